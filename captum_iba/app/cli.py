"""The ``captum-iba`` command line (also ``python -m captum_iba``).

Commands::

    captum-iba explain "text" [--pair "text"] [--model PATH] [--layer N]
                       [--html out.html]
    captum-iba evaluate --dataset sst2 --methods iba,ig,lime,random [--n 300]
    captum-iba reproduce [--profile cpu|paper] [--parts table,sweeps,examples]

Bad arguments get a one-line error and exit code 2, never a traceback.
"""

import argparse
import sys
from pathlib import Path
from typing import Any, Iterable, List, Optional, Sequence

from captum_iba.data import HELDOUT_SPLIT

#: CLI method names -> names used by :mod:`captum_iba.evaluate`.
METHOD_NAMES = {
    "iba": "IBA",
    "ig": "IG",
    "lime": "LIME",
    "lime-text": "LIME-text",
    "random": "random",
}
#: Corpora ``evaluate`` accepts (each on its held-out split, see the loaders).
DATASETS = tuple(HELDOUT_SPLIT)
#: Corpora of the paper's Table 1 that ``reproduce`` measures, and its parts.
REPRODUCE_CORPORA = ("sst2", "imdb", "ag_news", "rte")
REPRODUCE_PARTS = ("table", "sweeps", "examples")
REPRODUCE_SETTINGS = ("paper", "fair")


class CLIError(Exception):
    """A user error: printed as one line, exit code 2."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="captum-iba",
        description="Information Bottleneck Attribution for transformers (Captum).",
    )
    sub = parser.add_subparsers(dest="command", required=True)

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
    ex.add_argument("--beta", type=float, default=1e-5)
    ex.add_argument("--prior", default="paper", choices=["paper", "reference"])
    ex.add_argument("--html", help="write an HTML heatmap to this file")
    ex.add_argument("--seed", type=int, default=0)

    ev = sub.add_parser("evaluate", help="degradation test of several methods")
    ev.add_argument("--dataset", default="sst2", help=f"one of {', '.join(DATASETS)}")
    ev.add_argument(
        "--methods",
        default="iba,ig,lime,random",
        help=f"comma-separated, among {', '.join(METHOD_NAMES)}",
    )
    ev.add_argument("--n", type=int, default=300, help="number of instances")
    ev.add_argument("--setting", default="fair", choices=["fair", "paper"])
    ev.add_argument("--priors", default="paper", help="IBA priors, comma-separated")
    ev.add_argument("--model", help="fine-tuned classifier (default: cached MiniLM)")
    ev.add_argument("--layer", type=int, help="encoder layer index (0-based)")
    ev.add_argument("--max-length", type=int, default=128)
    ev.add_argument("--batch-size", type=int, default=16)
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--ig-steps", type=int, help="IG steps (paper 10, fair 50)")
    ev.add_argument(
        "--lime-samples", type=int, help="LIME samples (paper 100, fair 500)"
    )
    ev.add_argument(
        "--lime-max-length",
        type=int,
        default=512,
        help="paper-setting LIME pads perturbed texts to this length (paper: 512)",
    )
    ev.add_argument("--out", default="results/evaluate", help="output folder")
    ev.add_argument("--data-dir", help="corpus folder (default $CAPTUM_IBA_DATA)")

    rp = sub.add_parser("reproduce", help="re-run the paper's experiments")
    rp.add_argument("--profile", default="cpu", choices=["cpu", "paper"])
    rp.add_argument("--out", default="results/reproduce")
    rp.add_argument(
        "--datasets",
        help=f"comma-separated subset of {', '.join(REPRODUCE_CORPORA)}",
    )
    rp.add_argument(
        "--parts",
        default=",".join(REPRODUCE_PARTS),
        help=f"comma-separated subset of {', '.join(REPRODUCE_PARTS)}",
    )
    rp.add_argument(
        "--settings",
        default=",".join(REPRODUCE_SETTINGS),
        help="Table 1 settings to run (rows of others already in --out are kept)",
    )
    return parser


def _split(value: str) -> List[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def split_choices(value: str, allowed: Iterable[str], what: str) -> List[str]:
    """Splits a comma-separated option and checks every item.

    Args:
        value (str): The option's value, e.g. ``"iba,ig"``.
        allowed (Iterable[str]): The accepted items.
        what (str): The item's name for the error, e.g. ``"method"``.

    Returns:
        List[str]: The items, in the given order.

    Raises:
        CLIError: If ``value`` names no item or an unknown one.
    """
    allowed = list(allowed)
    chosen = _split(value)
    bad = [v for v in chosen if v not in allowed]
    if bad or not chosen:
        raise CLIError(f"unknown {what}(s) {bad or [value]}; choose from {allowed}")
    return chosen


def _model_and_tokenizer(path: Optional[str], dataset: str = "sst2") -> Any:
    from captum_iba.evaluate import load_classifier

    if path is None:
        from captum_iba.finetune import get_finetuned_model

        path = str(get_finetuned_model(dataset))
    elif not Path(path).exists() and not _looks_like_hub_name(path):
        raise CLIError(f"model path not found: {path}")
    try:
        return load_classifier(path)
    except OSError as err:
        raise CLIError(
            f"cannot load model {path!r}: {str(err).splitlines()[0]}"
        ) from None


def _looks_like_hub_name(path: str) -> bool:
    parts = path.split("/")
    return (
        len(parts) <= 2
        and all(parts)
        and not path.startswith((".", "~"))
        and "\\" not in path
    )


def _layer_index(model: Any, layer: Optional[int]) -> int:
    from captum_iba.evaluate import default_layer_index
    from captum_iba.text import encoder_layers

    n = len(encoder_layers(model))
    index = default_layer_index(model) if layer is None else layer
    if not 0 <= index < n:
        raise CLIError(f"--layer {index} is out of range: the model has {n} layers")
    return index


def cmd_explain(args: argparse.Namespace) -> int:
    import torch

    from captum_iba import InformationBottleneckAttribution, token_attributions
    from captum_iba.evaluate import encode
    from captum_iba.text import encoder_layers

    if not args.text.strip() or (args.pair is not None and not args.pair.strip()):
        raise CLIError("the text to explain is empty")
    model, tok = _model_and_tokenizer(args.model)
    index = _layer_index(model, args.layer)
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
    iba = InformationBottleneckAttribution(model, encoder_layers(model)[index])
    attr = iba.attribute(
        enc["input_ids"],
        target=target,
        additional_forward_args=extra,
        beta=args.beta,
        prior=args.prior,
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
    # Bars are min-max scaled over the sentence, as the paper's heatmaps are.
    low, high = float(scores.min()), float(scores.max())
    span = (high - low) or 1.0
    print(f"  {'token':>15s} {'nats':>9s}  relative (min-max)")
    for token, score in zip(tokens, scores.tolist()):
        bar = "#" * int(round(20 * (score - low) / span))
        print(f"  {token:>15s} {score:9.1f}  {bar}")
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


def cmd_evaluate(args: argparse.Namespace) -> int:
    from captum_iba.data import load_dataset
    from captum_iba.evaluate import PRIOR_NAMES, evaluate_corpus
    from captum_iba.metrics import compare

    dataset = args.dataset.lower()
    if dataset not in DATASETS:
        raise CLIError(f"unknown dataset {args.dataset!r}; choose from {DATASETS}")
    methods = split_choices(args.methods.lower(), METHOD_NAMES, "method")
    priors = split_choices(args.priors, PRIOR_NAMES, "prior")
    if args.n < 1:
        raise CLIError("--n must be at least 1")
    model, tok = _model_and_tokenizer(args.model, dataset)
    index = _layer_index(model, args.layer)
    data = load_dataset(
        dataset, HELDOUT_SPLIT[dataset], data_dir=args.data_dir, max_examples=args.n
    )
    prior_data = None
    if "dataset" in priors:
        prior_data = load_dataset(
            dataset, "train", data_dir=args.data_dir, max_examples=1000
        )
    results = evaluate_corpus(
        model,
        tok,
        data,
        methods=[METHOD_NAMES[m] for m in methods],
        setting=args.setting,
        priors=priors,
        layer_index=index,
        prior_data=prior_data,
        max_length=args.max_length,
        batch_size=args.batch_size,
        seed=args.seed,
        scorer_options=dict(
            ig_steps=args.ig_steps,
            lime_samples=args.lime_samples,
            lime_max_length=args.lime_max_length,
        ),
    )
    table = compare(results)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, result in results.items():
        result.to_json(out / f"{dataset}_{args.setting}_{_slug(name)}.json")
    (out / f"{dataset}_{args.setting}.md").write_text(table.to_markdown() + "\n")
    try:
        from captum_iba.visualization import plot_degradation_curves

        plot_degradation_curves(
            results, save_path=out / f"{dataset}_{args.setting}_curves.png"
        )
    except ImportError:  # pragma: no cover - visualisation extras missing
        pass
    print(f"{dataset} ({data.split}, n={len(data)}), setting={args.setting}")
    print(table.to_markdown())
    print(f"results in {out}/")
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    import runpy

    parts = split_choices(args.parts, REPRODUCE_PARTS, "part")
    settings = split_choices(args.settings, REPRODUCE_SETTINGS, "setting")
    script = _experiments_dir() / "reproduce.py"
    argv = [str(script), "--profile", args.profile, "--out", args.out]
    argv += ["--parts", ",".join(parts), "--settings", ",".join(settings)]
    if args.datasets:
        corpora = split_choices(args.datasets, REPRODUCE_CORPORA, "dataset")
        argv += ["--datasets", ",".join(corpora)]
    old = sys.argv
    sys.argv = argv
    try:
        runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.argv = old
    return 0


def _experiments_dir() -> Path:
    for root in (Path.cwd(), Path(__file__).resolve().parent.parent):
        if (root / "experiments" / "reproduce.py").exists():
            return root / "experiments"
    raise CLIError(
        "experiments/reproduce.py not found: run 'captum-iba reproduce' from a "
        "source checkout of captum-iba"
    )


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name).strip("_").lower()


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``captum-iba`` command.

    Args:
        argv (Sequence[str], optional): Arguments (default ``sys.argv[1:]``).

    Returns:
        int: The exit code.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    commands = {
        "explain": cmd_explain,
        "evaluate": cmd_evaluate,
        "reproduce": cmd_reproduce,
    }
    try:
        return commands[args.command](args)
    except CLIError as err:
        parser.exit(2, f"captum-iba: error: {err}\n")
    except (ValueError, FileNotFoundError, KeyError) as err:
        message = str(err).strip("'\"").splitlines()[0] if str(err) else repr(err)
        parser.exit(2, f"captum-iba: error: {message}\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
