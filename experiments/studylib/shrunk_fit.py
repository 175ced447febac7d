r"""Issue 77's fourth round: ``iba-surrogate`` 's fitted weights
soft-thresholded (docs/studies/context_long_fourth.rst; it lost, so it stays
a study variant, ``iba-surrogate-<k>-...-t<shrink>``).

:func:`soft_threshold` pulls the weights toward zero by :math:`\tau =
k \hat\sigma` and sets those within it to zero (the Lasso's proximal step;
Donoho and Johnstone, *Biometrika* 81(3), 1994): :math:`w \leftarrow
\operatorname{sign}(w) \max(|w| - \tau, 0)`, :math:`\hat\sigma` the
weights' median absolute deviation over 0.6745, a spread the few sources an
answer needs do not move. :func:`shrunk` puts it after a scorer's fit.
"""

from typing import Any

from torch import Tensor


def soft_threshold(weights: Tensor, shrink: float) -> Tensor:
    """The weights soft-thresholded at ``shrink`` spreads (module docstring).

    Args:
        weights (Tensor): ``(S,)`` the surrogate's weights.
        shrink (float): :math:`k \\ge 0`; 0 gives the weights back.

    Returns:
        Tensor: ``(S,)`` float64.
    """
    w = weights.double()
    if not shrink:
        return w
    spread = (w - w.median()).abs().median() / 0.6745
    return w.sign() * (w.abs() - shrink * spread).clamp_min(0.0)


def shrunk(scorer: Any, shrink: float) -> Any:
    """``scorer`` (an ``IBASurrogateScorer``) with its fit's weights
    soft-thresholded at ``shrink`` spreads, recorded in its settings; given
    back."""
    if not float(shrink) >= 0:
        raise ValueError(f"shrink must be >= 0; got {shrink!r}")
    fit = scorer.fit

    def fit_then_shrink(*args: Any) -> Tensor:
        return soft_threshold(fit(*args), shrink)

    scorer.fit = fit_then_shrink
    scorer.settings["shrink"] = float(shrink)
    return scorer
