"""IBA's first deletion step taken from random starts instead of lambda = 1/2,
averaged (an exploration of docs/studies/context_logodds.rst, "Random
starts").

One deletion step reads the gradient of the response's log-probability with
respect to each token's log-weight :math:`\\ln \\bar\\lambda_t` (Eq. R2,
``removal="attention"`` after the embeddings) at :math:`\\bar\\lambda = 1/2`,
pooled to sources by the max (``logit-max``'s order). The LDS asks for the
sources' average effect over random halves of the context (their Banzhaf
values); a gradient averaged over random source weights estimates an average
of that kind. Each draw gives every source one weight, shared by its tokens:

* ``unifbB``: :math:`\\ln \\bar\\lambda_s` uniform on [-B, 0];
* ``near``: :math:`\\bar\\lambda_s` 1/4 or 3/4, each with probability 1/2;
* ``jit``: :math:`\\bar\\lambda_s` uniform on [0.2, 0.8];

the token gradients pooled to sources by max and by sum, averaged over the
first k of K draws (k = 2, 4, 8). ``center`` is the gradient at 1/2 (one
row, where a deletion step has two: the kept tokens and the complement),
``ridge32`` a ridge regression on 32 real ablations of the context's own
(about ContextCite-32; seed 61000 + the example's number, not the held-out
ablations). LDS on each example's held-out ablations, as the study's.

Usage::

    python experiments/context_starts.py --task context-facts --split search --n 16
"""

import argparse
import sys
import time
from pathlib import Path
from typing import Dict, List

import numpy as np
import torch
from torch import Tensor

sys.path.insert(0, str(Path(__file__).parent))
import faithfulness_study as fs  # noqa: E402
from context_study import example_unit, study_examples  # noqa: E402

from captum_iba.app.causal_lm import load_causal_lm  # noqa: E402
from captum_iba.app.model_kind import SMOLLM2_HUB_ID  # noqa: E402
from captum_iba.attr._attention import attention_removal  # noqa: E402
from captum_iba.attr.llm import CausalLMLogLikelihood  # noqa: E402
from captum_iba.attr.llm_batch import _pad_id  # noqa: E402
from captum_iba.evaluation.sources import pool_sources  # noqa: E402
from captum_iba.metrics.context import (  # noqa: E402
    ablate_sources,
    linear_datamodeling_score,
)


def token_gradients(model, batch, log_weights: Tensor) -> Tensor:
    """``(K, W - 1)`` gradients of the response's log-probability with respect
    to each token's log-weight, at per-source log-weights ``(K, S)``."""
    args = batch.arguments()
    src = batch.sources[:, :-1]
    k = log_weights.shape[0]
    per_token = torch.where(src >= 0, log_weights[:, src[0].clamp_min(0)], 0.0)
    per_token = per_token.detach().requires_grad_(True)
    lam = per_token.exp()
    layers = model.model.layers
    with attention_removal(layers, list(range(len(layers))), lambda: lam):
        lp = CausalLMLogLikelihood(model)(*(args[a].expand(k, -1) for a in args))
    (grad,) = torch.autograd.grad(lp.sum(), per_token)
    return grad.double()


def draws(n: int, k: int, gen: torch.Generator) -> Dict[str, Tensor]:
    """Per-source log-weights ``(k, n)`` of each kind of start."""
    u = lambda: torch.rand(k, n, generator=gen)  # noqa: E731
    return {
        "unifb10": -10.0 * u(),
        "unifb6": -6.0 * u(),
        "near": torch.where(u() < 0.5, 0.75, 0.25).log(),
        "jit": (0.2 + 0.6 * u()).log(),
    }


def example_row(model, tok, unit, n: int, i: int, k: int) -> Dict[str, float]:
    """One example's LDS per variant."""
    held, batch = unit.ablations[0], unit.batch
    src = batch.sources[:, :-1]

    def pool(grad: Tensor, how: str) -> Tensor:  # (K, S): by max or sum
        return pool_sources(grad, src.expand(len(grad), -1), n, how)

    def lds(scores: Tensor) -> float:
        return float(linear_datamodeling_score(scores.double(), held)[0])

    row = {}
    start = time.process_time()
    center = token_gradients(model, batch, torch.full((1, n), float(np.log(0.5))))
    row["cpu center"] = time.process_time() - start
    for how in ("max", "sum"):
        row[f"center-{how}"] = lds(pool(center, how)[0])
    gen = torch.Generator().manual_seed(1000 + i)
    for name, weights in draws(n, k, gen).items():
        start = time.process_time()
        grad = token_gradients(model, batch, weights)
        row[f"cpu {name}-{k}"] = time.process_time() - start
        for how in ("max", "sum"):
            pooled = pool(grad, how)
            for m in (2, 4, 8):
                if m <= k:
                    row[f"{name}-{how}-{m}"] = lds(pooled[:m].mean(0))
    fit = ablate_sources(
        CausalLMLogLikelihood(model), unit.prompt_ids[0], batch.answer_ids(0), n,
        32, 0.5, 61000 + i, pad_token_id=_pad_id(tok),
    )  # fmt: skip
    x = np.concatenate([np.ones((32, 1)), fit.keep.double().numpy()], 1)
    y = np.clip(fit.log_odds.numpy(), -50, 50)
    w = np.linalg.solve(x.T @ x + np.diag([0.0] + [0.1] * n), x.T @ y)[1:]
    row["ridge32"] = lds(torch.from_numpy(w))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="context-facts")
    parser.add_argument("--split", default="search")
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--passages", default="3-10")
    parser.add_argument("--seed", type=int, default=0, help="the examples' seed")
    parser.add_argument("--draws", type=int, default=8, help="K")
    parser.add_argument("--model", default=SMOLLM2_HUB_ID)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"CPU {torch.backends.cpu.get_cpu_capability()}", flush=True)
    model, tok = load_causal_lm(args.model)
    rows: List[Dict[str, float]] = []
    for i, example in enumerate(study_examples(args)):
        unit = example_unit(model, tok, example, i)
        rows.append(example_row(model, tok, unit, len(example.sources), i, args.draws))
        print(i, {k: round(v, 3) for k, v in rows[-1].items()}, flush=True)
    anchor = "center-max"
    for key in rows[0]:
        values = np.array([r[key] for r in rows])
        paired = ""
        if not key.startswith("cpu"):
            diff = values - np.array([r[anchor] for r in rows])
            paired = fs.fmt(fs.bootstrap(diff[~np.isnan(diff)]), signed=True)
        print(f"{key:<18} {np.nanmean(values):>7.3f}  vs {anchor} {paired}")


if __name__ == "__main__":
    main()
