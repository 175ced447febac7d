#!/usr/bin/env bash
# AT2's head weights for SmolLM2-135M-Instruct trained on a lent GPU at budgets
# the 2-core CPU cannot afford (issue 51: "how its LDS grows with it"), with
# experiments/train_at2.py: AT2's own trainer, the context-facts search split
# (seed 1000, 3-6 passages; never the report split), 32 ablations an example,
# budgets nested; the weights come back under $OUT and are scored on the CPU
# by experiments/context_study.py (--at2-dir) on the report split.
#
# The GPU machine holds neither the weights nor several packages, and a call
# carries at most 64 MiB, so the run takes two calls on the same warm machine:
#   bash benchmarks/at2_device.sh stage1   # carry .gpuw/a .whl5: the first part
#                                          # of the GGUF file kept in /tmp/w, the
#                                          # wheels installed, the imports checked
#   bash benchmarks/at2_device.sh stage2   # carry .gpuw/b .gpu/data/ag_news: the
#                                          # file joined and checked, the training
# .gpuw/a/part1 and .gpuw/b/part2 are the GGUF file cut in two (`head -c` /
# `tail -c`), .gpuw/b/sha256 its digest; .whl5 holds captum, at2, gguf,
# datasets, dill, multiprocess and nltk wheels (Python 3.12). Where spaCy or
# `datasets` cannot be imported there, a stand-in of the few names AT2 uses
# (spaCy's English is for word splitting, which the training never asks for)
# is written to /tmp/stubs, and the log says so.
# Settings (environment): POOL (2048), BUDGETS (16,64,256,512,1024,2048),
# STOP (ablation wall-seconds, 200), DEVICE (cuda), LIMIT (430 s in all).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/at2_device}
W=/tmp/w
mkdir -p "$OUT" "$W"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 TQDM_DISABLE=1 HF_HUB_OFFLINE=1

stubs() {  # stand-ins for what cannot be imported here, on PYTHONPATH
    mkdir -p /tmp/stubs
    if ! python3 -c "import spacy.lang.en" 2>/dev/null; then
        mkdir -p /tmp/stubs/spacy/lang/en
        printf 'class Language:  # what datasets checks pickled objects against\n    pass\n' >/tmp/stubs/spacy/__init__.py
        : >/tmp/stubs/spacy/lang/__init__.py
        printf 'class English:\n    def __init__(self):\n        raise ImportError("spaCy is a stand-in here")\n' \
            >/tmp/stubs/spacy/lang/en/__init__.py
        echo "spaCy: a stand-in (word splitting unavailable)"
    fi
    if ! python3 -c "import datasets" 2>/dev/null; then
        mkdir -p /tmp/stubs/datasets
        cat >/tmp/stubs/datasets/__init__.py <<'EOF'
class Dataset:
    """The rows AT2 reads: from_list, from_dict, len, [i]."""

    def __init__(self, rows):
        self._rows = list(rows)

    @classmethod
    def from_list(cls, rows):
        return cls(dict(r) for r in rows)

    @classmethod
    def from_dict(cls, columns):
        n = len(next(iter(columns.values()))) if columns else 0
        return cls({k: v[i] for k, v in columns.items()} for i in range(n))

    def __len__(self):
        return len(self._rows)

    def __getitem__(self, i):
        return self._rows[i]
EOF
        echo "datasets: a stand-in (Dataset rows only)"
    fi
}

setup() {
    export PYTHONPATH=$PWD:/tmp/site
    stubs
    export PYTHONPATH=$PWD:/tmp/stubs:/tmp/site
}

case "${1:-}" in
stage1)
    cp .gpuw/a/part1 "$W/part1" || exit 1
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --upgrade --target /tmp/site .whl5/*.whl || exit 1
    setup
    {
        nvidia-smi -L
        lscpu | grep -E "Model name|^CPU\(s\)"
        python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__, torch.backends.cpu.get_cpu_capability(), torch.cuda.is_available())"
        PYTHONPATH=$PWD/experiments:$PYTHONPATH python3 -c "import at2.tasks, gguf, datasets; import studylib.at2_training; print('imports: ok', datasets.__file__)"
    } 2>&1 | tee "$OUT/stage1.txt"
    ls -la "$W"
    ;;
stage2)
    [ -f "$W/part1" ] || { echo "no $W/part1: run stage1 on this machine first"; exit 1; }
    setup
    cat "$W/part1" .gpuw/b/part2 >"$W/SmolLM2-135M-Instruct.gguf"
    echo "$(cat .gpuw/b/sha256)  $W/SmolLM2-135M-Instruct.gguf" | sha256sum -c - || exit 1
    export CAPTUM_IBA_DATA=$PWD/.gpu/data CAPTUM_IBA_CACHE=/tmp/cache
    nvidia-smi -L >"$OUT/machine.txt"
    python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__, torch.backends.cpu.get_cpu_capability())" >>"$OUT/machine.txt"
    timeout "${LIMIT:-430}" python3 experiments/train_at2.py --task context-facts \
        --passages 3-6 --pool "${POOL:-2048}" --n "${BUDGETS:-16,64,256,512,1024,2048}" \
        --device "${DEVICE:-cuda}" --generate-batch 64 --ablation-batch 32 \
        --stop-after "${STOP:-200}" --model "$W/SmolLM2-135M-Instruct.gguf" \
        --work /tmp/at2work --out "$OUT" 2>&1 | grep -v "punkt\|nltk_data\|Step " \
        | tee "$OUT/train.log"
    ;;
*)
    echo "usage: bash benchmarks/at2_device.sh stage1|stage2"; exit 2
    ;;
esac
