"""The ``captum-iba`` command line (also ``python -m captum_iba``).

Commands::

    captum-iba explain "text" [--pair "text"] [--model PATH] [--layer N]
                       [--html out.html]
    captum-iba evaluate --dataset sst2 --methods iba,ig,lime,random [--n 300]
    captum-iba reproduce [--profile cpu|paper] [--parts table,sweeps,examples]

Every name on the command line is resolved here, once, into the object the
library takes (a layer index into the layer, a prior name into a prior, method
names into scorers, a setting into its preset), and the objects are passed
down. Numbers, names and output paths are checked before any model loads.
Bad arguments, missing or damaged files and data get a one-line error and
exit code 2, never a traceback (``CAPTUM_IBA_DEBUG=1`` shows the traceback of
an unexpected error).

``evaluate`` and ``attribute`` run on the corpus engine
(:mod:`captum_iba.app.engine`): the same command line runs as one process or
as ``torchrun --nproc_per_node N -m captum_iba ...``, and a re-run with the
same ``--out`` resumes.
"""

import argparse
import os
import sys
from typing import Any, NoReturn, Optional, Sequence

from captum_iba.app import commands
from captum_iba.app.checks import (
    nonnegative_float,
    positive_int,
    removed_on_failure,
    seed_int,
    thread_count,
)
from captum_iba.app.data import HELDOUT_SPLIT
from captum_iba.app.errors import CLIError, split_choices
from captum_iba.app.reproduce import CORPORA, PARTS, PROFILES
from captum_iba.evaluation import SETTINGS
from captum_iba.registry import METHODS, PRIORS

__all__ = [
    "CLIError",
    "DATASETS",
    "METHOD_NAMES",
    "REPRODUCE_CORPORA",
    "REPRODUCE_PARTS",
    "REPRODUCE_SETTINGS",
    "main",
    "split_choices",
]

#: CLI method names (the registry's names in lower case) -> registered names.
METHOD_NAMES = {name.lower(): name for name in METHODS.names()}
#: IBA's noise priors, by name (the registry's).
PRIOR_NAMES = tuple(PRIORS.names())
#: Corpora ``evaluate`` accepts (each on its held-out split, see the loaders).
DATASETS = tuple(HELDOUT_SPLIT)
#: Corpora of the paper's Table 1 that ``reproduce`` measures, and its parts.
REPRODUCE_CORPORA, REPRODUCE_PARTS, REPRODUCE_SETTINGS = CORPORA, PARTS, SETTINGS


def _explain_parser(sub: "argparse._SubParsersAction") -> None:
    ex = sub.add_parser("explain", help="explain one prediction, token by token")
    ex.add_argument("text", help="the text to classify and explain")
    ex.add_argument("--pair", help="second text of a sentence pair")
    ex.add_argument(
        "--model",
        help="fine-tuned classifier (folder or hub name); default: MiniLM-L6 "
        "fine-tuned on SST-2 (made and cached on first use)",
    )
    ex.add_argument("--layer", type=int, help="encoder layer index (0-based)")
    ex.add_argument("--target", type=int, help="class to explain (default: predicted)")
    ex.add_argument("--beta", type=nonnegative_float, default=1e-5)
    ex.add_argument(
        "--prior",
        default="paper",
        choices=list(PRIOR_NAMES),
        help="IBA's noise prior (dataset: fitted on the model's training corpus)",
    )
    ex.add_argument("--html", help="write an HTML heatmap to this file")
    ex.add_argument("--seed", type=seed_int, default=0)
    ex.add_argument(
        "--top", type=positive_int, default=5, help="how many top tokens to print"
    )


def _corpus_arguments(p: argparse.ArgumentParser, methods: str, n: Any) -> None:
    """The options ``evaluate`` and ``attribute`` share (the corpus engine's)."""
    p.add_argument("--dataset", default="sst2", help=f"one of {', '.join(DATASETS)}")
    p.add_argument(
        "--methods",
        "--method",
        default=methods,
        help=f"comma-separated, among {', '.join(METHOD_NAMES)}",
    )
    p.add_argument(
        "--n",
        "--num-instances",
        dest="n",
        type=positive_int,
        default=n,
        help="number of instances (under torchrun write --num-instances: torchrun "
        "takes --n for an abbreviation of its own options)",
    )
    p.add_argument("--setting", default="fair", choices=list(SETTINGS))
    p.add_argument(
        "--priors",
        help=f"IBA priors, comma-separated, among {', '.join(PRIOR_NAMES)}; one IBA "
        "run each (default: the setting's, reference for paper, paper for fair)",
    )
    p.add_argument("--model", help="fine-tuned classifier (default: cached MiniLM)")
    p.add_argument("--layer", type=int, help="encoder layer index (0-based)")
    p.add_argument("--max-length", type=positive_int, default=128)
    p.add_argument(
        "--batch-size",
        type=positive_int,
        default=16,
        help="instances per batch (a unit of work: the results do not depend on "
        "the number of processes)",
    )
    p.add_argument("--seed", type=seed_int, default=0)
    p.add_argument("--ig-steps", type=positive_int, help="IG steps (paper 10, fair 50)")
    p.add_argument(
        "--lime-samples", type=positive_int, help="LIME samples (paper 100, fair 500)"
    )
    p.add_argument(
        "--lime-max-length",
        type=positive_int,
        default=512,
        help="paper-setting LIME pads perturbed texts to this length (paper: 512)",
    )
    p.add_argument("--data-dir", help="corpus folder (default $CAPTUM_IBA_DATA)")
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
        help="CPU threads per process (default 1: on a CPU, start one process per "
        "core with torchrun; the numbers depend on it, not on the processes)",
    )
    p.add_argument(
        "--device",
        default="auto",
        choices=["auto", "cpu"],
        help="auto: cuda:LOCAL_RANK when CUDA is present, else the CPU",
    )


def _evaluate_parser(sub: "argparse._SubParsersAction") -> None:
    ev = sub.add_parser("evaluate", help="degradation test of several methods")
    _corpus_arguments(ev, "iba,ig,lime,random", 300)
    ev.add_argument(
        "--out",
        default="results/evaluate",
        help="output folder (a re-run with the same options resumes; other options "
        "are refused)",
    )


def _attribute_parser(sub: "argparse._SubParsersAction") -> None:
    at = sub.add_parser(
        "attribute", help="token attributions of a whole corpus, saved as JSON lines"
    )
    _corpus_arguments(at, "iba", None)
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
    at.add_argument("--beta", type=nonnegative_float, default=1e-5, help="IBA's beta")
    at.add_argument("--steps", type=positive_int, default=10, help="IBA's steps")
    at.add_argument(
        "--n-samples", type=positive_int, default=10, help="IBA's noise samples"
    )


def _reproduce_parser(sub: "argparse._SubParsersAction") -> None:
    rp = sub.add_parser("reproduce", help="re-run the paper's experiments")
    rp.add_argument("--profile", default="cpu", choices=sorted(PROFILES))
    rp.add_argument("--out", default="results/reproduce")
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
        default=",".join(SETTINGS),
        help="Table 1 settings to run (rows of others already in --out are kept)",
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
        description="Information Bottleneck Attribution for transformers (Captum).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _explain_parser(sub)
    _evaluate_parser(sub)
    _attribute_parser(sub)
    _reproduce_parser(sub)
    return parser


def _check_corpus(args: argparse.Namespace) -> None:
    args.dataset = args.dataset.lower()
    if args.dataset not in DATASETS:
        raise CLIError(f"unknown dataset {args.dataset!r}; choose from {DATASETS}")
    chosen = split_choices(args.methods.lower(), METHOD_NAMES, "method")
    args.methods = [METHOD_NAMES[m] for m in chosen]
    if args.priors is not None:
        args.priors = split_choices(args.priors, PRIOR_NAMES, "prior")


def _check_reproduce(args: argparse.Namespace) -> None:
    args.parts = split_choices(args.parts, PARTS, "part")
    args.settings = split_choices(args.settings, SETTINGS, "setting")
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
        "evaluate": _check_corpus,
        "attribute": _check_corpus,
        "reproduce": _check_reproduce,
    }
    debug = os.environ.get("CAPTUM_IBA_DEBUG", "").strip() not in ("", "0")
    try:
        checks.get(args.command, lambda a: None)(args)
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
