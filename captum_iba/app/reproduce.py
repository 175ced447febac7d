"""Re-measure the paper's experiments (Table 1, Figures 1-3, Appendix C-E).

Writes into one results folder:

* ``table1.md`` / ``table1.json`` - absolute drop of the target-class
  probability with the top 11 % of tokens removed, for random, LIME, IG and
  IBA, per corpus, in the "paper" and the "fair" setting, beside the paper's
  own numbers (MNLI cannot be measured here: no copy of it is reachable);
* ``fig1_<corpus>_<setting>.png`` - normalised degradation curves;
* ``fig2_layers.png`` / ``fig2_beta.png`` - the degradation test with the
  bottleneck after each layer, and for beta in 1e-7 ... 1e-1;
* ``fig3_layers_tokens.png`` / ``fig3_beta.png`` - layers x tokens maps of
  one example, and the effect of beta on it (Appendix E);
* every result as JSON (``captum_iba.DegradationResult.from_json`` reads it);
* ``COMPLETE.json``, written last: its presence says the run finished.

Every file is written atomically (a temporary file, then a rename), so a run
that is killed leaves the earlier files whole; ``table1.json`` is rewritten
after each corpus and setting, so a long run can be read part-way.

**Resuming.** Each piece of the work - a corpus and setting of Table 1, a
layer or a beta of the sweeps - is recorded in ``resume.json`` when its
results are written, with what it was measured with (the profile's numbers,
the prior, the layer, the model's weights digest). The same command in the
same folder, after a crash, ``kill -9`` or Ctrl-C, skips every piece
recorded with the same settings and model and says so; a piece whose
settings or model differ is measured again. Delete ``resume.json`` (or give
another ``--out``) to measure everything again. The examples (Figure 3,
seconds) are always redone.

Profiles: ``cpu`` (small samples, IMDB and RTE truncated to 256 tokens;
measured on an idle 2-core CPU: 67 minutes for the table, 5 for the sweeps
and examples, once the four models are cached) and ``paper`` (1,000
instances, 512 tokens; for a GPU). Models: MiniLM-L6 fine-tuned per corpus by
:func:`captum_iba.app.finetune.get_finetuned_model` with the corpus' recipe and
:data:`~captum_iba.app.finetune.REPRODUCE_OVERRIDES` (cached; 8-15 minutes each
on a 2-core CPU on first use).

Usage::

    captum-iba reproduce --profile cpu --out results/reproduce
    python experiments/reproduce.py --profile cpu   # the same (a thin wrapper)
"""

import argparse
import json
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

import torch

from captum_iba._utils.digest import weights_digest
from captum_iba._utils.io import atomic_write_text, write_marker
from captum_iba.app.data import HELDOUT_SPLIT, load_dataset
from captum_iba.app.finetune import (
    FineTuneOptions,
    get_finetuned_model,
    reproduce_overrides,
)
from captum_iba.app.models import load_classifier
from captum_iba.app.outputs import Resume
from captum_iba.app.profiles import CORPORA, PARTS, PROFILES
from captum_iba.attr import (
    InformationBottleneckAttribution,
    encoder_layers,
    layer_token_map,
    paper_layer_index,
)
from captum_iba.evaluation import SETTINGS, encode, evaluate_corpus, get_preset
from captum_iba.metrics import DegradationResult, compare
from captum_iba.registry import PRIORS
from captum_iba.visualization import (
    LayerMapLayout,
    layer_token_heatmap,
    plot_beta_sweep,
    plot_degradation_curves,
    plot_layer_sweep,
)

__all__ = [
    "CORPORA",
    "PAPER_TABLE1",
    "PARTS",
    "PROFILES",
    "SETTINGS",
    "run",
    "run_examples",
    "run_sweeps",
    "run_table",
    "table1_markdown",
]

#: Table 1 of the paper (bert-base-uncased; absolute drop at 11 %).
PAPER_TABLE1 = {
    "imdb": {"random": 0.011, "LIME": 0.038, "IG": 0.090, "IBA": 0.229},
    "mnli_matched": {"random": 0.106, "LIME": 0.244, "IG": 0.226, "IBA": 0.374},
    "mnli_mismatched": {"random": 0.106, "LIME": 0.260, "IG": 0.233, "IBA": 0.367},
    "ag_news": {"random": 0.008, "LIME": 0.033, "IG": 0.036, "IBA": 0.029},
    "rte": {"random": 0.012, "LIME": 0.014, "IG": 0.043, "IBA": 0.059},
}
METHODS = ("random", "LIME", "IG", "IBA")
BETAS = [1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1]
EXAMPLE = (
    "I liked this movie a lot: the plot intrigued me from the first scene, "
    "although the ending felt rushed."
)


def corpus_model(corpus: str) -> Tuple[Any, Any]:
    """The fine-tuned classifier of ``corpus`` and its tokenizer (cached)."""
    options = FineTuneOptions.recipe(corpus, **reproduce_overrides(corpus))
    return load_classifier(get_finetuned_model(corpus, options=options))


def read_rows(path: Path) -> List[Dict[str, Any]]:
    """The rows of an earlier ``table1.json`` (none when there is no file).

    Raises:
        ValueError: Naming the file, when it is not a list of rows (a damaged
            or foreign file): move it away or delete it.
    """
    if not path.exists():
        return []
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(rows, list) or not all(
            isinstance(r, dict) and {"corpus", "setting", "method"} <= set(r)
            for r in rows
        ):
            raise ValueError("not a list of Table 1 rows")
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ValueError(
            f"{path} is damaged ({err}); move it away or delete it to start a new table"
        ) from None
    return rows


def iba_options(corpus: str) -> Dict[str, Any]:
    """Appendix A: beta 1e-5, except RTE (1e-4)."""
    return {"beta": 1e-4 if corpus == "rte" else 1e-5}


def prior_data(prior: str, corpus: str) -> Any:
    """1,000 training instances of ``corpus`` when ``prior`` is fitted on data
    (the dataset prior), else None."""
    if not PRIORS.load(prior).needs_data:
        return None
    return load_dataset(corpus, "train", max_examples=1000)


def paper_layer(model: Any, corpus: str) -> int:
    """Layer 9 of 12 (RTE: 10 of 12), scaled to the model's depth."""
    if corpus == "rte":
        return max(0, int(10 / 12 * len(encoder_layers(model))) - 1)
    return paper_layer_index(model)


def run_table(args: argparse.Namespace, profile: Dict[str, Any], out: Path) -> None:
    settings = args.settings
    # Rows of an earlier run in the same folder are kept, except those re-run.
    rerun = {(c, s) for c in args.datasets for s in settings}
    earlier_rows = read_rows(out / "table1.json")
    rows: List[Dict[str, Any]] = [
        r for r in earlier_rows if (r["corpus"], r["setting"]) not in rerun
    ]
    resume = Resume(out)
    earlier = {(r["corpus"], r["setting"]) for r in earlier_rows}
    for corpus in args.datasets:
        model, tok = corpus_model(corpus)
        n, length = profile["n"][corpus], profile["max_length"][corpus]
        data = load_dataset(corpus, HELDOUT_SPLIT[corpus], max_examples=n, seed=3)
        layer = paper_layer(model, corpus)
        for setting in settings:
            preset = get_preset(setting)  # its methods and prior: its data
            methods = preset.table1
            fixed = preset.scorer_arguments("IBA").get("prior")
            prior = args.fair_prior if preset.own_prior else fixed
            piece = dict(
                n=n, max_length=length, layer=layer, prior=prior, methods=methods,
                lime_max_length=profile["lime_max_length"][corpus],
                batch_size=profile["batch_size"], weights=weights_digest(model),
            )  # fmt: skip
            key = f"table/{corpus}/{setting}"
            if (corpus, setting) in earlier and resume.skips(key, piece):
                rows += [
                    r
                    for r in earlier_rows
                    if (r["corpus"], r["setting"]) == (corpus, setting)
                ]
                continue
            start = time.time()
            results = evaluate_corpus(
                model,
                tok,
                data,
                methods=methods + ("IBA",),
                setting=setting,
                method_options=_method_options(corpus, profile, methods),
                max_length=length,
                batch_size=profile["batch_size"],
                prior=prior,
                prior_data=prior_data(prior, corpus),
                layer=layer,
            )
            minutes = (time.time() - start) / 60
            for name, result in results.items():
                result.to_json(out / "json" / f"{corpus}_{setting}_{name}.json")
            plot_degradation_curves(
                results,
                normalized=True,
                title=f"{corpus} ({setting} setting, n={len(data)})",
                save_path=out / f"fig1_{corpus}_{setting}.png",
            )
            table = compare(results)
            rows += _table_rows(table, results, piece, corpus, setting, minutes)
            print(f"\n{corpus} / {setting} ({minutes:.1f} min)\n{table.to_markdown()}")
            # Written after every corpus and setting, so a long run can be read
            # (and an interrupted one kept) part-way.
            rows.sort(key=_row_order)
            atomic_write_text(out / "table1.json", json.dumps(rows, indent=2))
            atomic_write_text(out / "table1.md", table1_markdown(rows))
            resume.record(key, piece)
    rows.sort(key=_row_order)
    print("\n" + table1_markdown(rows))


def _table_rows(
    table: Any,
    results: Dict[str, Any],
    piece: Dict[str, Any],
    corpus: str,
    setting: str,
    minutes: float,
) -> List[Dict[str, Any]]:
    """Table 1's rows of one corpus and setting, one per method of ``table``
    (``piece``: what the run measured with)."""
    rows = []
    for row in table.rows:
        method = "LIME" if row["method"].startswith("LIME") else row["method"]
        attribution = results[row["method"]].settings["attribution"]
        rows.append(
            dict(
                corpus=corpus,
                setting=setting,
                method=method,
                n=row["num_instances"],
                drop_11=row["first_level_drop"],
                aopc=row["aopc"],
                seconds_per_instance=attribution.get("seconds_per_instance"),
                paper=PAPER_TABLE1.get(corpus, {}).get(method),
                minutes=minutes,
                max_length=piece["max_length"],
                lime_max_length=piece["lime_max_length"],
                layer_index=piece["layer"],
            )
        )
    return rows


def _method_options(
    corpus: str, profile: Dict[str, Any], methods: Sequence[str]
) -> Dict[str, Dict[str, Any]]:
    """Table 1's options per method: IBA's, and LIME-text's padding length
    when the paper's LIME runs."""
    options: Dict[str, Dict[str, Any]] = {"IBA": iba_options(corpus)}
    if "LIME-text" in methods:
        options["LIME-text"] = {"max_length": profile["lime_max_length"][corpus]}
    return options


def _row_order(row: Dict[str, Any]) -> Tuple[int, int, int]:
    return (
        CORPORA.index(row["corpus"]),
        SETTINGS.index(row["setting"]),
        METHODS.index(row["method"]),
    )


def table1_markdown(rows: List[Dict[str, Any]]) -> str:
    lines = [
        "| corpus | setting | method | n | drop @ 11 % (ours) | AOPC (ours) "
        "| drop @ 11 % (paper, BERT-base) | s / instance |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        paper = "-" if r["paper"] is None else f"{r['paper']:.3f}"
        secs = r.get("seconds_per_instance")
        secs = "-" if secs is None else f"{secs:.2f}"
        lines.append(
            f"| {r['corpus']} | {r['setting']} | {r['method']} | {r['n']} "
            f"| {r['drop_11']:.3f} | {r['aopc']:.3f} | {paper} | {secs} |"
        )
    lines.append(
        "| mnli (m/mm) | - | - | - | not measured: MNLI is not reachable offline "
        "| - | see paper | - |"
    )
    return "\n".join(lines) + "\n"


def run_sweeps(args: argparse.Namespace, profile: Dict[str, Any], out: Path) -> None:
    corpus = args.sweep_dataset
    model, tok = corpus_model(corpus)
    data = load_dataset(
        corpus, HELDOUT_SPLIT[corpus], max_examples=profile["sweep_n"], seed=3
    )
    common = dict(
        setting="fair",
        prior=args.fair_prior,
        prior_data=prior_data(args.fair_prior, corpus),
        max_length=profile["max_length"][corpus],
        batch_size=profile["batch_size"],
    )
    resume = Resume(out)
    piece = dict(
        corpus=corpus, n=profile["sweep_n"], max_length=common["max_length"],
        prior=args.fair_prior, batch_size=profile["batch_size"],
        weights=weights_digest(model),
    )  # fmt: skip

    def sweep_point(name: str, **options: Any) -> DegradationResult:
        path = out / "json" / f"sweep_{name}.json"
        key, settings = f"sweeps/{name}", dict(piece, **options)
        if path.exists() and resume.skips(key, settings):
            return DegradationResult.from_json(path)
        if "layer" in options:
            chosen: Dict[str, Any] = dict(layer=options["layer"])
        else:
            chosen = dict(method_options={"IBA": {"beta": options["beta"]}})
        res = evaluate_corpus(model, tok, data, methods=("IBA",), **chosen, **common)
        res = res["IBA"]
        res.to_json(path)
        resume.record(key, settings)
        return res

    by_layer = {}
    for index in range(len(encoder_layers(model))):
        by_layer[index + 1] = sweep_point(f"layer{index + 1}", layer=index)
    plot_layer_sweep(
        by_layer,
        title=f"IB after each layer ({corpus}, n={len(data)})",
        save_path=out / "fig2_layers.png",
    )
    by_beta = {}
    for beta in BETAS:
        by_beta[beta] = sweep_point(f"beta{beta:g}", beta=beta)
    plot_beta_sweep(
        by_beta,
        title=f"IBA with different beta ({corpus}, n={len(data)})",
        save_path=out / "fig2_beta.png",
    )
    summary = {
        "layers": {k: v.first_level_drop for k, v in by_layer.items()},
        "betas": {f"{k:g}": v.first_level_drop for k, v in by_beta.items()},
        # layers where IBA ranks no token (the last: [CLS] alone is read)
        "no_ranking_layers": [
            k
            for k, v in by_layer.items()
            if v.settings["attribution"].get("no_ranking")
        ],
    }
    atomic_write_text(out / "sweeps.json", json.dumps(summary, indent=2))
    print("\nfirst-level drop by layer / beta:", json.dumps(summary, indent=1))


def run_examples(args: argparse.Namespace, out: Path) -> None:
    model, tok = corpus_model("sst2")
    enc = encode(tok, [EXAMPLE])
    tokens = tok.convert_ids_to_tokens(enc["input_ids"][0].tolist())
    extra = (enc["attention_mask"],)
    with torch.no_grad():
        target = int(model(enc["input_ids"], *extra).logits.argmax())
    layers = encoder_layers(model)
    sweep = InformationBottleneckAttribution(model, layers).attribute(
        enc["input_ids"], target=target, additional_forward_args=extra, seed=0
    )
    layer_token_heatmap(
        layer_token_map(sweep)[0],
        tokens,
        normalize="layer",
        title="IBA per layer (rows) and token (SST-2 model)",
        save_path=out / "fig3_layers_tokens.png",
    )
    iba = InformationBottleneckAttribution(model, layers[paper_layer_index(model)])
    by_beta = torch.stack(
        [
            iba.attribute(
                enc["input_ids"],
                target=target,
                additional_forward_args=extra,
                beta=beta,
                seed=0,
            ).sum(-1)[0]
            for beta in BETAS
        ]
    )
    layer_token_heatmap(
        by_beta,
        tokens,
        normalize="layer",
        layer_labels=[f"{b:g}" for b in BETAS],
        layout=LayerMapLayout(ylabel="beta"),
        title="Effect of beta (rows) on one example (Appendix E)",
        save_path=out / "fig3_beta.png",
    )


def run(
    profile: str = "cpu",
    out: str = "results/reproduce",
    datasets: Sequence[str] = CORPORA,
    parts: Sequence[str] = PARTS,
    settings: Sequence[str] = SETTINGS,
    sweep_dataset: str = "sst2",
    fair_prior: str = "paper",
) -> Path:
    """Run the chosen parts of the reproduction into ``out``.

    Args:
        profile (str): A key of :data:`PROFILES` (``"cpu"`` or ``"paper"``).
        out (str): The results folder (created).
        datasets (Sequence[str]): Corpora of Table 1, among :data:`CORPORA`.
        parts (Sequence[str]): Among :data:`PARTS`.
        settings (Sequence[str]): Table 1 settings (rows of others already in
            ``out`` are kept).
        sweep_dataset (str): Corpus of the layer and beta sweeps.
        fair_prior (str): IBA's prior in the fair setting and the sweeps.

    Returns:
        Path: The results folder.
    """
    folder = Path(out)
    (folder / "json").mkdir(parents=True, exist_ok=True)
    read_rows(folder / "table1.json")  # a damaged table fails before any work
    Resume(folder)  # so does a damaged record of the pieces done
    (folder / "COMPLETE.json").unlink(missing_ok=True)
    args = argparse.Namespace(
        datasets=list(datasets),
        settings=list(settings),
        sweep_dataset=sweep_dataset,
        fair_prior=fair_prior,
    )
    chosen = PROFILES[profile]
    start = time.time()
    if "examples" in parts:
        run_examples(args, folder)
    if "table" in parts:
        run_table(args, chosen, folder)
    if "sweeps" in parts:
        run_sweeps(args, chosen, folder)
    write_marker(
        folder,
        profile=profile,
        datasets=list(datasets),
        parts=list(parts),
        settings=list(settings),
        minutes=round((time.time() - start) / 60, 1),
    )
    print(f"\ndone in {(time.time() - start) / 60:.1f} min; results in {folder}/")
    return folder
