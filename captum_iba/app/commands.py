"""What the ``captum-iba`` commands do, once their arguments are checked.

Each command turns the names it was given into objects here, once (the model
path into a model, the layer index into the layer, prior names into priors,
method names into scorers, the setting into its preset) and hands the objects
to the library.
"""

import argparse
import textwrap
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from captum_iba._utils.io import atomic_write_text, write_marker
from captum_iba.app import reproduce
from captum_iba.app.amortized import cached_explainer
from captum_iba.app.checks import (
    check_against_config,
    check_classes,
    class_index,
    class_names,
    output_file,
    output_folder,
    pair_warning,
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
from captum_iba.app.errors import CLIError
from captum_iba.app.explanation import explain
from captum_iba.app.models import load_classifier, model_config
from captum_iba.attr import (
    LayerRef,
    resolve_layer,
)
from captum_iba.attr.text import layer_ref_of
from captum_iba.evaluation import (
    Resources,
    build_scorers,
    get_preset,
)
from captum_iba.metrics import compare
from captum_iba.registry import METHODS, PRIORS

__all__ = ["COMMANDS", "cmd_attribute", "cmd_evaluate", "cmd_explain", "cmd_reproduce"]

#: The corpus of the default model (MiniLM-L6 fine-tuned on first use).
DEFAULT_CORPUS = "sst2"
#: Name of the marker written last into a results folder.
MARKER = "COMPLETE.json"


def _config_and_record(path: Optional[str], dataset: str) -> Tuple[Any, Optional[dict]]:
    """The model's configuration and fine-tuning record, before any weights load.

    For the default model (``path`` None) these are the base model's
    configuration with the corpus' classes, and a record naming the corpus.
    """
    from captum_iba.app.finetune import default_base_model, read_result
    from captum_iba.app.finetune.store import check_folder

    if path is None:
        config = model_config(default_base_model())
        names = load_label_names(dataset)
        config.num_labels = len(names)
        config.id2label = dict(enumerate(names))
        config.label2id = {n: i for i, n in enumerate(names)}
        return config, {"dataset": dataset}
    config = model_config(path)
    folder = Path(path).expanduser()
    if not folder.is_dir():
        return config, None
    try:
        record = read_result(folder)
    except (FileNotFoundError, ValueError):
        return config, None  # not made by fine_tune, or its record is unreadable
    problem = check_folder(folder, record) if "files" in record else None
    if problem:
        raise CLIError(
            f"model folder {folder} is damaged: {problem}; delete it (a cached "
            "model is fine-tuned again when next needed)"
        )
    return config, record


def load_label_names(dataset: str) -> List[str]:
    """The class names of a corpus (without reading it, where they are known)."""
    from captum_iba.app.data.corpora import LABEL_NAMES

    return list(LABEL_NAMES.get(dataset, ["0", "1"]))


def _model_and_tokenizer(path: Optional[str], dataset: str = DEFAULT_CORPUS) -> Any:
    if path is None:
        from captum_iba.app.finetune import get_finetuned_model

        path = str(get_finetuned_model(dataset))
    return load_classifier(path)


def _layer(model: Any, index: Optional[int]) -> LayerRef:
    try:
        return resolve_layer(model, index)
    except ValueError as err:
        raise CLIError(f"--layer: {err}") from None


def _prior_data(
    priors: Any, dataset: Optional[str], data_dir: Optional[str]
) -> Optional[Any]:
    """The training data the priors that need data are fitted on (1,000
    instances of ``dataset``'s training split), or None when none needs it."""
    if not any(PRIORS.load(p).needs_data for p in priors or ()):
        return None
    if dataset is None:
        raise CLIError(
            "--prior: a prior fitted on data needs the model's training corpus, "
            "which is not known for this model (use the default model or one "
            "fine-tuned by captum-iba)"
        )
    return load_dataset(dataset, "train", data_dir=data_dir, max_examples=1000)


def _iba_options(
    args: argparse.Namespace, methods: Sequence[str], prior: Any = None
) -> Dict[str, Dict[str, Any]]:
    """IBA's options given on the command line (``--beta``, ``--steps``,
    ``--n-samples``, a resolved ``--prior``), for every chosen method that
    takes them (those that take a noise prior: the IBA configurations); they
    replace the configuration's. Given with no such method, they are refused.
    """
    knobs = {
        k: getattr(args, k)
        for k in ("beta", "steps", "n_samples")
        if getattr(args, k, None) is not None
    }
    if prior is not None:
        knobs["prior"] = prior
    if not knobs:
        return {}
    takers = [m for m in methods if "prior" in _needs(m)]
    if not takers:
        given = ", ".join("--" + k.replace("_", "-") for k in knobs)
        raise CLIError(
            f"{given}: IBA's options, but no IBA method is chosen "
            f"({', '.join(methods)})"
        )
    return {m: dict(knobs) for m in takers}


def _needs(method: str) -> Tuple[str, ...]:
    """The resources a method's scorer declares (none when it cannot load)."""
    try:
        return tuple(METHODS.load(method).needs)
    except ImportError:
        return ()


def cmd_explain(args: argparse.Namespace) -> int:
    """``captum-iba explain``: the words a prediction relied on, by one method
    or several (``--compare``), printed and as an HTML page."""
    if not args.text.strip():
        raise CLIError("the text to explain is empty")
    if args.pair is not None and not args.pair.strip():
        raise CLIError("--pair is empty: give the second text, or leave --pair out")
    html = output_file(args.html, "--html")
    config, record = _config_and_record(args.model, DEFAULT_CORPUS)
    check_against_config(config, layer=args.layer)
    if args.target is not None:
        class_index(args.target, class_names(config))
    _iba_options(args, args.methods)  # refused before any model loads
    warning = pair_warning(config, record) if args.pair is not None else None
    if warning:
        print(f"warning: {warning}")
    model, tok = _model_and_tokenizer(args.model)
    prior = None
    if args.prior is not None:
        corpus = (record or {}).get("dataset")
        data = _prior_data([args.prior], corpus, None)
        resources = Resources(model, tok, args.layer, args.prior, prior_data=data)
        prior = resources.values("prior")[0]
    name = args.model or "MiniLM-L6 fine-tuned on SST-2 (the default model, cached)"
    corpus = (record or {}).get("dataset")

    def explainer(module: Any) -> Any:  # only when iba-amortized is built
        ref = layer_ref_of(model, module)
        return cached_explainer(model, tok, ref, corpus or DEFAULT_CORPUS, False)

    result = explain(
        args.text,
        model,
        args.methods,
        tokenizer=tok,
        pair=args.pair,
        target=args.target,
        layer=args.layer,
        seed=args.seed,
        method_options=_iba_options(args, args.methods, prior),
        model_name=name,
        explainer=explainer,
    )
    print(result.to_text(args.top, args.pieces))
    if html is not None:
        atomic_write_text(html, result.to_html(args.pieces))
        print(f"wrote {html}")
    return 0


def _evaluate_scorers(args: argparse.Namespace, model: Any, tok: Any) -> Dict:
    """The scorers of ``evaluate`` / ``attribute``: every name resolved once,
    by the harness's one resolver."""
    options = {
        "IG": {"n_steps": args.ig_steps},
        "LIME": {"n_samples": args.lime_samples},
        "LIME-text": {
            "n_samples": args.lime_samples,
            "max_length": args.lime_max_length,
        },
    }
    options = {
        m: {k: v for k, v in o.items() if v is not None} for m, o in options.items()
    }
    layer = _layer(model, args.layer)

    def explainer(module: Any) -> Any:  # fitted only when iba-amortized is built
        return cached_explainer(
            model, tok, layer_ref_of(model, module), args.dataset, True,
            args.data_dir, args.max_length,
        )  # fmt: skip

    options.update(_iba_options(args, args.methods))
    resources = Resources(
        model,
        tok,
        layer=layer,
        explainer=explainer,
        prior=args.priors,
        prior_data=_prior_data(args.priors, args.dataset, args.data_dir),
        seed=args.seed,
        precision="bf16" if args.bf16 else None,
        max_length=args.max_length,
    )
    return build_scorers(args.methods, resources, get_preset(args.setting), options)


#: What the corpus engine leaves in ``--out`` (the merge, its settings, the
#: per-rank shards a re-run resumes from).
ENGINE_FILES = ["attributions.jsonl", "settings.json", "shards"]

#: Options that do not change any number of a corpus run (left out of the
#: settings a re-run is compared with).
_RUN_ONLY = ("out", "data_dir", "device", "command")


def _run_settings(args: argparse.Namespace, split: str) -> Dict[str, Any]:
    """What defines a corpus run: its resolved options (compared on a re-run)."""
    settings = {k: v for k, v in sorted(vars(args).items()) if k not in _RUN_ONLY}
    return dict(settings, command=args.command, split=split)


def _corpus_job(args: argparse.Namespace, world: World, split: str) -> CorpusJob:
    """The model on this rank's device, the scorers and the corpus of a run."""
    if args.model is None and not world.is_main:
        world.barrier()  # rank 0 fine-tunes (or finds) the default model first
    model, tok = _model_and_tokenizer(args.model, args.dataset)
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
        scorers=_evaluate_scorers(args, model, tok),
        settings=settings,
        preset=get_preset(args.setting),
        max_length=args.max_length,
        batch_size=args.batch_size,
        target=target,
        degradation=args.command == "evaluate" or args.degradation,
    )


def _write_degradation(
    out: Path, stem: str, results: Dict, curves: bool
) -> Tuple[Any, List[str]]:
    """Each method's result as JSON, the comparison table (and the curves),
    each written atomically; returns the table and the names written."""
    written = []
    for name, result in results.items():
        path = out / f"{stem}_{_slug(name)}.json"
        result.to_json(path)
        written.append(path.name)
    table = compare(results)
    atomic_write_text(out / f"{stem}.md", table.to_markdown() + "\n")
    written.append(f"{stem}.md")
    if curves:
        from captum_iba.visualization import plot_degradation_curves

        plot_degradation_curves(results, save_path=out / f"{stem}_curves.png")
        written.append(f"{stem}_curves.png")
    return table, written


def _run_corpus_command(args: argparse.Namespace, split: str) -> Optional[Merged]:
    """Run ``args``' corpus job on this process's share; rank 0 gets the merge.

    The output folder and the model-dependent numbers are checked before any
    model loads; the folder's completion marker is removed until the run ends.
    """
    out = output_folder(args.out, "--out")
    config, _ = _config_and_record(args.model, args.dataset)
    check_against_config(config, layer=args.layer, max_length=args.max_length)
    _iba_options(args, args.methods)  # refused before any model loads
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)  # CPU rounding depends on it
    world = init_world(args.device)
    try:
        prepare_out(args.out, _run_settings(args, split), world)
        if world.is_main:
            (out / MARKER).unlink(missing_ok=True)  # this run is not complete yet
            print(
                f"captum-iba {args.command}: {args.dataset} {split}, methods "
                f"{', '.join(args.methods)}; results go to {out}/ (a re-run with "
                "the same options resumes)",
                flush=True,
            )
        return run_corpus_job(_corpus_job(args, world, split), args.out, world)
    finally:
        world.close()
        torch.set_num_threads(threads)


def cmd_evaluate(args: argparse.Namespace) -> int:
    """``captum-iba evaluate``: the degradation test of several methods, on
    the corpus engine (resumable; one process or ``torchrun``)."""
    merged = _run_corpus_command(args, HELDOUT_SPLIT[args.dataset])
    if merged is None:
        return 0
    out = Path(args.out)
    stem = f"{args.dataset}_{args.setting}"
    table, written = _write_degradation(out, stem, merged.results, curves=True)
    n = len({row["index"] for row in merged.rows})  # methods may be several IBAs
    files = ENGINE_FILES + written
    write_marker(out, MARKER, files=files, command="evaluate", n=n)
    accuracy = next(iter(merged.results.values())).original_accuracy
    print(f"\n{args.dataset} (n={n}), setting {args.setting}")
    print(table.to_markdown())
    print(_wrap(f"Columns: {table.legend()}"))
    print(
        f"done: {merged.run_line(n, len(merged.results))}; model accuracy on them "
        f"{100 * accuracy:.1f} %; results in {out}/"
    )
    return 0


def _wrap(text: str) -> str:
    return "\n".join(textwrap.wrap(text, 88))


def cmd_attribute(args: argparse.Namespace) -> int:
    """``captum-iba attribute``: token scores of a whole corpus as JSON lines
    (and the degradation test's summary with ``--degradation``)."""
    split = HELDOUT_SPLIT[args.dataset] if args.split is None else args.split
    merged = _run_corpus_command(args, canonical_split(args.dataset, split))
    if merged is None:
        return 0
    out = Path(args.out)
    written = list(ENGINE_FILES)
    if merged.results:
        table, files = _write_degradation(
            out, "degradation", merged.results, curves=False
        )
        written += files
        print(table.to_markdown())
        print(_wrap(f"Columns: {table.legend()}"))
    write_marker(out, MARKER, files=written, command="attribute", n=len(merged.rows))
    n = len({row["index"] for row in merged.rows})
    print(
        f"done: {merged.run_line(n, len(merged.rows) // max(n, 1))}; "
        f"{len(merged.rows)} rows in {out / 'attributions.jsonl'} (fields and "
        f"units: {out / 'settings.json'})"
    )
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    """``captum-iba reproduce``: the paper's experiments, package code."""
    reproduce.run(
        profile=args.profile,
        out=str(output_folder(args.out, "--out")),
        datasets=args.datasets,
        parts=args.parts,
        settings=args.settings,
        sweep_dataset=args.sweep_dataset,
        fair_prior=args.fair_prior,
    )
    return 0


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name).strip("_").lower()


#: The commands by name.
COMMANDS: Dict[str, Callable[[argparse.Namespace], int]] = {
    "explain": cmd_explain,
    "evaluate": cmd_evaluate,
    "attribute": cmd_attribute,
    "reproduce": cmd_reproduce,
}
