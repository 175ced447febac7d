"""IMDB on a GPU machine without the cached model: fine-tune with the package's
recipe there (its CPU, 16 threads), run the study's search and report splits on
the GPU, and leave the results and the model's weights (in parts of under
16 MiB, to bring back) in /tmp/ret. Needs the base model package, the IMDB
files (CAPTUM_IBA_DATA) and the package on PYTHONPATH.
"""

import os
import sys
import tarfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from captum_iba.app.finetune import get_finetuned_model

t = time.time()
folder = get_finetuned_model("imdb", num_threads=16)
print("finetuned", folder, round(time.time() - t), flush=True)
Path("/tmp/models").mkdir(exist_ok=True)
if not Path("/tmp/models/imdb").exists():
    os.symlink(folder, "/tmp/models/imdb")
import faithfulness_study as fs  # noqa: E402

common = [
    "--corpora",
    "imdb",
    "--device",
    "cuda",
    "--model-dir",
    "/tmp/models",
    "--out",
    "/tmp/res",
    "--threads",
    "16",
]
fs.main(
    ["search", "--methods", "IG,iba-deletion,random", "--iba", "faithful-grid", *common]
)
print("search", round(time.time() - t), flush=True)
fs.main(
    ["report", "--methods", "IG,iba-deletion,LOO,random", "--iba", "chosen", *common]
)
print("report", round(time.time() - t), flush=True)
ret = Path("/tmp/ret")
ret.mkdir(exist_ok=True)
with tarfile.open(ret / "res_imdb.tgz", "w:gz") as tf:
    tf.add("/tmp/res/imdb", arcname="imdb")
with tarfile.open(ret / "model_small.tgz", "w:gz") as tf:
    for p in Path(folder).iterdir():
        if p.name != "model.safetensors":
            tf.add(p, arcname=f"{Path(folder).name}/{p.name}")
data = (Path(folder) / "model.safetensors").read_bytes()
step = 16 * 1024 * 1024 - 4096
for i in range(0, len(data), step):
    (ret / f"part{i // step}").write_bytes(data[i : i + step])
print("done", round(time.time() - t), len(data), flush=True)
Path("/tmp/imdb.done").touch()
