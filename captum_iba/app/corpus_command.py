"""``captum-iba evaluate`` and ``attribute``: whole corpora on the corpus
engine (one process or ``torchrun``; a re-run with the same ``--out`` resumes).

The request (the model's kind, the corpus task, the methods and their
options) was decided and checked at the entry
(:func:`~captum_iba.app.cli_checks.check_corpus`); here the output folder is
checked, the task (:class:`~captum_iba.app.corpus_task.CorpusTask`: a
classifier's corpus, a causal LM's prompt task, a context task) makes and
checks what it needs before any weights load, the engine runs its job's
units, and the task reports.
"""

import argparse
from typing import Any, Dict, Optional, Tuple

import torch

from captum_iba._utils.io import atomic_write_text
from captum_iba.app import command_parts
from captum_iba.app.checks import output_folder
from captum_iba.app.cli_checks import CorpusRequest
from captum_iba.app.corpus_report import ENGINE_FILES, attribution_report, wrap
from captum_iba.app.engine import Merged, init_world, prepare_out, run_corpus_job
from captum_iba.app.finetune.recipes import DEFAULT_BASE_MODEL_NAME
from captum_iba.registry import OPTIONS

__all__ = ["ENGINE_FILES", "attribute", "evaluate"]

#: How the settings name the default model (``--model`` not given).
DEFAULT_MODEL = (
    f"default: MiniLM-L6 ({DEFAULT_BASE_MODEL_NAME}) fine-tuned on {{dataset}} by "
    "captum-iba (cached)"
)

#: Options that do not change any number of a corpus run (left out of the
#: settings a re-run is compared with); ``request`` is the checked form of
#: the options recorded beside it, ``kind`` and ``corpus_task`` what the
#: entry decided from them.
_RUN_ONLY = (
    "out", "data_dir", "device", "command", "request", "llm", "contexts",
    "kind", "corpus_task",
)  # fmt: skip


def _run_settings(args: CorpusRequest, split: str) -> Dict[str, Any]:
    """What defines a corpus run: its resolved options (compared on a re-run;
    a method option not given is recorded as ``"default"``)."""
    left_out = _RUN_ONLY + args.corpus_task.not_recorded
    settings = {k: v for k, v in sorted(args.items()) if k not in left_out}
    for name in OPTIONS.names():
        if settings.get(name, "") is None:
            settings[name] = "default"
    if args.model is None:  # the weights digest, recorded with them, is exact
        settings["model"] = DEFAULT_MODEL.format(dataset=args.dataset)
    return dict(settings, command=args.command, split=split)


def _run(
    args: CorpusRequest, split: str
) -> Tuple[Optional[Merged], Optional[str], Any]:
    """Run the request's corpus job on this process's share; rank 0 gets
    the merge, and every rank the run's warning (None: none) and what its
    task prepared before the weights.

    The output folder and the model-dependent numbers (a causal LM's prompts
    too) are checked before any model loads; the folder's completion marker
    is removed until the run ends (put back when a re-run of a finished
    folder fails).
    """
    out = output_folder(args.out, "--out")
    task = args.corpus_task
    prepared, warning = task.prepare(args, split)  # before any weights
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)  # CPU rounding depends on it
    world = init_world(args.device)
    if warning and world.is_main:
        print(f"warning: {warning}", flush=True)
    marker, finished = out / command_parts.MARKER, None
    try:
        prepare_out(args.out, _run_settings(args, split), world)
        if world.is_main and marker.is_file():  # not complete until it ends
            finished = marker.read_text()
            marker.unlink()
        if world.is_main:
            print(
                f"captum-iba {args.command}: {task.title(args)} {split}, methods "
                f"{', '.join(args.methods)}; results go to {out}/ (a re-run with "
                "the same options resumes)",
                flush=True,
            )
            command_parts.print_notes(args.request)
        skipped = task.note(prepared)
        if skipped:
            print(wrap(f"note: {skipped}"), flush=True)
        job = task.job(args, world, split, prepared, _run_settings(args, split))
        return run_corpus_job(job, args.out, world), warning, prepared
    except BaseException:
        if finished is not None and not marker.exists():
            # a finished folder's re-run (same settings: every unit was
            # there) that failed: it is as complete as before
            atomic_write_text(marker, finished)
        raise
    finally:
        world.close()
        torch.set_num_threads(threads)


def evaluate(parsed: argparse.Namespace, args: CorpusRequest) -> int:
    """``captum-iba evaluate``: the degradation test of several methods, on
    the corpus engine (resumable; one process or ``torchrun``); a context
    task's metrics with ``--task``. ``args`` is the checked request
    (:func:`~captum_iba.app.cli_checks.check_corpus`), ``parsed`` what it
    was made of."""
    task = args.corpus_task
    merged, warning, prepared = _run(args, task.split(args))
    if merged is None:
        return 0
    return task.report(args, merged, prepared, warning)


def attribute(parsed: argparse.Namespace, args: CorpusRequest) -> int:
    """``captum-iba attribute``: token scores of a whole corpus as JSON lines
    (and the degradation test's summary with ``--degradation``); ``args``
    is the checked request, ``parsed`` what it was made of."""
    merged = _run(args, args.corpus_task.split(args))[0]
    if merged is None:
        return 0
    return attribution_report(args, merged)
