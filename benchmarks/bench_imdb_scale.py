"""The paper's headline scale: IMDB's 25,000 test reviews at 512 tokens.

The paper (Jiang et al. 2020, appendix A) took "about 10 hours" to explain
IMDB's 25,000 test reviews with IBA on an NVIDIA RTX 2080 Ti (BERT-base, the
bottleneck after layer 9, 10 steps x 10 noise samples, PyTorch 1.4). Here a
fine-tuned classifier (``--model``: a folder; weights stored in float16 are
run in float32) explains the same split, cut to ``--max-length`` word pieces
(default 512), as ``captum-iba attribute --dataset imdb --max-length 512``
does: the corpus engine's units (:func:`~captum_iba.evaluation.work_units`:
``--batch-size`` reviews of similar length), each unit's tensors and first
pass (:meth:`CorpusJob.unit_tensors`) and the method's call
(:meth:`CorpusJob.score_unit`), the scores copied back to the CPU; only the
writing of the JSON rows is left out. Each method (``--methods``, a registry
name with options after a colon as in ``bench_llm_tasks.py``) runs units in a
seeded random order until all are done or its ``--budget`` seconds are
spent (or ``--deadline`` seconds from the start have passed), after one
untimed unit: when all 25,000 are done their time is **measured**, else
**projected** from the timed sample (reviews / s over the sampled units,
which are drawn uniformly from the length-sorted units). Printed: a line per
method as it ends, then a Markdown table of them, the explainer's fit under
it; ``--json FILE`` adds the rows (and the fit's) to FILE.

``iba-amortized`` is fitted first as ``captum-iba evaluate --dataset imdb
--methods iba-amortized --max-length 512`` fits it
(:func:`~captum_iba.app.amortized.cached_explainer`: the first
:data:`~captum_iba.app.amortized.TRAIN_INSTANCES` reviews of a seeded
stratified subset of the training split, into ``$CAPTUM_IBA_CACHE``); the
fit is timed (set ``CAPTUM_IBA_CACHE`` to an empty folder: a cached explainer
would be loaded, which the output says).

The header prints ``torch.__version__``, the GPU's name or the CPU's
``torch.backends.cpu.get_cpu_capability()``; on a GPU the seconds are wall
seconds, synchronised; on a CPU too (one torch thread), so that a dry run
prints the same table.

Usage::

    python benchmarks/bench_imdb_scale.py --model FOLDER --device cuda \\
        --methods iba-deletion iba-deletion:precision=float32 iba-amortized \\
        --budget 90 --json imdb_scale.jsonl
    python benchmarks/bench_imdb_scale.py --model TINY --n 8 --budget 20   # a check
"""

import argparse
import json
import os
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch

sys.path.insert(0, str(Path(__file__).parent))
from bench_llm_tasks import method_of  # noqa: E402

#: The paper's figure (appendix A): 25,000 IMDB test reviews with IBA in about
#: 10 hours on an RTX 2080 Ti.
PAPER_HOURS = 10.0
PAPER_REVIEWS = 25_000
#: A method is not started with less time than this before ``--deadline``.
MIN_SECONDS = 10.0
CORPUS = "imdb"
STARTED = time.perf_counter()


def clock(device: torch.device) -> float:
    """Wall seconds, after the device's queued work (on CUDA) is done."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def load(args: argparse.Namespace) -> Any:
    """The classifier (float32, eval, on ``--device``) and its tokenizer,
    loaded as the command line loads a ``--model`` folder."""
    from captum_iba.app.models import load_classifier

    model, tok = load_classifier(args.model)
    stored = model.dtype
    model = model.float().to(args.device).eval()
    where = Path(args.model) / "captum_iba_source.json"
    source = json.loads(where.read_text()) if where.is_file() else {}
    size = sum(p.numel() for p in model.parameters()) / 1e6
    said = f"; {source['what']}" if "what" in source else ""
    print(f"model {args.model}: {type(model).__name__}, {size:.1f} M parameters, "
          f"stored in {str(stored).replace('torch.', '')}, run in float32{said}",
          flush=True)  # fmt: skip
    return model, tok


def explainer_function(
    model: Any, tok: Any, args: argparse.Namespace, fits: List[Dict[str, Any]]
) -> Any:
    """``iba-amortized``'s explainer as the corpus commands make it (fitted
    on IMDB's training split cut to ``--max-length``), its fit timed into
    ``fits``."""
    from captum_iba.app.amortized import (
        TRAIN_INSTANCES,
        cached_explainer,
        explainer_folder,
    )
    from captum_iba.app.data import load_dataset
    from captum_iba.attr.amortized_store import RECORD
    from captum_iba.attr.text import resolve_layer

    def explainer(module: Any, objective: str = "distil") -> Any:
        ref = resolve_layer(model, module)
        folder = explainer_folder(model, ref, CORPUS, args.max_length, objective)
        cached = (folder / RECORD).is_file()
        began = clock(model.device)
        made = cached_explainer(
            model, tok, ref, CORPUS, True, args.data_dir, args.max_length, objective
        )
        seconds = clock(model.device) - began
        what = "loaded (cached: not a fit)" if cached else "fitted"
        count = len(load_dataset(CORPUS, "train", data_dir=args.data_dir,
                                 max_examples=TRAIN_INSTANCES))  # fmt: skip
        fits.append(dict(method="fit", seconds=seconds, cached=cached,
                         instances=count, objective=objective))  # fmt: skip
        print(f"iba-amortized explainer {what} in {seconds:.1f} s ({count} reviews "
              f"of IMDB's training split - at most {TRAIN_INSTANCES}, a seeded "
              f"stratified subset -, cut to {args.max_length} word pieces, "
              f"objective {objective!r}; {folder})", flush=True)  # fmt: skip
        return made

    return explainer


def run_method(
    spec: str, job: Any, args: argparse.Namespace, fits: List[Dict[str, Any]]
) -> Dict[str, Any]:
    """One method over the split's units in a seeded random order until all
    are done or ``--budget`` seconds are spent; its row."""
    from captum_iba.evaluation import Resources, build_scorers, work_units

    name, options = method_of(spec)
    resources = Resources(
        job.model, job.tokenizer, max_length=args.max_length,
        explainer=explainer_function(job.model, job.tokenizer, args, fits),
    )  # fmt: skip
    (scorer,) = build_scorers(
        [name], resources, "fair", method_options={name: options}, kind="classifier"
    ).values()
    job.scorers = {spec: scorer}
    units = work_units(job.data, args.batch_size)
    order = list(range(len(units)))
    random.Random(args.seed).shuffle(order)
    device = job.model.device

    def one(indices: List[int]) -> float:
        """A unit as the engine runs it, scores copied back: its scorer's
        seconds (the engine's own timing of the call)."""
        unit = job.unit_tensors(indices)
        (done,) = job.score_unit(unit, [spec])
        done.scores.float().cpu()
        return done.seconds * len(indices)

    one(units[order[0]])  # untimed: kernels, allocator (and its reviews not counted)
    timed = scorer_s = 0.0
    reviews = count = 0
    began = clock(device)
    budget = min(args.budget, args.deadline - (began - STARTED))
    for u in order:
        scorer_s += one(units[u])
        reviews += len(units[u])
        count += 1
        timed = clock(device) - began
        if timed > budget:
            break
    complete = count == len(units)
    rate = reviews / timed
    hours = PAPER_REVIEWS / rate / 3600  # for the paper's 25,000
    precision = scorer.settings.get("precision", "float32")
    return dict(
        method=spec, precision=precision, reviews=reviews, split=len(job.data),
        units=count, of_units=len(units), seconds=timed, scorer_seconds=scorer_s,
        rate=rate, hours=hours, paper_x=PAPER_HOURS / hours,
        measured=complete and len(job.data) == PAPER_REVIEWS,
        batch_size=args.batch_size, max_length=args.max_length, budget=budget,
    )  # fmt: skip


def how(row: Dict[str, Any]) -> str:
    """Whether the 25,000 reviews' time was measured or projected, and from what."""
    if row["measured"]:
        return "measured: all of them"
    return f"PROJECTED from {row['reviews']:,} of {row['split']:,} reviews"


def print_row(row: Dict[str, Any]) -> None:
    print(f"{row['method']:<32} {row['precision']:<8} {row['reviews']:>6,} of "
          f"{row['split']:,} reviews in {row['seconds']:.1f} s "
          f"({row['scorer_seconds']:.1f} s in the method's calls): "
          f"{row['rate']:.2f} reviews/s; {PAPER_REVIEWS:,} reviews: "
          f"{row['hours'] * 60:.2f} min ({how(row)}); the paper's "
          f"{PAPER_HOURS:.0f} h / this: {row['paper_x']:,.0f}x",
          flush=True)  # fmt: skip


def table(rows: List[Dict[str, Any]], fits: List[Dict[str, Any]]) -> None:
    """The rows as one Markdown table (the fit under it)."""
    print(f"\n| method | precision | reviews/s | {PAPER_REVIEWS:,} reviews, min "
          f"| how | the paper's {PAPER_HOURS:.0f} h / this |")  # fmt: skip
    print("|---|---|---:|---:|---|---:|")
    for r in rows:
        print(f"| {r['method']} | {r['precision']} | {r['rate']:.1f} | "
              f"{r['hours'] * 60:.1f} | {how(r)} | {r['paper_x']:,.0f}x |")  # fmt: skip
    for f in fits:
        what = "loaded, not fitted" if f["cached"] else "fitted"
        print(f"\niba-amortized's explainer {what} in {f['seconds']:.1f} s on "
              f"{f['instances']} training reviews")  # fmt: skip


def header(args: argparse.Namespace) -> None:
    from transformers import __version__

    device = torch.device(args.device)
    where = (
        f"GPU {torch.cuda.get_device_name(device)}"
        if device.type == "cuda"
        else f"CPU, capability {torch.backends.cpu.get_cpu_capability()}, "
        f"{torch.get_num_threads()} thread(s), load average {os.getloadavg()[0]:.1f}"
    )
    print(f"torch {torch.__version__}, transformers {__version__}; {where}; "
          f"IMDB's {args.split} split at {args.max_length} word pieces, units of "
          f"{args.batch_size}; budget {args.budget:.0f} s a method",
          flush=True)  # fmt: skip


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="a classifier folder")
    parser.add_argument("--data-dir", help="default: $CAPTUM_IBA_DATA")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--split", default="test")
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument(
        "--methods", nargs="+",
        default=["iba-deletion", "iba-deletion:precision=float32", "iba-amortized"],
    )  # fmt: skip
    parser.add_argument("--budget", type=float, default=90.0, help="s a method")
    parser.add_argument(
        "--deadline", type=float, default=float("inf"),
        help="s from the start after which no method starts a timed unit "
        "(a method with less than 10 s left is not run)",
    )  # fmt: skip
    parser.add_argument("--n", type=int, help="a stratified sample of the split")
    parser.add_argument("--seed", type=int, default=0, help="of the units' order")
    parser.add_argument("--json", help="add the rows to this JSON-lines file")
    args = parser.parse_args(argv)
    from captum_iba.app.data import load_dataset
    from captum_iba.evaluation import CorpusJob

    if args.device == "cpu":
        torch.set_num_threads(1)
    header(args)
    model, tok = load(args)
    data = load_dataset(CORPUS, args.split, data_dir=args.data_dir, max_examples=args.n)
    job = CorpusJob(model=model, tokenizer=tok, data=data, scorers={},
                    max_length=args.max_length, batch_size=args.batch_size)  # fmt: skip
    fits: List[Dict[str, Any]] = []
    rows: List[Dict[str, Any]] = []
    written = 0  # fits in --json
    for spec in args.methods:
        left = args.deadline - (time.perf_counter() - STARTED)
        if left < MIN_SECONDS:
            print(f"{spec:<32} not run: {left:.0f} s left of --deadline", flush=True)
            continue
        try:
            row = run_method(spec, job, args, fits)
        except Exception:  # reported; the other methods go on
            traceback.print_exc()
            print(f"{spec:<32} FAILED (above)", flush=True)
            continue
        print_row(row)
        rows.append(row)
        if args.json:
            with open(args.json, "a") as f:
                f.writelines(json.dumps(r) + "\n" for r in fits[written:] + [row])
        written = len(fits)
    table(rows, fits)
    print(f"the paper: {PAPER_REVIEWS:,} reviews in about {PAPER_HOURS:.0f} h on an "
          "RTX 2080 Ti (BERT-base, IB after layer 9, 10 steps x 10 samples, "
          "PyTorch 1.4): 1.44 s a review", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
