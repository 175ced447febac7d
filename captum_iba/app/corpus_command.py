"""``captum-iba evaluate`` and ``attribute``: whole corpora on the corpus
engine (one process or ``torchrun``; a re-run with the same ``--out`` resumes).

The request (methods and options) was checked by the parser; here the output
folder and the model-dependent numbers are checked against the model's
configuration before any weights load, then every method is built once by
the harness's resolver and the engine runs the units.
"""

import argparse
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from captum_iba._utils.io import atomic_write_text, write_marker
from captum_iba.app import command_parts
from captum_iba.app.checks import (
    check_against_config,
    check_classes,
    corpus_warning,
    output_folder,
)
from captum_iba.app.cli_checks import CorpusRequest
from captum_iba.app.command_parts import config_and_record
from captum_iba.app.context_corpus import (
    context_job,
    on_classifier,
    prepare_contexts,
    write_context_report,
)
from captum_iba.app.data import HELDOUT_SPLIT, load_dataset
from captum_iba.app.data.corpora import canonical_split
from captum_iba.app.engine import (
    CorpusJob,
    Merged,
    World,
    init_world,
    prepare_out,
    run_corpus_job,
)
from captum_iba.app.engine.records import weights_digest
from captum_iba.app.finetune.recipes import DEFAULT_BASE_MODEL_NAME
from captum_iba.app.llm_corpus import (
    check_methods,
    check_prompt_task,
    prepare_prompts,
    prompt_job,
)
from captum_iba.app.models import check_request_layers, kind_of
from captum_iba.attr.text import resolve_layer
from captum_iba.evaluation import Resources, build_scorers, get_preset
from captum_iba.metrics import compare
from captum_iba.registry import OPTIONS

__all__ = ["ENGINE_FILES", "attribute", "evaluate"]

#: What the corpus engine leaves in ``--out`` (the merge, its settings, the
#: per-rank shards a re-run resumes from).
ENGINE_FILES = ["attributions.jsonl", "settings.json", "shards"]

#: How the settings name the default model (``--model`` not given).
DEFAULT_MODEL = (
    f"default: MiniLM-L6 ({DEFAULT_BASE_MODEL_NAME}) fine-tuned on {{dataset}} by "
    "captum-iba (cached)"
)

#: ``--max-length`` of a classifier when not given (a causal LM's prompts
#: are cut only when it is given).
CLASSIFIER_MAX_LENGTH = 128

#: Options that do not change any number of a corpus run (left out of the
#: settings a re-run is compared with); ``request`` is the checked form of
#: the options recorded beside it.
_RUN_ONLY = ("out", "data_dir", "device", "command", "request", "llm", "contexts")


#: A context task's options (left out of another run's settings).
_CONTEXT_ONLY = ("task", "passages", "examples_seed")


def _scorers(args: CorpusRequest, model: Any, tok: Any) -> Dict:
    """The scorers of ``evaluate`` / ``attribute``: every method built once,
    by the harness's one resolver, from the checked request."""

    def explainer(module: Any, objective: str = "distil") -> Any:  # iba-amortized's
        from captum_iba.app.amortized import cached_explainer

        return cached_explainer(
            model, tok, resolve_layer(model, module), args.dataset, True,
            args.data_dir, args.max_length, objective,
        )  # fmt: skip

    resources = Resources(
        model,
        tok,
        explainer=explainer,
        prior_data=command_parts.prior_data(args.request, args.dataset, args.data_dir),
        max_length=args.max_length,
    )
    preset = get_preset(args.setting)
    return build_scorers(args.request, resources, preset, kind="classifier")


def _run_settings(args: CorpusRequest, split: str) -> Dict[str, Any]:
    """What defines a corpus run: its resolved options (compared on a re-run;
    a method option not given is recorded as ``"default"``)."""
    settings = {k: v for k, v in sorted(args.items()) if k not in _RUN_ONLY}
    if getattr(args, "task", None) is None:  # a corpus run's settings as before
        for name in _CONTEXT_ONLY:
            settings.pop(name, None)
    for name in OPTIONS.names():
        if settings.get(name, "") is None:
            settings[name] = "default"
    if args.model is None:  # the weights digest, recorded with them, is exact
        settings["model"] = DEFAULT_MODEL.format(dataset=args.dataset)
    return dict(settings, command=args.command, split=split)


#: What a route's ``prepare`` gives: what the job needs, and a warning.
_Prepared = Tuple[Any, Optional[str]]


@dataclass(frozen=True)
class _Route:
    """One question a corpus run answers - a classifier's corpus, a causal
    LM's prompt task, a context task - as the steps that differ: what is
    made and checked before any weights load (``prepare``: what the job
    needs, and a warning or None), and the job on this rank's device."""

    prepare: Callable[[CorpusRequest, str], _Prepared]
    job: Callable[[CorpusRequest, World, str, Any], CorpusJob]
    defaults: Callable[[CorpusRequest], Dict[str, Any]] = lambda args: {}
    note: Callable[[Any], str] = lambda prepared: ""


def _route(args: CorpusRequest) -> _Route:
    """The run's route, decided once from the model's kind and ``--task``;
    its methods checked against the kind.

    Raises:
        ~captum_iba.app.errors.CLIError: For methods that do not explain the
            model's kind, or a context task on a classifier.
    """
    kind = kind_of(args.model)
    question = "context task" if getattr(args, "task", None) else "corpus"
    route = _ROUTES.get((question, kind))
    if route is None:
        raise on_classifier(args)
    check_methods(args, kind)
    return route


def _prepare_corpus(args: CorpusRequest, split: str) -> _Prepared:
    """A classifier's corpus run: ``--max-length``, the layers and the
    classes checked against the configuration; its warning."""
    config, record = config_and_record(args.model, args.dataset)
    check_against_config(config, max_length=args.max_length)
    check_request_layers(args.request, config)
    return None, corpus_warning(record, args.dataset)


def _prepare_prompts(args: CorpusRequest, split: str) -> _Prepared:
    """A causal LM's prompt task: the prompts made and checked."""
    check_prompt_task(args)
    return prepare_prompts(args, split), None


def _prepare_contexts(args: CorpusRequest, split: str) -> _Prepared:
    """A context task: the examples made and fitted."""
    return prepare_contexts(args), None


def _classifier_defaults(args: CorpusRequest) -> Dict[str, Any]:
    """A classifier's corpus run: ``--max-length`` when not given."""
    return {"max_length": args.max_length or CLASSIFIER_MAX_LENGTH}


def _skipped(prepared: Any) -> str:
    """A context task's examples skipped, in one line ("" for none)."""
    return prepared.skipped_line()


def _prompt_job(
    args: CorpusRequest, world: World, split: str, prepared: Any
) -> CorpusJob:
    job = prompt_job(args, prepared, _run_settings(args, split))
    job.model.to(world.device)
    return job


def _context_job(
    args: CorpusRequest, world: World, split: str, prepared: Any
) -> CorpusJob:
    job = context_job(args, prepared, _run_settings(args, split))
    job.model.to(world.device)
    return job


def _corpus_job(
    args: CorpusRequest, world: World, split: str, prepared: Any = None
) -> CorpusJob:
    """A classifier's corpus run: the model on this rank's device, the
    scorers and the corpus."""
    if args.model is None and not world.is_main:
        world.barrier()  # rank 0 fine-tunes (or finds) the default model first
    model, tok = command_parts.model_and_tokenizer(args.model, args.dataset)
    if args.model is None and world.is_main:
        world.barrier()
    settings = dict(_run_settings(args, split), weights=weights_digest(model))
    model.to(world.device)
    data = load_dataset(
        args.dataset, split, data_dir=args.data_dir, max_examples=args.n
    )
    target = getattr(args, "target", "label")
    check_classes(model.config, data.label_names, args.dataset, target)
    return CorpusJob(
        model=model,
        tokenizer=tok,
        data=data,
        scorers=_scorers(args, model, tok),
        settings=settings,
        preset=get_preset(args.setting),
        max_length=args.max_length,
        batch_size=args.batch_size,
        target=target,
        degradation=args.command == "evaluate" or args.degradation,
    )


#: The routes, by question and model kind (a context task on a classifier
#: has none).
_ROUTES = {
    ("corpus", "classifier"): _Route(
        _prepare_corpus, _corpus_job, defaults=_classifier_defaults
    ),
    ("corpus", "causal-lm"): _Route(_prepare_prompts, _prompt_job),
    ("context task", "causal-lm"): _Route(
        _prepare_contexts, _context_job, note=_skipped
    ),
}


def _write_degradation(
    out: Path, stem: str, results: Dict, curves: bool, notes: Sequence[str] = ()
) -> Tuple[Any, List[str]]:
    """Each method's result as JSON, the comparison table with ``notes``
    under it (and the curves), each written atomically; returns the table and
    the names written."""
    written = []
    for name, result in results.items():
        path = out / f"{stem}_{command_parts.slug(name)}.json"
        result.to_json(path)
        written.append(path.name)
    table = compare(results)
    below = "".join(f"\n{note}\n" for note in notes)
    atomic_write_text(out / f"{stem}.md", table.to_markdown() + "\n" + below)
    written.append(f"{stem}.md")
    if curves:
        from captum_iba.visualization import plot_degradation_curves

        plot_degradation_curves(results, save_path=out / f"{stem}_curves.png")
        written.append(f"{stem}_curves.png")
    return table, written


def _run(
    args: CorpusRequest, split: str
) -> Tuple[Optional[Merged], Optional[str], Any]:
    """Run the request's corpus job on this process's share; rank 0 gets
    the merge, and every rank the run's warning (None: none) and what its
    route prepared before the weights.

    The output folder and the model-dependent numbers (a causal LM's prompts
    too) are checked before any model loads; the folder's completion marker
    is removed until the run ends (put back when a re-run of a finished
    folder fails).
    """
    out = output_folder(args.out, "--out")
    route = _route(args)
    args = args.replace(**route.defaults(args))  # the route's own defaults
    prepared, warning = route.prepare(args, split)  # before any weights
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
            what = getattr(args, "task", None) or args.dataset
            print(
                f"captum-iba {args.command}: {what} {split}, methods "
                f"{', '.join(args.methods)}; results go to {out}/ (a re-run with "
                "the same options resumes)",
                flush=True,
            )
            command_parts.print_notes(args.request)
        skipped = route.note(prepared)
        if skipped:
            print(_wrap(f"note: {skipped}"), flush=True)
        job = route.job(args, world, split, prepared)
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
    task = getattr(args, "task", None)
    split = args.split if task else HELDOUT_SPLIT[args.dataset]
    merged, warning, prepared = _run(args, split)
    if merged is None:
        return 0
    out = Path(args.out)
    if task:
        return _context_report(args, merged, prepared)
    stem = f"{args.dataset}_{args.setting}"
    n = len({row["index"] for row in merged.rows})  # methods may be several IBAs
    notes = merged.ranking_notes(n) + merged.left_out_notes()
    table, written = _write_degradation(
        out, stem, merged.results, curves=True, notes=notes
    )
    files = ENGINE_FILES + written
    write_marker(out, command_parts.MARKER, files=files, command="evaluate", n=n)
    accuracy = _accuracy(merged.rows)
    print(f"\n{args.dataset} (n={n}), setting {args.setting}")
    print(table.to_markdown())
    print(_wrap(f"Columns: {table.legend()}"))
    for note in notes:
        print(_wrap(note))
    print(
        f"done: {merged.run_line(n, len(merged.results))}; model accuracy on them "
        f"{100 * accuracy:.1f} %; results in {out}/"
    )
    if warning:  # said at the start too; the accuracy above is read here
        print(_wrap(f"warning: {warning}"))
    return 0


def _context_report(args: CorpusRequest, merged: Merged, prepared: Any) -> int:
    """A context task's summary (:func:`write_context_report`), printed."""
    table, written = write_context_report(args, merged, prepared)
    n = len({row["index"] for row in merged.rows})
    write_marker(
        Path(args.out), command_parts.MARKER, files=ENGINE_FILES + written,
        command="evaluate", n=n,
    )  # fmt: skip
    print(f"\n{args.task} {args.split} (n={n}), {args.model}")
    print(table)
    print(
        _wrap(
            "Columns: LDS (Spearman over the held-out ablations; higher = more "
            "faithful), top-1 hit (the key source ranked first), top-k drop (the "
            "response's log-probability fall, nats, removing the k sources ranked "
            "first), CPU-s per example; a method's rows by pooling of its token "
            "scores (sum, mean, max) or its own source scores (its name alone)"
        )
    )
    note = prepared.skipped_line()
    if note:
        print(_wrap(f"note: {note}"))
    for refused in merged.left_out_notes():
        print(_wrap(refused))
    print(f"done: {merged.run_line(n, len(merged.results))}; results in {args.out}/")
    return 0


def _accuracy(rows: Sequence[Dict[str, Any]]) -> float:
    """The share of instances whose predicted class (a causal LM's choice)
    is the gold label."""
    first = {r["index"]: r for r in rows}.values()
    return sum(r["predicted"] == r["label"] for r in first) / max(len(first), 1)


def _wrap(text: str) -> str:
    return "\n".join(textwrap.wrap(text, 88))


def attribute(parsed: argparse.Namespace, args: CorpusRequest) -> int:
    """``captum-iba attribute``: token scores of a whole corpus as JSON lines
    (and the degradation test's summary with ``--degradation``); ``args``
    is the checked request, ``parsed`` what it was made of."""
    split = HELDOUT_SPLIT[args.dataset] if args.split is None else args.split
    merged = _run(args, canonical_split(args.dataset, split))[0]
    if merged is None:
        return 0
    out = Path(args.out)
    written = list(ENGINE_FILES)
    n = len({row["index"] for row in merged.rows})
    notes = merged.ranking_notes(n) + merged.left_out_notes()
    if merged.results:
        table, files = _write_degradation(
            out, "degradation", merged.results, curves=False, notes=notes
        )
        written += files
        print(table.to_markdown())
        print(_wrap(f"Columns: {table.legend()}"))
    for note in notes:
        print(_wrap(note))
    write_marker(
        out,
        command_parts.MARKER,
        files=written,
        command="attribute",
        n=len(merged.rows),
    )
    print(
        f"done: {merged.run_line(n, len(merged.rows) // max(n, 1))}; "
        f"{len(merged.rows)} rows in {out / 'attributions.jsonl'} (fields and "
        f"units: {out / 'settings.json'})"
    )
    return 0
