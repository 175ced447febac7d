#!/usr/bin/env bash
# Issue 54's rows on a lent GPU machine, in one short run (~6 min):
#   * its CPU: benchmarks/bench_released.py at 77 and 256 tokens (the released
#     code itself, the emulation, ours in float32 and - where the CPU has
#     native bfloat16 - bf16), once more at 77 tokens with torch's kernels
#     held to AVX2 (ATEN_CPU_CAPABILITY=avx2: the same CPU, AVX2 code paths),
#     and the causal-LM default at 128 and 512 prompt tokens; one thread per
#     process, CPU-s, several processes side by side (16 cores);
#   * its GPU: the same comparison in wall seconds, ours' throughput at
#     B = 1, 8, 32, 128, the causal-LM default, and bench_iba.py --quick.
# Each part writes one file under $OUT (default /tmp/bench_device).
#
# The machine has torch and transformers but not captum (carried as a wheel
# in .whl/, installed to /tmp/site), nor the model packages (MiniLM-L6 and
# SmolLM2 are built from their configurations with seeded random weights:
# the same cost), nor the internet (the released code comes as a folder,
# RELEASED_SRC, default ./released: `git archive` of the pinned commit).
#
# Usage: bash benchmarks/bench_device.sh   (from the repository root)
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/bench_device}
SRC=${RELEASED_SRC:-released}
. benchmarks/device_setup.sh
B="python3 benchmarks/bench_released.py"
timeout 480 $B --released-src "$SRC" --lengths 77 >"$OUT/cpu_77.txt" 2>&1 &
timeout 480 $B --released-src "$SRC" --lengths 256 >"$OUT/cpu_256.txt" 2>&1 &
ATEN_CPU_CAPABILITY=avx2 timeout 480 $B --released-src "$SRC" --lengths 77 --bf16 off \
    >"$OUT/cpu_77_avx2.txt" 2>&1 &
timeout 480 $B --lengths --llm --llm-lengths 128 >"$OUT/llm_128.txt" 2>&1 &
timeout 480 $B --lengths --llm --llm-lengths 512 --reps 1 >"$OUT/llm_512.txt" 2>&1 &
if python3 -c "import torch, sys; sys.exit(not torch.cuda.is_available())"; then
    timeout 300 $B --device cuda --released-src "$SRC" --throughput --llm >"$OUT/gpu.txt" 2>&1
    timeout 150 python3 benchmarks/bench_iba.py --quick --device cuda >"$OUT/gpu_bench_iba.txt" 2>&1
fi
wait
tail -n 30 "$OUT"/*.txt
