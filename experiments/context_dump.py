"""Study-only (issue 77): every number a surrogate's fit reads, saved per
context, so that fits and designs can be compared offline on the same
outcomes (``context_fits.py``).

For each example of a context-study draw (``context_study.py`` 's
``--task/--split/--seed/--n/--passages/--passage-words``, the same examples
and held-out ablations), one ``.pt`` file holds: the held-out ablations and
the response's log-probability under each (the LDS's), one ``iba-deletion``
step's source scores (``iba-surrogate`` 's prior), the 16 ablations of
``iba-surrogate`` 's default design and a pool of ``--pool`` random ones
(each source kept with probability 1/2, none twice; ContextCite's
distribution), each with its outcome, and the response's token count. A run
resumes (an example whose file exists is skipped)::

    python experiments/context_dump.py --task context-facts --split search \\
        --seed 0 --n 8 --passages 32-32 --passage-words 20 --pool 64 --out R
"""

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))
from context_study import example_unit, study_examples  # noqa: E402
from study_lm import study_lm  # noqa: E402

from captum_iba.app.context_tasks import CONTEXT_TASKS  # noqa: E402
from captum_iba.app.model_kind import SMOLLM2_HUB_ID  # noqa: E402
from captum_iba.evaluation.iba import ONE_STEP_POOLING  # noqa: E402
from captum_iba.evaluation.sources import source_scores  # noqa: E402
from captum_iba.evaluation.surrogate import (  # noqa: E402
    IBASurrogateScorer,
    distinct_masks,
)

#: The pool's seed offset (apart from the held-out ablations' and the design's).
POOL_SEED = 7_000


def dump_example(model: Any, tok: Any, example: Any, number: int, pool: int) -> dict:
    """One example's numbers (module docstring)."""
    began = time.process_time()
    unit = example_unit(model, tok, example, number)
    batch, held = unit.batch, unit.ablations[0]
    scorer = IBASurrogateScorer(model, tokenizer=tok)
    n = len(example.sources)
    prior = source_scores(scorer.prior.attribute(batch), batch, ONE_STEP_POOLING)
    prior = prior[0, :n].double()
    design = scorer._keep(batch, 0, prior)
    drawn = distinct_masks(n, pool, POOL_SEED + number)
    (design_lp,) = scorer._ablated(batch, [design])
    (pool_lp,) = scorer._ablated(batch, [drawn])
    return dict(
        n_sources=n,
        key=example.key,
        response=tok.decode(batch.answer_ids(0)),
        tokens=len(batch.explained_ids(0)),
        heldout_keep=held.keep,
        heldout_log_probs=held.log_probs,
        prior=prior,
        design_keep=design,
        design_log_probs=design_lp,
        pool_keep=drawn,
        pool_log_probs=pool_lp,
        cpu_seconds=time.process_time() - began,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=CONTEXT_TASKS, default="context-facts")
    parser.add_argument("--split", choices=("search", "report"), default="search")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--passages", default="32-32")
    parser.add_argument("--passage-words", type=int, default=20)
    parser.add_argument("--pool", type=int, default=64)
    parser.add_argument("--model", default=SMOLLM2_HUB_ID)
    parser.add_argument("--tokenizer")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    examples = study_examples(args)
    model, tok = study_lm(args.model, args.tokenizer)
    for i, example in enumerate(examples):
        path = out / f"{i:03d}.pt"
        if i < args.start or path.exists():
            continue
        found = dump_example(model, tok, example, i, args.pool)
        torch.save(found, path.with_suffix(".tmp"))
        path.with_suffix(".tmp").rename(path)
        print(f"{i}: S {found['n_sources']} {found['cpu_seconds']:.0f} CPU-s "
              f"{found['response']!r}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
