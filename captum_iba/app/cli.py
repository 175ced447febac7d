"""The ``captum-iba`` command line (also ``python -m captum_iba``).

Commands::

    captum-iba explain "text" [--method M | --compare M1,M2] [--pair "text"]
                       [--model PATH] [--layer N] [--target CLASS] [--html out.html]
    captum-iba evaluate --dataset sst2 --methods iba-faithful,ig,lime,random [--n 300]
    captum-iba attribute --dataset imdb --method iba-deletion --out runs/imdb
    captum-iba reproduce [--profile cpu|paper] [--parts table,sweeps,examples]

This module is the parser only: it imports neither torch nor any method, so
``--help`` answers at once. The names it offers come from torch-free homes
(methods, priors and settings from :mod:`captum_iba.registry`, corpora from
:mod:`captum_iba.app.data.corpora`, ``reproduce``'s parts and profiles from
:mod:`captum_iba.app.profiles`); what a command does lives in
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
from typing import Any, List, NoReturn, Optional, Sequence

from captum_iba.app.checks import (
    nonnegative_float,
    positive_int,
    removed_on_failure,
    seed_int,
    thread_count,
)
from captum_iba.app.data.corpora import HELDOUT_SPLIT, LABEL_NAMES
from captum_iba.app.errors import CLIError, split_choices
from captum_iba.app.help import (
    DESCRIPTION,
    SCORES,
    HelpFormatter,
    methods_listing,
    priors_listing,
)
from captum_iba.app.profiles import CORPORA, PARTS, PROFILE_SUMMARIES, PROFILES
from captum_iba.registry import METHODS, PRIORS, SETTINGS

__all__ = [
    "CLIError",
    "DATASETS",
    "DEFAULT_METHOD",
    "METHOD_NAMES",
    "REPRODUCE_CORPORA",
    "REPRODUCE_PARTS",
    "REPRODUCE_SETTINGS",
    "main",
    "split_choices",
]

#: CLI method names (the registry's names in lower case) -> registered names.
METHOD_NAMES = {name.lower(): name for name in METHODS.names()}
#: What ``explain`` and ``attribute`` run when no method is named: the most
#: faithful IBA measured (docs/faithfulness.rst, second round).
DEFAULT_METHOD = "iba-deletion"
#: IBA's noise priors, by name (the registry's).
PRIOR_NAMES = tuple(PRIORS.names())
#: Corpora ``evaluate`` accepts (each on its held-out split, see the loaders).
DATASETS = tuple(HELDOUT_SPLIT)
#: Corpora of the paper's Table 1 that ``reproduce`` measures, and its parts.
REPRODUCE_CORPORA, REPRODUCE_PARTS = CORPORA, PARTS
REPRODUCE_SETTINGS = tuple(SETTINGS.names())
#: The corpus of the default model (MiniLM-L6 fine-tuned on first use).
DEFAULT_CORPUS = "sst2"


def _add(sub: "argparse._SubParsersAction", name: str, **kwargs: Any) -> Any:
    return sub.add_parser(name, formatter_class=HelpFormatter, **kwargs)


def _explain_parser(sub: "argparse._SubParsersAction") -> None:
    names = ", ".join(f"{i} {n}" for i, n in enumerate(LABEL_NAMES[DEFAULT_CORPUS]))
    ex = _add(
        sub,
        "explain",
        help="explain one prediction, word by word",
        description="Explain one prediction of a text classifier: which words\n"
        "it relied on, by one method or several side by side.",
        epilog="\n\n".join([SCORES, methods_listing(), priors_listing()]),
    )
    ex.add_argument("text", help="the text to classify and explain")
    choose = ex.add_mutually_exclusive_group()
    choose.add_argument(
        "--method",
        default=DEFAULT_METHOD,
        help="the attribution method (see the list below); the default is the "
        "most faithful IBA measured (docs/faithfulness.rst)",
    )
    choose.add_argument(
        "--compare",
        metavar="M1,M2,...",
        help="several methods, comma-separated: one HTML row and one top-words "
        "line per method, over the same words",
    )
    ex.add_argument("--pair", help="second text of a sentence pair (e.g. for RTE)")
    ex.add_argument(
        "--model",
        help="a fine-tuned classifier: a folder or a Hugging Face hub id. "
        "Default: MiniLM-L6 fine-tuned on SST-2 (sentiment), made once on first "
        "use and cached",
    )
    ex.add_argument(
        "--layer",
        type=int,
        help="encoder layer (0-based) after which IBA's bottleneck goes; default "
        "int(0.75 x the number of layers): 4 of 0..5 for the default model",
    )
    ex.add_argument(
        "--target",
        metavar="CLASS",
        help="the class to explain, by index or by name from the model's labels "
        f"(default model: {names}); default: the predicted class",
    )
    _iba_knobs(ex)
    ex.add_argument(
        "--prior",
        choices=list(PRIOR_NAMES),
        help="IBA's noise prior (listed below; dataset: fitted on the model's "
        "training corpus); default: the configuration's (iba-faithful: "
        "baseline, iba: paper)",
    )
    ex.add_argument(
        "--seed", type=seed_int, default=0, help="seed of every seeded method"
    )
    ex.add_argument("--html", metavar="FILE", help="also write the page to this file")
    ex.add_argument(
        "--pieces",
        action="store_true",
        help="show word pieces (the tokenizer's tokens) instead of words",
    )
    ex.add_argument(
        "--top", type=positive_int, default=5, help="how many top words to list"
    )


def _corpus_arguments(
    p: argparse.ArgumentParser, methods: str, n: Optional[int]
) -> None:
    """The options ``evaluate`` and ``attribute`` share (the corpus engine's)."""
    p.add_argument(
        "--dataset",
        default="sst2",
        help=f"the corpus (its held-out split), one of {', '.join(DATASETS)}",
    )
    p.add_argument(
        "--methods",
        "--method",
        default=methods,
        help="comma-separated method names (listed below)",
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
        "--priors",
        help="IBA priors, comma-separated (listed below); one IBA run each "
        "(default: the setting's: reference for paper, paper for fair)",
    )
    p.add_argument(
        "--model",
        help="a fine-tuned classifier, folder or hub id (default: MiniLM-L6 "
        "fine-tuned on --dataset, made once on first use and cached)",
    )
    p.add_argument(
        "--layer",
        type=int,
        help="encoder layer (0-based) of IBA's bottleneck (default: int(0.75 x "
        "the number of layers))",
    )
    p.add_argument(
        "--max-length",
        type=positive_int,
        default=128,
        help="longest input, in word pieces (longer texts are cut)",
    )
    p.add_argument(
        "--batch-size",
        type=positive_int,
        default=16,
        help="instances per batch (a unit of work: the results do not depend on "
        "the number of processes)",
    )
    p.add_argument(
        "--seed", type=seed_int, default=0, help="seed of every seeded method"
    )
    p.add_argument(
        "--ig-steps",
        type=positive_int,
        help="integrated gradients' steps (default: the setting's, paper 10, fair 50)",
    )
    p.add_argument(
        "--lime-samples",
        type=positive_int,
        help="LIME's samples (default: the setting's, paper 100, fair 500)",
    )
    p.add_argument(
        "--lime-max-length",
        type=positive_int,
        default=512,
        help="paper-setting LIME pads perturbed texts to this length (paper: 512)",
    )
    p.add_argument(
        "--data-dir",
        help="folder holding the corpora (default: $CAPTUM_IBA_DATA, then "
        "~/.cache/captum_iba/data, then the Hugging Face hub)",
    )
    p.add_argument(
        "--bf16",
        action="store_true",
        help="IBA in bfloat16 autocast: about half the time on a GPU or a CPU with "
        "native bfloat16 (AVX512-BF16, AMX), scores close to, not equal to, float32; "
        "on other CPUs (e.g. AVX2 only) bf16 is many times slower: measured once, "
        "float32 runs instead, with a warning (CAPTUM_IBA_CPU_BF16=on forces bf16)",
    )
    p.add_argument(
        "--threads",
        type=thread_count,
        default=1,
        help="CPU threads per process (on a CPU, start one process per core with "
        "torchrun; the numbers depend on it, not on the processes)",
    )
    p.add_argument(
        "--device",
        default="auto",
        choices=["auto", "cpu"],
        help="auto: cuda:LOCAL_RANK when CUDA is present, else the CPU",
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
    _corpus_arguments(ev, "iba-deletion,iba-faithful,ig,lime,random", 300)
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
        epilog="\n\n".join([SCORES, methods_listing(), priors_listing()]),
    )
    _corpus_arguments(at, DEFAULT_METHOD, None)
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
    _iba_knobs(at)


def _iba_knobs(p: argparse.ArgumentParser) -> None:
    """IBA's options: given, they replace those of every IBA method's
    configuration (iba: the paper's; iba-faithful: the most faithful)."""
    p.add_argument(
        "--beta",
        type=nonnegative_float,
        help="IBA's weight of the information term (Eq. 5); default: the "
        "configuration's, 1e-05",
    )
    p.add_argument(
        "--steps",
        type=positive_int,
        help="IBA's optimisation steps; default: the configuration's, 10",
    )
    p.add_argument(
        "--n-samples",
        type=positive_int,
        help="IBA's noise samples per step; default: the configuration's "
        "(iba: 10, iba-faithful: 5)",
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
        choices=list(PRIOR_NAMES),
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
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _explain_parser(sub)
    _evaluate_parser(sub)
    _attribute_parser(sub)
    _reproduce_parser(sub)
    return parser


def method_names(text: str, option: str) -> List[str]:
    """Comma-separated method names as registered names (unknown ones refused)."""
    chosen = split_choices(text.lower(), METHOD_NAMES, "method")
    if not chosen:
        raise CLIError(f"{option}: name at least one method")
    return [METHOD_NAMES[m] for m in chosen]


def _check_explain(args: argparse.Namespace) -> None:
    if args.compare is not None:
        args.methods = method_names(args.compare, "--compare")
    else:
        args.methods = method_names(args.method, "--method")


def _check_corpus(args: argparse.Namespace) -> None:
    args.dataset = args.dataset.lower()
    if args.dataset not in DATASETS:
        raise CLIError(f"unknown dataset {args.dataset!r}; choose from {DATASETS}")
    args.methods = method_names(args.methods, "--methods")
    if args.priors is not None:
        args.priors = split_choices(args.priors, PRIOR_NAMES, "prior")


def _check_reproduce(args: argparse.Namespace) -> None:
    args.parts = split_choices(args.parts, PARTS, "part")
    args.settings = split_choices(args.settings, REPRODUCE_SETTINGS, "setting")
    args.datasets = split_choices(args.datasets, CORPORA, "dataset")


#: Errors that user input, missing or damaged files and data end in: printed
#: as one line. ``KeyError`` is not among them: a missing key is a bug.
_USER_ERRORS = (CLIError, ValueError, OSError, ImportError, RuntimeError)


def _one_line(err: BaseException) -> str:
    """The first line of an error's message (never quotes stripped off it)."""
    text = str(err).strip() or type(err).__name__
    return next(ln.strip() for ln in text.splitlines() if ln.strip())


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
    checks = {
        "explain": _check_explain,
        "evaluate": _check_corpus,
        "attribute": _check_corpus,
        "reproduce": _check_reproduce,
    }
    debug = os.environ.get("CAPTUM_IBA_DEBUG", "").strip() not in ("", "0")
    try:
        checks[args.command](args)
        from captum_iba.app import commands  # the heavy stack, only now

        with removed_on_failure(args):
            return commands.COMMANDS[args.command](args)
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
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
