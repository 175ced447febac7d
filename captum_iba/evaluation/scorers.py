"""Attribution methods as per-token scorers, and the one registry of their names.

Every scorer turns one batch into per-token scores ``(B, L)`` aligned with
``input_ids`` (zero at padding), with one call::

    scores = scorer.attribute(input_ids, target=labels,
                              attention_mask=attention_mask,
                              token_type_ids=token_type_ids)

and records how it ran in ``scorer.settings``. Method names live in the one
registry :data:`captum_iba.registry.METHODS` (built-in methods are listed
there, imported on first use, with the options each takes and what its
scores are; :func:`register_scorer` adds a user's class, as does a package's
entry point in the group ``captum_iba.methods``); :func:`scorer_class` is the
lookup from a name (any case) to the class and :func:`build_scorer` builds an
entry with the arguments it fixes; :mod:`~captum_iba.evaluation.resolve`
checks a request's options and builds every method. The methods themselves
live in
:mod:`~captum_iba.evaluation.ig`, :mod:`~captum_iba.evaluation.lime`,
:mod:`~captum_iba.evaluation.iba` and the anchors' modules; the ``"paper"`` and
``"fair"`` configurations in :mod:`~captum_iba.evaluation.presets`.
"""

import time
import warnings
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Type

import torch
from captum.log import log_usage
from torch import Tensor

from captum_iba._utils import common
from captum_iba._utils.common import (
    check_length,
    format_target,
    hf_call,
    instance_seed,
    model_device,
)
from captum_iba.registry import METHODS, SETTINGS

__all__ = [
    "METHODS",
    "MethodFacts",
    "RandomScorer",
    "TokenScorer",
    "build_scorer",
    "register_scorer",
    "registered_name",
    "scorer_class",
    "scorer_names",
]

#: A scorer's ``setting`` outside the registered comparison settings.
CUSTOM_SETTING = "custom"
#: What a scorer's ``output`` option explains, in words (for
#: :attr:`TokenScorer.score_meaning`).
OUTPUT_WORDS = {"logits": "logit", "probs": "probability", "log_odds": "log-odds"}


def register_scorer(cls: Type["TokenScorer"]) -> Type["TokenScorer"]:
    """Class decorator: register a user's scorer under its ``name`` attribute
    in :data:`captum_iba.registry.METHODS` (the first line of its docstring is
    the summary; ``needs`` names the options it takes and ``signed`` /
    ``word_reduction`` say what its scores are, see
    :func:`captum_iba.registry.method_facts`).

    Args:
        cls (type): A :class:`TokenScorer` subclass with a unique ``name``.

    Returns:
        type: ``cls`` itself.

    Raises:
        ValueError: If another class is registered under the same name (any
            case), or ``needs`` names no declared option.
    """
    METHODS.adopt(cls)
    return cls


def scorer_class(name: str) -> Type["TokenScorer"]:
    """The scorer class registered under ``name`` (case-insensitive).

    Args:
        name (str): A method name, e.g. ``"IG"`` or ``"ig"``.

    Returns:
        type: The class (build an entry with the arguments it fixes with
        :func:`build_scorer`).

    Raises:
        ValueError: For an unknown name; the message lists the known ones.
    """
    return METHODS.load(name)


def build_scorer(name: str, model: Any, **kwargs: Any) -> "TokenScorer":
    """The scorer of the method registered as ``name``, named so, with the
    arguments its entry fixes (e.g. ``iba-faithful``'s configuration) and
    ``kwargs`` (which win).

    Args:
        name (str): A registered method name (any case).
        model (Callable): The classifier.
        **kwargs: Constructor arguments of the scorer.

    Returns:
        TokenScorer: The scorer.
    """
    entry = METHODS.entry(name)
    return entry.build(
        model, **{"name": entry.name, "method_name": entry.name, **kwargs}
    )


def scorer_names() -> List[str]:
    """The registered method names, in registration order."""
    return METHODS.names()


def registered_name(cls: type) -> str:
    """The name under which ``cls`` is registered (its first entry), else its
    ``name`` attribute, else its class name."""
    path = f"{cls.__module__}:{cls.__qualname__}"
    for name in METHODS.names():
        entry = METHODS.entry(name)
        kinds = entry.facts.get("kinds") or {"": (entry.target, None)}
        if any(target is cls or target == path for target, _ in kinds.values()):
            return name
    return str(getattr(cls, "name", None) or cls.__name__)


def __getattr__(name: str) -> Any:
    if name == "SCORERS":
        warnings.warn(
            "captum_iba.evaluation.SCORERS is replaced by the registry "
            "captum_iba.registry.METHODS (scorer_class(name) loads a class).",
            DeprecationWarning,
            stacklevel=2,
        )
        return {n: METHODS.load(n) for n in METHODS.names()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class MethodFacts:
    """What a scorer's method is, read from its registry entry - the one
    place a method states it (a scorer class states none of it; a user's
    class registered with :func:`register_scorer` states it as class
    attributes, which the registry reads and which then shadow these).

    Attributes:
        method_name (str): The registered method.
    """

    method_name: str = ""

    @property
    def facts(self) -> Mapping[str, Any]:
        """The registry's facts of this scorer's method (none when it is not
        registered)."""
        known = self.method_name in METHODS
        return METHODS.entry(self.method_name, warn=False).facts if known else {}

    @property
    def signed(self) -> bool:
        """bool: Whether a score has a direction (+ for the explained class
        or answer, - against it); False for a magnitude without one, such as
        IBA's."""
        return bool(self.facts.get("signed", True))

    @property
    def word_reduction(self) -> str:
        """str: How a word's score is made from its word pieces' scores:
        ``"sum"`` (additive scores: the word's share of the total) or
        ``"mean"`` (scores that do not add up over pieces)."""
        return str(self.facts.get("reduction", "sum"))


class TokenScorer(MethodFacts):
    """Base class: turn a batch of token ids into per-token scores ``(B, L)``.

    Subclasses implement :meth:`_scores`. :meth:`attribute` validates the inputs,
    moves them to the model's device, zeroes padding and records the time spent.

    What a method takes and what its scores are is said once, by its registry
    entry (:data:`captum_iba.registry.METHODS`): the options it takes (the
    resolver passes each one given, resolved once, as the constructor keyword
    the option declares), whether its scores are :attr:`signed` and how a
    word's score is made from its pieces' (:attr:`word_reduction`). A user's
    class registered with :func:`register_scorer` says the same with the class
    attributes ``name``, ``needs`` (the options it takes), ``signed`` and
    ``word_reduction``.

    Attributes:
        method_name (str): The registered method (e.g. ``"iba-faithful"``).
        name (str): The name shown in results and tables (the method, or a
            variant of it such as ``"IBA (paper)"``).
        settings (dict): Everything that defines the run (setting, target rule,
            steps, samples, seed, ...).
    """

    #: What one score means, in one sentence (pages, tables, ``settings.json``);
    #: ``{output}`` becomes what the method explains (``"logit"``, ...).
    meaning: str = "+ for the explained class, - against it"

    def __init__(
        self,
        model: Callable[..., Any],
        *,
        special_token_ids: Optional[Iterable[int]] = None,
        tokenizer: Any = None,
        pad_token_id: Optional[int] = None,
        target_class: Optional[int] = None,
        use_attention_mask: bool = True,
        name: Optional[str] = None,
        setting: str = "fair",
        method_name: Optional[str] = None,
    ) -> None:
        if setting != CUSTOM_SETTING and setting not in SETTINGS:
            raise ValueError(
                f"setting must be one of {', '.join(SETTINGS.names())} (or "
                f"{CUSTOM_SETTING!r}); got {setting!r}"
            )
        self.method_name = method_name or registered_name(type(self))
        self.name = name or self.method_name
        self.model = model
        self.tokenizer = tokenizer
        self.special_token_ids = common.special_token_ids(tokenizer, special_token_ids)
        self.pad_token_id = int(common.pad_token_id(tokenizer, pad_token_id, 0))
        self.target_class = target_class
        self.use_attention_mask = use_attention_mask
        self.settings: Dict[str, Any] = {
            "method": self.name,
            "setting": setting,
            "explains": "given target"
            if target_class is None
            else f"class {target_class}",
            "attention_mask": use_attention_mask,
        }
        self.seconds = 0.0
        self.instances = 0

    @property
    def score_meaning(self) -> str:
        """str: What one score means (:attr:`meaning` with its ``{output}``
        filled in from the scorer's ``output`` option, if it has one)."""
        output = OUTPUT_WORDS.get(getattr(self, "output", None), "score")
        return self.meaning.format(output=output)

    @log_usage()
    def attribute(
        self,
        input_ids: Tensor,
        target: Any = None,
        attention_mask: Optional[Tensor] = None,
        token_type_ids: Optional[Tensor] = None,
    ) -> Tensor:
        """Per-token scores of one batch.

        Args:
            input_ids (Tensor): ``(B, L)`` token ids.
            target (int, sequence, Tensor or None): The class to explain per instance
                (ignored when the scorer explains a fixed class, as in the paper
                setting). None: the predicted class.
            attention_mask (Tensor, optional): ``(B, L)``, 0 at padding.
            token_type_ids (Tensor, optional): ``(B, L)`` segment ids.

        Returns:
            Tensor: ``(B, L)`` float scores on the CPU, higher = more relevant, zero at
            padding.
        """
        if input_ids.dim() != 2:
            raise ValueError("input_ids must be (B, L)")
        check_length(self.model, input_ids.shape[1], "input_ids")
        mask = self._mask_of(input_ids, attention_mask)
        scores = self._attribute(input_ids, target, mask, token_type_ids)
        self.instances += input_ids.shape[0]
        return scores.masked_fill(~mask.bool().cpu(), 0.0)

    def _attribute(
        self, input_ids: Tensor, target: Any, mask: Tensor, tt: Optional[Tensor]
    ) -> Tensor:
        """Scores ``(B, L)`` on the CPU, before padding is zeroed: the method
        runs on the model's device, without the all-padding columns."""
        B, L = input_ids.shape
        dev = model_device(self.model)
        ids, mask = input_ids.to(dev), mask.to(dev)
        tt = tt.to(dev) if tt is not None else None
        tgt = self._target(target, ids, mask, tt)
        # Columns that are padding in every row (a slice of a data set padded
        # to its longest instance) are dropped for the method and put back.
        real = mask.bool().any(dim=0).nonzero()
        width = int(real.max()) + 1 if real.numel() else L
        start = time.perf_counter()
        scores = self._scores(
            ids[:, :width],
            mask[:, :width],
            None if tt is None else tt[:, :width],
            tgt.to(dev),
        )
        self.seconds += time.perf_counter() - start
        if scores.shape != (B, width):
            raise RuntimeError(
                f"{self.name} returned {tuple(scores.shape)}; expected {(B, width)}"
            )
        out = torch.zeros(B, L)
        out[:, :width] = scores.detach().float().cpu()
        return out

    def _target(
        self, target: Any, ids: Tensor, mask: Tensor, tt: Optional[Tensor]
    ) -> Tensor:
        """The class explained per instance: the fixed one, the given one or the
        predicted one."""
        batch = ids.shape[0]
        if self.target_class is not None:
            return torch.full((batch,), int(self.target_class), dtype=torch.long)
        if target is None:
            with torch.no_grad():
                return hf_call(self.model, ids, mask, tt).argmax(-1).cpu()
        formatted = format_target(target, batch)
        if formatted is None or formatted.dim() != 1:
            raise ValueError("target must be one class index per instance")
        return formatted

    def _scores(
        self, ids: Tensor, mask: Tensor, tt: Optional[Tensor], target: Tensor
    ) -> Tensor:
        raise NotImplementedError

    def _mask_of(self, input_ids: Tensor, attention_mask: Optional[Tensor]) -> Tensor:
        """The attention mask, or ``input_ids != pad`` when none is given."""
        if attention_mask is not None:
            return attention_mask
        return (input_ids != self.pad_token_id).long()

    def _removable(self, ids: Tensor, mask: Tensor) -> Tensor:
        return common.removable_mask(ids, mask, self.special_token_ids)

    def _forward(self, output: str) -> Callable[..., Tensor]:
        model, use_mask = self.model, self.use_attention_mask

        def forward(ids: Tensor, mask: Tensor, tt: Optional[Tensor] = None) -> Tensor:
            logits = hf_call(
                model, ids, mask if use_mask else None, tt if use_mask else None
            )
            return logits.softmax(-1) if output == "probs" else logits

        return forward

    def _forward_masking(
        self, output: str, token_id: int, masked: bool
    ) -> Callable[..., Tensor]:
        """:meth:`_forward`, with attention mask 0 at ``token_id`` when
        ``masked`` (perturbed inputs whose removed tokens are that id)."""
        base = self._forward(output)

        def forward(ids: Tensor, mask: Tensor, tt: Optional[Tensor] = None) -> Tensor:
            if masked:
                mask = mask * (ids != token_id).to(mask.dtype)
            return base(ids, mask, tt)

        return forward


class RandomScorer(TokenScorer):
    """Seeded uniform random scores (a lower bound for any method).

    Each instance's scores are drawn at its real tokens from a generator seeded
    with :func:`~captum_iba._utils.common.instance_seed` (``seed`` and the
    instance's token ids): an instance gets the same scores in any batch,
    order, padding width or process.

    Args:
        model (Callable, optional): Unused (kept for a uniform interface).
        seed (int): Default 0.
        **kwargs: See :class:`TokenScorer`.
    """

    meaning = "uniform random numbers in [0, 1): a floor to compare with, no meaning"

    def __init__(
        self, model: Optional[Callable[..., Any]] = None, seed: int = 0, **kwargs: Any
    ) -> None:
        super().__init__(model, **kwargs)  # type: ignore[arg-type]
        self.seed = int(seed)
        self.settings.update(
            distribution="uniform[0, 1)", seed=self.seed, seeding="per instance"
        )
        self.settings["explains"] = "n/a"

    def _attribute(
        self, input_ids: Tensor, target: Any, mask: Tensor, tt: Optional[Tensor]
    ) -> Tensor:
        """Uniform scores ``(B, L)`` (no forward pass, no target needed)."""
        return seeded_uniform(input_ids, mask, self.seed)


def seeded_uniform(input_ids: Tensor, mask: Tensor, seed: int) -> Tensor:
    """``(B, L)`` uniform scores in [0, 1) at the real tokens (``mask``), 0
    elsewhere; each row's from a generator seeded with
    :func:`~captum_iba._utils.common.instance_seed` (``seed``, its real ids)."""
    out = torch.zeros(input_ids.shape)
    real = mask.bool().cpu()
    for b in range(input_ids.shape[0]):
        ids = input_ids[b].cpu()[real[b]]
        gen = torch.Generator().manual_seed(instance_seed(seed, ids))
        out[b, real[b]] = torch.rand(ids.shape[0], generator=gen)
    return out
