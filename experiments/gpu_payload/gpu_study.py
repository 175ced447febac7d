"""GPU run of the faithfulness study for one corpus (payload from prep.py).

    python experiments/gpu_payload/gpu_study.py rte search+report PAYLOAD_DIR

(with the package on PYTHONPATH and $OUT a folder for the results' archive).
"""

import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import torch

root = Path(__file__).parent
corpus = sys.argv[1]
phases = sys.argv[2].split("+")  # e.g. search+report
pay = Path(sys.argv[3]) / corpus  # prep.py's destination
subprocess.run(
    [sys.executable, str(root / "rebuild.py"), str(pay), f"/tmp/models/{corpus}"],
    check=True,
)
sys.path.insert(0, str(root.parent))  # experiments/
import faithfulness_study as fs  # noqa: E402

fs.encoded = lambda c, split, tok: torch.load(
    pay / f"enc_{split}.pt", weights_only=True
)
res = Path("/tmp/res")
common = [
    "--corpora",
    corpus,
    "--device",
    "cuda",
    "--model-dir",
    "/tmp/models",
    "--out",
    str(res),
]
print(torch.cuda.get_device_name(0), torch.__version__, flush=True)
t = time.time()
if "search" in phases:
    fs.main(
        [
            "search",
            "--methods",
            "IG,iba-deletion,random",
            "--iba",
            "faithful-grid",
            *common,
        ]
    )
    print("search", time.time() - t, flush=True)
if "report" in phases:
    fs.main(
        [
            "report",
            "--methods",
            "IG,iba-deletion,LOO,random",
            "--iba",
            "chosen",
            *common,
        ]
    )
    print("report", time.time() - t, flush=True)
out = Path(os.environ["OUT"])
with tarfile.open(out / f"res_{corpus}.tgz", "w:gz") as tf:
    tf.add(res / corpus, arcname=corpus)
print("done", time.time() - t)
