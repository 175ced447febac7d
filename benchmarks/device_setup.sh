# Sourced from the repository root by the GPU machine's benchmarks
# (bench_device.sh, bench_llm_device.sh, issue78_device.sh), with OUT set:
# captum from the wheel in $WHL (default .whl/) where the machine lacks it
# (installed to /tmp/site), the package on PYTHONPATH, unbuffered output, one
# thread a process; $OUT/machine.txt: the GPU, the CPU and the versions.
mkdir -p "$OUT"
if ! python3 -c "import captum" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
        "${WHL:-.whl}"/*.whl || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
{
    nvidia-smi -L
    lscpu | grep -E "Model name|^CPU\(s\)|Thread|Flags"
    python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__, torch.backends.cpu.get_cpu_capability(), torch.cuda.is_available())"
} >"$OUT/machine.txt" 2>&1
