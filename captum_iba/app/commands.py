"""What the ``captum-iba`` commands do, once their arguments are checked.

Each command turns the names it was given into objects here, once (the model
path into a model, the layer index into the layer, prior names into priors,
method names into scorers, the setting into its preset) and hands the objects
to the library.
"""

import argparse
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

import torch

from captum_iba.app import reproduce
from captum_iba.app.data import HELDOUT_SPLIT, load_dataset
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
    run_corpus,
    scorer_class,
)
from captum_iba.metrics import compare

__all__ = ["COMMANDS", "cmd_evaluate", "cmd_explain", "cmd_reproduce"]


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
    """The scorers of ``evaluate``: every name resolved here, once."""
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
    return corpus_scorers(
        model,
        tok,
        args.methods,
        layer,
        priors,
        setting=get_preset(args.setting),
        seed=args.seed,
        scorer_options=dict(
            ig_steps=args.ig_steps,
            lime_samples=args.lime_samples,
            lime_max_length=args.lime_max_length,
        ),
    )


def cmd_evaluate(args: argparse.Namespace) -> int:
    """``captum-iba evaluate``: the degradation test of several methods."""
    model, tok = _model_and_tokenizer(args.model, args.dataset)
    scorers = _evaluate_scorers(args, model, tok)
    data = load_dataset(
        args.dataset,
        HELDOUT_SPLIT[args.dataset],
        data_dir=args.data_dir,
        max_examples=args.n,
    )
    results = run_corpus(
        model,
        tok,
        data,
        scorers,
        get_preset(args.setting),
        max_length=args.max_length,
        batch_size=args.batch_size,
    )
    table = compare(results)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{args.dataset}_{args.setting}"
    for name, result in results.items():
        result.to_json(out / f"{stem}_{_slug(name)}.json")
    (out / f"{stem}.md").write_text(table.to_markdown() + "\n")
    from captum_iba.visualization import plot_degradation_curves

    plot_degradation_curves(results, save_path=out / f"{stem}_curves.png")
    print(f"{args.dataset} ({data.split}, n={len(data)}), setting={args.setting}")
    print(table.to_markdown())
    print(f"results in {out}/")
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
    "reproduce": cmd_reproduce,
}
