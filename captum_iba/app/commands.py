"""What the ``captum-iba`` commands do, once their arguments are checked.

Each command turns the names it was given into objects here, once (the model
path into a model, the layer index into the layer, prior names into priors,
method names into scorers, the setting into its preset) and hands the objects
to the library.
"""

import argparse
import os
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

import torch

from captum_iba.app import reproduce
from captum_iba.app.data import HELDOUT_SPLIT, load_dataset
from captum_iba.app.data.corpora import canonical_split
from captum_iba.app.engine import (
    CorpusJob,
    Merged,
    World,
    atomic_write_text,
    init_world,
    prepare_out,
    run_corpus_job,
)
from captum_iba.app.engine.records import weights_digest
from captum_iba.app.errors import CLIError
from captum_iba.app.models import load_classifier
from captum_iba.attr import (
    InformationBottleneckAttribution,
    resolve_layer,
    resolve_prior,
    token_attributions,
)
from captum_iba.evaluation import (
    IBAScorer,
    corpus_scorers,
    encode,
    get_preset,
    resolve_priors,
    scorer_class,
)
from captum_iba.metrics import compare

__all__ = ["COMMANDS", "cmd_attribute", "cmd_evaluate", "cmd_explain", "cmd_reproduce"]


def _looks_like_hub_name(path: str) -> bool:
    parts = path.split("/")
    return (
        len(parts) <= 2
        and all(parts)
        and not path.startswith((".", "~"))
        and "\\" not in path
    )


def _model_and_tokenizer(path: Optional[str], dataset: str = "sst2") -> Any:
    if path is None:
        from captum_iba.app.finetune import get_finetuned_model

        path = str(get_finetuned_model(dataset))
    elif not Path(path).exists() and not _looks_like_hub_name(path):
        raise CLIError(f"model path not found: {path}")
    try:
        return load_classifier(path)
    except OSError as err:
        raise CLIError(
            f"cannot load model {path!r}: {str(err).splitlines()[0]}"
        ) from None


def _layer(model: Any, index: Optional[int]) -> Tuple[int, torch.nn.Module]:
    try:
        return resolve_layer(model, index)
    except ValueError as err:
        raise CLIError(f"--layer: {err}") from None


def _print_scores(tokens: Any, scores: torch.Tensor) -> None:
    # Bars are min-max scaled over the sentence, as the paper's heatmaps are.
    low, high = float(scores.min()), float(scores.max())
    span = (high - low) or 1.0
    print(f"  {'token':>15s} {'nats':>9s}  relative (min-max)")
    for token, score in zip(tokens, scores.tolist()):
        bar = "#" * int(round(20 * (score - low) / span))
        print(f"  {token:>15s} {score:9.1f}  {bar}")


def cmd_explain(args: argparse.Namespace) -> int:
    """``captum-iba explain``: IBA scores of one text, printed (and as HTML)."""
    if not args.text.strip() or (args.pair is not None and not args.pair.strip()):
        raise CLIError("the text to explain is empty")
    prior = resolve_prior(args.prior)
    model, tok = _model_and_tokenizer(args.model)
    index, layer = _layer(model, args.layer)
    enc = encode(tok, [args.text], None if args.pair is None else [args.pair], 512)
    extra = (enc["attention_mask"],)
    if "token_type_ids" in enc:
        extra += (enc["token_type_ids"],)
    with torch.no_grad():
        probs = model(enc["input_ids"], *extra).logits.softmax(-1)[0]
    pred = int(probs.argmax())
    target = pred if args.target is None else args.target
    if not 0 <= target < probs.numel():
        raise CLIError(f"--target {target} is out of range (0..{probs.numel() - 1})")
    attr = InformationBottleneckAttribution(model, layer).attribute(
        enc["input_ids"],
        target=target,
        additional_forward_args=extra,
        beta=args.beta,
        prior=prior,
        seed=args.seed,
    )
    scores = token_attributions(attr)[0]
    tokens = tok.convert_ids_to_tokens(enc["input_ids"][0].tolist())
    names = getattr(model.config, "id2label", {}) or {}
    label = lambda i: names.get(i, str(i))  # noqa: E731
    print(
        f"prediction: {label(pred)} (p={probs[pred]:.3f}); explaining "
        f"{label(target)}; IBA after layer index {index}, capacity in nats"
    )
    _print_scores(tokens, scores)
    if args.html:
        from captum_iba.visualization import save_html

        save_html(
            args.html,
            tokens,
            scores,
            pred=label(pred),
            pred_prob=float(probs[pred]),
            label=label(target),
        )
        print(f"wrote {args.html}")
    return 0


def _evaluate_scorers(args: argparse.Namespace, model: Any, tok: Any) -> Dict:
    """The scorers of ``evaluate`` / ``attribute``: every name resolved here, once."""
    layer = _layer(model, args.layer)
    priors = []
    if any(scorer_class(m) is IBAScorer for m in args.methods):
        prior_data = None
        if "dataset" in args.priors:
            prior_data = load_dataset(
                args.dataset, "train", data_dir=args.data_dir, max_examples=1000
            )
        priors = resolve_priors(
            args.priors, model, tok, layer[1], prior_data, args.max_length
        )
    iba = {k: getattr(args, k) for k in ("beta", "steps", "n_samples") if k in args}
    if args.bf16:
        iba["precision"] = "bf16"
    return corpus_scorers(
        model,
        tok,
        args.methods,
        layer,
        priors,
        setting=get_preset(args.setting),
        seed=args.seed,
        iba_options=iba,
        scorer_options=dict(
            ig_steps=args.ig_steps,
            lime_samples=args.lime_samples,
            lime_max_length=args.lime_max_length,
        ),
    )


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
    return CorpusJob(
        model=model,
        tokenizer=tok,
        data=data,
        scorers=_evaluate_scorers(args, model, tok),
        settings=settings,
        preset=get_preset(args.setting),
        max_length=args.max_length,
        batch_size=args.batch_size,
        target=getattr(args, "target", "label"),
        degradation=args.command == "evaluate" or args.degradation,
    )


def _write_degradation(out: Path, stem: str, results: Dict, curves: bool) -> Any:
    """Each method's result as JSON, the comparison table (and the curves)."""
    for name, result in results.items():
        atomic_write_text(out / f"{stem}_{_slug(name)}.json", result.to_json())
    table = compare(results)
    atomic_write_text(out / f"{stem}.md", table.to_markdown() + "\n")
    if curves:
        from captum_iba.visualization import plot_degradation_curves

        tmp = out / f".tmp-{os.getpid()}-{stem}_curves.png"
        plot_degradation_curves(results, save_path=tmp)
        os.replace(tmp, out / f"{stem}_curves.png")
    return table


def _run_corpus_command(args: argparse.Namespace, split: str) -> Optional[Merged]:
    """Run ``args``' corpus job on this process's share; rank 0 gets the merge."""
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)  # CPU rounding depends on it
    world = init_world(args.device)
    try:
        prepare_out(args.out, _run_settings(args, split), world)
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
    table = _write_degradation(out, stem, merged.results, curves=True)
    print(f"{args.dataset} (n={len(merged.rows) // len(args.methods)}), "
          f"setting={args.setting}")  # fmt: skip
    print(table.to_markdown())
    print(f"results in {out}/")
    return 0


def cmd_attribute(args: argparse.Namespace) -> int:
    """``captum-iba attribute``: token scores of a whole corpus as JSON lines
    (and the degradation test's summary with ``--degradation``)."""
    split = HELDOUT_SPLIT[args.dataset] if args.split is None else args.split
    merged = _run_corpus_command(args, canonical_split(args.dataset, split))
    if merged is None:
        return 0
    out = Path(args.out)
    if merged.results:
        table = _write_degradation(out, "degradation", merged.results, curves=False)
        print(table.to_markdown())
    print(f"{len(merged.rows)} attributions in {out / 'attributions.jsonl'}")
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    """``captum-iba reproduce``: the paper's experiments, package code."""
    reproduce.run(
        profile=args.profile,
        out=args.out,
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
