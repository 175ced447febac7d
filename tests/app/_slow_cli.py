"""``captum-iba`` with one more registered method, ``slow-random`` (random
scores after a pause per batch), for the engine's crash tests: the engine takes
any registered scorer by name. Run as a script (also under torchrun)."""

import os
import sys
import time

from captum_iba.evaluation import RandomScorer, register_scorer


@register_scorer
class SlowRandomScorer(RandomScorer):
    """Random scores, after ``$SLOW_SCORER_SECONDS`` (default 0.5) per batch."""

    name = "slow-random"

    def _scores(self, rows):
        time.sleep(float(os.environ.get("SLOW_SCORER_SECONDS", "0.5")))
        return super()._scores(rows)


if __name__ == "__main__":
    from captum_iba.app.cli import main  # after the registration

    sys.exit(main())
