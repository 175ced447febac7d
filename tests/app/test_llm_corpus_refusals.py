"""``evaluate`` / ``attribute`` on a causal LM: every prompt checked against
the model's positions before any weights load (refused naming the
instances, or its content cut to ``--max-length``, recorded per row), and a
failed re-run of a finished folder keeps its completion marker (issue 53)."""

import json

import pytest

from captum_iba.app import commands
from captum_iba.app.cli import main
from tests.app.test_cli_faults import _fails, _tiny_sst2

LONG = " ".join(["good film"] * 10)  # 20 tokens: its prompt has 31 + the answer


def _data(folder):
    """SST-2 of 6 rows; rows 1 and 4 make prompts past the 32 positions."""
    (folder / "sst2").mkdir(parents=True)
    texts = ["good film", LONG + " bad", "bad film", "good", LONG + " good", "bad"]
    rows = "".join(f"{t}\t{i % 2}\n" for i, t in enumerate(texts))
    (folder / "sst2" / "dev.tsv").write_text("sentence\tlabel\n" + rows)
    return folder


def _argv(model, tmp_path, out, *more):
    data = tmp_path / "data"
    if not data.exists():
        _data(data)
    return ["evaluate", "--model", model, "--data-dir", str(data), "--n", "6",
            "--batch-size", "3", "--methods", "llm-random", "--out", str(out),
            *more]  # fmt: skip


@pytest.fixture
def no_weights(monkeypatch):
    """Fails any test that loads a causal LM's weights."""
    import transformers

    def refuse(*args, **kwargs):
        raise AssertionError("the weights were loaded")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", refuse)


def test_long_prompts_are_named_before_any_work(
    tiny_llm_dir, tmp_path, capsys, no_weights
):
    out = tmp_path / "out"
    err = _fails(_argv(tiny_llm_dir, tmp_path, out), capsys)
    assert "2 prompt(s) (instances 1, 4) have more tokens than the model's 32" in err
    assert "--max-length 32" in err, err
    assert not out.exists()  # nothing recorded: a re-run starts afresh


def test_max_length_cuts_the_content_never_the_instruction(
    tiny_llm_dir, tmp_path, capsys
):
    out = tmp_path / "out"
    assert main(_argv(tiny_llm_dir, tmp_path, out, "--max-length", "28")) == 0
    rows = {}
    for line in (out / "attributions.jsonl").open():
        row = json.loads(line)
        rows[row["index"]] = row
    assert len(rows) == 6
    for index, row in rows.items():
        assert row["prompt"].startswith("Classify the sentiment")
        assert row["prompt"].endswith("\nSentiment:")  # the instruction kept
        assert len(row["tokens"]) - 1 <= 28  # the prompt, then the answer
        assert (row["content_tokens_cut"] > 0) == (index in (1, 4))
    settings = json.loads((out / "settings.json").read_text())
    assert settings["max_length"] == 28
    assert "content_tokens_cut" in settings["fields"]
    assert main(_argv(tiny_llm_dir, tmp_path, out, "--max-length", "28")) == 0


def test_a_max_length_past_the_positions_is_refused(
    tiny_llm_dir, tmp_path, capsys, no_weights
):
    err = _fails(
        _argv(tiny_llm_dir, tmp_path, tmp_path / "o", "--max-length", "99"), capsys
    )
    assert "--max-length 99 is longer than the model's 32 positions" in err, err


def test_a_failed_rerun_of_a_finished_folder_keeps_its_marker(
    tiny_llm_dir,
    tmp_path,
    capsys,
    monkeypatch,
):
    out, data = tmp_path / "out", _tiny_sst2(tmp_path / "short")  # prompts fit
    argv = _argv(tiny_llm_dir, tmp_path, out, "--data-dir", str(data))
    assert main(argv) == 0
    marker = (out / commands.MARKER).read_text()
    import transformers

    def broken(*args, **kwargs):
        raise OSError("the weights are gone")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", broken)
    assert "the weights are gone" in _fails(argv, capsys)
    assert (out / commands.MARKER).read_text() == marker


def test_unknown_answer_words_are_refused_before_the_weights(
    tmp_path, capsys, no_weights
):
    from tests.app.test_llm_evaluate import _char_tokenizer
    from tests.helpers import tiny_causal_lm

    folder = tmp_path / "chars"
    tiny_causal_lm("llama", layers=1, seed=0).save_pretrained(folder)
    _char_tokenizer(unknown=True).save_pretrained(folder)
    data = _tiny_sst2(tmp_path / "short")
    err = _fails(
        _argv(str(folder), tmp_path, tmp_path / "out", "--data-dir", str(data)),
        capsys,
    )
    assert "the unknown token" in err, err
