"""One prediction explained by one or several methods, word by word.

:func:`explain` is the one-line entry for a notebook and the engine of
``captum-iba explain``::

    import captum_iba
    result = captum_iba.explain("A gripping, beautifully acted film.")
    result                      # in Jupyter: the page, one row per method
    result.top(5)               # [("beautifully", 0.41), ...]
    result.scores()             # one score per word, in text order

It decides the model's kind once (its configuration, before any weights)
and the question - a classifier's prediction, a causal LM's answer, or with
a ``context`` the sources of an answer
(:mod:`~captum_iba.app.explain_request`) -, builds the request the question
takes and checks it - the methods and their options against the
declarations and the kind - before any weights load, and runs the one
pipeline (:func:`~captum_iba.app.explain_pipeline.explained`: prepare,
score, present) with the question's parts: for a classifier
(:mod:`~captum_iba.app.prediction_route`) the model loaded (the default:
MiniLM-L6 fine-tuned on SST-2, made once and cached, a layer index checked
against its configuration), the text predicted, the methods built once
through the one resolver of the harness
(:func:`~captum_iba.evaluation.build_scorers`; any registered method works),
the text's word pieces scored and grouped into words (a word's score is the
sum or the mean of its pieces', as the method's registry entry says), where
a method's scores rank no word said (``no_ranking``); for a causal LM its
answer to the text (:mod:`~captum_iba.app.answer_route`,
:mod:`~captum_iba.app.sources_route`).

Either way it returns one class, :class:`~captum_iba.app.page.Explanation`
(defined in :mod:`captum_iba.app.page`, below both routes; importable from
here): the pieces, the words and every method's scores
(:class:`~captum_iba.app.page.MethodScores`), and what was explained, its
``subject`` (:mod:`captum_iba.app.subjects`: a classifier's prediction or a
causal LM's answer). It renders as the page of
:func:`~captum_iba.visualization.page.explanation_html` and as the one
terminal listing (:func:`~captum_iba.app.listing.listing`), each with the
subject's parts.
"""

from typing import Any, Mapping, Optional, Sequence, Tuple, Union

from captum_iba.app.explain_pipeline import explained
from captum_iba.app.explain_request import decide_kind, question_of
from captum_iba.app.page import Explanation, MethodScores  # noqa: F401
from captum_iba.registry import DEFAULT_METHOD
from captum_iba.request import MethodRequest, check_values

# Explanation and MethodScores import from here as before; documented where
# they are defined (captum_iba.app.page)
__all__ = ["DEFAULT_METHOD", "explain"]


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
    request = question.request(
        kind, prompt, model, method, tokenizer=tokenizer, pair=pair, target=target,
        method_options=method_options, model_name=model_name, context=context,
        answer_span=answer_span, **options,
    )  # fmt: skip
    return explained(request, question.supplied(explainer, prior_data))


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
