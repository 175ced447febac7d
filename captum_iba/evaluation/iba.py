"""Information Bottleneck Attribution as a per-token scorer, of a classifier
or a causal LM.

One class, :class:`IBAScorer`, holds one :class:`~captum_iba.attr.options.IBAOptions`;
its registry entries (:data:`captum_iba.registry.METHODS`) name the
configuration: ``"IBA"`` is the paper's, ``"iba-faithful"`` the most faithful
one measured (docs/faithfulness.rst), ``"iba-deletion"`` the deletion through
the attention. What it explains is decided once, at construction, from the
model's kind (:attr:`~captum_iba.evaluation.TokenScorer.kind`): a
classifier's class logit, or a causal LM's answer's log-likelihood
(:class:`~captum_iba.attr.llm.CausalLMLogLikelihood`, on the batch route of
:func:`~captum_iba.attr.llm.explain_answers`: the whole batch, the whole
answer and each output token in one IBA call).
"""

import dataclasses
import warnings
from typing import Any, Callable, Dict, Optional, Tuple

import torch
from torch import Tensor

from captum_iba.attr._precision import precision_used
from captum_iba.attr.batches import scatter_back
from captum_iba.attr.iba import InformationBottleneckAttribution
from captum_iba.attr.kinds import CAUSAL_LM
from captum_iba.attr.options import ConfigLike, IBAOptions
from captum_iba.attr.priors import PriorLike
from captum_iba.attr.rows import Rows, RowScores
from captum_iba.attr.text import LayerLike, resolve_layer
from captum_iba.evaluation.scorers import TokenScorer
from captum_iba.evaluation.sources import MASK_POOLINGS, POOLINGS, pool_sources

__all__ = [
    "ONE_STEP_POOLING",
    "REST_FROM",
    "IBAScorer",
    "one_step_deletion",
    "top_share",
]

#: How one deletion step's token masks pool to source scores: the log-odds of
#: a source's largest mask weight (docs/studies/context_logodds.rst,
#: "The mask's log-odds").
ONE_STEP_POOLING = "logit-max"
#: The fewest scored tokens of a prompt that takes ``rest_share``'s step: on
#: shorter prompts one deletion step was level with seven (SST-2, AG News,
#: RTE; docs/studies/amortized_llm.rst), on IMDB's reviews of 256-512 tokens
#: behind them (docs/studies/llm_default.rst).
REST_FROM = 128


class IBAScorer(TokenScorer):
    """Information Bottleneck Attribution (the project's own class) per token:
    the capacity summed over the token's features (nats), or the mask's mean
    over them (the share of the token's signal kept, in [0, 1]), of a
    classifier's class or a causal LM's answer (see the module docstring).

    Args:
        model (Callable): HF model (``(ids, mask[, tt])`` positionally), a
            classifier or a causal LM (``...ForCausalLM``).
        layer (int, str, nn.Module or LayerRef, optional): The layer after
            which the bottleneck goes, in any form
            :func:`~captum_iba.attr.text.resolve_layer` takes (an index,
            ``"embeddings"`` - as ``iba-deletion`` uses -, a module); None:
            the default layer (a causal LM's: its token embeddings).
        config (str or IBAOptions): A named configuration
            (:data:`~captum_iba.attr.options.CONFIGS`) or options. Default
            ``"paper"``. On a causal LM, a named configuration of
            :data:`~captum_iba.attr.llm.LLM_MASKS` adds its ``mask``
            (``"faithful"``: one mask weight per token).
        prior (str or NoisePrior, optional): Replaces the configuration's
            prior; None keeps it.
        seed (int, optional): Noise seed. Default 0.
        precision (str, optional): ``"float32"``, ``"bf16"`` (bfloat16
            autocast, see :class:`~captum_iba.InformationBottleneckAttribution`)
            or ``"auto"`` (bf16 where the machine has it natively). Default:
            :func:`~captum_iba.attr._precision.default_precision` (``"auto"``
            for the deletion configuration on a classifier, else
            ``"float32"``: bfloat16 is not measured on causal LMs);
            ``settings`` records the precision it resolves to on the model's
            device.
        iba_class (type, optional): The attribution class (default
            ``captum_iba.InformationBottleneckAttribution``), for tests.
        rest_share (float): A causal LM's deletion configuration only: after
            its steps, one step more on the prompt with the share of its
            scored tokens they rank highest deleted for real (as the
            degradation test deletes them) - which of the rest still carry
            the answer (:meth:`_rest_step`), on prompts of at least
            ``rest_from`` scored tokens. 0 (default): none.
        rest_from (int): The fewest scored tokens of a prompt that takes
            that step (shorter prompts keep the first steps' scores).
            Default :data:`REST_FROM`.
        **kwargs: Further fields of :class:`~captum_iba.attr.options.IBAOptions`
            (``beta``, ``steps``, ``internal_batch_size``: on a causal LM by
            default as many noise rows per pass as keep rows x tokens within
            :data:`~captum_iba.evaluation.batches.ROW_TOKENS`, ...), then the
            arguments of :class:`TokenScorer`.
    """

    @property
    def source_poolings(self) -> Tuple[str, ...]:
        """The poolings a context study reports: ``"logit-max"`` too where the
        scores are a mask in [0, 1] (``readout="mask_mean"``)."""
        return MASK_POOLINGS if self.options.readout == "mask_mean" else POOLINGS

    @property
    def source_pooling(self) -> str:
        """How its token scores pool to a source (``mask="source"`` gives
        each source its own score instead). A mask's scores lie in [0, 1], so
        a sum would rank long sources first; the max was the most faithful
        pooling on the context study's search split, and the log-odds of the
        max (``"logit-max"``: 0 at a deletion step's start, lambda = 1/2) above
        it on both tasks' fresh report contexts (docs/studies/context_logodds.rst,
        "The mask's log-odds"): ``"logit-max"`` for a mask starting at 1/2
        (``init_alpha=0``: ``iba-deletion``, ``iba-faithful``), else
        ``"max"`` (the paper's capacity, or another start)."""
        o = self.options
        return "logit-max" if o.readout == "mask_mean" and o.init_alpha == 0 else "max"

    def __init__(
        self,
        model: Callable[..., Any],
        layer: LayerLike = None,
        config: ConfigLike = "paper",
        prior: Optional[PriorLike] = None,
        seed: Optional[int] = 0,
        precision: Optional[str] = None,
        iba_class: Optional[type] = None,
        rest_share: float = 0.0,
        rest_from: int = REST_FROM,
        **kwargs: Any,
    ) -> None:
        if not 0 <= rest_share < 1:
            raise ValueError(f"rest_share must be in [0, 1), got {rest_share!r}")
        #: The share of the tokens the last step deletes (0: no such step).
        self.rest_share = float(rest_share)
        #: The fewest scored tokens of a prompt that takes that step.
        self.rest_from = int(rest_from)
        knobs = {k: kwargs.pop(k) for k in list(kwargs) if k in IBAOptions.names()}
        if prior is not None:
            knobs["prior"] = prior
        super().__init__(model, **kwargs)
        kind = self.model_kind
        knobs = kind.configure({**knobs, "config": config})
        config = knobs.pop("config")
        ref = resolve_layer(model, layer)
        #: The IBA options every call uses (one object, validated once).
        self.options = IBAOptions.from_config(config, seed=seed, **knobs)
        default = kind.default_precision(self.options)
        precision, used = precision_used(model, precision, default)
        extra = kind.iba_arguments(
            precision, self.options, self.pad_token_id, self.special_token_ids
        )
        self.iba = (iba_class or InformationBottleneckAttribution)(
            kind.explained(model), ref.module, **extra
        )
        self.settings.update(kind.iba_settings(ref, self.options, used))
        if self.rest_share:
            if self.options.removal != "attention":
                raise ValueError(
                    "rest_share is a step of the deletion configuration "
                    "(removal='attention') on a causal LM's prompts"
                )
            self.settings.update(rest_share=self.rest_share, rest_from=self.rest_from)

    @property
    def meaning(self) -> str:  # type: ignore[override]
        """str: What a classifier's score means under this configuration's
        readout."""
        where = "the bottleneck"
        if "layer_index" in self.settings:
            where += f" after encoder layer {self.settings['layer_index']}"
        if self.options.removal == "attention":
            above = (
                "every layer"
                if "layer_index" not in self.settings
                else f"every layer above encoder layer {self.settings['layer_index']}"
            )
            what = (
                f"the weight with which {above} reads the token, learned so that "
                "the tokens kept suffice for the class and removing them takes it "
                "away (the mask lambda in [0, 1], 0 = deleted, 1 = kept, "
                "averaged over the steps and over the token's features)"
            )
        elif self.options.readout == "mask_mean":
            what = (
                f"the share of the token's signal {where} lets through (the mask "
                "lambda in [0, 1], averaged over the steps and over the token's "
                "features)"
            )
        else:
            what = (
                f"the information about the token that passes {where}, in nats "
                "(the capacity of Eq. 4, summed over the token's features)"
            )
        return (
            f"{what}: how much the prediction relied on the token, with no "
            "direction (for or against the class)"
        )

    @property
    def prompt_meaning(self) -> str:  # type: ignore[override]
        """str: What a causal LM's score means under this readout."""
        if self.options.readout == "mask_mean":
            return (
                "the share of the token's signal the answer needs (the mask in "
                "[0, 1], averaged over the steps and the features; 0: none)"
            )
        return "the information (nats) the answer needs from the token"

    def _scores(self, rows: Rows) -> RowScores:
        options = rows.sized(self.options)
        found = rows.bottleneck(self.iba, options)
        reason = self._last_run().get("no_ranking", "")
        if reason:  # the layer ranks no token: said wherever the settings go
            self.settings["no_ranking"] = reason
        if self.rest_share:
            found = self._rest_step(rows, found, options)
        if options.mask == "source":  # one weight per source: its tokens hold it
            B = rows.instances
            groups = rows.groups
            assert groups is not None
            own = pool_sources(found.values[:B], groups[:B], rows.n_groups, "mean")
            found = dataclasses.replace(found, groups=own)
        return found

    def _rest_step(
        self, rows: Rows, found: RowScores, options: IBAOptions
    ) -> RowScores:
        """One step more, on the instances without the top :attr:`rest_share`
        of their scored tokens by the first steps' scores (deleted for
        real: :meth:`~captum_iba.attr.rows.Rows.without`), from lambda =
        1/2: which of the remaining tokens the output still needs. A token's
        score stays its mask averaged over the steps: the deleted tokens
        count as kept (1) in the last, the others hold its mask. Rows that
        explain one output keep the first steps' scores, and so do the
        instances of fewer than :attr:`rest_from` scored tokens."""
        B = rows.instances
        long = (rows.scored[:B].sum(1) >= self.rest_from).nonzero().flatten()
        if len(long) == 0:
            return found
        part, first = rows.part(long.tolist()), found.values[long]
        scored = part.scored.bool()
        top = top_share(first, scored, self.rest_share)
        rest, columns = part.without(top)
        last = rest.bottleneck(self.iba, options.replace(steps=1)).values
        back = scatter_back(last, columns, first.shape[1])
        back = torch.where(top, torch.ones_like(back), back)
        steps = options.steps
        values = found.values.clone()
        values[long] = torch.where(scored, (steps * first + back) / (steps + 1), first)
        return dataclasses.replace(found, values=values)

    def _last_run(self) -> Dict[str, Any]:
        """The attribution's last run's record; the precision that ran (on
        the model's device now) recorded in the settings."""
        run = (getattr(self.iba, "last_run", None) or [{}])[0]
        if run.get("precision"):
            self.settings["precision"] = run["precision"]
        return run


def top_share(scores: Tensor, scored: Tensor, share: float) -> Tensor:
    """``(B, W)`` bool: per row, the ``share`` of its ``scored`` positions
    with the highest ``scores`` (at least one; ties by position)."""
    n = scored.sum(1)
    k = torch.clamp((n.float() * share).round().long(), min=1)
    ranked = scores.masked_fill(~scored, float("-inf"))
    order = torch.argsort(ranked, dim=1, descending=True, stable=True)
    rank = torch.empty_like(order).scatter_(
        1, order, torch.arange(order.shape[1], device=order.device).expand_as(order)
    )
    return scored & (rank < k[:, None])


def one_step_deletion(
    model: Any,
    tokenizer: Any,
    kind: Any = CAUSAL_LM,
    special_token_ids: Optional[Any] = None,
    pad_token_id: Optional[int] = None,
) -> IBAScorer:
    """``iba-deletion`` with one step, built through the registry for a model
    of ``kind`` (default a causal LM's; its sources pool by
    :data:`ONE_STEP_POOLING`): about one forward and backward of the input;
    the teacher of ``iba-heads`` and the prior of ``iba-surrogate``.
    ``special_token_ids`` and ``pad_token_id``: default the tokenizer's."""
    from captum_iba.evaluation import Resources, build_scorers

    resources = Resources(
        model, tokenizer, special_token_ids=special_token_ids, pad_token_id=pad_token_id
    )
    return build_scorers(
        ["iba-deletion"],
        resources,
        method_options={"iba-deletion": {"steps": 1}},
        kind=kind,
    )["iba-deletion"]


def __getattr__(name: str) -> Any:
    if name in ("FAITHFUL_OPTIONS", "IBAFaithfulScorer"):
        warnings.warn(
            f"captum_iba.evaluation.iba.{name} is deprecated since 0.2; removed in "
            "0.4: use the configuration "
            "'faithful' (captum_iba.attr.options.CONFIGS): IBAScorer(model, "
            "layer, config='faithful') or build_scorer('iba-faithful', ...).",
            DeprecationWarning,
            stacklevel=2,
        )
        if name == "FAITHFUL_OPTIONS":
            from captum_iba.attr.options import FAITHFUL

            return {k: v for k, v in FAITHFUL.record().items() if k in _FAITHFUL_KEYS}
        return _faithful_scorer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_FAITHFUL_KEYS = ("prior", "beta", "steps", "n_samples", "lr", "init_alpha")
_FAITHFUL_KEYS += ("optimizer", "readout")


def _faithful_scorer(model: Callable[..., Any], layer: Any, **kwargs: Any) -> IBAScorer:
    """``IBAScorer`` in the ``"faithful"`` configuration, named ``iba-faithful``."""
    return IBAScorer(
        model, layer, **{"config": "faithful", "name": "iba-faithful", **kwargs}
    )
