"""Study-only (issue 77): surrogate fits and designs compared offline on the
numbers ``context_dump.py`` saved, each scored by the LDS on the context's
held-out ablations (:func:`~captum_iba.metrics.context.linear_datamodeling_score`,
the study's).

Each fit takes a set of ablations (``design``: ``iba-surrogate`` 's 16;
``pool:<a>``: the pool's first ``a`` random ones; ``pool2:<a>``: the second
pool's, drawn at its own keep probability; ``design+pool:<a>``: both)
and a solver: ``ridge`` (``iba-surrogate`` 's prior ridge on the outcomes'
ranks, :func:`~captum_iba.evaluation.surrogate.rank_ridge`), ``ridge-lo``
(the same on the log-odds per token), ``lasso`` (ContextCite's: scikit-learn's
Lasso, alpha .01, on the log-odds per token), ``lasso-res`` (the Lasso on
what the prior, scaled by least squares, leaves: the prior's residual),
``prior`` (the prior alone)::

    python experiments/context_fits.py R/*.pt
"""

import argparse
from typing import Any, Callable, Dict, List, Tuple

import numpy as np
import torch
from torch import Tensor

from captum_iba.evaluation.surrogate import (
    per_token_log_odds,
    prior_ridge,
    prior_scale,
    rank_ridge,
)
from captum_iba.metrics.context import (
    SourceAblations,
    linear_datamodeling_score,
)


def _lasso(x: Tensor, y: Tensor, alpha: float = 0.01) -> Tensor:
    from sklearn.linear_model import Lasso

    fit = Lasso(alpha=alpha, random_state=0, fit_intercept=True)
    fit.fit(x.double().numpy(), y.double().numpy())
    return torch.tensor(fit.coef_, dtype=torch.float64)


def _lasso_res(x: Tensor, y: Tensor, s: Tensor) -> Tensor:
    x = x.double()
    a = float(prior_scale(x - x.mean(0), y - y.mean(), s))
    return a * s + _lasso(x, y - a * (x @ s))


SOLVERS: Dict[str, Callable[[Tensor, Tensor, Tensor], Tensor]] = {
    "ridge": lambda x, y, s: rank_ridge(x, y, s),
    "ridge-lo": lambda x, y, s: prior_ridge(x, y, s),
    "lasso": lambda x, y, s: _lasso(x, y),
    "lasso-res": _lasso_res,
    "prior": lambda x, y, s: s.clone(),
}


def ablations(d: Dict[str, Any], which: str) -> Tuple[Tensor, Tensor]:
    """The keep masks and log-probabilities of ``which`` (module docstring)."""
    parts: List[Tuple[Tensor, Tensor]] = []
    for part in which.split("+"):
        if part == "design":
            parts.append((d["design_keep"], d["design_log_probs"]))
        else:
            pool, a = part.split(":")
            a = int(a)
            parts.append((d[f"{pool}_keep"][:a], d[f"{pool}_log_probs"][:a]))
    return torch.cat([k for k, _ in parts]), torch.cat([lp for _, lp in parts])


def lds(d: Dict[str, Any], which: str, solver: str) -> float:
    keep, lp = ablations(d, which)
    y = per_token_log_odds(lp.double(), d["tokens"])
    w = SOLVERS[solver](keep, y, d["prior"].double())
    held = SourceAblations(d["heldout_keep"], d["heldout_log_probs"].double())
    return float(linear_datamodeling_score(w * d["tokens"], held)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument(
        "--fits",
        default="design/ridge,design/ridge-lo,design/lasso,design/lasso-res,"
        "design/prior,pool:16/ridge,pool:16/lasso,pool:32/ridge,pool:32/lasso,"
        "pool:32/lasso-res,design+pool:16/ridge,design+pool:16/lasso-res,"
        "pool:64/ridge,pool:64/lasso",
    )
    args = parser.parse_args()
    dumps = [torch.load(f, weights_only=True) for f in sorted(args.files)]
    fits = [f.split("/") for f in args.fits.split(",")]
    table = np.array([[lds(d, w, s) for w, s in fits] for d in dumps])
    base = table[:, 0]
    rng = np.random.default_rng(0)
    print(f"{len(dumps)} contexts, S {sorted({d['n_sources'] for d in dumps})}")
    for j, (w, s) in enumerate(fits):
        diff = table[:, j] - base
        boot = [diff[rng.integers(0, len(diff), len(diff))].mean() for _ in range(5000)]
        lo, hi = np.percentile(boot, [2.5, 97.5])
        print(f"{w + '/' + s:28s} LDS {table[:, j].mean():.3f}  minus the first "
              f"{diff.mean():+.3f} [{lo:+.3f}, {hi:+.3f}]")  # fmt: skip


if __name__ == "__main__":
    main()
