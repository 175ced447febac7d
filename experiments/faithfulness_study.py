"""The faithfulness study of issue #12: IBA configurations against strong anchors.

For each corpus (SST-2, IMDB at 256 tokens, AG News, RTE) and each method, the
script scores instances with a registered scorer, runs the fair degradation
test (deletion, levels k/9 of the removable tokens, the gold label), and keeps
per instance: drop@11 %, AOPC, ERASER comprehensiveness and sufficiency, and
the CPU-seconds the scorer took (``time.process_time`` with one torch thread).
Tables give means with 95 % bootstrap intervals (1,000 resamples of the
instances) and paired differences against the anchors (the same resamples for
both methods).

Two disjoint splits per corpus, so that no configuration is chosen on the
instances it is reported on:

* ``search`` (held in): SST-2 dev half A, IMDB test reviews, AG News held-out
  part A, RTE train sentences;
* ``report`` (held out): SST-2 dev half B, other IMDB test reviews, AG News
  held-out part B, RTE validation (all 277).

Scores and results are cached under ``--out`` (one JSON file per corpus,
split and method), so a run can be stopped and resumed, and methods can be
added later (e.g. AttnLRP from an environment where ``lxt`` imports)::

    python experiments/faithfulness_study.py search --corpora sst2 --methods IG,LOO
    python experiments/faithfulness_study.py search --corpora sst2 --iba grid
    python experiments/faithfulness_study.py report --corpora sst2,imdb
    python experiments/faithfulness_study.py tables --out results/faithfulness
"""

import argparse
import hashlib
import json
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

from captum_iba.app.data import HELDOUT_SPLIT, load_dataset, stratified_split
from captum_iba.app.models import load_classifier
from captum_iba.attr import encoder_layers
from captum_iba.attr.text import resolve_layer
from captum_iba.evaluation import encode, get_preset, make_scorers
from captum_iba.evaluation.amortized import IBAAmortizedScorer, fit_amortized
from captum_iba.evaluation.iba import IBAScorer
from captum_iba.metrics import degradation_test

CORPORA = ("sst2", "imdb", "ag_news", "rte")
#: Out of distribution: one sentence (8-40 words) from each of many IMDB
#: reviews, with the review's label, explained by the SST-2 model.
SENTENCES = "imdb_sentences"
MODEL_OF = {SENTENCES: "sst2"}
MAX_LENGTH = {"sst2": 128, "imdb": 256, "ag_news": 128, "rte": 256, SENTENCES: 128}
N = {  # instances per split (search, report)
    "sst2": (100, 200),
    "imdb": (30, 100),
    "ag_news": (60, 200),
    "rte": (60, 200),
    SENTENCES: (100, 200),
}
BATCH = {"sst2": 16, "imdb": 4, "ag_news": 8, "rte": 8, SENTENCES: 16}
#: The anchors, by registered name, with the fair preset's arguments.
ANCHORS = (
    "random",
    "IG",
    "LIME",
    "LOO",
    "occlusion",
    "grad-x-act",
    "kernel-shap",
    "shapley",
    "AttnLRP",
)
#: The references of the paired differences.
REFS = ("IG", "LIME", "LOO", "AttnLRP")
BOOTSTRAP = 1000
#: The amortized candidates' settings unless they name them (a candidate's
#: ``settings`` override these; the explainer's key holds them all).
STUDY_BASE = dict(
    keep=0.3, keep_weight=10.0, distil=0.0, distil_only=False, epochs=2, lr=1e-3
)
FAIR = get_preset("fair")


# ---------------------------------------------------------------------------
# instances
# ---------------------------------------------------------------------------


def imdb_sentences(split: str, reviews: int) -> Any:
    """One sentence of 8-40 words from each of ``reviews`` IMDB reviews of
    ``split`` (seeded), with the review's label (:data:`SENTENCES`)."""
    import re

    from captum_iba.app.data.dataset import TextClassificationData

    data = load_dataset("imdb", split)
    texts, labels = [], []
    for i in np.random.RandomState(1).permutation(len(data))[:reviews].tolist():
        text = data.texts[i].replace("<br />", " ")
        for sentence in re.split(r"(?<=[.!?])\s+", text):
            if 8 <= len(sentence.split()) <= 40:
                texts.append(sentence)
                labels.append(data.labels[i])
                break
    return TextClassificationData(
        texts, None, labels, data.label_names, SENTENCES, split
    )


def split_indices(corpus: str, split: str) -> Tuple[Any, List[int]]:
    """The corpus split and the row indices of the study's ``split``."""
    n_search, n_report = N[corpus]
    rng = np.random.RandomState(0)
    if corpus == SENTENCES:
        data = imdb_sentences("test", 800)
        first, second = stratified_split(data.labels, 0.5, seed=0)
        rows = first if split == "search" else second
        n = n_search if split == "search" else n_report
        return data, sorted(rng.permutation(rows)[:n].tolist())
    if corpus == "rte":
        if split == "report":
            data = load_dataset("rte", "validation")
            return data, list(range(len(data)))[:n_report]
        data = load_dataset("rte", "train")
        return data, sorted(rng.permutation(len(data))[:n_search].tolist())
    data = load_dataset(corpus, HELDOUT_SPLIT[corpus])
    first, second = stratified_split(data.labels, 0.5, seed=0)
    rows = first if split == "search" else second
    n = n_search if split == "search" else n_report
    return data, sorted(rng.permutation(rows)[:n].tolist())


def encoded(corpus: str, split: str, tokenizer: Any) -> Dict[str, Any]:
    """Token ids (sorted by length), masks, segment ids and gold labels."""
    data, idx = split_indices(corpus, split)
    data = data.subset(idx)
    order = sorted(range(len(data)), key=lambda i: len(data.texts[i]))
    data = data.subset(order)
    enc = encode(tokenizer, data.texts, data.text_pairs, MAX_LENGTH[corpus])
    return {
        "input_ids": enc["input_ids"],
        "attention_mask": enc["attention_mask"],
        "token_type_ids": enc.get("token_type_ids") if data.is_pair else None,
        "labels": torch.tensor(data.labels),
        "rows": [idx[i] for i in order],
    }


def train_batches(
    corpus: str, tokenizer: Any, n: int, batch_size: int = 16
) -> List[Dict[str, Tensor]]:
    """``n`` instances of the corpus's training split (seeded; SST-2: sentences
    of 8 words or more, not its phrases; RTE: not the search split's pairs),
    sorted by length, as batches for the amortized explainer's fit."""
    if corpus == SENTENCES:
        data = imdb_sentences("train", 2 * n)
    else:
        data = load_dataset(corpus, "train")
    rows = list(range(len(data)))
    if corpus == "sst2":
        rows = [i for i in rows if len(data.texts[i].split()) >= 8]
    if corpus == "rte":
        held = set(split_indices("rte", "search")[1])
        rows = [i for i in rows if i not in held]
    rng = np.random.RandomState(0)
    rows = sorted(rng.permutation(rows)[:n].tolist())
    data = data.subset(rows)
    order = sorted(range(len(data)), key=lambda i: len(data.texts[i]))
    data = data.subset(order)
    batches = []
    for s in range(0, len(data), batch_size):
        part = data.subset(list(range(s, min(s + batch_size, len(data)))))
        enc = encode(tokenizer, part.texts, part.text_pairs, MAX_LENGTH[corpus])
        batch = {k: v for k, v in enc.items() if k in ("input_ids", "attention_mask")}
        if data.is_pair and "token_type_ids" in enc:
            batch["token_type_ids"] = enc["token_type_ids"]
        batch["labels"] = torch.tensor(part.labels)
        batches.append(batch)
    return batches


def amortized_explainer(
    out: Path, corpus: str, model: Any, tokenizer: Any, config: Dict[str, Any]
) -> Any:
    """The candidate's explainer, fitted on ``config["fit_corpus"]``'s training
    split (default the corpus's own) and cached under ``out/explainers``."""
    fit_corpus = config.get("fit_corpus", corpus)
    layer = resolve_layer(model, config["layer"]).module
    n = int(config.get("n_train", 2000))
    settings = dict(config.get("settings", {}))
    digest = hashlib.sha1(json.dumps(settings, sort_keys=True).encode()).hexdigest()
    owner = MODEL_OF.get(corpus, corpus)  # the explainer is the model's
    name = f"{owner}-l{config['layer']}-{fit_corpus}-n{n}-{digest[:10]}"
    folder = out / "explainers" / name
    data = train_batches(fit_corpus, tokenizer, n)
    options = {**STUDY_BASE, **settings}
    return fit_amortized(model, layer, data, tokenizer, folder, **options)


# ---------------------------------------------------------------------------
# methods
# ---------------------------------------------------------------------------


def iba_grid(n_layers: int) -> Dict[str, Dict[str, Any]]:
    """The IBA candidates of the search (name -> scorer arguments): the paper's
    configuration and ``iba-faithful`` after every layer but the last."""
    grid: Dict[str, Dict[str, Any]] = {}
    for layer in range(n_layers - 1):
        grid[f"IBA l{layer}"] = {"layer": layer}
        grid[f"iba-faithful l{layer}"] = {"layer": layer, "faithful": True}
    return grid


def chosen_layers(out: Path, corpus: str) -> Dict[str, Dict[str, Any]]:
    """The report's IBA runs: the paper's configuration at the old default
    layer (index 3 of 6) and at the new one (4), and ``iba-faithful`` at the
    layer with the best AOPC on the search split (cached results)."""
    recs = load_records(out, corpus, "search")
    faithful = {m: r for m, r in recs.items() if m.startswith("iba-faithful l")}
    if not faithful:
        raise SystemExit(f"{corpus}: run the search with --iba grid first")
    best = max(faithful, key=lambda m: np.mean(faithful[m]["aopc"]))
    layer = int(best.rsplit("l", 1)[1])
    return {
        "IBA l3 (old default)": {"layer": 3},
        "IBA l4 (new default)": {"layer": 4},
        f"iba-faithful (l{layer}, chosen)": {"layer": layer, "faithful": True},
    }


def build_scorer(
    name: str,
    model: Any,
    tokenizer: Any,
    iba: Optional[Dict[str, Any]] = None,
    anchor_options: Optional[Dict[str, Any]] = None,
) -> Any:
    """A registered anchor (fair preset, ``anchor_options`` overriding its
    arguments), or an IBA candidate."""
    if iba is None:
        options = {name: dict(anchor_options or {})}
        return make_scorers(
            model, tokenizer, FAIR, methods=[name], method_options=options
        )[name]
    options = dict(iba)
    layer = options.pop("layer")
    if "explainer" in options:  # an amortized candidate
        module = resolve_layer(model, layer).module
        return IBAAmortizedScorer(
            model, module, options["explainer"], tokenizer=tokenizer, setting="fair",
            name=name, refine_steps=options.get("refine_steps", 0),
        )  # fmt: skip
    config = options.pop("config", None)
    faithful = options.pop("faithful", False)
    config = config or ("faithful" if faithful else "paper")
    module = encoder_layers(model)[layer] if isinstance(layer, int) else layer
    return IBAScorer(
        model,
        module,
        config=config,
        tokenizer=tokenizer,
        setting="fair",
        name=name,
        **options,
    )


def score(scorer: Any, enc: Dict[str, Any], batch_size: int) -> Tuple[Tensor, list]:
    """Scores of every instance and the CPU-seconds of each batch, per instance."""
    chunks, cpu = [], []
    n = enc["input_ids"].shape[0]
    for s in range(0, n, batch_size):
        sl = slice(s, s + batch_size)
        tt = enc["token_type_ids"]
        t0 = time.process_time()
        part = scorer.attribute(
            enc["input_ids"][sl],
            enc["labels"][sl],
            enc["attention_mask"][sl],
            None if tt is None else tt[sl],
        )
        seconds = time.process_time() - t0
        chunks.append(part)
        cpu += [seconds / part.shape[0]] * part.shape[0]
    return torch.cat(chunks), cpu


def fair_test(
    model: Any, tokenizer: Any, enc: Dict[str, Any], scores: Tensor, name: str
) -> Any:
    """The fair degradation test of one method's scores on the encoded split."""
    return degradation_test(
        model,
        enc["input_ids"],
        scores,
        target=enc["labels"],
        attention_mask=enc["attention_mask"],
        token_type_ids=enc["token_type_ids"],
        options=FAIR.test.with_tokenizer(tokenizer),
        metadata={"method": name},
    )


def per_instance(result: Any) -> Dict[str, List[float]]:
    """drop@11 %, AOPC, comprehensiveness and sufficiency of every instance."""
    o = result.original_probs.double()[:, None]
    p = result.probs.double()
    k = p.shape[1]
    values = {
        "drop11": (o[:, 0] - p[:, 0]),
        "aopc": (o - p).sum(1) / (k + 1),
        "comprehensiveness": (o - p).mean(1),
        "sufficiency": (o - result.kept_probs.double()).mean(1),
    }
    return {key: v.tolist() for key, v in values.items()}


def run_method(
    corpus: str,
    split: str,
    name: str,
    out: Path,
    model: Any,
    tokenizer: Any,
    enc: Dict[str, Any],
    iba: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """Score, test and cache one method (skipped when already cached)."""
    path = out / corpus / split / f"{_slug(name)}.json"
    if path.exists():
        return json.loads(path.read_text())
    if iba is not None and iba.get("amortized"):
        explainer = amortized_explainer(out, corpus, model, tokenizer, iba)
        iba = dict(iba, explainer=explainer)
    scorer = build_scorer(name, model, tokenizer, iba)
    scores, cpu = score(scorer, enc, BATCH[corpus])
    result = fair_test(model, tokenizer, enc, scores, name)
    record = {
        "corpus": corpus,
        "split": split,
        "method": name,
        "settings": scorer.settings,
        "iba": None
        if iba is None
        else {k: v for k, v in iba.items() if k != "explainer"},
        "rows": enc["rows"],
        "cpu_seconds": cpu,
        "device": str(getattr(next(model.parameters()), "device", "cpu")),
        **per_instance(result),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, default=str))
    tmp.replace(path)
    return record


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


# ---------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------


def bootstrap(values: np.ndarray, seed: int = 0) -> Tuple[float, float, float]:
    """Mean and 95 % percentile interval of the mean (instances resampled)."""
    rng = np.random.RandomState(seed)
    idx = rng.randint(0, len(values), size=(BOOTSTRAP, len(values)))
    means = values[idx].mean(1)
    return float(values.mean()), *np.percentile(means, [2.5, 97.5]).tolist()


def fmt(stat: Tuple[float, float, float], signed: bool = False) -> str:
    sign = "+" if signed else ""
    return f"{stat[0]:{sign}.3f} [{stat[1]:{sign}.3f}, {stat[2]:{sign}.3f}]"


def table(records: Dict[str, Dict[str, Any]]) -> str:
    """Markdown: every method's metrics (means, 95 % bootstrap intervals)."""
    cols = ["drop11", "aopc", "comprehensiveness", "sufficiency"]
    head = "| method | n | " + " | ".join(cols) + " | CPU-s |"
    lines = [head, "|" + "---|" * (len(cols) + 3)]
    for m in sorted(records, key=lambda m: np.mean(records[m]["aopc"])):
        r = records[m]
        cells = [fmt(bootstrap(np.array(r[c]))) for c in cols]
        cells.append(_cost_cell(r))
        lines.append(f"| {m} | {len(r['aopc'])} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _on_cpu(record: Dict[str, Any]) -> bool:
    return record.get("device", "cpu") == "cpu"


def _cost_cell(record: Dict[str, Any]) -> str:
    """The CPU-s cell: the mean, or "(GPU run)" for a run on a GPU, whose
    process time measures no CPU cost."""
    if not _on_cpu(record):
        return "(GPU run)"
    return f"{np.mean(record['cpu_seconds']):.3f}"


def paired_table(
    records: Dict[str, Dict[str, Any]], methods: Sequence[str], refs: Sequence[str]
) -> str:
    """Markdown: paired differences (method minus reference) of drop@11 % and
    AOPC, with 95 % bootstrap intervals over the same resampled instances."""
    refs = [r for r in refs if r in records]
    head = "| method | reference | d drop11 | d AOPC |"
    lines = [head, "|---|---|---|---|"]
    for m in methods:
        for ref in refs:
            if m == ref or m not in records:
                continue
            diffs = [
                np.array(records[m][k]) - np.array(records[ref][k])
                for k in ("drop11", "aopc")
            ]
            cells = [fmt(bootstrap(d), signed=True) for d in diffs]
            lines.append(f"| {m} | {ref} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def to_rst(markdown: str, title: str) -> str:
    """A markdown table as an RST ``list-table`` (for ``docs/``)."""
    rows = [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in markdown.splitlines()
        if line.startswith("|") and not line.startswith("|---")
    ]
    out = [f".. list-table:: {title}", "   :header-rows: 1", ""]
    for row in rows:
        out.append("   * - " + row[0])
        out += [f"     - {cell}" for cell in row[1:]]
    return "\n".join(out) + "\n"


def plot(
    records: Dict[str, Dict[str, Any]], title: str, path: Path, iba: str = "iba"
) -> None:
    """The cost-faithfulness picture of one corpus (AOPC against CPU-seconds);
    the methods whose names start with ``iba`` drawn highlighted."""
    from captum_iba.visualization import plot_cost_faithfulness

    points = {}
    for m, r in records.items():
        mean, low, high = bootstrap(np.array(r["aopc"]))
        if _on_cpu(r):  # a GPU run's process time is no CPU cost
            points[m] = (float(np.mean(r["cpu_seconds"])), mean, (low, high))
    if not points:  # every record ran on a GPU: no CPU cost to plot
        return
    ours = [m for m in records if m.lower().startswith(iba)]
    plot_cost_faithfulness(points, highlight=ours, title=title, save_path=path)


def load_records(out: Path, corpus: str, split: str) -> Dict[str, Dict[str, Any]]:
    folder = out / corpus / split
    recs = {}
    for f in sorted(folder.glob("*.json")) if folder.exists() else []:
        r = json.loads(f.read_text())
        recs[r["method"]] = r
    return recs


# ---------------------------------------------------------------------------
# entry point
# ---------------------------------------------------------------------------


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("phase", choices=["search", "report", "tables"])
    parser.add_argument("--corpora", default=",".join(CORPORA))
    parser.add_argument("--methods", default="", help="anchors, comma-separated")
    parser.add_argument(
        "--iba",
        default="",
        help="'grid' (search), 'faithful-grid' (search, iba-faithful only), "
        "'chosen' (report: the layers chosen on the search) or a JSON file",
    )
    parser.add_argument(
        "--model-dir",
        help="folder of one model folder per corpus (default: the cached "
        "get_finetuned_model(corpus), fine-tuned on first use)",
    )
    parser.add_argument("--out", default="results/faithfulness")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--device", default="cpu", help="where the model runs (CPU-s are for cpu)"
    )
    parser.add_argument(
        "--refs", default="", help="tables: more references, comma-separated"
    )
    parser.add_argument("--docs", help="tables: also write the docs' files here")
    parser.add_argument(
        "--docs-name",
        default="faithfulness",
        help="tables: the docs' files are _generated/NAME_CORPUS.rst and, for "
        "another name than the default, _static/NAME_tradeoff_CORPUS.png",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    corpora = [c for c in args.corpora.split(",") if c]
    for corpus in corpora:
        split = "search" if args.phase == "search" else "report"
        if args.phase == "tables":
            for sp in ("search", "report"):
                recs = load_records(out, corpus, sp)
                if recs:
                    iba = sorted(m for m in recs if m.lower().startswith("iba"))
                    extra = [m for m in args.refs.split(",") if m in recs]
                    refs = list(REFS) + [m for m in iba if _is_chosen_faithful(m)]
                    refs += extra
                    md = table(recs) + "\n\n" + paired_table(recs, iba, refs)
                    (out / corpus / f"{sp}.md").write_text(md + "\n")
                    n = len(next(iter(recs.values()))["aopc"])
                    title = f"{corpus} ({sp} split, n={n})"
                    plot(recs, title, out / corpus / f"{sp}.png")
                    print(f"\n## {corpus} / {sp}\n\n{md}")
                    if args.docs and sp == "report":
                        where = (Path(args.docs), args.docs_name)
                        _write_docs(where, corpus, recs, iba, title, out, refs)
            continue
        model, tok = load_classifier(_model_path(args.model_dir, corpus), args.device)
        enc = encoded(corpus, split, tok)
        for name in [m for m in args.methods.split(",") if m]:
            rec = run_method(corpus, split, name, out, model, tok, enc)
            print(_line(rec), flush=True)
        n_layers = len(encoder_layers(model))
        configs = (
            chosen_layers(out, corpus)
            if args.iba == "chosen"
            else _iba_configs(args.iba, n_layers)
        )
        for name, config in configs.items():
            rec = run_method(corpus, split, name, out, model, tok, enc, config)
            print(_line(rec), flush=True)


def _is_chosen_faithful(name: str) -> bool:
    return name.startswith("iba-faithful") and "chosen" in name


def _write_docs(
    where: Tuple[Path, str],
    corpus: str,
    recs: Dict,
    iba: List[str],
    title: str,
    out: Path,
    refs: Sequence[str] = REFS,
) -> None:
    """The report split's tables (RST) and plot, for docs/faithfulness.rst
    (``where`` = the docs folder and the files' name)."""
    import shutil

    docs, name = where
    (docs / "_generated").mkdir(exist_ok=True)
    rst = to_rst(table(recs), f"{title}: means [95 % CI]")
    rst += "\n" + to_rst(paired_table(recs, iba, refs), "Paired differences")
    (docs / "_generated" / f"{name}_{corpus}.rst").write_text(rst)
    stem = (
        f"tradeoff_{corpus}" if name == "faithfulness" else f"{name}_tradeoff_{corpus}"
    )
    png = docs / "_static" / f"{stem}.png"
    shutil.copy(out / corpus / "report.png", png)


def _model_path(model_dir: Optional[str], corpus: str) -> Path:
    corpus = MODEL_OF.get(corpus, corpus)
    if model_dir is not None:
        return Path(model_dir) / corpus
    from captum_iba.app.finetune import get_finetuned_model

    return get_finetuned_model(corpus)


def _iba_configs(spec: str, n_layers: int) -> Dict[str, Dict[str, Any]]:
    if not spec:
        return {}
    if spec == "grid":
        return iba_grid(n_layers)
    if spec == "faithful-grid":  # only iba-faithful's layers (a cheaper search)
        return {k: v for k, v in iba_grid(n_layers).items() if v.get("faithful")}
    return json.loads(Path(spec).read_text())


def _line(rec: Dict[str, Any]) -> str:
    return (
        f"{rec['corpus']}/{rec['split']} {rec['method']:30s} n={len(rec['aopc'])} "
        f"drop11={np.mean(rec['drop11']):.3f} aopc={np.mean(rec['aopc']):.3f} "
        f"cpu={np.mean(rec['cpu_seconds']):.3f}"
    )


if __name__ == "__main__":
    main()
