"""Whether ``precision="bf16"`` is worth it on the device at hand.

bfloat16 autocast halves IBA's time on a GPU and on CPUs with native bfloat16
arithmetic (AVX512-BF16 or AMX). On other CPUs (e.g. AVX2 only) PyTorch
emulates it and the same run is many times *slower* than float32 (issue 20:
20x on an AVX2 AMD EPYC). So before bf16 runs on a CPU:

1. a CPU with native bfloat16 (:func:`native_cpu_bf16`) uses it;
2. on any other CPU a micro-benchmark (:func:`measure_cpu_ratio`: the
   forward and backward of a transformer feed-forward block under autocast,
   against float32, in CPU seconds) is run once per machine and cached in
   ``$CAPTUM_IBA_CACHE/cpu_bf16.json`` (default ``~/.cache/captum_iba``),
   keyed by the CPU model, torch's CPU capability and the torch version;
3. when bfloat16 is slower there, a warning (once per process) gives the
   measured ratio and IBA runs in float32.

The environment variable ``CAPTUM_IBA_CPU_BF16`` decides without measuring:
``on`` (bf16 on any CPU), ``off`` (never on a CPU), ``auto`` (the default).

``precision="auto"`` (:func:`auto_precision`) asks the machine instead of the
user: bfloat16 on a GPU that supports it (``torch.cuda.is_bf16_supported()``)
and on a CPU whose ``/proc/cpuinfo`` flags name native bfloat16
(:data:`CPU_BF16_FLAGS`), float32 elsewhere - no micro-benchmark, no warning.
It is the default of the configurations whose bfloat16 scores were measured
as faithful as float32's (:func:`default_precision`).
"""

import json
import platform
import statistics
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Set, Tuple

import torch

from captum_iba._utils.common import model_device
from captum_iba._utils.io import atomic_write_text, cache_root
from captum_iba._utils.values import BF16_ENV_VAR, cpu_bf16_setting

__all__ = [
    "BF16_ENV_VAR",
    "CACHE_FILE",
    "CPU_BF16_FLAGS",
    "CpuBf16",
    "auto_precision",
    "cpu_bf16",
    "cpu_flags",
    "default_precision",
    "measure_cpu_ratio",
    "native_cpu_bf16",
    "precision_used",
    "resolve_precision",
]

#: The file, in the cache root, that keeps the measured ratios.
CACHE_FILE = "cpu_bf16.json"
#: bf16 is used on a CPU whose measured time ratio bf16 / float32 is below this.
FAST_ENOUGH = 1.0
#: The /proc/cpuinfo flags of native bfloat16 arithmetic: AVX512-BF16 and AMX.
CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16", "amx_tile")


@dataclass(frozen=True)
class CpuBf16:
    """What is known of bfloat16 on this CPU.

    Attributes:
        fast (bool): Whether IBA uses bf16 here.
        reason (str): Why, in words (for the warning).
        ratio (float, optional): Measured CPU seconds of bf16 over float32.
    """

    fast: bool
    reason: str
    ratio: Optional[float] = None


def cpu_flags(path: str = "/proc/cpuinfo") -> Optional[Set[str]]:
    """The CPU's feature flags (the first ``flags`` line of ``path``), or None
    where the file cannot be read (not Linux)."""
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        return None
    return set()


def native_cpu_bf16() -> bool:
    """Whether the CPU has bfloat16 instructions (AVX512-BF16 or AMX tiles):
    its /proc/cpuinfo flags, else what torch detects."""
    flags = cpu_flags()
    if flags is not None:
        return any(f in flags for f in CPU_BF16_FLAGS)
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in checks)


def auto_precision(device: torch.device) -> str:
    """What ``precision="auto"`` runs in on ``device``: ``"bf16"`` on a GPU
    with bfloat16 support and on a CPU with native bfloat16
    (:func:`native_cpu_bf16`; ``CAPTUM_IBA_CPU_BF16=on``/``off`` decides for
    any CPU), ``"float32"`` elsewhere.

    Args:
        device (torch.device): Where the model runs.

    Returns:
        str: ``"float32"`` or ``"bf16"``.

    Raises:
        ValueError: ``CAPTUM_IBA_CPU_BF16`` set to another value than
            ``on``, ``off``, ``auto``
            (:func:`~captum_iba._utils.values.cpu_bf16_setting`).
    """
    device_type = torch.device(device).type
    if device_type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "float32"
    if device_type != "cpu":
        return "float32"
    setting = cpu_bf16_setting()
    if setting in ("on", "off"):
        return "bf16" if setting == "on" else "float32"
    return "bf16" if native_cpu_bf16() else "float32"


def default_precision(options: Any) -> str:
    """A classifier's default precision: ``"auto"`` for the configuration
    whose bfloat16 scores were measured as faithful as float32's - the
    deletion configuration (attention removal with the complement term):
    AOPC within .001 of float32 on the SST-2 and RTE report splits
    (docs/faithfulness.rst) - and ``"float32"`` for every other
    configuration. A causal LM's is ``"float32"`` (not measured in bfloat16;
    :meth:`~captum_iba.attr.kinds.ModelKind.default_precision`).

    Args:
        options (IBAOptions): The run's options.

    Returns:
        str: ``"auto"`` or ``"float32"``.
    """
    deletion = options.removal == "attention" and options.complement > 0
    return "auto" if deletion else "float32"


def capability() -> str:
    """``torch.backends.cpu.get_cpu_capability()`` (e.g. ``"AVX2"``)."""
    return str(torch.backends.cpu.get_cpu_capability())


def machine_key() -> str:
    """The CPU model, torch's CPU capability and the torch version."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            names = [ln.split(":", 1)[1] for ln in fh if ln.startswith("model name")]
        model = names[0].strip() if names else model
    except OSError:
        pass
    return f"{model} | {capability()} | torch {torch.__version__}"


def _block_seconds(dtype: Optional[torch.dtype], rows: int) -> float:
    """CPU seconds of one forward + backward of a BERT-base-like feed-forward
    block (384 -> 1536 -> 384, GELU) on ``rows`` rows, under autocast to
    ``dtype`` (None: float32)."""
    g = torch.Generator().manual_seed(0)
    up = torch.randn(1536, 384, generator=g) / 20
    down = torch.randn(384, 1536, generator=g) / 40
    x = torch.randn(rows, 384, generator=g, requires_grad=True)
    start = time.process_time()
    autocast = torch.autocast("cpu", torch.bfloat16, enabled=dtype is not None)
    with autocast:
        h = torch.nn.functional.gelu(x @ up.T) @ down.T
        torch.autograd.grad(h.float().square().sum(), x)
    return time.process_time() - start


def measure_cpu_ratio(repeats: int = 3, rows: int = 128) -> float:
    """The median of ``repeats`` paired ratios of CPU seconds, bf16 autocast
    over float32, of :func:`_block_seconds`, on one thread (several threads
    count their waiting as CPU time); the first pair warms up and is left
    out. About a second on a CPU without native bfloat16."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _block_seconds(None, rows), _block_seconds(torch.bfloat16, rows)
        ratios = []
        for _ in range(repeats):
            base = max(_block_seconds(None, rows), 1e-6)
            ratios.append(_block_seconds(torch.bfloat16, rows) / base)
    finally:
        torch.set_num_threads(threads)
    return statistics.median(ratios)


def _cached_ratio(path: Path, key: str, measure: Callable[[], float]) -> float:
    """The ratio cached for ``key`` in ``path``, else measured and written."""
    try:
        table: Dict[str, float] = json.loads(path.read_text(encoding="utf-8"))
        value = table[key]
        if isinstance(value, (int, float)) and value > 0:
            return float(value)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        table = {}
    if not isinstance(table, dict):
        table = {}
    table[key] = ratio = float(measure())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(table, indent=1, sort_keys=True) + "\n")
    except OSError:
        pass  # a read-only cache: measured again in the next process
    return ratio


_DECIDED: Dict[str, CpuBf16] = {}


def cpu_bf16(measure: Optional[Callable[[], float]] = None) -> CpuBf16:
    """Whether bf16 is worth it on this CPU (decided once per process).

    Args:
        measure (Callable): The micro-benchmark (default
            :func:`measure_cpu_ratio`); run only on a CPU without native
            bfloat16 whose ratio is not cached yet.

    Returns:
        CpuBf16: The decision, its reason and the measured ratio.

    Raises:
        ValueError: ``CAPTUM_IBA_CPU_BF16`` set to another value than
            ``on``, ``off``, ``auto``.
    """
    setting = cpu_bf16_setting()
    if setting != "auto":
        return CpuBf16(setting == "on", f"{BF16_ENV_VAR}={setting}")
    key = machine_key()
    if key not in _DECIDED:
        if native_cpu_bf16():
            _DECIDED[key] = CpuBf16(True, "the CPU has native bfloat16")
        else:
            path = cache_root() / CACHE_FILE
            ratio = _cached_ratio(path, key, measure or measure_cpu_ratio)
            _DECIDED[key] = CpuBf16(
                ratio < FAST_ENOUGH,
                f"this CPU ({capability()}: torch.backends.cpu.get_cpu_capability(), "
                f"no native bfloat16) measured bfloat16 at {ratio:.1f}x float32's "
                f"time (measured once, kept in {path})",
                ratio,
            )
    return _DECIDED[key]


_WARNED: Set[str] = set()


def resolve_precision(
    precision: str,
    device: torch.device,
    decide: Optional[Callable[[], CpuBf16]] = None,
) -> str:
    """The precision IBA runs in: for ``"bf16"``, bf16 on a GPU and where the
    CPU runs it fast, else ``"float32"`` (with a warning, once per process);
    for ``"auto"``, :func:`auto_precision`.

    Args:
        precision (str): ``"float32"``, ``"bf16"`` or ``"auto"`` (asked for).
        device (torch.device): Where the model runs.
        decide (Callable, optional): Returns the CPU's :class:`CpuBf16`
            (default :func:`cpu_bf16`).

    Returns:
        str: ``"float32"`` or ``"bf16"``.
    """
    if precision == "auto":
        return auto_precision(device)
    if precision != "bf16" or torch.device(device).type != "cpu":
        return precision
    verdict = (decide or cpu_bf16)()
    if verdict.fast:
        return "bf16"
    if verdict.reason not in _WARNED:
        _WARNED.add(verdict.reason)
        warnings.warn(
            f"precision='bf16' runs in float32 here: {verdict.reason}. "
            f"Set {BF16_ENV_VAR}=on to use bf16 anyway.",
            stacklevel=4,
        )
    return "float32"


def precision_used(
    model: Any, precision: Optional[str], default: str
) -> Tuple[str, str]:
    """The precision a scorer asks for - ``precision``, or for None
    ``default`` (its model kind's,
    :meth:`~captum_iba.attr.kinds.ModelKind.default_precision`) - and what
    it resolves to on the model's device now (:func:`resolve_precision`; the
    attribution resolves it again at each call, on the device the model is
    on then, and records it in ``last_run``).

    Args:
        model (Any): The model (its first parameter's device).
        precision (str, optional): ``"float32"``, ``"bf16"``, ``"auto"`` or
            None (the default).
        default (str): The precision for None.

    Returns:
        tuple(str, str): The precision asked for, and ``"float32"`` or
        ``"bf16"``.
    """
    asked = precision or default
    return asked, resolve_precision(asked, model_device(model))
