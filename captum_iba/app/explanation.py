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
the sum or the mean of its pieces', as the method's registry entry says). The
:class:`Explanation` it returns
holds the pieces, the words and every method's scores, renders as the page of
:func:`~captum_iba.visualization.page.explanation_html` and as the terminal
listing of :func:`~captum_iba.app.explain_text.terminal_text`.
"""

import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch

from captum_iba._utils.common import hf_call
from captum_iba._utils.hooks import evaluation_mode
from captum_iba._utils.ranking import check_finite, flat_reason
from captum_iba.app.checks import class_index, class_names
from captum_iba.app.explain_setup import build, load, n_layers, warn_if_training
from captum_iba.app.models import kind_of
from captum_iba.app.page import Page
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
    """One method's scores of the text's word pieces.

    Attributes:
        method (str): The registered name (e.g. ``"iba-faithful"``).
        summary (str): The registry's one-line summary.
        scores (list[float]): One per word piece, special tokens included.
        signed (bool): Whether a score has a direction (+ for the class).
        meaning (str): What one score means.
        seconds (float): Time the method took.
        word_reduction (str): ``"sum"`` or ``"mean"``: how a word's score is
            made from its pieces' (the scorer's
            :attr:`~captum_iba.evaluation.TokenScorer.word_reduction`).
        layer (int, optional): The encoder layer it used, for IBA.
        settings (dict): The scorer's settings.
        no_ranking (str): Why the scores rank no word ("" when they do): the
            method's own finding (e.g. IBA after a layer whose first token
            alone is read), or flat word scores; then no top words are
            listed.
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


@dataclass
class Explanation(Page):
    """The result of :func:`explain`: the text, the prediction, each method's
    scores, and the words they are grouped into.

    Attributes:
        text (str): The text explained (and ``pair``, the second text).
        pair (str, optional): The second text of a pair.
        pieces (list[str]): The tokenizer's tokens, special tokens included.
        special (list[bool]): Per piece: a special token ([CLS], [SEP], ...).
        words (list[str]): The words, as written in the text.
        word_of_piece (list[int or None]): Per piece: its word's index (None
            for special tokens).
        segment (list[int]): Per word: 0 in ``text``, 1 in ``pair``.
        labels (list[str]): The model's class names by index.
        probabilities (list[float]): The predicted probability of each class.
        target (int): The class explained.
        model_name (str): What the model is, for the page.
        n_layers (int, optional): The model's encoder layers.
        methods (dict[str, MethodScores]): By name, in the order asked.
        skipped (dict[str, str]): Methods left out, and why (e.g. an optional
            package is missing).
    """

    text: str
    pair: Optional[str]
    pieces: List[str]
    special: List[bool]
    words: List[str]
    word_of_piece: List[Optional[int]]
    segment: List[int]
    labels: List[str]
    probabilities: List[float]
    target: int
    model_name: str = ""
    n_layers: Optional[int] = None
    methods: Dict[str, MethodScores] = field(default_factory=dict)
    skipped: Dict[str, str] = field(default_factory=dict)

    @property
    def predicted(self) -> int:
        """int: The predicted class."""
        return max(range(len(self.probabilities)), key=self.probabilities.__getitem__)

    def label(self, index: int) -> str:
        """The name of class ``index``."""
        return self.labels[index] if 0 <= index < len(self.labels) else str(index)

    def tokens(self, pieces: bool = False) -> List[str]:
        """The words (or, with ``pieces``, the word pieces) shown, special
        tokens left out, in text order."""
        if pieces:
            return [p for p, s in zip(self.pieces, self.special) if not s]
        return list(self.words)

    def scores(self, method: Optional[str] = None, pieces: bool = False) -> List[float]:
        """One method's scores of :meth:`tokens` (default: the first method).

        A word's score is the sum of its pieces' scores for additive methods
        (integrated gradients, occlusion, ...: the word's share of the
        total), their mean for the others (IBA: every piece keeps some
        signal, so a sum would rank words by their number of pieces); the
        method's :attr:`MethodScores.word_reduction` says which.
        """
        found = self._method(method)
        raw = found.scores
        if pieces:
            return [x for x, s in zip(raw, self.special) if not s]
        return to_words(raw, self.word_of_piece, len(self.words), found.word_reduction)

    def breaks(self, pieces: bool = False) -> List[int]:
        """Positions in :meth:`tokens` where the pair's second text starts."""
        if self.pair is None:
            return []
        if pieces:
            segs = [
                self.segment[w]
                for w, s in zip(self.word_of_piece, self.special)
                if not s and w is not None
            ]
        else:
            segs = list(self.segment)
        return [i for i in range(1, len(segs)) if segs[i] != segs[i - 1]]

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

    def facts(self) -> List[Tuple[str, str]]:
        """What a reader needs beside the colours: the model, its prediction,
        the class explained."""
        pred = self.predicted
        target = f"{self.label(self.target)} (class {self.target}"
        target += ", the predicted class)" if self.target == pred else ")"
        facts = [
            ("Model", self.model_name or "(given)"),
            ("Prediction", f"{self.label(pred)} (p = {self.probabilities[pred]:.3f})"),
            ("Explained class", target),
        ]
        if self.pair is not None:
            facts.append(("Second text", self.pair))
        return facts

    def notes(self, pieces: bool = False) -> List[str]:
        """How the tokens shown were formed."""
        if pieces:
            shown = "Word pieces as the tokenizer cut the text."
        else:
            how = {"sum": "the sum", "mean": "the mean"}
            by = "; ".join(
                f"{name}: {how.get(m.word_reduction, m.word_reduction)}"
                for name, m in self.methods.items()
            )
            shown = f"A word's score is made from its word pieces' scores ({by})."
        notes = [f"{shown} Special tokens ([CLS], [SEP], ...) are left out."]
        notes += [f"{m} left out: {why}" for m, why in self.skipped.items()]
        return notes

    def details(self, method: str) -> str:
        """One line on how ``method`` ran (configuration, layer, time)."""
        m = self._method(method)
        parts = [m.summary] if m.summary else []
        if m.layer is not None:
            of = f" of 0..{self.n_layers - 1}" if self.n_layers else ""
            parts.append(f"after encoder layer {m.layer}{of}")
        if "precision" in m.settings:
            parts.append(str(m.settings["precision"]))
        parts.append(f"{m.seconds:.1f} s")
        return "; ".join(parts)

    def to_html(self, pieces: bool = False, full_page: bool = True) -> str:
        """The page: the facts, then one row per method (own scale each)."""
        from captum_iba.visualization.page import explanation_html

        rows = [
            self._score_row(
                name, pieces, breaks=self.breaks(pieces), no_ranking=m.no_ranking
            )
            for name, m in self.methods.items()
        ]
        return explanation_html(
            rows,
            text=self.text,
            facts=self.facts(),
            notes=self.notes(pieces),
            full_page=full_page,
        )

    def to_text(self, top: int = 5, pieces: bool = False) -> str:
        """The terminal listing (see :mod:`~captum_iba.app.explain_text`)."""
        from captum_iba.app.explain_text import terminal_text

        return terminal_text(self, top, pieces)

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
        Explanation: The scores of every method, by word piece and by word;
        it shows as a page in Jupyter.

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

        return explain_answer(  # type: ignore[return-value]
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
    result = Explanation(
        text=text,
        pair=pair,
        pieces=tokenizer.convert_ids_to_tokens(ids[0].tolist()),
        special=special,
        words=words,
        word_of_piece=of_piece,
        segment=segment,
        labels=labels,
        probabilities=probs.tolist(),
        target=index,
        model_name=model_name,
        n_layers=n_layers(model, encoder_layers),
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
        said = _flat_said_by(scorer)
        result.methods[name].no_ranking = _no_ranking(result, name, warn=not said)
    return result


def _flat_said_by(scorer: Any) -> bool:
    """Whether the method warned itself that the instance's scores are flat
    (IBA does, :attr:`~captum_iba.InformationBottleneckAttribution.last_run`)."""
    runs = getattr(getattr(scorer, "iba", None), "last_run", None) or []
    return any(run.get("flat_instances") for run in runs)


def _no_ranking(result: Explanation, name: str, warn: bool = True) -> str:
    """Why a method's scores rank no word: its own finding (IBA after a layer
    whose first token alone is read, which IBA warned), or flat scores of
    its pieces or words (:func:`~captum_iba._utils.ranking.flat_reason`, special
    tokens left out; warned here unless ``warn`` is False); "" when they
    rank."""
    method = result.methods[name]
    reason = str(method.settings.get("no_ranking", ""))
    if reason:
        return reason
    # the pieces (a word of several pieces sums them, for an additive method)
    # or the words shown (a mean of the pieces)
    flat = flat_reason(result.scores(name, pieces=True), result.scores(name))
    if not flat:
        return ""
    where = "" if method.layer is None else f" (here after encoder layer {method.layer}"
    if where and result.n_layers:
        where += f" of 0..{result.n_layers - 1}"
    reason = (
        f"{flat}: the method found nothing in this text that changes "
        "the prediction. For IBA this happens after a layer the prediction barely "
        f"reads{where + ')' if where else ''}: try an earlier layer, or iba-deletion"
    )
    if warn:
        warnings.warn(f"{name}: no ranking: {reason}", UserWarning, stacklevel=4)
    return reason
