"""Screening of the second round's candidates (issue #19) on held-in splits.

Uses the faithfulness study's instances, fair degradation test and record
format (``experiments/faithfulness_study.py``), so that its ``tables`` and
paired differences read the results. Candidates are named configurations of
:class:`round2_masks.MaskConfig` (``CANDIDATES``) or the study's own methods.

    python experiments/round2_screen.py --corpus sst2 --split search --n 300 \
        --cands faithful-proto,complement --out /work/results_r2
    python experiments/round2_screen.py --corpus sst2 --split search --n 300 \
        --compare faithful-proto --out /work/results_r2
"""

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, Optional

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
import faithfulness_study as fs  # noqa: E402
from round2_masks import MaskConfig, MaskScorer  # noqa: E402

from captum_iba.app.models import load_classifier  # noqa: E402

C = MaskConfig
CANDIDATES: Dict[str, MaskConfig] = {
    # iba-faithful reproduced by the prototype (layer index 4, every real token)
    "faithful-proto": C(),
    "faithful-removable": C(only_removable=True),
    "complement-g1": C(gamma=1.0),
    "complement-g1-rem": C(gamma=1.0, only_removable=True),
    "complement-g3": C(gamma=3.0),
    # one mask per token shared by bottlenecks after several layers
    "shared-emb": C(sites=(-1,), share="token", only_removable=True),
    "shared-emb-l4": C(sites=(-1, 4), share="token", only_removable=True),
    "shared-all": C(sites=(-1, 0, 1, 2, 3, 4), share="token", only_removable=True),
    "shared-l4": C(sites=(4,), share="token", only_removable=True),
    # deletion relaxed through attention
    "attn": C(removal="attention", only_removable=True, beta=0.0),
    "attn-b1": C(removal="attention", only_removable=True, beta=1.0),
    "attn-comp": C(removal="attention", only_removable=True, beta=0.0, gamma=1.0),
    "attn-prob-comp": C(
        removal="attention", only_removable=True, beta=0.0, gamma=1.0, task="prob"
    ),
    # the deletion game (the complement term alone, a sparsity on what is deleted)
    "attn-del-b01": C(
        removal="attention", only_removable=True, task="none", gamma=1.0, beta=0.1
    ),
    "attn-del-b03": C(
        removal="attention", only_removable=True, task="none", gamma=1.0, beta=0.3
    ),
    # readouts across budgets: extremal areas (kept fraction / deleted fraction)
    "attn-pres-areas": C(
        removal="attention", only_removable=True, area=True, budgets=(0.1, 0.3, 0.5)
    ),
    "attn-del-areas": C(
        removal="attention",
        only_removable=True,
        area=True,
        task="none",
        gamma=1.0,
        budgets=(0.1, 0.3, 0.5),
    ),
    "attn-betas": C(removal="attention", only_removable=True, budgets=(0.0, 0.3, 1.0)),
}


def run_candidate(
    name: str,
    cfg: Optional[MaskConfig],
    corpus: str,
    split: str,
    out: Path,
    model: Any,
    tok: Any,
    enc: Dict[str, Any],
    batch: int,
) -> Dict[str, Any]:
    path = out / corpus / split / f"{fs._slug(name)}.json"
    if path.exists():
        return json.loads(path.read_text())
    if cfg is None:
        iba = None
        if name.startswith("iba-faithful l"):  # the shipped configuration
            iba = {"layer": int(name.rsplit("l", 1)[1]), "faithful": True}
        return fs.run_method(corpus, split, name, out, model, tok, enc, iba)
    scorer = MaskScorer(model, cfg, tokenizer=tok, name=name)
    scores, cpu = fs.score(scorer, enc, batch)
    result = fs.fair_test(model, tok, enc, scores, name)
    record = {
        "corpus": corpus,
        "split": split,
        "method": name,
        "settings": scorer.settings,
        "iba": None,
        "rows": enc["rows"],
        "cpu_seconds": cpu,
        **fs.per_instance(result),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, default=str))
    tmp.replace(path)
    return record


def paired(a: Dict[str, Any], b: Dict[str, Any], key: str) -> str:
    d = np.array(a[key]) - np.array(b[key])
    return fs.fmt(fs.bootstrap(d), signed=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--corpus", default="sst2")
    p.add_argument("--split", default="search")
    p.add_argument("--n", type=int, default=0, help="instances (0: the study's)")
    p.add_argument("--cands", default="")
    p.add_argument("--anchors", default="", help="the study's methods (IG, LOO...)")
    p.add_argument("--compare", default="", help="reference for paired differences")
    p.add_argument("--out", default="/work/results_r2")
    p.add_argument("--extra", default="", help="JSON file: more candidates")
    args = p.parse_args()
    torch.set_num_threads(1)
    if args.n:
        n_search, n_report = fs.N[args.corpus]
        fs.N[args.corpus] = (
            (args.n, n_report) if args.split == "search" else (n_search, args.n)
        )
    cands = dict(CANDIDATES)
    if args.extra:
        for k, v in json.loads(Path(args.extra).read_text()).items():
            v = {kk: tuple(vv) if isinstance(vv, list) else vv for kk, vv in v.items()}
            cands[k] = MaskConfig(**v)
    out = Path(args.out)
    from captum_iba.app.finetune import get_finetuned_model

    model, tok = load_classifier(get_finetuned_model(args.corpus))
    enc = fs.encoded(args.corpus, args.split, tok)
    names = [m for m in args.anchors.split(",") if m] + [
        c for c in args.cands.split(",") if c
    ]
    recs = {}
    for name in names:
        cfg = cands.get(name)
        rec = run_candidate(
            name, cfg, args.corpus, args.split, out, model, tok, enc,
            fs.BATCH[args.corpus],
        )  # fmt: skip
        recs[name] = rec
        line = fs._line(rec)
        if args.compare and name != args.compare:
            ref = run_candidate(
                args.compare, cands.get(args.compare), args.corpus, args.split,
                out, model, tok, enc, fs.BATCH[args.corpus],
            )  # fmt: skip
            line += (
                f"  vs {args.compare}: d drop11 {paired(rec, ref, 'drop11')}"
                f"  d aopc {paired(rec, ref, 'aopc')}"
            )
        print(line, flush=True)


if __name__ == "__main__":
    main()
