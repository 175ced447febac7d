"""bf16 only where it is fast (issue 20, item 1): on a CPU without native
bfloat16 the measured ratio decides, once per machine, and a slow CPU runs
float32 with one warning. The decision is injected: no test times anything."""

import json
import warnings

import pytest
import torch

from captum_iba import InformationBottleneckAttribution
from captum_iba.attr import _precision
from tests.helpers import tiny_hf_model

IDS = torch.randint(5, 50, (2, 6), generator=torch.Generator().manual_seed(0))
FAST = dict(target=0, steps=2, n_samples=2, seed=0)


@pytest.fixture
def cpu(monkeypatch, tmp_path):
    """A fresh process on a CPU without native bf16 (the ratio cache in
    tmp_path); ``measured`` counts the micro-benchmarks and returns ``ratio``."""
    monkeypatch.setenv("CAPTUM_IBA_CACHE", str(tmp_path))
    monkeypatch.delenv(_precision.BF16_ENV_VAR, raising=False)
    monkeypatch.setattr(_precision, "_DECIDED", {})
    monkeypatch.setattr(_precision, "_WARNED", set())
    monkeypatch.setattr(_precision, "native_cpu_bf16", lambda: False)
    state = {"ratio": 20.0, "calls": 0}

    def measure():
        state["calls"] += 1
        return state["ratio"]

    monkeypatch.setattr(_precision, "measure_cpu_ratio", measure)
    return state


def _run(precision):
    torch.manual_seed(0)
    model = tiny_hf_model("bert")
    iba = InformationBottleneckAttribution(
        model, model.bert.encoder.layer[0], precision=precision
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = [iba.attribute(IDS, **FAST) for _ in range(2)]
    messages = [str(w.message) for w in caught if "bf16" in str(w.message)]
    return out, iba.last_run[0]["precision"], messages


def test_slow_cpu_runs_float32_and_says_so_once(cpu, tmp_path):
    (half, again), used, messages = _run("bf16")
    (full, _), _, _ = _run("float32")
    assert used == "float32" and torch.equal(half, full) and torch.equal(again, full)
    assert len(messages) == 1, messages
    says = messages[0]
    assert "20.0x float32's time" in says and _precision.capability() in says
    assert f"{_precision.BF16_ENV_VAR}=on" in says and str(tmp_path) in says
    assert cpu["calls"] == 1
    table = json.loads((tmp_path / _precision.CACHE_FILE).read_text())
    assert table == {_precision.machine_key(): 20.0}


def test_fast_cpu_runs_bf16(cpu):
    cpu["ratio"] = 0.6
    (half, _), used, messages = _run("bf16")
    (full, _), _, _ = _run("float32")
    assert used == "bf16" and not messages and not torch.equal(half, full)


def test_ratio_is_measured_once_per_machine(cpu, monkeypatch, tmp_path):
    first = _precision.cpu_bf16()
    monkeypatch.setattr(_precision, "_DECIDED", {})  # a new process
    second = _precision.cpu_bf16()
    assert cpu["calls"] == 1 and first == second and not second.fast
    (tmp_path / _precision.CACHE_FILE).write_text("{damaged")
    monkeypatch.setattr(_precision, "_DECIDED", {})
    cpu["ratio"] = 0.5
    assert _precision.cpu_bf16().fast and cpu["calls"] == 2
    table = json.loads((tmp_path / _precision.CACHE_FILE).read_text())
    assert table == {_precision.machine_key(): 0.5}


def test_native_bf16_and_the_variable_need_no_measurement(cpu, monkeypatch):
    monkeypatch.setattr(_precision, "native_cpu_bf16", lambda: True)
    assert _precision.cpu_bf16().fast
    monkeypatch.setattr(_precision, "native_cpu_bf16", lambda: False)
    for setting, fast in (("on", True), ("off", False), ("ON ", True)):
        monkeypatch.setenv(_precision.BF16_ENV_VAR, setting)
        assert _precision.cpu_bf16().fast is fast
    assert cpu["calls"] == 0
    monkeypatch.setenv(_precision.BF16_ENV_VAR, "maybe")
    with pytest.raises(ValueError, match=_precision.BF16_ENV_VAR):
        _precision.cpu_bf16()


def test_gpu_and_float32_are_not_decided(cpu):
    def never():
        raise AssertionError("decided where nothing was to decide")

    cuda = torch.device("cuda")
    assert _precision.resolve_precision("bf16", cuda, never) == "bf16"
    assert _precision.resolve_precision("float32", torch.device("cpu"), never) == (
        "float32"
    )
    assert cpu["calls"] == 0
