"""IBA's options: the one list of its knobs (:class:`IBAOptions`) and the named
configurations built from them (:data:`CONFIGS`: ``"paper"``, ``"faithful"``).

Every knob is one field below, with its default and its documentation; the
docstrings of :class:`IBAOptions` and of
:meth:`~captum_iba.InformationBottleneckAttribution.attribute` are written from
those fields, the evaluation harness records :meth:`IBAOptions.record`, and
the optimisation (:mod:`captum_iba.attr._loop`) reads them. Adding a knob is
one field here and its use there.
"""

import dataclasses
import numbers
import textwrap
from dataclasses import dataclass, field
from math import inf
from typing import Any, Dict, Literal, Optional, Union

from captum_iba._utils.registry import Registry
from captum_iba.attr._inputs import check_numbers
from captum_iba.attr.objectives import Objective, resolve_objective
from captum_iba.attr.priors import NoisePrior, PaperPrior, resolve_prior

__all__ = [
    "CONFIGS",
    "DELETION",
    "FAITHFUL",
    "OPTIMIZERS",
    "PAPER",
    "READOUTS",
    "MASKS",
    "REMOVALS",
    "BetaType",
    "ConfigLike",
    "IBAOptions",
    "options_doc",
    "used_options",
]

BetaType = Union[float, Literal["auto"]]
#: How ``alpha`` is optimised: the paper's Adam, or gradient descent with each
#: instance's gradient divided by its largest absolute element
#: (``"normalized_gd"``, see :func:`captum_iba.attr._loop.normalized_step`).
OPTIMIZERS = ("adam", "normalized_gd")
#: What is returned per element: the paper's capacity (Eqs. 3-4), or the signal
#: weight :math:`\lambda` averaged over the optimisation steps (``"mask_mean"``).
READOUTS = ("capacity", "mask_mean")
#: What the mask does to a token (docs/method.rst): the paper's noise (Eq. 2)
#: at the bottleneck, or deletion relaxed through the attention of every layer
#: above it (``"attention"``, Eq. R2; deterministic, no prior).
REMOVALS = ("noise", "attention")
#: How many weights the mask has: the paper's one per token and feature, or
#: one per token shared by its features (``"token"``, not in the paper).
MASKS = ("feature", "token", "source")
#: The options only the noise removal uses (refused with ``"attention"``).
NOISE_ONLY = ("beta", "prior")


def _knob(doc: str, default: Any = dataclasses.MISSING, factory: Any = None) -> Any:
    """A field of :class:`IBAOptions` with its documentation."""
    if factory is not None:
        return field(default_factory=factory, metadata={"doc": doc})
    return field(default=default, metadata={"doc": doc})


def _check_int(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}.")


@dataclass(frozen=True)
class IBAOptions:
    """The options of one IBA run, validated once when built.

    Build one from a named configuration with :meth:`from_config` (or pass
    the name as ``config=`` to
    :meth:`~captum_iba.InformationBottleneckAttribution.attribute`). The
    fields' defaults are the paper's configuration.

    Attributes:
        {options}
    """

    beta: BetaType = _knob(
        "float >= 0 or ``'auto'``: weight of the information term (Eq. 5). "
        "``'auto'`` sets it per instance to 10 x abs(L_task) / L_IB at the start "
        "(Appendix A), L_IB being the instance's total capacity.",
        1e-5,
    )
    steps: int = _knob("int >= 1: optimisation steps.", 10)
    n_samples: int = _knob("int >= 1: noise copies per instance and step.", 10)
    lr: float = _knob("float > 0: the optimiser's learning rate (step size).", 1.0)
    init_alpha: float = _knob(
        "float: initial alpha (lambda = sigmoid(alpha); 5 gives 0.993).", 5.0
    )
    prior: NoisePrior = _knob(
        "str or NoisePrior: where the noise comes from - ``'paper'`` (the "
        "instance's own layer statistics), ``'reference'`` (the released code's), "
        "``'baseline'`` (the layer's output on ``baselines``: deletion-like) or a "
        "fitted :class:`~captum_iba.DatasetPrior` (names: "
        ":data:`captum_iba.registry.PRIORS`).",
        factory=PaperPrior,
    )
    seed: Optional[int] = _knob(
        "int, optional: seed of the noise; every instance draws its own noise "
        "from it, so a result does not depend on the batch. None draws it from "
        "torch's global generator.",
        None,
    )
    internal_batch_size: Optional[int] = _knob(
        "int, optional: most rows (instances x n_samples) per forward pass; "
        "below n_samples, one instance's noise copies run in several passes "
        "whose gradients add up (the same scores, less memory). None: as many "
        "rows as keep rows x tokens within a bound per device (the whole batch "
        "with ``cuts=False``).",
        None,
    )
    objective: Objective = _knob(
        "str or Callable: the task loss (:mod:`captum_iba.attr.objectives`): "
        "``'auto'`` (cross-entropy of class logits as in the paper, -log p of "
        "probabilities, the negated score of one output per instance), "
        "``'cross_entropy'``, ``'probability'``, ``'log_probability'``, "
        "``'score'``, or ``(output, target) -> loss per row``.",
        factory=lambda: resolve_objective("auto"),
    )
    attribute_to_layer_input: bool = _knob(
        "bool: bottleneck the hidden states the layer is called with instead of "
        "its output (always through hooks).",
        False,
    )
    optimizer: str = _knob(
        "str: ``'adam'`` (the paper) or ``'normalized_gd'`` (each instance's gradient "
        "divided by its largest absolute element, step ``lr``).",
        "adam",
    )
    readout: str = _knob(
        "str: ``'capacity'`` (the paper: the final capacity, in nats) or "
        "``'mask_mean'`` (lambda averaged over the steps, in (0, 1)).",
        "capacity",
    )

    removal: str = _knob(
        "str: what the mask does to a token - ``'noise'`` (the paper: Eq. 2 at "
        "the bottleneck) or ``'attention'`` (not in the paper: deletion relaxed "
        "through attention, Eq. R2 - every layer above the bottleneck reads each "
        "token with weight lambda; at lambda = 0 the token is deleted. "
        "Deterministic: the prior, beta and the capacity are not used, and one "
        "noise sample suffices).",
        "noise",
    )
    complement: float = _knob(
        "float >= 0: weight gamma of the complement term (not in the paper, "
        "Eq. R3): the loss also asks the target to be improbable when the mask "
        "is inverted (the tokens it keeps removed). 0: Eq. 5 alone.",
        0.0,
    )
    complement_skip: int = _knob(
        "int >= 0: the last ``complement_skip`` steps leave the complement "
        "term out (Eq. 5 or R2 alone there: one pass of the mask's rows "
        "instead of two). 0: the term at every step.",
        0,
    )

    mask: str = _knob(
        "str: ``'feature'`` (the paper: one lambda per token and feature) or "
        "``'token'`` (not in the paper: one lambda per token, shared by its "
        "features; the task gradient is then summed over the features, so its "
        "noise averages out - what makes the faithful configuration rank on a "
        "decoder LLM, docs/llm.rst) or ``'source'`` (one lambda per source of a "
        "context, shared by its tokens and their features: the attribute's "
        "``feature_mask``, a causal LM's PromptBatch with sources; "
        "docs/context.rst). Needs a ``(B, L, features)`` layer output.",
        "feature",
    )

    def __post_init__(self) -> None:
        for name, value, allowed in (
            ("optimizer", self.optimizer, OPTIMIZERS),
            ("readout", self.readout, READOUTS),
            ("removal", self.removal, REMOVALS),
            ("mask", self.mask, MASKS),
        ):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}.")
        check_numbers(
            self.beta, self.lr, self.init_alpha, self.seed, self.internal_batch_size
        )
        _check_int("steps", self.steps)
        _check_int("n_samples", self.n_samples)
        beta_ok = self.beta == "auto" or (
            isinstance(self.beta, numbers.Real)
            and not isinstance(self.beta, bool)
            and self.beta >= 0
        )
        if not beta_ok:
            raise ValueError(f"beta must be a float >= 0 or 'auto', got {self.beta!r}.")
        if not (isinstance(self.lr, numbers.Real) and self.lr > 0):
            raise ValueError(f"lr must be > 0, got {self.lr!r}.")
        if not isinstance(self.init_alpha, numbers.Real):
            raise ValueError(f"init_alpha must be a number, got {self.init_alpha!r}.")
        object.__setattr__(self, "init_alpha", float(self.init_alpha))
        c = self.complement
        if isinstance(c, bool) or not isinstance(c, numbers.Real) or not 0 <= c < inf:
            raise ValueError(f"complement must be a float >= 0, got {c!r}.")
        object.__setattr__(self, "complement", float(c))
        skip = self.complement_skip
        if isinstance(skip, bool) or not isinstance(skip, int) or skip < 0:
            raise ValueError(f"complement_skip must be an int >= 0, got {skip!r}.")
        if self.removal == "attention" and self.readout == "capacity":
            raise ValueError(
                "removal='attention' adds no noise, so there is no capacity to read: "
                "use readout='mask_mean'."
            )
        object.__setattr__(self, "prior", resolve_prior(self.prior))
        object.__setattr__(self, "objective", resolve_objective(self.objective))
        if self.attribute_to_layer_input and self.prior.needs_layer_input:
            raise ValueError(
                f"prior={self.prior.name!r} takes its mean from the layer's input, "
                "so it cannot bottleneck that input: use attribute_to_layer_input="
                "False or another prior."
            )

    @classmethod
    def from_config(
        cls, config: "ConfigLike" = "paper", **overrides: Any
    ) -> "IBAOptions":
        """The options of a named configuration, with ``overrides`` applied.

        Args:
            config (str or IBAOptions): A name in :data:`CONFIGS` (any case),
                or options to start from. Default ``"paper"``.
            **overrides: Fields of :class:`IBAOptions` to change.

        Returns:
            IBAOptions: The options, validated.

        Raises:
            ValueError: For an unknown configuration name.
            TypeError: For an override that is no field (the message lists
                the fields).
        """
        base = config if isinstance(config, IBAOptions) else CONFIGS.load(config)
        return base.replace(**overrides)

    def replace(self, **overrides: Any) -> "IBAOptions":
        """A copy with ``overrides`` applied (validated again).

        Raises:
            TypeError: For a name that is no field; the message lists them.
        """
        unknown = sorted(set(overrides) - set(self.names()))
        if unknown:
            raise TypeError(
                f"unknown IBA option(s) {unknown}; the options are {self.names()}"
            )
        new = dataclasses.replace(self, **overrides) if overrides else self
        unused = sorted(set(overrides) & set(NOISE_ONLY))
        if new.removal == "attention" and unused:
            raise ValueError(
                f"IBA option(s) {unused} have no effect with removal='attention' "
                "(no noise, no prior, no capacity); use a configuration with "
                "removal='noise' (e.g. 'faithful') to set them."
            )
        return new

    @property
    def token_reduction(self) -> str:
        """How a token's score is made from its features' (one rule for
        classifiers and causal LMs, :func:`~captum_iba.attr.text.token_attributions`):
        ``"sum"`` for the capacity (information, in nats, adds up),
        ``"mean"`` for a mask readout (the share of the token's signal kept,
        in [0, 1])."""
        return "sum" if self.readout == "capacity" else "mean"

    @classmethod
    def names(cls) -> "list[str]":
        """The fields' names, in order."""
        return [f.name for f in dataclasses.fields(cls)]

    def record(self) -> Dict[str, Any]:
        """Every field as plain data (the prior and objective by name), as
        results record them."""
        out: Dict[str, Any] = {}
        for name in self.names():
            value = getattr(self, name)
            out[name] = getattr(value, "name", value) if name in _NAMED else value
        return out


_NAMED = ("prior", "objective")
ConfigLike = Union[str, IBAOptions]


def options_doc(indent: int = 4, bullets: bool = False) -> str:
    """The fields of :class:`IBAOptions` for a docstring: a Google-style
    argument list (``name (type): meaning. Default: value.``), or a bullet
    list, each line indented by ``indent``."""
    pad = " " * indent
    lines = []
    for f in dataclasses.fields(IBAOptions):
        kind, _, text = f.metadata["doc"].partition(": ")
        default = f.default if f.default is not dataclasses.MISSING else None
        shown = f" Default: ``{default!r}``." if default is not None else ""
        head = f"* ``{f.name}`` ({kind}): " if bullets else f"{f.name} ({kind}): "
        lines += textwrap.wrap(
            head + text + shown,
            width=88 - indent,
            subsequent_indent="  " if bullets else "    ",
            break_on_hyphens=False,
        )
    return ("\n" + pad).join(lines)


IBAOptions.__doc__ = (IBAOptions.__doc__ or "").replace("{options}", options_doc(8))

#: The paper's configuration (Section 3, Appendix A): Adam from lambda = 0.993,
#: 10 steps of 10 noise samples, the final capacity in nats.
PAPER = IBAOptions()
#: The most faithful configuration measured (``iba-faithful``,
#: docs/faithfulness.rst): a deletion-like prior (the layer's output with the
#: removable tokens replaced by [PAD]), alpha from 0 (lambda = 0.5) moved by
#: normalised gradient descent, 5 noise samples, the mask averaged over the
#: steps as the score.
FAITHFUL = IBAOptions(
    prior="baseline",
    n_samples=5,
    lr=3.0,
    init_alpha=0.0,
    optimizer="normalized_gd",
    readout="mask_mean",
)

#: The second round's configuration (``iba-deletion``,
#: docs/studies/faithfulness_round2.rst):
#: the mask acts by deletion relaxed through attention in every layer above
#: the bottleneck (put it after the embeddings for every depth) instead of
#: noise, and the loss adds the complement term (Eq. R3); alpha from 0 moved by
#: normalised gradient descent, one pass per term and step (deterministic), the
#: mask averaged over the steps as the score. Not an information bottleneck:
#: no noise, no capacity. 7 steps of lr 4 (10 of lr 3, then 8 of lr 4, before):
#: the cheapest schedule within .005 AOPC of 10 x 3 on the SST-2 search split,
#: checked on the SST-2 and RTE report splits (AOPC -.004 and -.001, 0.6x the
#: CPU-s; docs/studies/faithfulness_round2.rst, "The default's schedule"). The last step
#: leaves the complement term out (one set of rows instead of two there):
#: AOPC -.001 / -.000 on the SST-2 search / report split (issue 54; causal LMs
#: keep it at every step, :data:`~captum_iba.attr.llm.LLM_OVERRIDES`).
DELETION = IBAOptions(
    removal="attention",
    complement=1.0,
    complement_skip=1,
    n_samples=1,
    steps=7,
    lr=4.0,
    init_alpha=0.0,
    optimizer="normalized_gd",
    readout="mask_mean",
)

#: IBA's named configurations: the one registry of configuration names.
CONFIGS = Registry("IBA configuration")
CONFIGS.add("paper", PAPER, "the paper's configuration (reproduction)")
CONFIGS.add("faithful", FAITHFUL, "the most faithful configuration of the first round")
CONFIGS.add(
    "deletion",
    DELETION,
    "deletion through attention plus the complement term (second round)",
)


def used_options(options: "IBAOptions") -> Dict[str, Any]:
    """The options as results record them, less those the run does not use:
    the deletion through attention adds no noise, so it has no prior, beta or
    noise seed."""
    record = options.record()
    if options.removal == "attention":
        for name in NOISE_ONLY + ("seed",):
            record.pop(name, None)
    return record
