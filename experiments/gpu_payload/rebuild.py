"""Rebuilds a model folder from prep.py's payload (zero rows elsewhere)."""

import shutil
import sys
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

src, dst = Path(sys.argv[1]), Path(sys.argv[2])
dst.mkdir(parents=True, exist_ok=True)
with safe_open(str(src / "partial.safetensors"), "pt") as f:
    meta = f.metadata()
state = load_file(src / "partial.safetensors")
rows, sub = state.pop("__rows__"), state.pop("__emb_rows__")
emb = torch.zeros(int(meta["vocab"]), sub.shape[1], dtype=sub.dtype)
emb[rows] = sub
state[meta["key"]] = emb
save_file(state, dst / "model.safetensors", metadata={"format": "pt"})
for p in src.iterdir():
    if p.suffix == ".json":
        shutil.copy(p, dst / p.name)
print("rebuilt", dst)
