"""Prepares one corpus for the GPU study run: pre-encoded search/report
splits and the fine-tuned model with only the word-embedding rows those
splits (and the special tokens) use -- exact for every computation of the
study, which only ever looks up those ids. Run here (CPU) with the r2 tree
on PYTHONPATH."""

import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import faithfulness_study as fs  # noqa: E402

from captum_iba.app.finetune import get_finetuned_model  # noqa: E402
from captum_iba.app.models import load_classifier  # noqa: E402

corpus, dest = sys.argv[1], Path(sys.argv[2])
folder = get_finetuned_model(corpus)
model, tok = load_classifier(folder)
out = dest / corpus
shutil.rmtree(out, ignore_errors=True)
out.mkdir(parents=True)
ids = set(tok.all_special_ids) | {tok.pad_token_id}
for split in ("search", "report"):
    enc = fs.encoded(corpus, split, tok)
    torch.save(enc, out / f"enc_{split}.pt")
    ids |= set(enc["input_ids"].flatten().tolist())
state = load_file(folder / "model.safetensors")
key = [k for k in state if k.endswith("word_embeddings.weight")][0]
rows = torch.tensor(sorted(ids))
emb = state.pop(key)
state["__rows__"] = rows
state["__emb_rows__"] = emb[rows].contiguous()
save_file(
    state,
    out / "partial.safetensors",
    metadata={"key": key, "vocab": str(emb.shape[0])},
)
for f in (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "captum_iba_finetune.json",
):
    shutil.copy(folder / f, out / f)
print(
    corpus,
    len(rows),
    "rows of",
    emb.shape[0],
    {p.name: p.stat().st_size for p in out.iterdir()},
)
