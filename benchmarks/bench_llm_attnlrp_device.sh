#!/usr/bin/env bash
# AttnLRP's cost on a lent GPU machine beside the causal-LM IBA methods, in one
# short run (about 4 minutes), with benchmarks/bench_llm_tasks.py on SmolLM2-135M's
# architecture with seeded random weights, as bench_llm_device.sh: the four prompt
# tasks' first 16 report prompts in the study's batches of 4, wall seconds a
# prompt, synchronised, and their ratio to one forward + backward of the batch.
#   1. transformers 4.53 (lxt 2.1 does not import under 5.x): attnlrp, and in the
#      same process iba-deletion with 1 step and with 7 (the default), so that
#      the comparison does not mix transformers versions;
#   2. the machine's own transformers 5.x: iba-deletion with 1 step (the same
#      card's baseline of bench_llm_device.sh's rows) and iba-amortized, its
#      explainer fitted first on FIT_PROMPTS training prompts (default 32: the
#      explanation's cost does not depend on it; SST-2's 32-prompt fit took
#      9.1 s on the H200).
# Then one table of both parts' rows against attnlrp (part 1's deletion rows
# renamed "... tf4").
#
# The machine has torch and transformers 5.x but neither captum nor the 4.x stack
# nor the internet: captum from .whl/ (benchmarks/device_setup.sh); the 4.x stack
# from the wheels in .whl4/ (transformers 4.53.3, tokenizers 0.21.4,
# huggingface_hub 0.36.2, lxt 2.1; requests and its dependencies in .whl4/req/,
# installed only where requests is missing), installed to /tmp/site4, first on
# PYTHONPATH for part 1 only; torchvision, which lxt imports for its ViT rules
# only, from a stand-in (.whl4/stub) where the machine has none that imports. The
# model's folder for 4.x (SMOLLM2_CONFIG_4X, default .gpu/smollm2_4x): .gpu/smollm2
# saved again by transformers 4.53 (its rope_theta, no GGUF quantization entry;
# the tokenizer's class PreTrainedTokenizerFast): the same token ids on these
# prompts as 5.x's (checked on the four tasks).
#
# Usage: bash benchmarks/bench_llm_attnlrp_device.sh   (from the repository root)
# A short check on a CPU: DEVICE=cpu N=2 TASKS=sst2 FIT_PROMPTS=4 bash ...
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/bench_llm_attnlrp}
DEVICE=${DEVICE:-cuda}
N=${N:-16}
TASKS=${TASKS:-sst2,ag_news,rte,imdb}
FIT=${FIT_PROMPTS:-32}
SITE4=${SITE4:-/tmp/site4}
export CAPTUM_IBA_DATA=${CAPTUM_IBA_DATA:-$PWD/.gpu/data} HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
. benchmarks/device_setup.sh
rm -rf "$SITE4" "$OUT"/t4.jsonl "$OUT"/t5.jsonl
python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE4" .whl4/*.whl || exit 1
if ! python3 -c "import requests" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE4" \
        .whl4/req/*.whl || exit 1
fi
if ! python3 -c "import torchvision.models.vision_transformer" 2>/dev/null; then
    cp -r .whl4/stub/torchvision "$SITE4"/
fi
P4="$SITE4:$PYTHONPATH"
PYTHONPATH=$P4 python3 -c "import torch, transformers, tokenizers, huggingface_hub, lxt, torchvision; print('part 1:', torch.__version__, transformers.__version__, tokenizers.__version__, huggingface_hub.__version__, torchvision.__file__)" >>"$OUT/machine.txt" 2>&1
B="python3 benchmarks/bench_llm_tasks.py --random-weights --device $DEVICE --tasks $TASKS --n $N"
PYTHONPATH=$P4 CAPTUM_IBA_CACHE=/tmp/cache_attnlrp_t4 timeout 150 \
    $B --model "${SMOLLM2_CONFIG_4X:-.gpu/smollm2_4x}" \
    --methods attnlrp iba-deletion:steps=1 iba-deletion \
    --json "$OUT/t4.jsonl" >"$OUT/t4.txt" 2>&1
echo "part 1 exit $?" >>"$OUT/t4.txt"
CAPTUM_IBA_CACHE=/tmp/cache_attnlrp_t5 timeout 200 \
    $B --model "${SMOLLM2_CONFIG:-.gpu/smollm2}" \
    --methods iba-deletion:steps=1 iba-amortized --fit-prompts "$FIT" \
    --json "$OUT/t5.jsonl" >"$OUT/t5.txt" 2>&1
echo "part 2 exit $?" >>"$OUT/t5.txt"
touch "$OUT/t4.jsonl" "$OUT/t5.jsonl"
sed 's/"method": "iba-deletion\([^"]*\)"/"method": "iba-deletion\1 tf4"/' "$OUT/t4.jsonl" \
    | cat - "$OUT/t5.jsonl" >"$OUT/both.jsonl"
python3 benchmarks/bench_llm_tasks.py --table "$OUT/both.jsonl" --reference attnlrp \
    >"$OUT/table.txt" 2>&1
grep -h -v "it/s\]\|batch/s\]\|warn(\|zennit" "$OUT"/machine.txt "$OUT"/t4.txt "$OUT"/t5.txt \
    "$OUT"/table.txt | tail -n 80
