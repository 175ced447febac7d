"""One prediction explained by one or several methods, word by word.

:func:`explain` is the one-line entry for a notebook and the engine of
``captum-iba explain``::

    import captum_iba
    result = captum_iba.explain("A gripping, beautifully acted film.")
    result                      # in Jupyter: the page, one row per method
    result.top(5)               # [("beautifully", 0.41), ...]
    result.scores()             # one score per word, in text order

It checks the request - the methods and their options - against the
declarations (:func:`~captum_iba.request.check_request`; a layer index also
against the model's configuration) before any weights load, loads the model
(the default: MiniLM-L6 fine-tuned on SST-2, made once and cached), predicts,
builds the methods once through the one resolver of the harness
(:func:`~captum_iba.evaluation.build_scorers`; any registered method works),
scores the text's word pieces, and groups them into words (a word's score is
the sum or the mean of its pieces', as the method's registry entry says). For
a causal LM it explains the model's answer to the text instead
(:func:`~captum_iba.app.llm_explanation.explain_answer`).

Either way it returns one class, :class:`Explanation`: the pieces, the words
and every method's scores (:class:`MethodScores`), and what was explained,
its ``subject`` (:mod:`captum_iba.app.subjects`: a classifier's prediction or
a causal LM's answer). It renders as the page of
:func:`~captum_iba.visualization.page.explanation_html` and as the terminal
listing (:func:`~captum_iba.app.explain_text.terminal_text`,
:func:`~captum_iba.app.llm_explain_text.answer_text`).
"""

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch

from captum_iba._utils.common import hf_call
from captum_iba._utils.hooks import evaluation_mode
from captum_iba._utils.ranking import check_finite, is_near_flat
from captum_iba.app.checks import class_index, class_names
from captum_iba.app.explain_setup import (
    build,
    load,
    n_layers,
    no_ranking,
    warn_if_training,
)
from captum_iba.app.llm_explain_text import near_flat_said
from captum_iba.app.models import kind_of
from captum_iba.app.page import Page
from captum_iba.app.subjects import ClassifierSubject, Subject
from captum_iba.app.words import encode, grouping, to_words
from captum_iba.registry import DEFAULT_METHOD, METHODS
from captum_iba.request import (
    MethodRequest,
    check_model_kind,
    check_request,
    check_values,
)

__all__ = ["DEFAULT_METHOD", "Explanation", "MethodScores", "explain"]


@dataclass
class MethodScores:
    """One method's scores of the word pieces explained, for a classifier or
    a causal LM.

    Attributes:
        method (str): The registered name (e.g. ``"iba-faithful"``).
        summary (str): The registry's one-line summary.
        scores (list[float]): One per word piece (a classifier's special
            tokens included; a causal LM: the prompt's own tokens); for a
            causal LM, for the whole answer.
        signed (bool): Whether a score has a direction (+ for the class or
            the answer).
        meaning (str): What one score means.
        seconds (float): Time the method took (the explanation's subject
            says how it was measured).
        word_reduction (str): ``"sum"`` or ``"mean"``: how a word's score is
            made from its pieces' (the scorer's
            :attr:`~captum_iba.evaluation.TokenScorer.word_reduction`).
        layer (int, optional): The encoder layer it used, for IBA on a
            classifier.
        settings (dict): The scorer's settings.
        no_ranking (str): Why the scores rank no word ("" when they do): the
            method's own finding (e.g. IBA after a classifier's layer whose
            first token alone is read, or most of a prompt's tokens tied), or
            flat scores (:func:`~captum_iba._utils.ranking.flat_reason`); then
            no top words are listed.
        per_token (list of list of float, optional): A causal LM's scores per
            output token, per piece (None when the method gives none, or
            they were not asked for; always None for a classifier).
        per_token_note (str): Why the method gives no per-token scores when
            asked for them ("" when it gives them).
    """

    method: str
    summary: str
    scores: List[float]
    signed: bool
    meaning: str
    seconds: float
    word_reduction: str = "sum"
    layer: Optional[int] = None
    settings: Dict[str, Any] = field(default_factory=dict, repr=False)
    no_ranking: str = ""
    per_token: Optional[List[List[float]]] = None
    per_token_note: str = ""

    @property
    def flat(self) -> bool:
        """bool: The scores rank no word (:attr:`no_ranking` says why)."""
        return bool(self.no_ranking)


@dataclass
class Explanation(Page):
    """The result of :func:`explain`, for a classifier or a causal LM: the
    pieces explained, the words they form, each method's scores, and what was
    explained (:attr:`subject`).

    One class for both kinds of model: a user gets the same methods
    (:meth:`tokens`, :meth:`scores`, :meth:`top`, :meth:`matrix`, the page of
    :meth:`to_html` and :meth:`save_html`, the listing of :meth:`to_text`)
    whatever the model. What differs by kind is what was explained - a
    text's predicted class, or a prompt's answer - and it is one object,
    the :attr:`subject` (:mod:`captum_iba.app.subjects`), which also renders
    what depends on it: the page's heading and facts, where a method ran,
    the notes, the terminal listing. The alternative, one class with the
    optional fields of both kinds, would leave half of them None on every
    result and a test of which half is set in every method; here no method
    asks the kind, and a new kind is a new subject. The subject's
    attributes read as the explanation's own: ``result.answer``,
    ``result.probabilities`` or ``result.predicted`` is
    ``result.subject.answer`` ...

    Attributes:
        subject (Subject): What was explained: a
            :class:`~captum_iba.app.subjects.ClassifierSubject` (``text``,
            ``pair``, ``segment``, ``labels``, ``probabilities``, ``target``,
            ``n_layers``) or a
            :class:`~captum_iba.app.subjects.PromptSubject` (``prompt``,
            ``chat``, ``answer``, ``output_tokens``, ``generated``,
            ``per_token``, ``odds``).
        pieces (list[str]): The tokenizer's tokens explained: a classifier's
            special tokens included; a causal LM's prompt's own tokens.
        special (list[bool]): Per piece: a special token ([CLS], [SEP], ...),
            left out of what is shown (none of a prompt's).
        words (list[str]): The words, as written in the text.
        word_of_piece (list[int or None]): Per piece: its word's index (None
            for special tokens).
        model_name (str): What the model is, for the page.
        methods (dict[str, MethodScores]): By name, in the order asked.
        skipped (dict[str, str]): Methods left out, and why (e.g. an optional
            package is missing).
    """

    subject: Subject
    pieces: List[str]
    special: List[bool]
    words: List[str]
    word_of_piece: List[Optional[int]]
    model_name: str = ""
    methods: Dict[str, MethodScores] = field(default_factory=dict)
    skipped: Dict[str, str] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        # only for a name the explanation lacks: its subject's public ones
        subject = self.__dict__.get("subject")
        if subject is None or name.startswith("_"):
            raise AttributeError(name)
        try:
            return getattr(subject, name)
        except AttributeError:
            raise AttributeError(
                f"an explanation of {subject.what} has no attribute {name!r}"
            ) from None

    def __dir__(self) -> List[str]:
        return sorted(set(super().__dir__()) | set(dir(self.subject)))

    @property
    def kind(self) -> str:
        """str: The kind of model explained, ``"classifier"`` or
        ``"causal-lm"``."""
        return self.subject.kind

    def tokens(self, pieces: bool = False) -> List[str]:
        """The words (or, with ``pieces``, the word pieces) shown, special
        tokens left out, in text order."""
        if pieces:
            return [p for p, s in zip(self.pieces, self.special) if not s]
        return list(self.words)

    def _shown(
        self, raw: Sequence[float], method: MethodScores, pieces: bool
    ) -> List[float]:
        """``raw`` per piece as shown: the pieces', or the words'."""
        if pieces:
            return [x for x, s in zip(raw, self.special) if not s]
        n = len(self.words)
        return to_words(raw, self.word_of_piece, n, method.word_reduction)

    def scores(self, method: Optional[str] = None, pieces: bool = False) -> List[float]:
        """One method's scores of :meth:`tokens` (default: the first method);
        for a causal LM, for the whole answer.

        A word's score is the sum of its pieces' scores for additive methods
        (integrated gradients, occlusion, ...: the word's share of the
        total), their mean for the others (IBA: every piece keeps some
        signal, so a sum would rank words by their number of pieces); the
        method's :attr:`MethodScores.word_reduction` says which.
        """
        found = self._method(method)
        return self._shown(found.scores, found, pieces)

    def matrix(
        self, method: Optional[str] = None, pieces: bool = False
    ) -> Optional[List[List[float]]]:
        """One method's output-token x :meth:`tokens` scores of a causal LM's
        answer (None when it gives none, and for a classifier)."""
        found = self._method(method)
        if found.per_token is None:
            return None
        return [self._shown(row, found, pieces) for row in found.per_token]

    def breaks(self, pieces: bool = False) -> List[int]:
        """Positions in :meth:`tokens` where the pair's second text starts."""
        return self.subject.breaks(self, pieces)

    def top(
        self, k: int = 5, method: Optional[str] = None, pieces: bool = False
    ) -> List[Tuple[str, float]]:
        """The ``k`` highest-scoring words (or pieces) with their scores.

        Raises:
            ValueError: When the method's scores rank nothing
                (:attr:`MethodScores.no_ranking`, which the message gives).
        """
        found = self._method(method)
        if found.no_ranking:
            raise ValueError(f"{found.method}: no ranking: {found.no_ranking}")
        tokens, values = self.tokens(pieces), self.scores(method, pieces)
        order = sorted(range(len(tokens)), key=lambda i: -values[i])
        return [(tokens[i], values[i]) for i in order[:k]]

    def near_flat_methods(self) -> List[str]:
        """The methods whose scores rank, but nearly flat
        (:func:`~captum_iba._utils.ranking.is_near_flat`)."""
        return [
            name
            for name, m in self.methods.items()
            if not m.no_ranking and is_near_flat(m.scores)
        ]

    def near_flat(self, method: str) -> str:
        """What a nearly flat ranking of ``method`` means, with its range."""
        return near_flat_said(self._method(method).scores)

    def facts(self) -> List[Tuple[str, str]]:
        """What a reader needs beside the colours: the model, then what was
        explained (the prediction and the class; the prompt and the
        answer)."""
        return [("Model", self.model_name or "(given)")] + self.subject.facts()

    def notes(self, pieces: bool = False) -> List[str]:
        """How the tokens shown were formed, ...; the methods left out."""
        notes = self.subject.notes(self, pieces)
        return notes + [f"{m} left out: {why}" for m, why in self.skipped.items()]

    def details(self, method: str) -> str:
        """One line on how ``method`` ran (configuration, layer, time)."""
        m = self._method(method)
        where = self.subject.where(m)
        parts = [m.summary] if m.summary else []
        parts += [where] if where else []
        if "precision" in m.settings:
            parts.append(str(m.settings["precision"]))
        parts.append(f"{m.seconds:.1f} {self.subject.seconds_unit}")
        return "; ".join(parts)

    def to_html(self, pieces: bool = False, full_page: bool = True) -> str:
        """The page: the facts, then one row per method (own scale each); for
        a causal LM, under each row its output-token x word matrix."""
        from captum_iba.visualization.page import explanation_html

        rows = []
        for name, m in self.methods.items():
            matrix = self.matrix(name, pieces)
            labels = self.subject.matrix_labels() if matrix is not None else ()
            rows.append(
                self._score_row(
                    name,
                    pieces,
                    breaks=self.breaks(pieces),
                    matrix=matrix,
                    matrix_labels=labels,
                    no_ranking=m.no_ranking,
                )
            )
        return explanation_html(
            rows,
            **self.subject.heading(),
            facts=self.facts(),
            notes=self.notes(pieces),
            full_page=full_page,
        )

    def to_text(self, top: int = 5, pieces: bool = False) -> str:
        """The terminal listing (a classifier's:
        :mod:`~captum_iba.app.explain_text`; a causal LM's:
        :mod:`~captum_iba.app.llm_explain_text`)."""
        return self.subject.listing(self, top, pieces)

    def __str__(self) -> str:
        return self.to_text()


def explain(
    text: str,
    model: Any = None,
    method: Union[None, str, Sequence[str], MethodRequest] = None,
    *,
    tokenizer: Any = None,
    pair: Optional[str] = None,
    target: Union[None, int, str] = None,
    method_options: Optional[Mapping[str, Mapping[str, Any]]] = None,
    model_name: Optional[str] = None,
    explainer: Any = None,
    prior_data: Any = None,
    **options: Any,
) -> Explanation:
    """Explain one prediction, word by word, by one method or several; for a
    causal LM (a generative model), its answer to ``text``
    (:func:`~captum_iba.app.llm_explanation.explain_answer`, which also takes
    ``chat`` and ``max_new_tokens``).

    Args:
        text (str): The text to classify and explain.
        model (str, Path or nn.Module, optional): A fine-tuned classifier: a
            folder, a Hugging Face hub id, or a loaded model (then pass
            ``tokenizer``); or a causal LM (a folder, a GGUF file, a hub id, a
            ``...ForCausalLM``). Default: MiniLM-L6 fine-tuned on SST-2, made
            once on first use and cached.
        method (str, Sequence[str] or MethodRequest): A registered method
            name (:data:`captum_iba.registry.METHODS`, any case), or several
            to compare, or a request checked by
            :func:`~captum_iba.request.check_request` (then no options are
            given here); the same names explain a classifier or a causal LM.
            Default (None): ``"iba-deletion"``, the most faithful IBA
            measured (docs/faithfulness.rst; for a causal LM docs/llm.rst).
        tokenizer (optional): The tokenizer of a model given as an object,
            or one to use instead of a model folder's own (it must fit the
            model's vocabulary).
        pair (str, optional): The second text of a sentence pair.
        target (int or str, optional): The class to explain, by index or by
            name (``"positive"``). Default: the predicted class. For a causal
            LM: the answer to explain (default: the model's greedy answer).
        method_options (Mapping, optional): Method name -> its options (e.g.
            ``{"iba-faithful": {"beta": 1e-4}}``) or more constructor
            arguments of its scorer; only for methods asked for.
        model_name (str, optional): How the page names the model.
        explainer (optional): ``iba-amortized``'s fitted explainer (see
            :func:`captum_iba.app.amortized.cached_explainer`), or a function
            of the layer module returning one.
        prior_data (optional): Training data for a prior fitted on data
            (``prior="dataset"``).
        **options: Options for every method that takes them
            (:data:`captum_iba.registry.OPTIONS`), e.g. ``layer`` (the layer
            of the bottleneck: an encoder layer index or ``"embeddings"``),
            ``seed``, ``beta``, ``steps``, ``prior``, ``ig_steps``. Default:
            each method's own. An option no chosen method takes is an error,
            never ignored.

    A model in training mode is explained in eval mode (dropout off, so the
    prediction and the scores are not random), with a warning; its flags are
    put back afterwards.

    Returns:
        Explanation: The scores of every method, by word piece and by word,
        and what was explained (a classifier's prediction, or a causal LM's
        answer: the same class); it shows as a page in Jupyter.

    Raises:
        ValueError: Before any weights load: for an unknown method, an option
            no chosen method takes, a bad value, options for a method not
            asked for, or a layer index out of the model's range.
        ~captum_iba.app.errors.CLIError: For an unknown class, an empty text,
            or a tokenizer without its vocabulary.
        ImportError: When the only method asked for needs a package that is
            not installed (with several, it is left out and named in
            :attr:`Explanation.skipped`).
    """
    check_values(options)  # a bad value is named before the model is looked up
    if kind_of(model) == "causal-lm":
        if pair is not None:
            raise ValueError("pair is for a classifier; a causal LM explains a prompt")
        from captum_iba.app.llm_explanation import explain_answer

        return explain_answer(
            text, model, method, tokenizer=tokenizer,
            target=None if target is None else str(target),
            method_options=method_options, model_name=model_name, **options,
        )  # fmt: skip
    method = DEFAULT_METHOD if method is None else method
    given = {k: v for k, v in options.items() if v is not None}
    if isinstance(method, MethodRequest):
        if given or method_options:
            raise ValueError("give the options in the request, or no request")
        request = method
        check_model_kind(request.methods, "classifier")
    else:
        request = check_request(
            method, given, method_options, setting="fair", model_kind="classifier"
        )
    model, tokenizer, described = load(model, tokenizer, request)
    warn_if_training(model)
    with evaluation_mode(model, []):  # dropout off; every flag put back after
        return _explain(
            text, pair, target, request, model, tokenizer,
            model_name or described, explainer, prior_data,
        )  # fmt: skip


def _explain(
    text: str,
    pair: Optional[str],
    target: Union[None, int, str],
    request: MethodRequest,
    model: Any,
    tokenizer: Any,
    model_name: str,
    explainer: Any,
    prior_data: Any,
) -> Explanation:
    """:func:`explain` once the model is loaded (in eval mode)."""
    from captum_iba.attr.text import encoder_layers
    from captum_iba.evaluation import Resources

    enc = encode(tokenizer, model, text, pair)
    ids, mask = enc["input_ids"], enc["attention_mask"]
    types = enc.get("token_type_ids")
    with torch.no_grad():
        logits = hf_call(model, ids, mask, types)
    check_finite(logits, "the model's logits")
    probs = logits.softmax(-1)[0]
    labels = class_names(model.config)[: probs.numel()]
    labels += [str(i) for i in range(len(labels), probs.numel())]
    index = int(probs.argmax()) if target is None else class_index(target, labels)
    resources = Resources(model, tokenizer, explainer=explainer, prior_data=prior_data)
    scorers, skipped = build(request, resources)
    texts = [text] if pair is None else [text, pair]
    special, words, of_piece, segment = grouping(enc, tokenizer, texts)
    subject = ClassifierSubject(
        text=text,
        pair=pair,
        segment=segment,
        labels=labels,
        probabilities=probs.tolist(),
        target=index,
        n_layers=n_layers(model, encoder_layers),
    )
    result = Explanation(
        subject=subject,
        pieces=tokenizer.convert_ids_to_tokens(ids[0].tolist()),
        special=special,
        words=words,
        word_of_piece=of_piece,
        model_name=model_name,
        skipped=skipped,
    )
    for name, scorer in scorers.items():
        start = time.perf_counter()
        scores = scorer.attribute(
            ids, target=torch.tensor([index]), attention_mask=mask, token_type_ids=types
        )
        check_finite(scores, f"{name}'s scores")
        result.methods[name] = MethodScores(
            method=name,
            summary=METHODS.entry(scorer.method_name, warn=False).summary,
            scores=scores[0].tolist(),
            signed=bool(scorer.signed),
            meaning=scorer.score_meaning,
            seconds=time.perf_counter() - start,
            word_reduction=getattr(scorer, "word_reduction", "sum"),
            layer=scorer.settings.get("layer_index"),
            settings=dict(scorer.settings),
        )
        result.methods[name].no_ranking = no_ranking(result, name, scorer)
    return result
