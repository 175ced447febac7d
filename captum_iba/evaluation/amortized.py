"""Amortized IBA as a per-token scorer (``iba-amortized``) of a classifier.

The explainer is fitted once per model and layer
(:meth:`~captum_iba.attr.amortized.AmortizedExplainer.fit`, e.g. on the
corpus's training split) and given to the scorer; :func:`fit_amortized`
fits one with the settings chosen by the faithfulness study. On a causal
LM's prompts it measured at random's level (docs/studies/amortized_llm.rst):
that use is the lab's (``experiments/lab``, ``iba-amortized-lm``), which fits
with :func:`fit_with` and its own settings."""

from typing import Any, Callable, Dict, Iterable, Optional, Union

import torch
from torch import nn

from captum_iba.attr.amortized import (
    AmortizedExplainer,
    AmortizedInformationBottleneckAttribution,
)
from captum_iba.attr.kinds import kind_of
from captum_iba.attr.llm import no_ranking
from captum_iba.attr.options import ConfigLike, IBAOptions
from captum_iba.attr.rows import Rows, RowScores
from captum_iba.attr.text import LayerLike, resolve_layer
from captum_iba.evaluation.scorers import TokenScorer
from captum_iba.evaluation.sources import MASK_POOLINGS
from captum_iba.registry import EXPLAINER_OBJECTIVES, method_entry  # their home

__all__ = [
    "AMORTIZED_SETTINGS",
    "EXPLAINER_OBJECTIVES",
    "IBAAmortizedScorer",
    "default_teacher",
    "objective_settings",
    "trained_on",
    "faithful_teacher",
    "teacher_options",
    "fit_amortized",
    "fit_with",
]

ExplainerLike = Union[AmortizedExplainer, Callable[[nn.Module], AmortizedExplainer]]

#: The explainer settings of ``iba-amortized``, chosen on SST-2's search split
#: (docs/amortized.rst): distillation of a per-sample teacher's masks (no IBA
#: term), 2 epochs, Adam 1e-3; the teacher follows the layer
#: (:func:`default_teacher`).
AMORTIZED_SETTINGS = dict(
    keep=None, distil=1.0, distil_only=True, epochs=2, network_lr=1e-3
)
# What an explainer can be trained on, as overrides of AMORTIZED_SETTINGS:
# EXPLAINER_OBJECTIVES, declared once with the option explainer_objective
# (captum_iba.method_options, re-exported by the registry) and imported here.


def objective_settings(objective: str = "distil") -> dict:
    """The fit settings of an explainer trained on ``objective`` (a name in
    :data:`EXPLAINER_OBJECTIVES`).

    Raises:
        ValueError: For an unknown name.
    """
    if objective not in EXPLAINER_OBJECTIVES:
        names = ", ".join(map(repr, EXPLAINER_OBJECTIVES))
        raise ValueError(
            f"explainer_objective must be one of {names}, got {objective!r}"
        )
    return {**AMORTIZED_SETTINGS, **EXPLAINER_OBJECTIVES[objective]}


def fit_amortized(
    model: nn.Module,
    layer: nn.Module,
    data: Iterable[Any],
    tokenizer: Any = None,
    folder: Optional[Any] = None,
    show_progress: bool = True,
    **settings: Any,
) -> AmortizedExplainer:
    """Fit (or load from ``folder``) a classifier's explainer with
    ``iba-amortized``'s settings (:data:`AMORTIZED_SETTINGS`, overridden by
    ``settings``): the distillation of a per-sample teacher,
    ``iba-deletion`` at the embeddings and ``iba-faithful`` at an encoder
    layer (:func:`default_teacher`).

    Args:
        model (nn.Module): The classifier.
        layer (nn.Module): The bottlenecked layer.
        data (Iterable): Training batches (see
            :meth:`~captum_iba.attr.amortized.AmortizedExplainer.fit`).
        tokenizer (optional): Gives the [PAD] and special ids; its digest
            is kept with the explainer (another tokenizer is refused).
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

    Raises:
        ValueError: For a model of a kind ``iba-amortized`` does not explain
            (a causal LM's explainer is the lab's).
    """
    method_entry("iba-amortized", kind_of(model))  # the kinds it explains
    return fit_with(
        model, layer, data, classifier_settings, tokenizer, folder, show_progress,
        **settings,
    )  # fmt: skip


def fit_with(
    model: nn.Module,
    layer: nn.Module,
    data: Iterable[Any],
    resolve: Callable[[Dict[str, Any], Any], Dict[str, Any]],
    tokenizer: Any = None,
    folder: Optional[Any] = None,
    show_progress: bool = True,
    **settings: Any,
) -> AmortizedExplainer:
    """Fit (or load from ``folder``) an explainer of the forward ``model`` 's
    kind explains (:meth:`~captum_iba.attr.kinds.ModelKind.explained`) with
    :data:`AMORTIZED_SETTINGS` overridden by ``settings`` and the teacher
    :func:`default_teacher` of the layer unless given, then resolved for
    that forward by ``resolve(options, tokenizer)``
    (:func:`classifier_settings` for a classifier; the lab's for a causal
    LM). The other arguments are :func:`fit_amortized` 's."""
    options = {**AMORTIZED_SETTINGS, **settings}
    if options.get("distil_only") and not options.get("distil"):
        options["distil_only"] = False  # a budget or beta instead of the teacher
    if options.get("distil", 0) > 0:
        options.setdefault("teacher", default_teacher(model, layer))
    options = resolve(options, tokenizer)
    return AmortizedExplainer.fit(
        kind_of(model).explained(model), layer, data, tokenizer=tokenizer,
        folder=folder, show_progress=show_progress, **options,
    )  # fmt: skip


def classifier_settings(options: Dict[str, Any], tokenizer: Any) -> Dict[str, Any]:
    """A classifier's fit settings from ``options``: a teacher named by a
    configuration (or given as options) resolved to its options."""
    if isinstance(options.get("teacher"), (str, IBAOptions)):
        options["teacher"] = teacher_options(options["teacher"])
    return options


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


def trained_on(explainer: AmortizedExplainer) -> str:
    """What ``explainer`` was trained on: ``"deletion"`` (``iba-deletion``'s
    objective), ``"distil"`` (a teacher's masks alone) or ``"other"`` (the
    noise objective with a budget or a beta)."""
    settings = explainer.settings
    if settings.options.removal == "attention":
        return "deletion"
    return "distil" if settings.distil_only and settings.distil > 0 else "other"


def _check_objective(explainer: AmortizedExplainer, objective: Optional[str]) -> None:
    """Refuse an explainer trained on another objective than asked for."""
    found = trained_on(explainer)
    if objective is not None and found != objective:
        raise ValueError(
            f"explainer_objective={objective!r}, but this explainer was trained on "
            f"{found!r} (its settings: {explainer.settings.to_dict()}); fit one with "
            f"objective_settings({objective!r})."
        )


def faithful_teacher() -> IBAOptions:
    """``iba-faithful``'s options as the teacher (:func:`teacher_options` of
    ``"faithful"``)."""
    return teacher_options("faithful")


class IBAAmortizedScorer(TokenScorer):
    """Amortized IBA: a fitted explainer's mask per token (one forward pass),
    optionally refined by a few per-sample steps.

    Args:
        model (Callable): HF model (``(ids, mask[, tt])`` positionally), a
            classifier.
        layer (nn.Module, LayerRef or str): The bottlenecked layer (the
            explainer's; ``"embeddings"``, the registry's, for the model's
            embeddings).
        explainer (AmortizedExplainer or Callable): The fitted explainer
            (refused when it was fitted for other weights or another layer),
            or a function of the layer module returning one (e.g. one that
            fits and caches it, as the command line's).
        refine_steps (int): Per-sample steps from the amortized mask. Default 0.
        seed (int): Seed of the refinement's noise. Default 0.
        explainer_objective (str, optional): What the explainer must have
            been trained on (:data:`EXPLAINER_OBJECTIVES`): ``"distil"`` (the
            teacher's masks alone) or ``"deletion"`` (``iba-deletion``'s
            objective). A function ``explainer`` is called with it as the
            keyword ``objective`` (unless ``"distil"``); a fitted one trained
            on another is refused. Default None: the explainer as given
            (a function called with the layer alone).
        **kwargs: See :class:`TokenScorer`.
    """

    unit = "signal"
    meaning = (
        "the share of the token's signal the fitted explainer's mask keeps (lambda "
        "in [0, 1], the same for every feature; refined per sample when asked): "
        "how much the prediction relied on the token, with no direction (for or "
        "against the class)"
    )

    #: A mask in [0, 1], as IBA's: a source's most kept token.
    source_pooling = "max"
    source_poolings = MASK_POOLINGS

    def __init__(
        self,
        model: Callable[..., Any],
        layer: LayerLike = "embeddings",
        explainer: Optional[ExplainerLike] = None,
        refine_steps: int = 0,
        seed: Optional[int] = 0,
        explainer_objective: Optional[str] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, **kwargs)
        ref = resolve_layer(model, layer)
        if explainer is None:
            raise ValueError(
                "iba-amortized needs a fitted explainer (explainer=, see "
                "captum_iba.evaluation.amortized.fit_amortized)."
            )
        if explainer_objective is not None:
            objective_settings(explainer_objective)  # a known name
        if not isinstance(explainer, AmortizedExplainer):
            given = explainer_objective not in (None, "distil")
            objective = {"objective": explainer_objective} if given else {}
            explainer = explainer(ref.module, **objective)
        _check_objective(explainer, explainer_objective)
        forward = self.model_kind.explained(model)
        if self.tokenizer is not None:
            explainer.check(forward, ref.module, self.tokenizer)
        self.aiba = AmortizedInformationBottleneckAttribution(
            forward, ref.module, explainer
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

    def _scores(self, rows: Rows) -> RowScores:
        read = rows.read()
        refine = {"seed": self.seed} if self.refine_steps else {}
        attr = self.aiba.attribute(
            read.input_ids,
            target=read.target,
            additional_forward_args=read.args,
            token_mask=read.token_mask,
            refine_steps=self.refine_steps,
            **refine,
        )
        # lambda, in [0, 1]
        scores = attr.detach().reshape(attr.shape[:2] + (-1,)).mean(-1).float()
        width = rows.input_ids.shape[1]
        if scores.shape[1] < width:  # a column read by no forward
            pad = scores.new_zeros(scores.shape[0], width - scores.shape[1])
            scores = torch.cat([scores, pad], dim=1)
        scored = rows.scored.to(scores.device)
        return RowScores(scores, flat=no_ranking(scores, scored))
