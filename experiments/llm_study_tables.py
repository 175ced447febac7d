"""The tables and plot of the study of ``experiments/llm_faithfulness.py``
(issue 28; issue 52's ``amortized`` table), read from its records: one JSON
file per task, split and method under ``--out``, named by :func:`record_name`.

CPU-s compare only within one kind of CPU
(``torch.backends.cpu.get_cpu_capability()``, each record's ``cpu``): where a
table's records ran on two, each method is labelled with its own, and issue
52's target judges the cost only on one.
"""

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Dict, List

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "lab"))  # the lab: captum_iba_lab
import faithfulness_study as fs  # noqa: E402
from captum_iba_lab.amortized_lm import LLM_OBJECTIVE  # noqa: E402
from context_tables import AT2_PREFIX  # noqa: E402

from captum_iba.registry import LLM_NAMES, METHODS  # noqa: E402

#: The tasks' names in tables.
TITLES = {"sst2": "SST-2", "rte": "RTE", "ag_news": "AG News", "imdb": "IMDB"}

#: The anchors the paired differences are taken against.
ANCHORS = ("IG", "LOO", "AttnLRP", "contextcite-32")
#: The amortized method, whose explainer is fitted on a task's prompts.
AMORTIZED = METHODS.entry("iba-amortized").name
#: A method's record file name: 0.2's name of the method, where it had one.
RECORD_NAMES = {METHODS.entry(new).name: old for old, new in LLM_NAMES.items()}


def record_name(method: str) -> str:
    """The stem of ``method``'s record file (``IG`` -> ``llm-ig``)."""
    name = METHODS.entry(method).name
    return RECORD_NAMES.get(name, name)


def method_of(stem: str) -> str:
    """The method a record file holds, by its name now (``llm-ig`` -> ``IG``,
    ``llm-iba-deletion-steps1`` -> ``iba-deletion-steps1``)."""
    base, steps = re.fullmatch(r"(.*?)(-steps\d+)?", stem).groups()
    name = METHODS.entry(LLM_NAMES[base]).name if base in LLM_NAMES else base
    return name + (steps or "")


def tables(args: argparse.Namespace) -> None:
    """The task's table and its paired differences against the anchors."""
    records = _records(args.out, args.task, args.split)
    if not records:
        raise SystemExit(f"no results in {Path(args.out) / args.task / args.split}")
    # the accuracy of the record with the most prompts (the others hold its first)
    most = max(records.values(), key=lambda record: len(record["aopc"]))
    cpus = sorted({str(r.get("cpu")) for r in records.values()})
    where = "CPU-s on two kinds of CPU, per method"
    where = f"CPU {cpus[0]}" if len(cpus) == 1 else where
    answered = f"accuracy {most['accuracy']:.3f} on {len(most['aopc'])} prompts"
    accuracy = f"{answered}, {where}"
    head = f"{args.task} {args.split}: {accuracy}"
    means, differences = fs.table(_labelled(records, n=False)), paired(records)
    print(f"{head}\n\n{means}\n\n{differences}")
    if args.docs:
        model = getattr(args, "model_name", None) or "SmolLM2"
        tag = "" if model == "SmolLM2" else "_" + model.split()[0].lower()
        name = f"{args.task}_{args.split}{tag}"
        split = f"{TITLES[args.task]}, {args.split} split"
        what = f"{split} ({accuracy})"
        rst = fs.to_rst(
            means, f"{what}: means, 95 % bootstrap intervals; CPU-s a prompt"
        )
        rst += "\n" + fs.to_rst(
            differences,
            f"{what}: paired differences (method minus anchor), 95 % intervals",
        )
        docs = Path(args.docs)
        for sub in ("_generated", "_static"):
            (docs / sub).mkdir(parents=True, exist_ok=True)
        (docs / "_generated" / f"llm_{name}.rst").write_text(rst)
        png = docs / "_static" / f"llm_tradeoff_{name}.png"
        # three lines: the clauses no longer fit the plot's width on one
        title = f"{model}, {split}\n({answered};\n{where})"
        fs.plot(_labelled(_plotted(records)), title, png, iba="iba")


def _plotted(records: Dict[str, Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """The records the plot draws: all but the variants of ``iba-amortized``
    's fit (another number of prompts, objective, epochs, refinement) and
    the learned explainers trained on another task's prompts (``-from-``);
    their table is ``amortized`` 's: they would crowd it."""
    return {
        m: r
        for m, r in records.items()
        if not m.startswith(AMORTIZED + "-") and "-from-" not in m
    }


def _labelled(
    records: Dict[str, Dict[str, Any]], n: bool = True
) -> Dict[str, Dict[str, Any]]:
    """The records keyed for a table or the plot: each method's name with
    its CPU (``get_cpu_capability``) when the records ran on more than one
    kind, and (``n``) its number of prompts when they do not all hold the
    same number: CPU-s from two kinds of CPU do not compare."""
    cpus = {str(r.get("cpu")) for r in records.values()}
    counts = {len(r["aopc"]) for r in records.values()}
    out = {}
    for m, r in records.items():
        tags = [f"n {len(r['aopc'])}"] if n and len(counts) > 1 else []
        tags += [str(r.get("cpu"))] if len(cpus) > 1 else []
        out[f"{m} ({', '.join(tags)})" if tags else m] = r
    return out


def _records(out: str, task: str, split: str) -> Dict[str, Dict[str, Any]]:
    folder = Path(out) / task / split
    for parts in sorted(folder.glob("*.parts")):
        held = len(list(parts.glob("*.json")))
        if held:  # a batch before them still runs, or its process died
            print(f"note: {parts} holds {held} batches not yet in its record "
                  "(a re-run of the command merges them)", file=sys.stderr)  # fmt: skip
    return {
        method_of(p.stem): json.loads(p.read_text())
        for p in sorted(folder.glob("*.json"))
    }


def summary(args: argparse.Namespace) -> None:
    """One row per task: the default's AOPC and CPU-s, and its paired AOPC
    difference from each anchor on the prompts both have (n given)."""
    default = "iba-deletion"
    refs = ("AttnLRP", "LOO", "IG", "random")
    head = "| task | n | accuracy | default AOPC | default CPU-s | "
    head += " | ".join(f"d AOPC vs {r} (n)" for r in refs) + " |"
    lines = [head, "|" + "---|" * (5 + len(refs))]
    for task in args.tasks.split(","):
        records = _records(args.out, task, args.split)
        if default not in records:
            continue
        mine = records[default]
        cells = [TITLES[task], str(len(mine["aopc"])), f"{mine['accuracy']:.3f}"]
        cells += [f"{np.mean(mine['aopc']):.3f}", f"{np.mean(mine['cpu_seconds']):.2f}"]
        for ref in refs:
            cells.append(_diff(mine, records[ref]) if ref in records else "")
        lines.append("| " + " | ".join(cells) + " |")
    title = (
        f"SmolLM2, {args.split} splits: iba-deletion's AOPC, CPU-s a prompt "
        "and paired AOPC differences (95 % intervals) on the prompts both have"
    )
    _publish(lines, args, f"llm_summary_{args.split}", title)


def _publish(lines: List[str], args: argparse.Namespace, name: str, title: str) -> None:
    """Print a markdown table; with ``--docs`` also write it as
    ``<docs>/_generated/<name>.rst`` under ``title``."""
    table = "\n".join(lines)
    print(table)
    if args.docs:
        path = Path(args.docs) / "_generated" / f"{name}.rst"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(fs.to_rst(table, title))


def _paired(mine: Dict[str, Any], ref: Dict[str, Any]) -> np.ndarray:
    """The per-prompt AOPC differences (mine minus ref) on the prompts both
    have (the first ``n``)."""
    n = min(len(mine["aopc"]), len(ref["aopc"]))
    return np.subtract(mine["aopc"][:n], ref["aopc"][:n])


def _diff(mine: Dict[str, Any], ref: Dict[str, Any]) -> str:
    """The paired AOPC difference, its 95 % interval and its ``n``."""
    diff = _paired(mine, ref)
    return f"{fs.fmt(fs.bootstrap(diff), signed=True)} ({len(diff)})"


def amortized(args: argparse.Namespace) -> None:
    """Issue 52's table: every learned explainer's record of each task -
    ``iba-amortized`` 's and AT2's (``at2-<n>``), fitted on the task's
    prompts or another's, on K of them - against ``iba-deletion``, AttnLRP
    and random, with the fit's cost and the target (AOPC at least
    ``iba-deletion`` 's minus .005, CPU-s a prompt at most AttnLRP's)."""
    head = "| task | explainer fitted on | fit CPU-s | n | AOPC | CPU-s | "
    head += "d AOPC vs iba-deletion (n) | d AOPC vs AttnLRP (n) | "
    head += "d AOPC vs random (n) | AttnLRP CPU-s | target |"
    lines = [head, "|" + "---|" * 11]
    for task in args.tasks.split(","):
        records = _records(args.out, task, args.split)
        deletion, lrp = records.get("iba-deletion"), records.get("AttnLRP")
        floor = records.get("random")
        learned = (r for r in records if r.startswith((AMORTIZED, AT2_PREFIX)))
        for name in sorted(learned, key=_row_order):
            mine, fit = records[name], records[name].get("fit", {})
            cells = [TITLES[task], _fitted_on(name, fit, task)]
            cells += [f"{fit.get('cpu_seconds', float('nan')):.0f}"]
            cells += [str(len(mine["aopc"])), f"{np.mean(mine['aopc']):.3f}"]
            cells += [f"{np.mean(mine['cpu_seconds']):.3f}"]
            cells += [_diff(mine, r) if r else "" for r in (deletion, lrp, floor)]
            met = _verdict(mine, deletion, lrp)
            lrp_cost = f"{np.mean(lrp['cpu_seconds']):.2f} ({lrp.get('cpu')})"
            cells += [lrp_cost if lrp else "", met]
            lines.append("| " + " | ".join(cells) + " |")
    if len(lines) == 2:
        folders = ", ".join(
            str(Path(args.out) / t / args.split) for t in args.tasks.split(",")
        )
        raise SystemExit(
            f"no iba-amortized or at2-<n> records in {folders} (give --out the "
            "folder llm_faithfulness.py run wrote them to)"
        )
    title = (
        f"SmolLM2, {args.split} splits: the learned explainers (iba-amortized, "
        "AT2; fit CPU-s once per model and task; CPU-s a prompt) against "
        "iba-deletion, AttnLRP and random, paired AOPC differences (95 % "
        "intervals) on the prompts both have"
    )
    _publish(lines, args, f"llm_amortized_{args.split}", title)


def _row_order(name: str) -> List[Any]:
    """A learned explainer's row's place: ``iba-amortized`` 's records
    before AT2's, the task's own before a transfer's (``-from-``), numbers
    by their value (``at2-32`` before ``at2-128``)."""
    parts = re.split(r"(\d+)", name)
    key = [int(p) if p.isdigit() else p for p in parts]
    return [name.startswith(AT2_PREFIX), "-from-" in name] + key


def _fitted_on(name: str, fit: Dict[str, Any], task: str) -> str:
    """The table's "explainer fitted on" cell of a learned explainer's
    record: the task and number of prompts, and how (``iba-amortized``: its
    objective, epochs and deletion steps a prompt; AT2: its ablations a
    prompt). An AT2 record written before its ``fit`` was kept is read from
    its name (``at2-<n>[-from-<task>]``)."""
    if name.startswith(AT2_PREFIX):
        n, _, source = name[len(AT2_PREFIX) :].partition("-from-")
        on, prompts = fit.get("task", source or task), fit.get("prompts", n)
        ablations = fit.get("ablations")
        how = f"AT2, {ablations} ablations a prompt" if ablations else "AT2"
        return f"{on}, {prompts} prompts ({how})"
    prompts = fit.get("prompts", fit.get("instances", 0) // 2)  # 2 epochs
    how = f"{fit.get('objective', LLM_OBJECTIVE)}, {fit.get('epochs', 2)} epochs"
    refine = fit.get("refine_steps", 0)
    steps = "1 deletion step" if refine == 1 else f"{refine} deletion steps"
    how += f"; {steps} a prompt" if refine else ""
    return f"{fit.get('task')}, {prompts} prompts ({how})"


def _verdict(mine: Dict[str, Any], deletion: Any, lrp: Any) -> str:
    """Issue 52's target for a record: AOPC at least ``iba-deletion`` 's
    minus .005 (paired) and CPU-s a prompt at most AttnLRP's, on the same
    kind of CPU; on two kinds the cost is not judged ("AOPC met, cost on
    other CPUs")."""
    if not (deletion and lrp):
        return ""
    if np.mean(_paired(mine, deletion)) < -0.005:
        return "not met"
    if mine.get("cpu") != lrp.get("cpu"):
        return f"AOPC met; cost on other CPUs ({mine.get('cpu')}, {lrp.get('cpu')})"
    cheap = np.mean(mine["cpu_seconds"]) <= np.mean(lrp["cpu_seconds"])
    return "met" if cheap else "not met"


def paired(records: Dict[str, Dict[str, List[float]]]) -> str:
    """Markdown: paired differences (method minus anchor) of drop@11 % and
    AOPC on the prompts both have (the first ``n``: every record holds the
    first prompts of the same list), with 95 % bootstrap intervals."""
    lines = ["| method | anchor | n | d drop11 | d AOPC |", "|---|---|---|---|---|"]
    for m in sorted(records):
        for ref in (a for a in ANCHORS if a in records and a != m):
            n = min(len(records[m]["aopc"]), len(records[ref]["aopc"]))
            cells = [
                fs.fmt(
                    fs.bootstrap(np.subtract(records[m][k][:n], records[ref][k][:n])),
                    signed=True,
                )
                for k in ("drop11", "aopc")
            ]
            lines.append(f"| {m} | {ref} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
