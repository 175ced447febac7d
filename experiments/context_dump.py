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
distribution), each with its outcome, and the response's token count;
with ``--pool2 A --keep2 P`` a second pool of ``A`` random ablations each
keeping a source with probability ``P`` (``pool2_keep``, ``pool2_log_probs``;
cheaper rows when ``P < 1/2``), each pool's CPU-s apart (``pool_seconds``,
``pool2_seconds``). A run resumes (an example whose file exists is
skipped; one without the second pool asked for gets it added)::

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
from captum_iba.metrics.context import ablation_masks  # noqa: E402

#: The pool's seed offset (apart from the held-out ablations' and the design's).
POOL_SEED = 7_000
#: The second pool's.
POOL2_SEED = 9_000


def _timed_pool(scorer: Any, batch: Any, keep: Any) -> tuple:
    """The log-probabilities of ``keep`` 's ablations and their CPU-s."""
    began = time.process_time()
    (found,) = scorer._ablated(batch, [keep])
    return found, time.process_time() - began


def second_pool(
    model: Any, tok: Any, batch: Any, n: int, number: int, size: int, keep: float
) -> dict:
    """The second pool of example ``number`` (``n`` sources): its ablations,
    outcomes and CPU-s (module docstring)."""
    scorer = IBASurrogateScorer(model, tokenizer=tok)
    drawn = ablation_masks(n, size, keep, POOL2_SEED + number)
    found, seconds = _timed_pool(scorer, batch, drawn)
    return dict(
        pool2_keep=drawn,
        pool2_log_probs=found,
        pool2_seconds=seconds,
        keep2=keep,
    )


def dump_example(
    model: Any,
    tok: Any,
    example: Any,
    unit: Any,
    spent: float,
    pool: int,
    number: int,
) -> dict:
    """One example's numbers (module docstring) from its ``unit``
    (:func:`example_unit`, which took ``spent`` CPU-s)."""
    began = time.process_time() - spent
    batch, held = unit.batch, unit.ablations[0]
    scorer = IBASurrogateScorer(model, tokenizer=tok)
    n = len(example.sources)
    prior = source_scores(scorer.prior.attribute(batch), batch, ONE_STEP_POOLING)
    prior = prior[0, :n].double()
    design = scorer._keep(batch, 0, prior)
    drawn = distinct_masks(n, pool, POOL_SEED + number)
    (design_lp,) = scorer._ablated(batch, [design])
    pool_lp, pool_seconds = _timed_pool(scorer, batch, drawn)
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
        pool_seconds=pool_seconds,
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
    parser.add_argument("--pool2", type=int, default=0)
    parser.add_argument("--keep2", type=float, default=0.3)
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
        if i < args.start:
            continue
        found = torch.load(path, weights_only=True) if path.exists() else None
        if found is not None and (not args.pool2 or "pool2_keep" in found):
            continue
        began = time.process_time()
        unit = example_unit(model, tok, example, i)
        spent = time.process_time() - began
        if found is None:
            found = dump_example(model, tok, example, unit, spent, args.pool, i)
        if args.pool2:
            n = len(example.sources)
            found.update(
                second_pool(model, tok, unit.batch, n, i, args.pool2, args.keep2)
            )
        torch.save(found, path.with_suffix(".tmp"))
        path.with_suffix(".tmp").rename(path)
        print(f"{i}: S {found['n_sources']} {found['cpu_seconds']:.0f} CPU-s "
              f"{found['response']!r}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
