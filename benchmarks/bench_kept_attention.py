"""The kept attention of ``removal="attention"`` on a causal LM's fused
route (:func:`captum_iba.attr._attention.kept_sdpa`): numerator and
denominator in one call of PyTorch's fused attention (queries and keys
zero-padded to the values' size), against two calls (before), one call
without the padding, and the plain attention; forward + backward, in one
run.

SmolLM2-135M's shapes (9 heads of 64 channels) by default, a batch of 4,
causal, float32, one torch thread; the keep weights need a gradient. Medians
of ``--repeats`` process times per cell, with
``torch.backends.cpu.get_cpu_capability()``.

Usage::

    python benchmarks/bench_kept_attention.py --lengths 64 128 256 512
"""

import argparse
import statistics
import time
from typing import Callable, List

import torch
import torch.nn.functional as F
from torch import Tensor

from captum_iba.attr._attention import DENOMINATOR_CHANNELS, kept_attention


def plain(q: Tensor, k: Tensor, v: Tensor, keep: Tensor) -> Tensor:
    """The attention without keep weights (the floor)."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def two_calls(q: Tensor, k: Tensor, v: Tensor, keep: Tensor) -> Tensor:
    """Numerator and denominator in two calls of ``d`` channels (before)."""
    w = keep[:, None, :, None]
    num = F.scaled_dot_product_attention(q, k, v * w, is_causal=True)
    den = F.scaled_dot_product_attention(
        q, k, w.expand_as(v).contiguous(), is_causal=True
    )
    return num / den.clamp_min(1e-30)


def one_call(q: Tensor, k: Tensor, v: Tensor, keep: Tensor) -> Tensor:
    """Both in one call of ``d + DENOMINATOR_CHANNELS`` value channels, the
    queries and keys padded with zeros to that size, the scale kept (now:
    the library's own :func:`~captum_iba.attr._attention.kept_attention`)."""
    scale = q.shape[-1] ** -0.5

    def attend(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)

    return kept_attention(attend, q, k, v, keep[:, None, :, None])


def unpadded(q: Tensor, k: Tensor, v: Tensor, keep: Tensor) -> Tensor:
    """As :func:`one_call` with queries and keys of ``d`` channels: the
    fused kernel's slower case (values of another size)."""
    w, extra, d = keep[:, None, :, None], DENOMINATOR_CHANNELS, v.shape[-1]
    both = torch.cat([v * w, w.expand(*v.shape[:-1], extra)], -1)
    out = F.scaled_dot_product_attention(q, k, both, is_causal=True)
    return out[..., :d] / out[..., d : d + 1].clamp_min(1e-30)


def timed(fn: Callable[..., Tensor], length: int, args: argparse.Namespace) -> float:
    """The median process time of one forward + backward."""
    g = torch.Generator().manual_seed(0)
    shape = (args.batch, args.heads, length, args.dim)
    q, k, v = (torch.randn(shape, generator=g).requires_grad_() for _ in range(3))
    keep = torch.rand(args.batch, length, generator=g).requires_grad_()
    times: List[float] = []
    for _ in range(args.repeats + 1):  # the first: warm-up, not counted
        began = time.process_time()
        fn(q, k, v, keep).sum().backward()
        times.append(time.process_time() - began)
    return statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 128, 256, 512])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=9)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 3, 11, 8, generator=g) for _ in range(3))
    keep = torch.rand(2, 11, generator=g)
    for fn in (one_call, unpadded):
        torch.testing.assert_close(fn(q, k, v, keep), two_calls(q, k, v, keep))
    cpu = torch.backends.cpu.get_cpu_capability()
    print(f"CPU capability {cpu}; torch {torch.__version__}; batch {args.batch}, "
          f"{args.heads} heads of {args.dim}; ms of forward + backward (median of "
          f"{args.repeats})")  # fmt: skip
    print(f"{'length':>6} {'plain':>8} {'two calls':>10} {'unpadded':>9} "
          f"{'one call':>9} {'one / two':>9} {'one / plain':>11}")  # fmt: skip
    cells = (plain, two_calls, unpadded, one_call)
    for length in args.lengths:
        ms = [1e3 * timed(fn, length, args) for fn in cells]
        print(f"{length:>6} {ms[0]:>8.1f} {ms[1]:>10.1f} {ms[2]:>9.1f} {ms[3]:>9.1f} "
              f"{ms[3] / ms[1]:>9.2f} {ms[3] / ms[0]:>11.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
