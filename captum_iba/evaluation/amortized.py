"""Amortized IBA as a per-token scorer (``iba-amortized``).

The explainer is fitted once per model and layer
(:meth:`~captum_iba.attr.amortized.AmortizedExplainer.fit`, e.g. on the
corpus's training split) and given to the scorer; :func:`fit_amortized` fits
one with the settings chosen by the faithfulness study.
"""

from typing import Any, Callable, Iterable, Optional, Union

from torch import Tensor, nn

from captum_iba.attr.amortized import (
    AmortizedExplainer,
    AmortizedInformationBottleneckAttribution,
)
from captum_iba.attr.options import ConfigLike, IBAOptions
from captum_iba.attr.text import LayerLike, resolve_layer
from captum_iba.evaluation.scorers import TokenScorer

__all__ = [
    "AMORTIZED_SETTINGS",
    "IBAAmortizedScorer",
    "default_teacher",
    "faithful_teacher",
    "teacher_options",
    "fit_amortized",
]

ExplainerLike = Union[AmortizedExplainer, Callable[[nn.Module], AmortizedExplainer]]

#: The explainer settings of ``iba-amortized``, chosen on SST-2's search split
#: (docs/amortized.rst): distillation of a per-sample teacher's masks (no IBA
#: term), 2 epochs, Adam 1e-3; the teacher follows the layer
#: (:func:`default_teacher`).
AMORTIZED_SETTINGS = dict(
    keep=None, distil=1.0, distil_only=True, epochs=2, network_lr=1e-3
)


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
    settings (:data:`AMORTIZED_SETTINGS`, overridden by ``settings``): the
    distillation of a per-sample teacher, ``iba-deletion`` at the embeddings
    and ``iba-faithful`` at an encoder layer (:func:`default_teacher`).

    Args:
        model (nn.Module): The classifier.
        layer (nn.Module): The bottlenecked layer.
        data (Iterable): Training batches (see
            :meth:`~captum_iba.attr.amortized.AmortizedExplainer.fit`).
        tokenizer (optional): Gives the [PAD] and special ids.
        folder (optional): Where the explainer is saved (and resumed from).
        show_progress (bool): A progress bar with the ETA.
        **settings: :class:`~captum_iba.attr.explainer.ExplainerSettings`
            fields (or version 0.2's flat names, see
            :meth:`~captum_iba.attr.explainer.ExplainerSettings.from_dict`);
            ``teacher`` may also be a configuration name (``"faithful"`` or
            ``"deletion"``: see :func:`teacher_options`); by default
            :func:`default_teacher` of the layer.

    Returns:
        AmortizedExplainer: The explainer.
    """
    options = {**AMORTIZED_SETTINGS, **settings}
    if options.get("distil_only") and not options.get("distil"):
        options["distil_only"] = False  # a budget or beta instead of the teacher
    if options.get("distil", 0) > 0:
        options.setdefault("teacher", default_teacher(model, layer))
    if isinstance(options.get("teacher"), (str, IBAOptions)):
        options["teacher"] = teacher_options(options["teacher"])
    return AmortizedExplainer.fit(
        model, layer, data, tokenizer=tokenizer, folder=folder,
        show_progress=show_progress, **options,
    )  # fmt: skip


def teacher_options(config: ConfigLike = "faithful") -> IBAOptions:
    """A named IBA configuration as the teacher: its options, every field of
    them (a new :class:`~captum_iba.attr.options.IBAOptions` field reaches the
    teacher as it is). The named configurations leave the seed None: the
    teacher then takes the explainer's.

    Args:
        config (str or IBAOptions): ``"faithful"`` (``iba-faithful``, the
            default), ``"deletion"`` (``iba-deletion``: fit its explainer at
            the embeddings, where that configuration's bottleneck sits) or any
            :class:`~captum_iba.attr.options.IBAOptions`.

    Returns:
        IBAOptions: The teacher's options.

    Raises:
        ValueError: For an unknown configuration name.
    """
    return IBAOptions.from_config(config)


def default_teacher(model: nn.Module, layer: nn.Module) -> str:
    """The per-sample configuration that teaches an explainer at ``layer``:
    ``"deletion"`` (``iba-deletion``, whose bottleneck sits there) for a layer
    outside the model's layer stack - the embeddings -, ``"faithful"``
    (``iba-faithful``) for an encoder layer."""
    try:
        outside = resolve_layer(model, layer).index is None
    except ValueError:  # no layer stack
        outside = False
    return "deletion" if outside else "faithful"


def faithful_teacher() -> IBAOptions:
    """``iba-faithful``'s options as the teacher (:func:`teacher_options` of
    ``"faithful"``)."""
    return teacher_options("faithful")


class IBAAmortizedScorer(TokenScorer):
    """Amortized IBA: a fitted explainer's mask per token (one forward pass),
    optionally refined by a few per-sample steps.

    Args:
        model (Callable): HF model (``(ids, mask[, tt])`` positionally).
        layer (nn.Module, LayerRef or str): The bottlenecked layer (the
            explainer's; ``"embeddings"``, the registry's, for the model's
            embeddings).
        explainer (AmortizedExplainer or Callable): The fitted explainer
            (refused when it was fitted for other weights or another layer),
            or a function of the layer module returning one (e.g. one that
            fits and caches it, as the command line's).
        refine_steps (int): Per-sample steps from the amortized mask. Default 0.
        seed (int): Seed of the refinement's noise. Default 0.
        **kwargs: See :class:`TokenScorer`.
    """

    meaning = (
        "the share of the token's signal the fitted explainer's mask keeps (lambda "
        "in [0, 1], the same for every feature; refined per sample when asked): "
        "how much the prediction relied on the token, with no direction (for or "
        "against the class)"
    )

    def __init__(
        self,
        model: Callable[..., Any],
        layer: LayerLike = "embeddings",
        explainer: Optional[ExplainerLike] = None,
        refine_steps: int = 0,
        seed: Optional[int] = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, **kwargs)
        ref = resolve_layer(model, layer)
        if explainer is None:
            raise ValueError(
                "iba-amortized needs a fitted explainer (explainer=, see "
                "captum_iba.evaluation.amortized.fit_amortized)."
            )
        if not isinstance(explainer, AmortizedExplainer):
            explainer = explainer(ref.module)
        self.aiba = AmortizedInformationBottleneckAttribution(
            model, ref.module, explainer
        )
        self.refine_steps, self.seed = int(refine_steps), int(seed or 0)
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
        if ref.index is not None:
            self.settings["layer_index"] = ref.index

    def _scores(
        self, ids: Tensor, mask: Tensor, tt: Optional[Tensor], target: Tensor
    ) -> Tensor:
        extra = (mask,) if tt is None else (mask, tt)
        refine = {"seed": self.seed} if self.refine_steps else {}
        attr = self.aiba.attribute(
            ids,
            target=target,
            additional_forward_args=extra,
            token_mask=mask,
            refine_steps=self.refine_steps,
            **refine,
        )
        return attr.reshape(attr.shape[:2] + (-1,)).mean(-1)  # lambda, in [0, 1]
