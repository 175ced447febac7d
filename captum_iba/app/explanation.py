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
the sum or the mean of its pieces', as the method's registry entry says),
saying where a method's scores rank no word (``no_ranking``). For
a causal LM it explains the model's answer to the text instead
(:func:`~captum_iba.app.llm_explanation.explain_answer`).

Either way it returns one class, :class:`~captum_iba.app.page.Explanation`
(defined in :mod:`captum_iba.app.page`, below both routes; importable from
here): the pieces, the words and every method's scores
(:class:`~captum_iba.app.page.MethodScores`), and what was explained, its
``subject`` (:mod:`captum_iba.app.subjects`: a classifier's prediction or a
causal LM's answer). It renders as the page of
:func:`~captum_iba.visualization.page.explanation_html` and as the terminal
listing (:func:`~captum_iba.app.explain_text.terminal_text`,
:func:`~captum_iba.app.llm_explain_text.answer_text`).
"""

import time
import warnings
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

import torch

from captum_iba._utils.common import hf_call, user_stacklevel
from captum_iba._utils.hooks import evaluation_mode
from captum_iba._utils.ranking import check_finite, flat_reason
from captum_iba.app.checks import class_index, class_names
from captum_iba.app.data.corpora import DEFAULT_CORPUS
from captum_iba.app.explain_request import (
    ANSWER,
    PREDICTION,
    SOURCES,
    ExplainRequest,
    Question,
    check_methods,
    decide_kind,
    question_of,
)
from captum_iba.app.models import check_request_layers
from captum_iba.app.page import Explanation, MethodScores
from captum_iba.app.subjects import ClassifierSubject
from captum_iba.app.words import encode, grouping
from captum_iba.attr.kinds import ModelKind
from captum_iba.registry import DEFAULT_METHOD, METHODS
from captum_iba.request import MethodRequest, check_values

# Explanation and MethodScores import from here as before; documented where
# they are defined (captum_iba.app.page)
__all__ = ["DEFAULT_METHOD", "explain", "prediction"]


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
    context: Union[None, str, Sequence[str]] = None,
    sources: Any = None,
    explainer: Any = None,
    prior_data: Any = None,
    answer_span: Union[None, str, Tuple[int, int]] = None,
    **options: Any,
) -> Explanation:
    """Explain one prediction, word by word, by one method or several; for a
    causal LM (a generative model), its answer to ``text``
    (:func:`~captum_iba.app.llm_explanation.explain_answer`, which also takes
    ``chat``, ``max_new_tokens`` and ``per_token``: the whole answer is
    explained unless ``per_token=True`` asks for each output token too, at
    about N + 1 times the cost for an answer of N tokens).

    Args:
        text (str): The text to classify and explain.
        model (str, Path or nn.Module, optional): A fine-tuned classifier: a
            folder, a Hugging Face hub id, or a loaded model (then pass
            ``tokenizer``); or a causal LM (a folder, a GGUF file, a hub id, a
            ``...ForCausalLM``). Default: MiniLM-L6 fine-tuned on SST-2, made
            once on first use and cached. A model of another head (token
            classification, masked LM, question answering, multiple choice),
            an encoder-decoder, a vision or audio model, or an ``nn.Module``
            without a Hugging Face configuration is refused before any work
            (:class:`~captum_iba.attr.kinds.NotExplainedError`; a plain
            forward function's scores come from
            :func:`~captum_iba.evaluation.build_scorers`).
        method (str, Sequence[str] or MethodRequest): A registered method
            name (:data:`captum_iba.registry.METHODS`, any case), or several
            to compare, or a request checked by
            :func:`~captum_iba.request.check_request` (then no options are
            given here); the same names explain a classifier or a causal LM.
            Default (None): ``"iba-deletion"``, the most faithful IBA
            measured (docs/faithfulness.rst; for a causal LM docs/llm.rst);
            with a ``context``, ``"iba-surrogate"``, the most faithful
            attribution to sources measured at the lowest cost
            (docs/context.rst).
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
        context (str or Sequence[str], optional): For a causal LM: a context
            whose sources the answer may use; ``text`` is then the query,
            laid out with the context as ContextCite does (``"Context:
            ...\\n\\nQuery: ..."``, a user turn of a chat model), and the
            result's :meth:`~captum_iba.app.page.Explanation.sources` and
            :meth:`~captum_iba.app.page.Explanation.source_scores` give one
            score per source (docs/context.rst). A list: one source per
            item, laid out as ``sources`` says (default: a blank line
            between items, as a notes file's documents); a text: cut by
            ``sources``, without its leading and trailing whitespace.
        sources (str or Sequence[tuple[int, int]], optional): How a text
            ``context`` is cut into sources: ``"sentence"`` (default),
            ``"documents"`` (separated by blank lines), ``"lines"``,
            ``"turns"`` (a line opening with a speaker's label, ``User:``),
            or the sources' character spans of the text. For a list, how
            its items are joined, as that split would cut them back:
            ``"documents"`` (default, a blank line), ``"sentence"`` (a
            space, as ContextCite joins sentences), ``"lines"`` or
            ``"turns"`` (a line break).
        explainer (optional): A classifier's ``iba-amortized``'s fitted
            explainer (see :func:`captum_iba.app.amortized.cached_explainer`),
            or a function of the layer module returning one: a resource its
            methods share.
        prior_data (optional): Training data for a prior fitted on data
            (``prior="dataset"``), a classifier's methods' shared resource.
        answer_span (str or (int, int), optional): With a ``context``, also
            attribute parts of the answer to its sources, one attribution
            per part: ``"sentences"`` (each sentence of the answer) or
            ``(start, end)``, characters of the answer (``result.answer``;
            offsets that cut a token are rounded outward to whole tokens,
            with a warning). The answer is generated (or given) whole and a
            part's log-probability is explained, the answer before it read
            as given; the whole answer is explained as well.
            :meth:`~captum_iba.app.page.Explanation.spans`,
            :meth:`~captum_iba.app.page.Explanation.source_scores`
            ``(method, span=i)`` and
            :meth:`~captum_iba.app.page.Explanation.citations` give them;
            the page and the listing show the answer as a cited paragraph
            (docs/context.rst, "Citations for each sentence of an answer").
            Each method runs once more, on all the parts at once.
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
        ValueError: Before any weights load: for a model of no kind the
            package explains (see ``model``), an unknown method, an option
            no chosen method takes, a bad value, options for a method not
            asked for, or a layer index out of the model's range; a context
            for a classifier, with fewer than two sources, an empty one or
            sources that overlap, an empty query, or a query and context
            longer than the model's positions (the message says how many
            tokens); an ``answer_span`` without a context, of a bad form,
            for a method that explains the whole answer only, or outside a
            given target (a greedy answer's: once it is generated).
        ~captum_iba.app.errors.CLIError: For an unknown class, an empty text,
            or a tokenizer without its vocabulary.
        ImportError: When the only method asked for needs a package that is
            not installed (with several, it is left out and named in
            :attr:`~captum_iba.app.page.Explanation.skipped`).
    """
    prompt = _context(text, context, sources)
    check_values(options)  # a bad value is named before the model is looked up
    kind = decide_kind(model)  # the model's kind, decided once
    question = question_of(kind, context is not None)
    return _ROUTES[question](
        question, kind, prompt, model, method, tokenizer=tokenizer, pair=pair,
        target=target, method_options=method_options, model_name=model_name,
        context=context, resources=(explainer, prior_data),
        answer_span=answer_span, **options,
    )  # fmt: skip


def _explain_answer(
    question: Question,
    kind: ModelKind,
    prompt: Any,
    model: Any,
    method: Any,
    *,
    tokenizer: Any,
    pair: Optional[str],
    target: Union[None, int, str],
    method_options: Optional[Mapping[str, Mapping[str, Any]]],
    model_name: Optional[str],
    context: Any,
    resources: Any,
    answer_span: Any,
    chat: Optional[bool] = None,
    max_new_tokens: int = 20,
    per_token: bool = False,
    **options: Any,
) -> Explanation:
    """:func:`explain` of a causal LM: its answer to ``prompt``
    (:func:`~captum_iba.app.llm_explanation.answer`), the request built
    here, once."""
    if pair is not None:
        raise ValueError("pair is for a classifier; a causal LM explains a prompt")
    from captum_iba.app.llm_explanation import answer

    given = {k: v for k, v in options.items() if v is not None}
    request = ExplainRequest(
        question,
        kind,
        check_methods(method, question, kind, given, method_options),
        model,
        prompt,
        tokenizer=tokenizer,
        target=None if target is None else str(target),
        chat=chat,
        max_new_tokens=max_new_tokens,
        per_token=per_token,
        answer_span=answer_span,
        model_name=model_name,
    )
    return answer(request)


def _explain_prediction(
    question: Question,
    kind: ModelKind,
    text: str,
    model: Any,
    method: Any,
    *,
    tokenizer: Any,
    pair: Optional[str],
    target: Union[None, int, str],
    method_options: Optional[Mapping[str, Mapping[str, Any]]],
    model_name: Optional[str],
    context: Any,
    resources: Any,
    answer_span: Any,
    **options: Any,
) -> Explanation:
    """:func:`explain` of a classifier: its prediction of ``text``."""
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
    given = {k: v for k, v in options.items() if v is not None}
    methods = check_methods(
        method, question, kind, given, method_options, setting="fair"
    )
    request = ExplainRequest(
        question, kind, methods, model, text, tokenizer=tokenizer, target=target,
        pair=pair, model_name=model_name,
    )  # fmt: skip
    loaded, tokenizer, described = load(model, tokenizer, methods)
    return prediction(request, loaded, tokenizer, described, *resources)


def prediction(
    request: ExplainRequest,
    model: Any,
    tokenizer: Any,
    described: str = "",
    explainer: Any = None,
    prior_data: Any = None,
) -> Explanation:
    """A classifier's prediction of a checked request's text explained, the
    model loaded (in eval mode while it runs, with a warning when it was
    in training mode; its flags put back after).

    Args:
        request (ExplainRequest): The request, built and checked once by the
            entry (:func:`explain`, the command line).
        model: The loaded classifier.
        tokenizer: Its tokenizer.
        described (str): How the page names the model when the request
            does not.
        explainer, prior_data (optional): The methods' shared resources
            (see :func:`explain`).

    Returns:
        Explanation: The prediction and every method's scores.
    """
    warn_if_training(model)
    with evaluation_mode(model, []):  # dropout off; every flag put back after
        return _explain(
            request.prompt, request.pair, request.target, request.methods, model,
            tokenizer, request.model_name or described, explainer, prior_data,
        )  # fmt: skip


#: :func:`explain`'s route per question.
_ROUTES = {
    PREDICTION: _explain_prediction,
    ANSWER: _explain_answer,
    SOURCES: _explain_answer,
}


def _context(text: str, context: Any, sources: Any) -> Any:
    """``text``, or with a ``context`` the query and its context laid out
    (:func:`~captum_iba.app.context_explain.context_prompt_of`), checked
    before any model is looked up."""
    if context is None:
        if sources is not None:
            raise ValueError("sources= says how to cut a context=: give one")
        return text
    from captum_iba.app.context_explain import context_prompt_of

    return context_prompt_of(text, context, sources)


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


def load(model: Any, tokenizer: Any, request: MethodRequest) -> Tuple[Any, Any, str]:
    """The model and tokenizer (loaded when given by name, after the
    request's layers are checked against its configuration), and a
    description."""
    from captum_iba.app.command_parts import config_and_record
    from captum_iba.app.models import load_classifier

    if model is None or isinstance(model, (str, Path)):
        path = None if model is None else str(model)
        config, _ = config_and_record(path, DEFAULT_CORPUS)
        check_request_layers(request, config, cli=False)
    if model is None:
        if tokenizer is not None:
            raise ValueError(
                "tokenizer= given without model=: the default model comes with its "
                "own tokenizer; give the model this tokenizer belongs to"
            )
        from captum_iba.app.finetune import get_finetuned_model

        path = get_finetuned_model(DEFAULT_CORPUS)
        model, tokenizer = load_classifier(path)
        return model, tokenizer, f"MiniLM-L6 fine-tuned on SST-2 ({path})"
    if isinstance(model, (str, Path)):
        name = str(model)
        model, own = load_classifier(model)
        if tokenizer is None:
            return model, own, name
        _check_fits(tokenizer, model)
        return model, tokenizer, name
    if tokenizer is None:
        raise ValueError("a model given as an object needs its tokenizer=")
    _check_fits(tokenizer, model)
    name = getattr(getattr(model, "config", None), "name_or_path", "") or ""
    return model, tokenizer, name or type(model).__name__


def _check_fits(tokenizer: Any, model: Any) -> None:
    """Refuses a tokenizer whose ids the model's vocabulary cannot hold."""
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    size = len(tokenizer) if hasattr(tokenizer, "__len__") else None
    if isinstance(vocab, int) and isinstance(size, int) and size > vocab:
        raise ValueError(
            f"tokenizer= has {size} tokens but the model's vocabulary has {vocab}: "
            "it is not this model's tokenizer"
        )


def build(
    request: MethodRequest, resources: Any
) -> Tuple[Dict[str, Any], Dict[str, str]]:
    """The scorers by name, each method's class for a classifier; with
    several methods, one that cannot be imported (an optional package) is
    left out, with the reason."""
    from captum_iba.evaluation import build_scorers

    scorers: Dict[str, Any] = {}
    skipped: Dict[str, str] = {}
    for name in request.methods:
        one = _only(request, name)
        try:
            built = build_scorers(one, resources, "fair")
        except ImportError as err:
            if len(request.methods) == 1:
                raise
            first = str(err).splitlines()[0]
            skipped[name] = first.split(". ")[0].rstrip(".") + "."
            continue
        scorers.update(built)
    return scorers, skipped


def _only(request: MethodRequest, method: str) -> MethodRequest:
    """The part of a request that concerns one of its methods."""
    from captum_iba.request import options_of

    return MethodRequest(
        (method,),
        {k: v for k, v in request.options.items() if k in options_of(method)},
        {k: v for k, v in request.method_options.items() if k == method},
        {k: v for k, v in request.passthrough.items() if k == method},
        kind=request.kind,
    )


def warn_if_training(model: Any) -> None:
    """Warns that a model in training mode is explained in eval mode."""
    if isinstance(model, torch.nn.Module) and model.training:
        warnings.warn(
            "the model is in training mode (dropout on, which would make the "
            "prediction and the scores random): it is explained in eval mode, and "
            "its flags are put back afterwards; call model.eval() to silence this",
            UserWarning,
            user_stacklevel(),
        )


def n_layers(model: Any, encoder_layers: Any) -> Optional[int]:
    """The number of encoder layers ``encoder_layers(model)`` finds, None
    where it finds none."""
    try:
        return len(encoder_layers(model))
    except (ValueError, TypeError, AttributeError):
        return None


def no_ranking(result: Any, name: str, scorer: Any) -> str:
    """Why a method's scores of a classifier's text rank no word: its own
    finding (IBA after a layer whose first token alone is read, which IBA
    warned), or flat scores of its pieces or words
    (:func:`~captum_iba._utils.ranking.flat_reason`, special tokens left
    out; warned here unless the method warned itself); "" when they rank.

    Args:
        result (Explanation): The explanation, with ``name``'s scores.
        name (str): The method.
        scorer (TokenScorer): Its scorer, just run.

    Returns:
        str: The reason, or "".
    """
    method = result.methods[name]
    reason = str(method.settings.get("no_ranking", ""))
    if reason:
        return reason
    # the pieces (a word of several pieces sums them, for an additive method)
    # or the words shown (a mean of the pieces)
    flat = flat_reason(result.scores(name, pieces=True), result.scores(name))
    if not flat:
        return ""
    where = result.subject.where(method)
    reason = (
        f"{flat}: the method found nothing in this text that changes "
        "the prediction. For IBA this happens after a layer the prediction barely "
        f"reads{f' (here {where})' if where else ''}: try an earlier layer, or "
        "iba-deletion"
    )
    # IBA warns itself of a flat instance (its last_run says so)
    runs = getattr(getattr(scorer, "iba", None), "last_run", None) or []
    if not any(run.get("flat_instances") for run in runs):
        warnings.warn(f"{name}: no ranking: {reason}", UserWarning, user_stacklevel())
    return reason
