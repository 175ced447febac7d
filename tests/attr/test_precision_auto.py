"""``precision="auto"`` (issue 54, item 2): the machine chooses - bf16 on a
CPU whose /proc/cpuinfo flags name native bfloat16 and on a GPU that has it,
float32 elsewhere, with no micro-benchmark and no warning; the default of
the configuration measured as faithful in bf16 (``iba-deletion``), the
resolved value recorded. The CPU's flags and CUDA are mocked: nothing here
depends on the machine the tests run on."""

import warnings
from contextlib import contextmanager

import pytest
import torch

from captum_iba import InformationBottleneckAttribution
from captum_iba.app import cli
from captum_iba.attr import _precision, _speed
from captum_iba.attr.kinds import CAUSAL_LM, CLASSIFIER
from captum_iba.attr.options import IBAOptions
from captum_iba.evaluation.iba import IBAScorer
from captum_iba.registry import OPTIONS
from tests.helpers import tiny_causal_lm, tiny_hf_model

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


@pytest.fixture
def machine(monkeypatch):
    """A CPU whose flags the test sets (``machine["flags"]``); the
    micro-benchmark must never run."""
    monkeypatch.delenv(_precision.BF16_ENV_VAR, raising=False)
    monkeypatch.setattr(_precision, "_DECIDED", {})
    monkeypatch.setattr(_precision, "_WARNED", set())
    state = {"flags": {"fpu", "avx2"}}
    monkeypatch.setattr(_precision, "cpu_flags", lambda: state["flags"])

    def never():
        raise AssertionError("auto measured bf16")

    monkeypatch.setattr(_precision, "measure_cpu_ratio", never)
    return state


def test_cpu_flags_are_read_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nmodel name\t: X\nflags\t\t: fpu avx2 avx512_bf16 amx_tile\n"
        "processor\t: 1\nflags\t\t: fpu\n"
    )
    assert _precision.cpu_flags(str(info)) == {"fpu", "avx2", "avx512_bf16", "amx_tile"}
    assert _precision.cpu_flags(str(tmp_path / "absent")) is None


@pytest.mark.parametrize(
    "flags, expected",
    [
        ({"fpu", "avx2", "fma"}, "float32"),
        ({"avx2", "avx512f", "avx512_vnni"}, "float32"),
        ({"avx2", "avx512f", "avx512_bf16"}, "bf16"),
        ({"avx2", "amx_tile", "amx_bf16"}, "bf16"),
    ],
)
def test_auto_on_a_cpu_follows_its_flags(machine, flags, expected):
    machine["flags"] = flags
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _precision.resolve_precision("auto", CPU) == expected


def test_auto_where_cpuinfo_is_unreadable_asks_torch(machine, monkeypatch):
    machine["flags"] = None
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True)
    assert _precision.auto_precision(CPU) == "bf16"
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    assert _precision.auto_precision(CPU) == "float32"


def test_auto_obeys_the_cpu_variable(machine, monkeypatch):
    machine["flags"] = {"avx512_bf16"}
    monkeypatch.setenv(_precision.BF16_ENV_VAR, "off")
    assert _precision.auto_precision(CPU) == "float32"
    machine["flags"] = {"avx2"}
    monkeypatch.setenv(_precision.BF16_ENV_VAR, "on")
    assert _precision.auto_precision(CPU) == "bf16"


def test_auto_refuses_an_unknown_cpu_variable(machine, monkeypatch):
    """``CAPTUM_IBA_CPU_BF16=garbage`` was taken as ``auto`` (issue 79 item 6)."""
    monkeypatch.setenv(_precision.BF16_ENV_VAR, "garbage")
    with pytest.raises(ValueError, match="CAPTUM_IBA_CPU_BF16='garbage': use 'on'"):
        _precision.auto_precision(CPU)


@pytest.mark.parametrize("supported, expected", [(True, "bf16"), (False, "float32")])
def test_auto_on_a_gpu_asks_cuda(machine, monkeypatch, supported, expected):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: supported)
    assert _precision.resolve_precision("auto", CUDA) == expected
    assert _precision.resolve_precision("auto", torch.device("meta")) == "float32"


def test_the_class_takes_auto_and_records_what_ran(machine, monkeypatch):
    contexts = []

    @contextmanager
    def precision_context(model, precision, device):
        contexts.append(precision)  # the autocast itself: tests/attr/test_precision
        yield

    monkeypatch.setattr(_speed, "precision_context", precision_context)
    torch.manual_seed(0)
    model = tiny_hf_model("bert")
    ids = torch.randint(5, 50, (1, 6), generator=torch.Generator().manual_seed(0))
    iba = InformationBottleneckAttribution(
        model, model.bert.encoder.layer[0], precision="auto"
    )
    run = dict(target=0, steps=1, n_samples=2, seed=0)
    auto = iba.attribute(ids, **run)
    assert iba.last_run[0]["precision"] == "float32"
    iba.precision = "float32"
    assert torch.equal(auto, iba.attribute(ids, **run))
    machine["flags"] = {"amx_bf16"}
    iba.precision = "auto"
    iba.attribute(ids, **run)
    assert iba.last_run[0]["precision"] == "bf16" and contexts[-1] == "bf16"
    assert set(contexts[:-1]) == {"float32"}


def test_auto_is_the_default_only_where_bf16_was_measured_faithful():
    deletion = IBAOptions.from_config("deletion")
    assert _precision.default_precision(deletion) == "auto"
    assert CAUSAL_LM.default_precision(deletion) == "float32"
    assert CLASSIFIER.default_precision(deletion) == "auto"
    for config in ("paper", "faithful"):
        assert _precision.default_precision(IBAOptions.from_config(config)) == (
            "float32"
        )


def test_scorers_record_the_resolved_precision(machine):
    model = tiny_hf_model("bert")
    layer = model.bert.encoder.layer[0]
    deletion = dict(layer="embeddings", config="deletion")
    assert IBAScorer(model, **deletion).settings["precision"] == "float32"
    machine["flags"] = {"avx512_bf16"}
    assert IBAScorer(model, **deletion).settings["precision"] == "bf16"
    assert IBAScorer(model, layer, config="paper").settings["precision"] == "float32"
    assert IBAScorer(model, **deletion, precision="float32").settings["precision"] == (
        "float32"
    )
    scorer = IBAScorer(model, **deletion, steps=1)
    machine["flags"] = {"avx2"}  # the model on another device by the call
    ids = torch.randint(5, 50, (1, 6), generator=torch.Generator().manual_seed(0))
    scorer.attribute(ids, torch.tensor([0]), torch.ones_like(ids), None)
    assert scorer.settings["precision"] == "float32"
    machine["flags"] = {"avx512_bf16"}
    lm = tiny_causal_lm("llama")
    assert IBAScorer(lm, **deletion).settings["precision"] == "float32"
    assert IBAScorer(lm, **deletion, precision="auto").settings["precision"] == ("bf16")


def test_the_command_line_takes_precision_and_keeps_bf16():
    parse = cli._parser().parse_args
    base = ["evaluate", "--methods", "iba-deletion"]
    assert parse(base + ["--precision", "auto"]).precision == "auto"
    assert parse(base + ["--precision", "float32"]).precision == "float32"
    assert parse(base + ["--bf16"]).precision == "bf16"
    assert parse(base).precision is None
    assert OPTIONS.load("precision")("auto") == "auto"
    with pytest.raises(SystemExit):
        parse(base + ["--precision", "fp16"])


def test_the_page_says_which_precision_ran(tiny_model_dir):
    from captum_iba.app.explanation import explain

    result = explain("a fine film", tiny_model_dir, "iba-deletion", steps=1)
    assert result.methods["iba-deletion"].settings["precision"] == "float32"
    assert "; float32; " in result.details("iba-deletion")
    assert "float32" in result.to_html()
