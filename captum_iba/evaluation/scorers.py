"""Attribution methods as per-token scorers, and the one registry of their names.

Every scorer turns one batch of either kind into per-token scores, with one
call (:mod:`~captum_iba.evaluation.batches`)::

    scores = scorer.attribute(batch)

* a classifier's :class:`~captum_iba.attr.batches.TokenBatch` (token
  ids, the class explained, mask, segment ids) gives ``(B, L)`` scores
  aligned with ``input_ids`` (zero at padding); the same call written
  Captum's way, ``scorer.attribute(input_ids, target=labels,
  attention_mask=attention_mask, token_type_ids=token_type_ids)``, is that
  batch;
* a causal LM's :class:`~captum_iba.attr.batches.PromptBatch` (prompts and
  their answers) gives an :class:`~captum_iba.attr.batches.AnswerScores`: the
  prompt tokens' scores for the whole answer (``answer``, ``(B, W)``) and,
  with ``per_token=True``, for each output token (``tokens``).

A method is one class (:class:`TokenScorer`) whichever kind it explains; its
registry entry says which kinds it does. The scorer records how it ran in
``scorer.settings``. Method names live in the one
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

import warnings
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Type,
    Union,
)

from captum.log import log_usage
from torch import Tensor

from captum_iba._utils import common
from captum_iba.attr.batches import (
    BATCH_TYPES,
    Batch,
    Scores,
    TokenBatch,
)
from captum_iba.attr.kinds import ModelKind, kind_named, kind_of
from captum_iba.attr.rows import Rows, RowScores
from captum_iba.evaluation.sources import POOLINGS
from captum_iba.registry import METHODS, SETTINGS

__all__ = [
    "METHODS",
    "MethodFacts",
    "TokenScorer",
    "build_scorer",
    "register_scorer",
    "registered_name",
    "scorer_class",
    "scorer_names",
]

#: A scorer's ``setting`` outside the registered comparison settings.
CUSTOM_SETTING = "custom"
#: The class explained per instance, as Captum's methods take it: an index
#: for all, one per instance, a ``(B,)`` tensor, or None (the predicted class).
TargetLike = Union[None, int, Sequence[int], Tensor]


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
        target = METHODS.entry(name).target
        if target is cls or target == path:
            return name
    return str(getattr(cls, "name", None) or cls.__name__)


def __getattr__(name: str) -> Any:
    if name == "SCORERS":
        warnings.warn(
            "captum_iba.evaluation.SCORERS is deprecated since 0.2; removed in 0.4: "
            "use the registry "
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

    @property
    def needs_sources(self) -> bool:
        """bool: Whether it explains a causal LM's prompts only with their
        sources (:func:`~captum_iba.evaluation.sources.with_sources`; the
        registry's ``sources`` fact, a user's class's ``needs_sources``); on
        a prompt task the content's words are its sources
        (:func:`~captum_iba.evaluation.llm_loop.scorer_batch`)."""
        return bool(self.facts.get("sources", False))

    @property
    def reads_answer_text(self) -> bool:
        """bool: Whether it re-reads a causal LM's answer as text (the
        registry's ``reads_answer`` fact, a user's class's
        ``reads_answer_text``: AT2, ContextCite, whose packages re-encode it),
        so that an answer of only whitespace, which re-encodes as other
        tokens, is refused before it runs."""
        return bool(self.facts.get("reads_answer", False))

    @property
    def explains_spans(self) -> bool:
        """bool: Whether it explains a part of a causal LM's answer (a batch
        whose :attr:`~captum_iba.attr.batches.PromptBatch.explained` is set:
        the registry's ``spans`` fact, a user's class's ``explains_spans``,
        False unless it says so)."""
        return bool(self.facts.get("spans", False))


class TokenScorer(MethodFacts):
    """Base class of every method: per-token scores of a batch of either kind.

    :meth:`attribute` takes a classifier's
    :class:`~captum_iba.attr.batches.TokenBatch` (or its tensors, as
    Captum's methods take them) or a causal LM's
    :class:`~captum_iba.attr.batches.PromptBatch`; a subclass implements a
    hook per kind it explains: :meth:`_scores` (a classifier's ``(B, L)``
    scores of the class explained, the base class validating the inputs,
    moving them to the model's device, zeroing padding and recording the
    time spent) and :meth:`_prompt_scores` (a causal LM's
    :class:`~captum_iba.attr.batches.AnswerScores` of the prompt tokens for the
    answers, zeroed outside ``batch.scored``).

    What a method takes and what its scores are is said once, by its registry
    entry (:data:`captum_iba.registry.METHODS`): the kinds of model it
    explains, the options it takes (the resolver passes each one given,
    resolved once, as the constructor keyword the option declares), whether
    its scores are :attr:`signed` and how a word's score is made from its
    pieces' (:attr:`word_reduction`). A user's class registered with
    :func:`register_scorer` says the same with the class attributes ``name``,
    ``models`` (the kinds: default ``("classifier",)``), ``needs`` (the
    options it takes), ``signed``, ``word_reduction``, ``needs_sources`` and
    ``reads_answer_text``.

    Attributes:
        method_name (str): The registered method (e.g. ``"iba-faithful"``).
        name (str): The name shown in results and tables (the method, or a
            variant of it such as ``"IBA (paper)"``).
        model_kind (ModelKind): The kind of the model: as the entry decided
            it (the constructor's ``model_kind``, which
            :func:`~captum_iba.evaluation.build_scorers` passes), else decided
            once when the scorer is built (:func:`~captum_iba.attr.kinds.kind_of`:
            a Hugging Face causal LM's, else a classifier's); ``kind`` is its
            name.
        settings (dict): Everything that defines the run (setting, target rule,
            steps, samples, seed, ...).
    """

    #: What one score means, in one sentence (pages, tables, ``settings.json``);
    #: ``{output}`` becomes what the method explains (``"logit"``, ...).
    meaning: str = "+ for the explained class, - against it"
    #: What one score of a causal LM's prompt token means.
    prompt_meaning: str = "+ for the answer, - against it"
    #: Why the method gives no per-output-token scores of a causal LM's
    #: answer ("" when it gives them).
    per_token_note: str = ""
    #: How its token scores pool to one score per source of a context
    #: (:func:`~captum_iba.evaluation.sources.source_scores`; docs/context.rst
    #: says which pooling was measured most faithful per method).
    source_pooling: str = "sum"
    #: The poolings its token scores are reported by in a context study
    #: (:func:`~captum_iba.evaluation.context_loop.method_source_scores`):
    #: :data:`~captum_iba.evaluation.sources.POOLINGS`, and for a mask's
    #: scores in [0, 1] ``"logit-max"`` too.
    source_poolings: Tuple[str, ...] = POOLINGS
    #: What a score is, where the method's scores of a causal LM's prompts
    #: say no other (:attr:`~captum_iba.attr.batches.AnswerScores.unit`).
    unit: str = "nats"
    #: Whether it reads the model (False: a classifier's target is not
    #: resolved for it, no forward pass runs).
    reads_model: bool = True

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
        model_kind: Union[None, str, ModelKind] = None,
    ) -> None:
        if setting != CUSTOM_SETTING and setting not in SETTINGS:
            raise ValueError(
                f"setting must be one of {', '.join(SETTINGS.names())} (or "
                f"{CUSTOM_SETTING!r}); got {setting!r}"
            )
        # The kind of the model (:class:`~captum_iba.attr.kinds.ModelKind`):
        # as the entry decided it (``model_kind``), else decided here once;
        # everything that differs by kind asks it.
        self.model_kind: ModelKind = (
            self._kind_of(model) if model_kind is None else kind_named(model_kind)
        )
        self.method_name = method_name or registered_name(type(self))
        self.name = name or self.method_name
        self.model = model
        self.tokenizer = tokenizer
        self.special_token_ids = common.special_token_ids(tokenizer, special_token_ids)
        self.pad_token_id = self.model_kind.pad_token_id(tokenizer, pad_token_id)
        self.target_class = target_class
        self.use_attention_mask = use_attention_mask
        self.settings: Dict[str, Any] = {"method": self.name, "setting": setting}
        self.settings.update(
            self.model_kind.scorer_settings(target_class, use_attention_mask)
        )
        self.seconds = 0.0
        self.instances = 0
        self._meaning: Optional[str] = None

    @classmethod
    def _kind_of(cls, model: Any) -> ModelKind:
        """The kind ``model`` is explained as
        (:func:`~captum_iba.attr.kinds.kind_of`)."""
        return kind_of(model)

    @property
    def kind(self) -> str:
        """str: The name of the model's kind (``"classifier"`` or
        ``"causal-lm"``; the object is :attr:`model_kind`)."""
        return self.model_kind.name

    @property
    def score_meaning(self) -> str:
        """str: What one score means (:attr:`meaning` with its ``{output}``
        filled in from the scorer's ``output`` option, if it has one; a causal
        LM's: :attr:`prompt_meaning`), unless set on the instance."""
        if self._meaning is not None:
            return self._meaning
        return self.model_kind.score_meaning(self)

    @score_meaning.setter
    def score_meaning(self, value: str) -> None:
        self._meaning = value

    @log_usage()
    def attribute(
        self,
        batch: Union[Batch, Tensor],
        target: TargetLike = None,
        attention_mask: Optional[Tensor] = None,
        token_type_ids: Optional[Tensor] = None,
        per_token: Optional[bool] = None,
    ) -> Scores:
        """Per-token scores of one batch: ``attribute(batch) -> scores``.

        Args:
            batch (TokenBatch, PromptBatch or Tensor): A classifier's batch
                (:class:`~captum_iba.attr.batches.TokenBatch`) or a causal
                LM's prompts and answers
                (:class:`~captum_iba.attr.batches.PromptBatch`,
                :func:`~captum_iba.attr.llm_batch.prompt_batch`); or, written
                Captum's way, a classifier's ``(B, L)`` token ids with the
                next three arguments (the same as their ``TokenBatch``).
            target (int, sequence, Tensor or None): With token ids: the class
                to explain per instance (ignored when the scorer explains a
                fixed class, as in the paper setting). None: the predicted
                class.
            attention_mask (Tensor, optional): With token ids: ``(B, L)``, 0
                at padding.
            token_type_ids (Tensor, optional): With token ids: ``(B, L)``
                segment ids.
            per_token (bool, optional): Deprecated since 0.3 (removed in
                0.5): each output token is the causal LM's option, the
                batch's ``each_token``
                (:meth:`PromptBatch.with_each_token
                <captum_iba.attr.batches.PromptBatch.with_each_token>`).

        Returns:
            Tensor or AnswerScores: A classifier's ``(B, L)`` float scores on
            the CPU, higher = more relevant, zero at padding; a causal LM's
            :class:`~captum_iba.attr.batches.AnswerScores` (``answer``
            ``(B, W)`` and, where the batch asks for each answer token and
            the method gives them, ``tokens`` ``(B, T, W)``), zero wherever
            ``batch.scored`` is False.

        Raises:
            TypeError: For a batch of neither kind, or not the batch of the
                scorer's model's kind.
        """
        if isinstance(batch, Tensor):  # Captum's form: a classifier's tensors
            batch = TokenBatch(batch, target, attention_mask, token_type_ids)
        elif isinstance(target, bool):  # 0.3's attribute(prompt_batch, per_token)
            per_token = target
        if per_token is not None:
            batch = _each_token(batch, per_token)
        if not isinstance(batch, BATCH_TYPES):
            raise TypeError(
                "batch must be a TokenBatch or token ids (a classifier) or a "
                f"PromptBatch (a causal LM); got {type(batch).__name__}"
            )
        expected = self.model_kind.batch_type
        if self.model is not None and not isinstance(batch, expected):
            raise TypeError(
                f"{self.name} was built on {self.model_kind.article}: give it a "
                f"{expected.__name__}, not a {type(batch).__name__}"
            )
        return self.model_kind.explain(self, batch)

    def _removable(self, ids: Tensor, mask: Tensor) -> Tensor:
        """``(B, L)`` bool: the real tokens of ``ids`` that are not special."""
        return common.removable_mask(ids, mask, self.special_token_ids)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _adopt_legacy_hook(cls)

    def _scores(self, rows: Rows) -> Union[Tensor, RowScores]:
        """The method's one hook: a score per row and token of ``rows``
        (:class:`~captum_iba.attr.rows.Rows`, whatever the model's kind:
        the kind packs the batch into them and builds the result from the
        scores), ``(R, L)`` or the width of :meth:`Rows.read
        <captum_iba.attr.rows.Rows.read>`, or
        :class:`~captum_iba.attr.rows.RowScores`. A subclass implements it."""
        raise NotImplementedError(f"{type(self).__name__} implements no _scores(rows)")


#: The hooks of 0.3 a user's subclass may still define, by their parameters
#: (after ``self``): a classifier's ``_scores(ids, mask, tt, target)``, a
#: causal LM's ``_prompt_scores(batch, per_token)`` (``LLMScorer``'s
#: ``_scores(batch, per_token)``).
_LEGACY_CLASS, _LEGACY_PROMPT = 4, 2


def _adopt_legacy_hook(cls: type) -> None:
    """Gives a subclass that defines a hook of 0.3 (see
    :data:`_LEGACY_CLASS`) the one hook ``_scores(rows)`` around it: the
    rows call the hook of their kind (:meth:`Rows.legacy
    <captum_iba.attr.rows.Rows.legacy>`), with a ``DeprecationWarning``
    (0.3's hooks go in 0.5)."""
    import inspect

    own = cls.__dict__
    hooks = {}
    for name in ("_scores", "_prompt_scores"):
        hook = own.get(name)
        if hook is None:
            continue
        params = list(inspect.signature(hook).parameters)[1:]
        if params[:1] != ["rows"] and len(params) in (_LEGACY_CLASS, _LEGACY_PROMPT):
            hooks[len(params)] = hook
    if not hooks:
        return
    if _LEGACY_CLASS in hooks:
        cls._legacy_tokens = hooks[_LEGACY_CLASS]  # type: ignore[attr-defined]
    if _LEGACY_PROMPT in hooks:
        cls._legacy_prompts = hooks[_LEGACY_PROMPT]  # type: ignore[attr-defined]

    def _scores(self: Any, rows: Rows) -> Union[Tensor, RowScores]:
        warnings.warn(
            f"{type(self).__name__} implements a hook of 0.3 (_scores(ids, mask, "
            "tt, target) or _prompt_scores(batch, per_token)): implement "
            "_scores(rows) instead (docs/extending.rst); deprecated since 0.3; "
            "removed in 0.5",
            DeprecationWarning,
            stacklevel=4,
        )
        return rows.legacy(self)

    cls._scores = _scores  # type: ignore[method-assign]


def _each_token(batch: Any, per_token: bool) -> Any:
    """0.3's ``attribute(batch, per_token=...)``: the batch asking for each
    answer token (a causal LM's), with a ``DeprecationWarning``; a
    classifier's batch as it is (the argument never meant anything there)."""
    warnings.warn(
        "attribute(..., per_token=...) is deprecated since 0.3; removed in 0.5: "
        "each output token is the causal LM's option, the batch's "
        "(batch.with_each_token(), prompt_batch(..., each_token=True))",
        DeprecationWarning,
        stacklevel=4,
    )
    with_each = getattr(batch, "with_each_token", None)
    return batch if with_each is None else with_each(bool(per_token))
