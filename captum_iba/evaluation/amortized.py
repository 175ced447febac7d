"""Amortized IBA as a per-token scorer (``iba-amortized``).

The explainer is fitted once per model and layer
(:meth:`~captum_iba.attr.amortized.AmortizedExplainer.fit`, e.g. on the
corpus's training split) and given to the scorer; :func:`fit_amortized` fits
one with the settings chosen by the faithfulness study.
"""

from typing import Any, Callable, Iterable, Optional

from torch import Tensor, nn

from captum_iba.attr.amortized import (
    AmortizedExplainer,
    AmortizedInformationBottleneckAttribution,
)
from captum_iba.evaluation.iba import FAITHFUL_OPTIONS
from captum_iba.evaluation.scorers import TokenScorer, register_scorer

__all__ = ["AMORTIZED_SETTINGS", "IBAAmortizedScorer", "fit_amortized"]

#: The explainer settings of ``iba-amortized``, chosen on SST-2's search split
#: (docs/amortized.rst): distillation of ``iba-faithful``'s per-sample masks
#: (the teacher), 2 epochs, Adam 1e-3.
AMORTIZED_SETTINGS = dict(keep=None, distil=1.0, distil_only=True, epochs=2, lr=1e-3)


def fit_amortized(
    model: nn.Module,
    layer: nn.Module,
    data: Iterable[Any],
    tokenizer: Any = None,
    folder: Optional[Any] = None,
    show_progress: bool = True,
    **settings: Any,
) -> AmortizedExplainer:
    """Fit (or load from ``folder``) an explainer with ``iba-amortized``'s
    settings (:data:`AMORTIZED_SETTINGS`, overridden by ``settings``), the
    per-sample teacher being ``iba-faithful``.

    Args:
        model (nn.Module): The classifier.
        layer (nn.Module): The bottlenecked layer.
        data (Iterable): Training batches (see
            :meth:`~captum_iba.attr.amortized.AmortizedExplainer.fit`).
        tokenizer (optional): Gives the [PAD] and special ids.
        folder (optional): Where the explainer is saved (and resumed from).
        show_progress (bool): A progress bar with the ETA.
        **settings: :class:`~captum_iba.attr.explainer.ExplainerSettings`
            fields.

    Returns:
        AmortizedExplainer: The explainer.
    """
    options = {**AMORTIZED_SETTINGS, **settings}
    if options.get("distil_only") and not options.get("distil"):
        options["distil_only"] = False  # a budget or beta instead of the teacher
    if options.get("distil", 0) > 0:
        options.setdefault("teacher", dict(FAITHFUL_OPTIONS))
    return AmortizedExplainer.fit(
        model, layer, data, tokenizer=tokenizer, folder=folder,
        show_progress=show_progress, **options,
    )  # fmt: skip


@register_scorer
class IBAAmortizedScorer(TokenScorer):
    """Amortized IBA: a fitted explainer's mask per token (one forward pass),
    optionally refined by a few per-sample steps.

    Args:
        model (Callable): HF model (``(ids, mask[, tt])`` positionally).
        layer (nn.Module): The bottlenecked layer (the explainer's).
        explainer (AmortizedExplainer): The fitted explainer (refused when it
            was fitted for other weights or another layer).
        refine_steps (int): Per-sample steps from the amortized mask. Default 0.
        seed (int): Seed of the refinement's noise. Default 0.
        **kwargs: See :class:`TokenScorer`.
    """

    name = "iba-amortized"
    suite_options = {"seed": "seed", "iba_layer": "layer"}
    required = ("layer", "explainer")

    def __init__(
        self,
        model: Callable[..., Any],
        layer: nn.Module,
        explainer: AmortizedExplainer,
        refine_steps: int = 0,
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, **kwargs)
        self.aiba = AmortizedInformationBottleneckAttribution(model, layer, explainer)
        self.refine_steps, self.seed = int(refine_steps), int(seed)
        self.settings.update(
            layer=explainer.key["layer"],
            budget=explainer.settings.budget(),
            explainer=explainer.settings.to_dict(),
            fit={
                k: explainer.stats.get(k) for k in ("instances", "steps", "cpu_seconds")
            },
            refine_steps=self.refine_steps,
            seed=self.seed,
        )

    def _scores(
        self, ids: Tensor, mask: Tensor, tt: Optional[Tensor], target: Tensor
    ) -> Tensor:
        extra = (mask,) if tt is None else (mask, tt)
        attr = self.aiba.attribute(
            ids,
            target=target,
            additional_forward_args=extra,
            token_mask=mask,
            refine_steps=self.refine_steps,
            seed=self.seed,
        )
        return attr.reshape(attr.shape[:2] + (-1,)).sum(-1)
