"""Re-scores a small sample of a study's committed records with a checkout's
code and compares them with the records (issue 76: a refactor keeps the
scores bit-identical).

Each study's own script runs the sample (the records' first ``--n`` prompts
or contexts, which every record holds first, in the same batches) into a
temporary ``--out``, one torch thread, in a subprocess that imports the
package of ``--code`` (default this checkout: ``PYTHONPATH`` and the
working directory are that tree, and its own copy of the study script
runs); then every value is compared with the record's (the records keep
JSON floats, which read back as the very float64 written: "identical" is
bit for bit)::

    PYTHONPATH=$PWD python experiments/rescore_sample.py reference
    PYTHONPATH=$PWD python experiments/rescore_sample.py llm --task sst2 \\
        --split report --n 4 --methods iba-deletion,iba-deletion-steps1,ig
    PYTHONPATH=$PWD python experiments/rescore_sample.py context \\
        --records experiments/context_results/smollm2_seed1 \\
        --task context-topics --split report --seed 1 --n 2 \\
        --methods iba-deletion,iba-surrogate-16,loso,random

* ``reference``: ``tests.reference_cases.compute()`` (one thread) against
  ``tests/reference_scores.json`` (``--records`` another such file).
* ``llm``: ``llm_faithfulness.py run``; a record holds per prompt drop@11 %,
  AOPC, comprehensiveness and sufficiency (the degradation test of the
  method's scores, not the scores), the chosen answer and the prompt's
  index. ``<method>-steps<K>`` runs with ``--iba-steps K``.
* ``context``: ``context_study.py run``; a record holds per context the
  response and, per pooling, the source scores, LDS, top-1 hit and top-k
  drops. ``<method>-steps<K>`` runs with ``--iba-steps K``.
* ``classifier``: ``faithfulness_study.py report`` (its whole split: the
  script has no subset) with a model folder (``--model-dir``): it has no
  committed records, so ``--records`` is another run's ``--keep`` folder
  (e.g. the base commit's code, ``--code``).

CPU-seconds are not compared. ``--keep DIR`` keeps the run's records (to
compare two checkouts: run one with ``--keep``, the other with ``--records``
that folder). Exits 1 when anything differs.
"""

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
#: The per-prompt numbers of an LLM record.
LLM_ROWS = ("drop11", "aopc", "comprehensiveness", "sufficiency")
LLM_LABELS = ("answers", "indices")


class Diffs:
    """Per method and quantity, the largest absolute difference and whether
    every value (and every label) is identical."""

    def __init__(self) -> None:
        self.max: Dict[Tuple[str, str], float] = defaultdict(float)
        self.count: Dict[Tuple[str, str], int] = defaultdict(int)
        self.same: Dict[Tuple[str, str], bool] = defaultdict(lambda: True)
        self.notes: List[str] = []

    def values(self, method: str, what: str, got: Any, want: Any) -> None:
        """Numbers (or nested lists of them; None for an undefined value)."""
        got, want = _flat(got), _flat(want)
        key = (method, what)
        if len(got) != len(want):
            self.same[key] = False
            self.max[key] = math.inf
            self.notes.append(f"{method} {what}: {len(got)} values, record {len(want)}")
            return
        for g, w in zip(got, want):
            self.count[key] += 1
            if g is None or w is None or math.isnan(g) or math.isnan(w):
                ok = (g is None) == (w is None) and (
                    g is None or math.isnan(g) == math.isnan(w)
                )
                if not ok:
                    self.same[key], self.max[key] = False, math.inf
                continue
            if g != w:
                self.same[key] = False
                self.max[key] = max(self.max[key], abs(g - w))

    def labels(self, method: str, what: str, got: Any, want: Any) -> None:
        """Values compared for equality only (responses, answers, indices)."""
        key = (method, what)
        self.count[key] += 1
        if got != want:
            self.same[key] = False
            self.max[key] = math.nan
            self.notes.append(f"{method} {what}: {got!r} != record {want!r}")

    def report(self) -> bool:
        width = max((len(m) for m, _ in self.count), default=6)
        head = f"{'method':{width}}  {'quantity':24} {'n':>5}  {'max |diff|':>10}"
        print(head + "  verdict")
        for key in sorted(self.count):
            m, what = key
            diff = self.max[key]
            verdict = "identical" if self.same[key] else "DIFFERS"
            row = f"{m:{width}}  {what:24} {self.count[key]:5d}  {diff:10.3g}"
            print(f"{row}  {verdict}")
        for note in self.notes[:20]:
            print("  note:", note)
        return all(self.same.values())


def _flat(value: Any) -> List[Optional[float]]:
    if isinstance(value, dict):
        return [x for k in sorted(value) for x in _flat(value[k])]
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _flat(v)]
    return [None if value is None else float(value)]


def _record(path: Path, diffs: Diffs) -> Any:
    """The record at ``path``; None (noted as a difference) when missing."""
    if not path.is_file():
        diffs.labels(path.stem, "record present", False, True)
        return None
    return json.loads(path.read_text())


def _run(code: Path, argv: List[str]) -> None:
    """One study command, run with ``code`` 's package and script."""
    env = dict(os.environ, PYTHONPATH=str(code), TQDM_DISABLE="1")
    if "CAPTUM_IBA_DATA" not in env:  # this checkout's corpora, for any --code
        from captum_iba.app.data import default_data_dir

        try:
            env["CAPTUM_IBA_DATA"] = str(default_data_dir())
        except FileNotFoundError:  # the study's own message follows
            pass
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    print("$", "PYTHONPATH=" + str(code), " ".join(argv), flush=True)
    subprocess.run([sys.executable, *argv], cwd=code, env=env, check=True)


def _steps(method: str) -> Tuple[str, Optional[int]]:
    """``iba-deletion-steps1`` -> (``iba-deletion``, 1)."""
    found = re.fullmatch(r"(.*)-steps(\d+)", method)
    return (found.group(1), int(found.group(2))) if found else (method, None)


def _grouped(methods: List[str]) -> Dict[Optional[int], List[str]]:
    by_steps: Dict[Optional[int], List[str]] = defaultdict(list)
    for m in methods:
        base, steps = _steps(m)
        by_steps[steps].append(base)
    return by_steps


def reference(args: argparse.Namespace, out: Path, diffs: Diffs) -> None:
    records = Path(args.records or ROOT / "tests" / "reference_scores.json")
    target = out / "reference_scores.json"
    script = (
        "import json, sys, torch; torch.set_num_threads(1); "
        "from tests.reference_cases import compute; "
        "open(sys.argv[1], 'w').write(json.dumps(compute(), indent=0) + '\\n')"
    )
    _run(args.code, ["-c", script, str(target)])
    got, want = json.loads(target.read_text()), json.loads(records.read_text())
    for case in sorted(set(got) | set(want)):
        if case not in got or case not in want:
            diffs.labels(case, "case present", case in got, case in want)
            continue
        diffs.values(case, "scores", got[case], want[case])


def llm(args: argparse.Namespace, out: Path, diffs: Diffs) -> None:
    records = Path(args.records or HERE / "llm_results")
    for steps, methods in _grouped(args.methods.split(",")).items():
        argv = [
            "experiments/llm_faithfulness.py", "run", "--task", args.task,
            "--split", args.split, "--n", str(args.n), "--out", str(out),
            "--methods", ",".join(methods), "--batch-size", str(args.batch_size),
        ]  # fmt: skip
        _run(args.code, argv + (["--iba-steps", str(steps)] if steps else []))
    folder = out / args.task / args.split
    for path in sorted(folder.glob("*.json")):
        got = json.loads(path.read_text())
        want = _record(records / args.task / args.split / path.name, diffs)
        if want is None:
            continue
        n = len(got["aopc"])
        for key in LLM_ROWS:
            diffs.values(path.stem, key, got[key], want[key][:n])
        for key in LLM_LABELS:
            diffs.labels(path.stem, key, got[key], want[key][:n])


def context(args: argparse.Namespace, out: Path, diffs: Diffs) -> None:
    if not args.records:
        raise SystemExit("context: --records names the run's folder (its seed's)")
    records = Path(args.records)
    for steps, methods in _grouped(args.methods.split(",")).items():
        argv = [
            "experiments/context_study.py", "run", "--task", args.task,
            "--split", args.split, "--n", str(args.n), "--seed", str(args.seed),
            "--out", str(out), "--methods", ",".join(methods),
        ]  # fmt: skip
        argv += ["--passages", args.passages] if args.passages else []
        _run(args.code, argv + (["--iba-steps", str(steps)] if steps else []))
    folder = out / args.task / args.split
    for path in sorted(folder.glob("*.json")):
        if path.name.startswith("_"):
            continue
        got = json.loads(path.read_text())
        want = _record(records / args.task / args.split / path.name, diffs)
        if want is None:
            continue
        diffs.labels(path.stem, "contexts held", len(got) <= len(want), True)
        for row, old in zip(got, want):
            for key in ("response", "n_sources", "key", "index"):
                diffs.labels(path.stem, key, row[key], old[key])
            pools = sorted(row["pooled"]), sorted(old["pooled"])
            diffs.labels(path.stem, "poolings", *pools)
            for pooling, found in row["pooled"].items():
                recorded = old["pooled"].get(pooling, {})
                for key in ("scores", "lds", "drops"):
                    diffs.values(path.stem, key, found[key], recorded.get(key))
                diffs.labels(path.stem, "top1", found["top1"], recorded.get("top1"))


def classifier(args: argparse.Namespace, out: Path, diffs: Diffs) -> None:
    if not (args.records and args.model_dir):
        raise SystemExit("classifier: --records (another run's --keep) and --model-dir")
    argv = [
        "experiments/faithfulness_study.py", "report", "--corpora", args.task,
        "--out", str(out), "--model-dir", str(Path(args.model_dir).resolve()),
        "--methods", args.methods, "--threads", "1",
    ]  # fmt: skip
    if args.iba:
        argv += ["--iba", str(Path(args.iba).resolve())]
    _run(args.code, argv)
    records = Path(args.records)
    for path in sorted((out / args.task / "report").glob("*.json")):
        got = json.loads(path.read_text())
        want = _record(records / args.task / "report" / path.name, diffs)
        if want is None:
            continue
        for key in LLM_ROWS:
            diffs.values(path.stem, key, got[key], want[key])
        diffs.labels(path.stem, "rows", got["rows"], want["rows"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", choices=("reference", "llm", "context", "classifier"))
    parser.add_argument("--records", help="the records' folder (or file)")
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout to run")
    parser.add_argument("--task", default="sst2", help="task (classifier: corpus)")
    parser.add_argument("--split", default="report")
    parser.add_argument("--n", type=int, default=4, help="prompts / contexts")
    parser.add_argument("--batch-size", type=int, default=4, help="llm: as recorded")
    parser.add_argument("--seed", type=int, default=0, help="context: the draw")
    parser.add_argument("--passages", help="context-facts: as recorded, e.g. 3-10")
    parser.add_argument("--methods", default="iba-deletion,random")
    parser.add_argument("--model-dir", help="classifier: folder of <corpus>/ models")
    parser.add_argument("--iba", help="classifier: a JSON file of IBA configurations")
    parser.add_argument("--keep", type=Path, help="keep the run's records here")
    args = parser.parse_args()
    args.code = args.code.resolve()
    study = {"reference": reference, "llm": llm, "context": context}
    study["classifier"] = classifier
    diffs = Diffs()
    with tempfile.TemporaryDirectory(prefix="rescore-") as tmp:
        out = args.keep.resolve() if args.keep else Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        study[args.study](args, out, diffs)
    print(f"\n{args.study}: code {args.code}, records {args.records or 'default'}")
    sys.exit(0 if diffs.report() else 1)


if __name__ == "__main__":
    main()
