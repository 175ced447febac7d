"""What the ``captum-iba`` commands do, once their arguments are checked.

The parser (:mod:`captum_iba.app.cli`) has checked the arguments and the
request - the methods and their options, against the declarations of
:data:`captum_iba.registry.OPTIONS` - before anything heavy loads. Each
command lives in its own module, imported only when it runs, so ``explain``
loads neither the corpus engine nor the reproduction:

* ``explain`` - :mod:`captum_iba.app.explain_command`;
* ``evaluate`` and ``attribute`` - :mod:`captum_iba.app.corpus_command`;
* ``reproduce`` - :mod:`captum_iba.app.reproduce`.

What they share (the model, the priors' data, the marker of a finished
folder) lives in :mod:`~captum_iba.app.command_parts`, below them all.
"""

import argparse
from typing import Any, Callable, Dict

from captum_iba.app.command_parts import MARKER, config_and_record, prior_data
from captum_iba.app.models import (
    check_request_layers,
    load_label_names,
)

__all__ = [
    "COMMANDS",
    "MARKER",
    "check_request_layers",
    "cmd_attribute",
    "cmd_evaluate",
    "cmd_explain",
    "cmd_reproduce",
    "config_and_record",
    "load_label_names",
    "prior_data",
]


def cmd_explain(args: argparse.Namespace, request: Any) -> int:
    """``captum-iba explain`` (:mod:`captum_iba.app.explain_command`)."""
    from captum_iba.app.explain_command import run

    return run(args, request)


def cmd_evaluate(args: argparse.Namespace, request: Any) -> int:
    """``captum-iba evaluate`` (:mod:`captum_iba.app.corpus_command`)."""
    from captum_iba.app.corpus_command import evaluate

    return evaluate(args, request)


def cmd_attribute(args: argparse.Namespace, request: Any) -> int:
    """``captum-iba attribute`` (:mod:`captum_iba.app.corpus_command`)."""
    from captum_iba.app.corpus_command import attribute

    return attribute(args, request)


def cmd_reproduce(args: argparse.Namespace, request: Any) -> int:
    """``captum-iba reproduce``: the paper's experiments, package code."""
    from captum_iba.app import reproduce
    from captum_iba.app.checks import output_folder

    reproduce.run(
        profile=args.profile,
        out=str(output_folder(args.out, "--out")),
        datasets=request.datasets,
        parts=request.parts,
        settings=request.settings,
        sweep_dataset=args.sweep_dataset,
        fair_prior=args.fair_prior,
    )
    return 0


#: The commands by name.
COMMANDS: Dict[str, Callable[[argparse.Namespace, Any], int]] = {
    "explain": cmd_explain,
    "evaluate": cmd_evaluate,
    "attribute": cmd_attribute,
    "reproduce": cmd_reproduce,
}
