#!/usr/bin/env bash
# Issue 52's GPU rows in one short run (about 6 minutes) on a lent GPU machine,
# with benchmarks/bench_llm_tasks.py on SmolLM2-135M's architecture:
#   * GPU, wall seconds: the four prompt tasks' first 16 report prompts in the
#     study's batches of 4 - iba-deletion with 1, 3 and 7 steps and
#     iba-amortized, whose explainer is first fitted as `evaluate --methods
#     iba-amortized` fits it (128 training prompts, the deletion objective,
#     2 epochs), that fit timed; SST-2's fit on 32, 64 and 256 prompts (the
#     training-size curve's costs); batches of 16 (throughput), bf16 beside;
#   * the same machine's CPU, one thread a process, one process a task beside
#     the GPU run: 1 and 7 steps, and the fit on 16 prompts.
# Each part writes its text (and --json rows) under $OUT.
#
# The machine has torch and transformers but not captum (a wheel in .whl/,
# installed to /tmp/site), nor the weights, nor the corpora, nor the internet:
# the model is SmolLM2's configuration and tokenizer (a folder, SMOLLM2_CONFIG,
# default .gpu/smollm2: `config.save_pretrained` and `save_pretrained` of the
# tokenizer of the GGUF model) with seeded random weights - the same cost,
# every method here running a fixed number of steps; the corpora are a copy of
# the data folder (CAPTUM_IBA_DATA, default .gpu/data).
#
# Usage: bash benchmarks/bench_llm_device.sh   (from the repository root)
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/bench_llm_device}
CONFIG=${SMOLLM2_CONFIG:-.gpu/smollm2}
export CAPTUM_IBA_DATA=${CAPTUM_IBA_DATA:-$PWD/.gpu/data}
. benchmarks/device_setup.sh
B="python3 benchmarks/bench_llm_tasks.py --random-weights --model $CONFIG"
for t in sst2 ag_news rte; do
    CAPTUM_IBA_CACHE=/tmp/cache_cpu_$t timeout 380 $B --tasks $t --n 8 \
        --methods iba-deletion:steps=1 iba-deletion iba-amortized --fit-prompts 16 \
        --json "$OUT/cpu_$t.jsonl" >"$OUT/cpu_$t.txt" 2>&1 &
done
CAPTUM_IBA_CACHE=/tmp/cache_gpu timeout 270 $B --device cuda \
    --methods iba-deletion:steps=1 iba-deletion:steps=3 iba-deletion iba-amortized \
    --json "$OUT/gpu.jsonl" >"$OUT/gpu.txt" 2>&1
timeout 50 $B --device cuda --tasks sst2 --n 64 --batch-size 16 \
    --methods iba-deletion:steps=1 iba-deletion iba-deletion:precision=bf16 \
    >"$OUT/gpu_b16.txt" 2>&1
for k in 32 64 256; do
    CAPTUM_IBA_CACHE=/tmp/cache_k$k timeout 50 $B --device cuda --tasks sst2 --n 4 \
        --methods iba-amortized --fit-prompts $k >>"$OUT/gpu_fits.txt" 2>&1
done
wait
grep -h -v "it/s\]\|batch/s\]" "$OUT"/machine.txt "$OUT"/*.txt | tail -n 80
