"""``captum-iba explain``: the words a prediction relied on, by one method or
several (``--compare``), printed and as an HTML page; with ``--context`` and
``--query``, which sources of a context a causal LM's answer used.

The request (methods and options) was checked by the parser; here the model's
kind (a classifier or a causal LM) and configuration are read and the request
checked against them before any weights load - its methods must explain that
kind, its layers and class exist -, then :func:`captum_iba.explain` (or, for a
causal LM, :func:`~captum_iba.app.llm_explanation.explain_answer`) builds
every method once and scores the text.
"""

import argparse
from typing import Any, Optional

from captum_iba._utils.io import atomic_write_text
from captum_iba.app import command_parts
from captum_iba.app.checks import class_index, class_names, output_file, pair_warning
from captum_iba.app.command_parts import config_and_record
from captum_iba.app.data.corpora import DEFAULT_CORPUS
from captum_iba.app.errors import CLIError
from captum_iba.app.explain_pipeline import Supplied, explained
from captum_iba.app.explain_request import (
    ANSWER,
    PREDICTION,
    SOURCES,
    ExplainRequest,
    Question,
)
from captum_iba.app.models import check_request_layers
from captum_iba.app.words import blank
from captum_iba.attr.kinds import ModelKind

__all__ = ["explain_request", "run"]

#: How the page names the default model.
DEFAULT_MODEL_NAME = "MiniLM-L6 fine-tuned on SST-2 (the default model, cached)"


def explain_request(
    args: argparse.Namespace, question: Question, kind: ModelKind, methods: Any
) -> ExplainRequest:
    """``explain`` 's request from its checked parts (the question, the kind,
    the methods: :func:`~captum_iba.app.cli_checks.check_explain`) and its
    inputs, the text (or the query and its context) checked."""
    flag = _span_flag(args)
    return ExplainRequest(
        question,
        kind,
        methods,
        args.model,
        _prompt(args),  # the text, or a query and its context: checked
        target=args.target,
        pair=args.pair,
        chat=args.chat,
        max_new_tokens=args.max_new_tokens or 20,
        per_token=args.per_token,
        answer_span="sentences" if args.answer_sentences else args.answer_span,
        model_name=args.model or DEFAULT_MODEL_NAME,
        labels=("--max-new-tokens", flag or "answer_span="),
    )


def run(args: argparse.Namespace, request: ExplainRequest) -> int:
    """Run ``captum-iba explain`` with its checked request (see the module
    docstring); ``args`` gives the listing's and the page's options only;
    returns the exit code."""
    html = output_file(args.html, "--html")
    result = explained(request, _SUPPLIED[request.question](args, request))
    print(result.to_text(args.top, args.pieces))
    if html is not None:
        atomic_write_text(html, result.to_html(args.pieces))
        print(f"wrote {html}")
    return 0


def _prompt(args: argparse.Namespace) -> Any:
    """The text to explain; with ``--context``, the query (``--query``, or
    the text) and the context laid out, every check made before any model
    is looked up."""
    if args.context is None:
        for flag, value in (("--query", args.query), ("--sources", args.sources)):
            if value is not None:
                raise CLIError(f"{flag} goes with --context: give the context too")
        flag = _span_flag(args)
        if flag:
            raise CLIError(
                f"{flag} attributes parts of the answer to the sources of a "
                "context: give --context and --query"
            )
        if args.text is None:
            raise CLIError("give the text to explain (or --context and --query)")
        if blank(args.text):
            raise CLIError(
                "the text to explain is empty (only spaces or invisible characters "
                "such as zero-width spaces)"
            )
        return args.text
    from captum_iba.app.context_explain import context_prompt_of, read_context

    if args.text is not None and args.query is not None:
        raise CLIError(
            f"give the question once: --query, or the text {args.text!r}, not both"
        )
    query = args.query if args.query is not None else args.text
    if query is None or blank(query):
        raise CLIError(
            "--query is empty or missing: give the question about --context "
            f"({'empty' if query is not None else 'none given'})"
        )
    text = read_context(args.context)
    try:
        return context_prompt_of(query, text, args.sources or "sentence", "--sources")
    except ValueError as err:
        named = text is args.context and not any(c.isspace() for c in text)
        hint = " (no file of that name: it was read as the text)" if named else ""
        raise CLIError(f"--context{hint}: {err}") from None


def _span_flag(args: argparse.Namespace) -> str:
    """The option that asks for parts of the answer ("" for none)."""
    if getattr(args, "answer_sentences", False):
        return "--answer-sentences"
    if getattr(args, "answer_span", None) is not None:
        return "--answer-span"
    return ""


def _classifier_supplies(args: argparse.Namespace, request: ExplainRequest) -> Supplied:
    """What ``explain`` of a classifier supplies: its flags, its class and
    layers checked against its configuration, then its model loaded, the
    priors' data and ``iba-amortized`` 's cached explainer."""
    if args.context is not None:
        raise CLIError(
            "--context is for a causal LM (a generative model): give --model "
            "<causal LM> (a folder, a GGUF file or a hub id)"
        )
    llm_only = (
        ("--max-new-tokens", args.max_new_tokens),
        ("--chat" if args.chat else "--no-chat", args.chat),
        ("--per-token", args.per_token or None),
    )
    for flag, value in llm_only:
        if value is not None:
            raise CLIError(f"{flag} is for a causal LM; the model is a classifier")
    methods = request.methods
    fit_on = _check_fit_on(args.fit_on, methods)
    if request.pair is not None and blank(request.pair):
        raise CLIError("--pair is empty: give the second text, or leave --pair out")
    config, record = config_and_record(request.model, DEFAULT_CORPUS)
    check_request_layers(methods, config)
    if request.target is not None:
        class_index(request.target, class_names(config))
    warning = pair_warning(config, record) if request.pair is not None else None
    if warning:
        print(f"warning: {warning}")
    command_parts.print_notes(methods)
    model, tok = command_parts.model_and_tokenizer(request.model)
    corpus = (record or {}).get("dataset")
    data = command_parts.prior_data(methods, corpus, None)

    def explainer(module: Any, objective: str = "distil") -> Any:  # iba-amortized's
        from captum_iba.app.amortized import cached_explainer
        from captum_iba.attr.text import resolve_layer

        ref = resolve_layer(model, module)
        name = fit_on or corpus or DEFAULT_CORPUS
        return cached_explainer(model, tok, ref, name, False, objective=objective)

    return Supplied(loaded=(model, tok), explainer=explainer, prior_data=data)


def _causal_lm_supplies(args: argparse.Namespace, request: ExplainRequest) -> Supplied:
    """What ``explain --model <causal LM>`` supplies: its flags and its
    methods checked against the configuration (the route explains the
    answer - greedy, or --target - to the prompt, or to a query and its
    context)."""
    from captum_iba.app.llm_checks import check_lm_request, lm_config

    if args.pair is not None:
        raise CLIError("--pair is for a classifier; a causal LM explains one prompt")
    check_lm_request(request.methods, lm_config(request.model))
    if args.fit_on is not None:
        raise CLIError(
            f"--fit-on {args.fit_on} chooses iba-amortized's explainer, which "
            "explains classifiers; the model is a causal LM"
        )
    command_parts.print_notes(request.methods)
    return Supplied()


def _check_fit_on(given: Optional[str], methods: Any) -> Optional[str]:
    """``--fit-on``, before the weights load: it goes with ``iba-amortized``
    and names a corpus that ``evaluate`` fits a classifier's explainer on
    (its training split); returned lower-cased (None: not given)."""
    from captum_iba.app.data.corpora import HELDOUT_SPLIT

    if given is None:
        return None
    if "iba-amortized" not in methods.methods:
        raise CLIError(
            f"--fit-on {given} chooses iba-amortized's cached explainer; "
            f"the methods chosen are {', '.join(methods.methods)}: give "
            "--method iba-amortized (or --compare with it), or leave --fit-on out"
        )
    fit_on = given.strip().lower()
    if fit_on not in HELDOUT_SPLIT:
        raise CLIError(
            f"--fit-on {fit_on}: not a corpus (a classifier's explainer is fitted "
            f"on its training split); choose from {', '.join(HELDOUT_SPLIT)}"
        )
    return fit_on


#: What ``explain`` supplies per question (its flags checked, the model
#: loaded when a classifier, the cached explainer).
_SUPPLIED = {
    PREDICTION: _classifier_supplies,
    ANSWER: _causal_lm_supplies,
    SOURCES: _causal_lm_supplies,
}
