"""``captum-iba explain``: the words a prediction relied on, by one method or
several (``--compare``), printed and as an HTML page.

The request (methods and options) was checked by the parser; here the model's
configuration is read and the request's layers and class checked against it
before any weights load, then :func:`captum_iba.explain` builds every method
once and scores the text.
"""

import argparse
from typing import Any

from captum_iba._utils.io import atomic_write_text
from captum_iba.app import commands
from captum_iba.app.checks import class_index, class_names, output_file, pair_warning
from captum_iba.app.data.corpora import DEFAULT_CORPUS
from captum_iba.app.errors import CLIError
from captum_iba.app.explanation import explain
from captum_iba.app.models import check_request_layers, config_and_record
from captum_iba.app.words import blank

__all__ = ["run"]

#: How the page names the default model.
DEFAULT_MODEL_NAME = "MiniLM-L6 fine-tuned on SST-2 (the default model, cached)"


def run(args: argparse.Namespace) -> int:
    """Run ``captum-iba explain`` with checked arguments (see the module
    docstring); returns the exit code."""
    if blank(args.text):
        raise CLIError(
            "the text to explain is empty (only spaces or invisible characters such "
            "as zero-width spaces)"
        )
    if args.pair is not None and blank(args.pair):
        raise CLIError("--pair is empty: give the second text, or leave --pair out")
    html = output_file(args.html, "--html")
    config, record = config_and_record(args.model, DEFAULT_CORPUS)
    check_request_layers(args.request, config)
    if args.target is not None:
        class_index(args.target, class_names(config))
    warning = pair_warning(config, record) if args.pair is not None else None
    if warning:
        print(f"warning: {warning}")
    commands.print_notes(args.request)
    model, tok = commands._model_and_tokenizer(args.model)
    corpus = (record or {}).get("dataset")
    data = commands.prior_data(args.request, corpus, None)

    def explainer(module: Any) -> Any:  # only when iba-amortized is built
        from captum_iba.app.amortized import cached_explainer
        from captum_iba.attr.text import resolve_layer

        ref = resolve_layer(model, module)
        return cached_explainer(model, tok, ref, corpus or DEFAULT_CORPUS, False)

    result = explain(
        args.text,
        model,
        args.request,
        tokenizer=tok,
        pair=args.pair,
        target=args.target,
        model_name=args.model or DEFAULT_MODEL_NAME,
        explainer=explainer,
        prior_data=data,
    )
    print(result.to_text(args.top, args.pieces))
    if html is not None:
        atomic_write_text(html, result.to_html(args.pieces))
        print(f"wrote {html}")
    return 0
