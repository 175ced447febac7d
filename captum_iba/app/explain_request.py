"""One explain, one request: what is asked (the question), of which kind of
model, by which methods with which options, about which inputs - built once
at the entry (``captum-iba explain``, :func:`captum_iba.explain`,
:func:`captum_iba.explain_answer`), checked once before any weights load,
and passed down; nothing after the entry decides the kind or the question
again, nor checks the methods again.

* :class:`Question` - a prediction, an answer, the sources of an answer:
  the route an explain takes, chosen once (:func:`question_of`) from the
  model's kind and whether a context was given; it supplies what differs
  between them: the context of a prompt, the default method, the request
  of a Python entry (:meth:`Question.request`), and its parts of the one
  pipeline (:meth:`Question.prepare`;
  :mod:`~captum_iba.app.explain_pipeline`);
* :func:`~captum_iba.app.model_kind.decide_kind` - the model's kind,
  decided once from its name (its configuration, before any weights) or
  the loaded object;
* :func:`check_methods` - the methods (the question's default when none is
  named) and their options checked once, against the declarations and the
  kind (:func:`captum_iba.request.check_request`);
* :class:`ExplainRequest` - the checked request, frozen.
"""

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence, Tuple, Union

from captum_iba.app.model_kind import decide_kind
from captum_iba.attr.kinds import CAUSAL_LM, CLASSIFIER, ModelKind
from captum_iba.request import MethodRequest, check_model_kind, check_request

__all__ = [
    "ANSWER",
    "PREDICTION",
    "SOURCES",
    "ExplainRequest",
    "Question",
    "check_methods",
    "decide_kind",
    "question_of",
]


class Question:
    """What an explain asks of the model: its prediction of a text
    (:data:`PREDICTION`), its answer to a prompt (:data:`ANSWER`), or which
    sources of a context its answer used (:data:`SOURCES`) - and the route
    it takes: the question supplies the parts of the one pipeline
    (:func:`~captum_iba.app.explain_pipeline.explained`) that differ between
    them: the request of :func:`captum_iba.explain` (:meth:`request`), what
    is explained and how its batch is built (:meth:`prepare`, whose parts
    build the result and its subject: which rows the listing and the page
    show).

    Attributes:
        name (str): The question in one word.
        context (bool): Whether it is about the sources of a context.
    """

    name = ""
    context = False

    def context_of(self, prompt: Any) -> Any:
        """The context the prompt holds (a
        :class:`~captum_iba.app.context_explain.ContextPrompt`), None for a
        question about no context."""
        return None

    def text_of(self, prompt: Any) -> Any:
        """The text the model reads: the prompt itself, or a context's
        laid-out text."""
        return prompt

    def default_method(self, kind: ModelKind) -> str:
        """The method run when none is named, for models of ``kind``."""
        return kind.default_for(self.context)

    def request(
        self,
        kind: ModelKind,
        prompt: Any,
        model: Any,
        methods: Any,
        *,
        tokenizer: Any = None,
        pair: Optional[str] = None,
        target: Any = None,
        method_options: Optional[Mapping[str, Mapping[str, Any]]] = None,
        model_name: Optional[str] = None,
        context: Any = None,
        answer_span: Any = None,
        labels: Tuple[str, str] = ("max_new_tokens=", "answer_span="),
        **options: Any,
    ) -> "ExplainRequest":
        """The request of a Python entry (:func:`captum_iba.explain`,
        :func:`captum_iba.explain_answer`), its inputs and methods checked
        once (``context``: what was given, refused where the question has
        none; ``options``: the methods' options, None left out).

        Raises:
            ValueError: For an input the question does not take, and as
                :func:`check_methods` says.
        """
        raise NotImplementedError

    def supplied(self, explainer: Any, prior_data: Any) -> Any:
        """What :func:`captum_iba.explain` supplies beside the request: a
        classifier's methods' shared resources (its ``explainer`` and
        ``prior_data``), which a causal LM's route does not take."""
        from captum_iba.app.explain_pipeline import Supplied

        return Supplied(explainer=explainer, prior_data=prior_data)

    def prepare(self, request: "ExplainRequest", supplied: Any) -> Any:
        """The request prepared (a context manager giving a
        :class:`~captum_iba.app.explain_pipeline.Prepared`): its inputs
        checked against the model's configuration and tokenizer, the model
        and tokenizer loaded, the batch built.

        Args:
            request (ExplainRequest): The checked request.
            supplied (Supplied): What the caller supplies beside it
                (:class:`~captum_iba.app.explain_pipeline.Supplied`).
        """
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<question {self.name}>"


def _given(options: Mapping[str, Any]) -> dict:
    """The options given (None: not given)."""
    return {k: v for k, v in options.items() if v is not None}


class _Prediction(Question):
    name = "prediction"

    def request(self, kind, prompt, model, methods, *, tokenizer=None, pair=None,
                target=None, method_options=None, model_name=None, context=None,
                answer_span=None, labels=("max_new_tokens=", "answer_span="),
                **options):  # fmt: skip
        if context is not None:
            raise ValueError(
                "context= is for a causal LM (a generative model): a classifier "
                "explains its prediction of text"
            )
        if answer_span is not None:
            raise ValueError(
                "answer_span= is for a causal LM's answer to a context= (a "
                "classifier explains its prediction of text)"
            )
        checked = check_methods(
            methods, self, kind, _given(options), method_options, setting="fair"
        )
        return ExplainRequest(
            self, kind, checked, model, prompt, tokenizer=tokenizer, target=target,
            pair=pair, model_name=model_name,
        )  # fmt: skip

    def prepare(self, request, supplied):
        """:func:`~captum_iba.app.prediction_route.prepare`."""
        from captum_iba.app.prediction_route import prepare

        return prepare(request, supplied)


class _Answer(Question):
    name = "answer"

    def request(self, kind, prompt, model, methods, *, tokenizer=None, pair=None,
                target=None, method_options=None, model_name=None, context=None,
                answer_span=None, labels=("max_new_tokens=", "answer_span="),
                chat=None, max_new_tokens=20, per_token=False, **options):  # fmt: skip
        if pair is not None:
            raise ValueError("pair is for a classifier; a causal LM explains a prompt")
        return ExplainRequest(
            self,
            kind,
            check_methods(methods, self, kind, _given(options), method_options),
            model,
            prompt,
            tokenizer=tokenizer,
            target=None if target is None else str(target),
            chat=chat,
            max_new_tokens=max_new_tokens,
            per_token=per_token,
            answer_span=answer_span,
            model_name=model_name,
            labels=labels,
        )

    def supplied(self, explainer, prior_data):
        """Nothing: :func:`captum_iba.explain` 's resources are a
        classifier's (:func:`captum_iba.explain_answer` takes a causal LM's
        ``explainer``)."""
        from captum_iba.app.explain_pipeline import Supplied

        return Supplied()

    def prepare(self, request, supplied):
        """:class:`~captum_iba.app.answer_route.Answer`."""
        from captum_iba.app.answer_route import Answer

        return Answer(request, supplied.explainer)


class _Sources(_Answer):
    name = "sources"
    context = True

    def context_of(self, prompt: Any) -> Any:
        return prompt

    def text_of(self, prompt: Any) -> Any:
        return prompt.text

    def prepare(self, request, supplied):
        """:class:`~captum_iba.app.sources_route.Sources`."""
        from captum_iba.app.sources_route import Sources

        return Sources(request, supplied.explainer)


#: The three questions.
PREDICTION, ANSWER, SOURCES = _Prediction(), _Answer(), _Sources()

#: The question of each kind of model, without and with a context (a
#: classifier's route refuses a context in its own words).
_QUESTIONS = {CLASSIFIER: (PREDICTION, PREDICTION), CAUSAL_LM: (ANSWER, SOURCES)}


def question_of(model: ModelKind, context: bool) -> Question:
    """The question asked of a model of kind ``model``, with a context or
    without: decided once, at the entry."""
    return _QUESTIONS[model][bool(context)]


def check_methods(
    methods: Union[None, str, Sequence[str], MethodRequest],
    question: Question,
    model: ModelKind,
    options: Optional[Mapping[str, Any]] = None,
    method_options: Optional[Mapping[str, Mapping[str, Any]]] = None,
    setting: Optional[str] = None,
    cli: bool = False,
) -> MethodRequest:
    """The methods (``question``'s default for a model of kind ``model``
    when None) and their options, checked once against the declarations and
    the kind; a request already checked (a :class:`MethodRequest`) is
    checked against the kind unless it was checked for it.

    Raises:
        ValueError: As :func:`~captum_iba.request.check_request` says; for
            a request given with options.
    """
    if isinstance(methods, MethodRequest):
        if options or method_options:
            raise ValueError("give the options in the request, or no request")
        if not methods.checked_for(model):
            check_model_kind(methods.methods, model, cli)
        return MethodRequest(
            methods.methods, methods.options, methods.method_options,
            methods.passthrough, methods.notes, model.name,
        )  # fmt: skip
    return check_request(
        question.default_method(model) if methods is None else methods,
        options,
        method_options,
        setting=setting,
        cli=cli,
        model_kind=model.name,
    )


@dataclass(frozen=True)
class ExplainRequest:
    """One explain, checked.

    Attributes:
        question (Question): What is asked.
        kind (ModelKind): The model's kind, decided once.
        methods (MethodRequest): The methods and their options, checked for
            ``kind`` (:attr:`MethodRequest.kind` names it).
        model (Any): The model: None (the default model), a name, or a
            loaded model.
        prompt (Any): The text, the prompt, or (:data:`SOURCES`) the query
            and its context laid out.
        tokenizer (Any): The tokenizer given, if any.
        target (Any): The class, or the answer, to explain (None: the
            prediction, the greedy answer).
        pair (str, optional): A classifier's second text.
        chat (bool, optional): A causal LM: wrap the prompt as a user turn
            (None: when the tokenizer has a chat template).
        max_new_tokens (int): A causal LM: the longest greedy answer.
        per_token (bool): A causal LM: each output token explained too.
        answer_span (Any): Parts of the answer to attribute to the sources.
        model_name (str, optional): How the page names the model.
        labels (tuple[str, str]): How the options of the answer's length and
            of its parts are written in the messages (the command line's
            flags, or Python's keywords).
    """

    question: Question
    kind: ModelKind
    methods: MethodRequest
    model: Any = None
    prompt: Any = None
    tokenizer: Any = None
    target: Any = None
    pair: Optional[str] = None
    chat: Optional[bool] = None
    max_new_tokens: int = 20
    per_token: bool = False
    answer_span: Any = None
    model_name: Optional[str] = None
    labels: Tuple[str, str] = ("max_new_tokens=", "answer_span=")

    @property
    def context(self) -> Any:
        """The context asked about (None: none)."""
        return self.question.context_of(self.prompt)

    @property
    def text(self) -> Any:
        """The text the model reads (a context's laid out)."""
        return self.question.text_of(self.prompt)
