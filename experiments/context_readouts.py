"""The LDS of a context study's records under other readouts of IBA's scores
(a diagnostic of docs/studies/context_report.rst, "Centring one step's
mask").

For each example of a ``context_study.py run`` record folder, the example's
unit is made again as the study made it (its greedy response and held-out
ablations: the same seed, so the recorded LDS comes out again, and is
printed beside), and each IBA method's recorded source scores per pooling
are read three ways: as recorded (the mask, in [0, 1]), centred at the
mask's start (``score - 1/2``) and as the mask's log-odds (``log(s / (1 -
s))``). Other methods' scores are read as recorded. Means over the examples
and, against ``--anchor``, paired differences with 95 % bootstrap intervals.

Usage::

    python experiments/context_readouts.py --task context-facts --split report \\
        --n 16 --out results/retime --methods contextcite-32,iba-deletion-steps1
"""

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Dict, List

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
import faithfulness_study as fs  # noqa: E402
from context_study import example_unit, study_examples  # noqa: E402

from captum_iba.app.causal_lm import load_causal_lm  # noqa: E402
from captum_iba.app.model_kind import SMOLLM2_HUB_ID  # noqa: E402
from captum_iba.metrics.context import linear_datamodeling_score  # noqa: E402

#: IBA's readouts of a mask score ``s`` in [0, 1].
READOUTS = {
    "recorded": lambda s: s,
    "centred": lambda s: s - 0.5,
    "log-odds": lambda s: torch.logit(s.clamp(1e-6, 1 - 1e-6)),
}


def example_lds(records: Dict[str, list], unit_ablations, i: int) -> Dict[str, float]:
    """Example ``i``'s LDS per method, pooling and (IBA's) readout."""
    out = {}
    for method, record in records.items():
        for pooling, found in record[i]["pooled"].items():
            scores = torch.tensor(found["scores"], dtype=torch.float64)
            readouts = list(READOUTS) if method.startswith("iba") else ["recorded"]
            for name in readouts:
                given = READOUTS[name](scores)
                lds = float(linear_datamodeling_score(given, unit_ablations)[0])
                out[f"{method} {pooling} {name}"] = lds
            if not math.isclose(
                out[f"{method} {pooling} recorded"], found["lds"] or math.nan,
                abs_tol=1e-9,
            ):  # fmt: skip
                print(f"note: example {i} {method} {pooling}: recorded LDS "
                      f"{found['lds']} made again as "
                      f"{out[f'{method} {pooling} recorded']}")  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", required=True)
    parser.add_argument("--split", default="report")
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--passages", default="3-10")
    parser.add_argument("--seed", type=int, default=0, help="the examples' seed")
    parser.add_argument("--out", required=True, help="the study's --out")
    parser.add_argument("--methods", required=True)
    parser.add_argument(
        "--anchor", default="contextcite-32 - recorded",
        help="the row paired against: method, pooling ('-' for a method's own "
        "source scores), readout",
    )  # fmt: skip
    parser.add_argument("--model", default=SMOLLM2_HUB_ID)
    args = parser.parse_args()
    torch.set_num_threads(1)
    folder = Path(args.out) / args.task / args.split
    records = {
        m: json.loads((folder / f"{m}.json").read_text())
        for m in args.methods.split(",")
    }
    examples = study_examples(args)
    model, tok = load_causal_lm(args.model)
    rows: List[Dict[str, float]] = []
    for i, example in enumerate(examples):
        unit = example_unit(model, tok, example, i)
        rows.append(example_lds(records, unit.ablations[0], i))
    anchor = args.anchor if args.anchor in rows[0] else None
    print(f"{'method, pooling, readout':<48} {'LDS':>6}  paired vs {anchor}")
    for key in rows[0]:
        values = np.array([r[key] for r in rows])
        paired = ""
        if anchor and key != anchor:
            diff = values - np.array([r[anchor] for r in rows])
            paired = fs.fmt(fs.bootstrap(diff[~np.isnan(diff)]), signed=True)
        print(f"{key:<48} {np.nanmean(values):>6.3f}  {paired}")


if __name__ == "__main__":
    main()
