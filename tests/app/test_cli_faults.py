"""The command line under bad input and faults: checked before any model
loads, one line and exit 2, never a traceback; atomic results with a completion
marker; nothing run from the current directory (P1, P3, P6, P8, P11, P12)."""

import json
import sys
from pathlib import Path

import pytest
import torch

from captum_iba.app import command_parts, commands, models, reproduce
from captum_iba.app.cli import main


def _fails(argv, capsys, code=2):
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == code, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


@pytest.fixture
def no_weights(monkeypatch):
    """Fails the test if any model weights are loaded."""

    def forbidden(*args, **kwargs):
        raise AssertionError("weights were loaded before the arguments were checked")

    monkeypatch.setattr(command_parts, "load_classifier", forbidden)
    monkeypatch.setattr(command_parts, "model_and_tokenizer", forbidden)


@pytest.mark.parametrize(
    "argv, says",
    [
        (["explain", "x", "--beta", "inf"], "--beta"),
        (["explain", "x", "--beta", "nan"], "--beta"),
        (["explain", "x", "--beta", "-1"], "--beta"),
        (["explain", "x", "--seed", str(2**70)], "--seed"),
        (["explain", "x", "--layer", "5"], "valid indices are 0..1"),
        (["explain", "x", "--layer", "-1"], "--layer: expected a layer index"),
        (["explain", "x", "--target", "2"], "valid indices are 0..1"),
        (["evaluate", "--max-length", "1000"], "valid values are 3..512"),
        (["evaluate", "--max-length", "0"], "--max-length"),
        (["evaluate", "--max-length", "1"], "at least 3"),
        (["evaluate", "--batch-size", "0"], "--batch-size"),
        (["evaluate", "--ig-steps", "0"], "--ig-steps"),
        (["evaluate", "--lime-samples", "0"], "--lime-samples"),
        (["evaluate", "--n", "-3"], "--n"),
        (["evaluate", "--layer", "9"], "valid indices are 0..1"),
    ],
)
def test_bad_numbers_fail_before_any_model_loads(
    argv, says, tiny_model_dir, tmp_path, capsys, no_weights
):
    extra = ["--model", tiny_model_dir]
    if argv[0] == "evaluate":
        extra += ["--out", str(tmp_path / "out")]
    err = _fails(argv + extra, capsys)
    assert says in err


def test_output_paths_are_checked_before_the_work(
    tiny_model_dir, tmp_path, capsys, no_weights
):
    a_file = tmp_path / "a_file"
    a_file.write_text("keep me")
    err = _fails(["explain", "x", "--model", tiny_model_dir, "--html", str(tmp_path)],
                 capsys)  # fmt: skip
    assert "is a folder" in err
    err = _fails(["evaluate", "--model", tiny_model_dir, "--out", str(a_file)], capsys)
    assert "is a file" in err
    err = _fails(["evaluate", "--model", tiny_model_dir, "--out",
                  str(a_file / "sub")], capsys)  # fmt: skip
    assert "is a file" in err
    err = _fails(["reproduce", "--out", str(a_file)], capsys)
    assert "is a file" in err
    assert a_file.read_text() == "keep me"


def test_model_placeholder_fails_at_once_without_the_hub(monkeypatch, capsys):
    from transformers import AutoConfig

    calls = []
    monkeypatch.setattr(
        AutoConfig, "from_pretrained", lambda *a, **k: calls.append((a, k))
    )
    err = _fails(["explain", "x", "--model", "PATH"], capsys)
    assert "not found" in err and "PATH" in err and calls == []


def test_unreachable_hub_id_fails_after_the_local_cache_only(monkeypatch, capsys):
    from transformers import AutoConfig

    calls = []

    def local_only(name, **kwargs):
        calls.append(kwargs)
        raise OSError("not in the cache")

    monkeypatch.setattr(AutoConfig, "from_pretrained", local_only)
    monkeypatch.setattr(models, "_hub_reachable", lambda timeout=3.0: False)
    err = _fails(["explain", "x", "--model", "someone/some-model"], capsys)
    assert "cannot be reached" in err
    assert calls == [{"local_files_only": True}]


def test_hub_ids_are_told_from_paths():
    for name in ("someone/some-model", "gpt2", "bert-base-uncased",
                 "distilbert-base-uncased-finetuned-sst-2-english"):  # fmt: skip
        assert models.looks_like_hub_id(name), name
    for name in ("PATH", "./model", "~/m", "/abs/m", "a/b/c", "..", "x"):
        assert not models.looks_like_hub_id(name), name


def test_pair_warning_from_the_fine_tuning_record(tiny_model_dir, capsys):
    Path(tiny_model_dir, "captum_iba_finetune.json").write_text(
        json.dumps({"dataset": "sst2"})
    )
    main(["explain", "a man sleeps", "--pair", "a person rests", "--model",
          tiny_model_dir, "--layer", "0"])  # fmt: skip
    out = capsys.readouterr().out
    assert "warning: --pair given" in out and "'sst2'" in out and "record" in out


def test_pair_warning_guessed_from_label_names(tiny_model_dir, capsys):
    main(["explain", "a man sleeps", "--pair", "a person rests", "--model",
          tiny_model_dir, "--layer", "0"])  # fmt: skip
    out = capsys.readouterr().out
    assert "warning: --pair given" in out and "guessed" in out


def test_top_tokens_leave_out_special_tokens(tiny_model_dir, capsys):
    main(["explain", "a fine film", "--model", tiny_model_dir, "--top", "2"])
    line = [ln for ln in capsys.readouterr().out.splitlines() if "top 2 words" in ln]
    assert len(line) == 1 and "[CLS]" not in line[0] and "[SEP]" not in line[0]
    assert line[0].count("(") == 2


def test_tokenizer_without_vocabulary_is_an_error(tmp_path, capsys):
    """P3: a tokenizer that turns every word into [UNK] is refused."""
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    BertTokenizer(vocab={w: i for i, w in enumerate(vocab)}).save_pretrained(tmp_path)
    cfg = BertConfig(vocab_size=5, hidden_size=8, num_hidden_layers=1,
                     num_attention_heads=2, intermediate_size=8)  # fmt: skip
    BertForSequenceClassification(cfg).save_pretrained(tmp_path)
    err = _fails(["explain", "a fine film", "--model", str(tmp_path)], capsys)
    assert "unknown token" in err


def test_nan_weights_are_named(tiny_model_dir, capsys):
    """P8: a model with NaN weights gets a clear error, not a numeric one."""
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        model.bert.encoder.layer[0].output.dense.weight[0, 0] = float("nan")
    model.save_pretrained(tiny_model_dir)
    err = _fails(["explain", "a fine film", "--model", tiny_model_dir], capsys)
    assert "non-finite" in err and "encoder.layer.0" in err


def test_messages_keep_their_quotes(monkeypatch, capsys):
    """P6: a message is printed as it is (no quote stripped off its ends)."""

    def raising(args, request):
        raise ValueError("'utf-8' codec can't decode byte 0xff in 'x.tsv'")

    monkeypatch.setitem(commands.COMMANDS, "explain", raising)
    err = _fails(["explain", "x"], capsys)
    assert "error: 'utf-8' codec can't decode byte 0xff in 'x.tsv'" in err


def test_unexpected_errors_are_one_line_unless_debugging(monkeypatch, capsys):
    def buggy(args, request):
        raise KeyError("oops")

    monkeypatch.setitem(commands.COMMANDS, "explain", buggy)
    err = _fails(["explain", "x"], capsys, code=1)
    assert "unexpected error: KeyError" in err and "CAPTUM_IBA_DEBUG" in err
    monkeypatch.setenv("CAPTUM_IBA_DEBUG", "1")
    with pytest.raises(KeyError):
        main(["explain", "x"])


# ------------------------------------------------------------ results on disk


def _tiny_sst2(folder: Path) -> Path:
    (folder / "sst2").mkdir(parents=True)
    rows = "".join(
        f"{w} film number {i}\t{y}\n"
        for i in range(4)
        for w, y in (("good", 1), ("bad", 0))
    )
    (folder / "sst2" / "dev.tsv").write_text("sentence\tlabel\n" + rows)
    return folder


def _evaluate(tiny_model_dir, tmp_path, out):
    return main(["evaluate", "--model", tiny_model_dir, "--data-dir",
                 str(_tiny_sst2(tmp_path / "data")), "--methods", "random",
                 "--n", "8", "--out", str(out)])  # fmt: skip


def test_evaluate_writes_results_then_the_marker(tiny_model_dir, tmp_path, capsys):
    """P12: the completion marker lists every file; a summary line ends it."""
    out = tmp_path / "out"
    assert _evaluate(tiny_model_dir, tmp_path, out) == 0
    marker = json.loads((out / commands.MARKER).read_text())
    assert sorted(marker["files"]) == sorted(
        p.name for p in out.iterdir() if p.name != commands.MARKER
    )
    assert not [p for p in out.iterdir() if p.name.startswith(".")]
    assert "instances/s" in capsys.readouterr().out


def test_evaluate_killed_while_writing_leaves_no_marker(
    tiny_model_dir, tmp_path, monkeypatch
):
    """P12: a crash while writing leaves the earlier files whole, no marker,
    and no half-written file."""
    out = tmp_path / "out"
    assert _evaluate(tiny_model_dir, tmp_path, out) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    import captum_iba.visualization as viz

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(viz, "plot_degradation_curves", crash)
    with pytest.raises(SystemExit) as exc:
        _evaluate(tiny_model_dir, tmp_path / "again", out)
    assert exc.value.code == 130
    assert not (out / commands.MARKER).exists()
    for p in out.iterdir():
        assert not p.name.startswith("."), p.name  # no temporary file left
        if p.is_file():
            assert p.read_bytes() == before[p.name] or p.suffix == ".json"
    for name in before:
        if name.endswith(".json") and name != commands.MARKER:
            json.loads((out / name).read_text())  # whole


def test_reproduce_names_a_damaged_table_before_any_work(tmp_path, monkeypatch, capsys):
    """P12: a truncated table1.json is named, nothing runs."""
    (tmp_path / "table1.json").write_text('[{"corpus": "sst2", "setting": "fa')
    monkeypatch.setattr(reproduce, "corpus_model", lambda c: pytest.fail("ran"))
    err = _fails(["reproduce", "--out", str(tmp_path), "--parts", "table"], capsys)
    assert str(tmp_path / "table1.json") in err and "damaged" in err


def test_reproduce_runs_no_code_from_the_current_directory(
    tmp_path, monkeypatch, capsys
):
    """P1: an experiments/reproduce.py in the current directory is not run."""
    marker = tmp_path / "PWNED"
    (tmp_path / "experiments").mkdir()
    for name in ("__init__.py", "reproduce.py"):
        (tmp_path / "experiments" / name).write_text(
            f"open({str(marker)!r}, 'w').write('ran')\n"
            "def run(*a, **k):\n    open(" + repr(str(marker)) + ", 'w')\n"
            "def main(*a, **k):\n    run()\n"
        )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # as `python -m` would
    for mod in [m for m in sys.modules if m.split(".")[0] == "experiments"]:
        monkeypatch.delitem(sys.modules, mod)
    called = []
    monkeypatch.setattr(reproduce, "run", lambda **kw: called.append(kw))
    assert main(["reproduce", "--parts", "examples", "--out", "res"]) == 0
    assert called and not marker.exists()


# ------------------------------------------------ issue 20: the long tail
def test_too_many_threads_fail_before_any_model_loads(
    tiny_model_dir, tmp_path, capsys, no_weights
):
    """Item 5: --threads past the CPUs is refused (100000 segfaulted)."""
    import os

    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    n = n or os.cpu_count()
    for threads in (n + 1, 100000):
        argv = ["evaluate", "--model", tiny_model_dir, "--threads", str(threads)]
        err = _fails(argv + ["--out", str(tmp_path / "out")], capsys)
        assert f"--threads: must be in 1 .. {n}" in err and "CPUs" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("precision", ["auto", "bf16", "float32"])
def test_an_unknown_cpu_bf16_variable_fails_before_any_model_loads(
    precision, tiny_model_dir, monkeypatch, capsys, no_weights
):
    """Issue 79 item 6: CAPTUM_IBA_CPU_BF16=garbage was refused only when
    the method ran in bf16, and taken as auto with --precision auto."""
    monkeypatch.setenv("CAPTUM_IBA_CPU_BF16", "garbage")
    argv = ["explain", "x", "--model", tiny_model_dir, "--precision", precision]
    err = _fails(argv, capsys)
    assert "CAPTUM_IBA_CPU_BF16='garbage': use 'on', 'off' or 'auto'" in err, err


def test_empty_pair_is_named(tiny_model_dir, capsys, no_weights):
    """Item 11: --pair "" is not "the text to explain is empty"."""
    err = _fails(["explain", "a film", "--pair", " ", "--model", tiny_model_dir],
                 capsys)  # fmt: skip
    assert "--pair is empty" in err


def _ag_news(folder: Path) -> Path:
    (folder / "ag_news").mkdir(parents=True)
    (folder / "ag_news" / "classes.txt").write_text("World\nSports\nBusiness\nSci\n")
    rows = "".join(f'"{1 + i % 4}","title {i}","text {i}"\n' for i in range(16))
    (folder / "ag_news" / "test.csv").write_text(rows)
    return folder


def test_corpus_with_other_classes_than_the_model_is_named(
    tiny_model_dir, tmp_path, capsys
):
    """Item 11: a 4-class corpus with a 2-class model names both (it said
    "target 3 ... out of range for forward output of shape (4, 2)")."""
    data = _ag_news(tmp_path / "data")
    for command in (["evaluate"], ["attribute", "--target", "predicted"]):
        err = _fails(command + ["--dataset", "ag_news", "--model", tiny_model_dir,
                                "--data-dir", str(data), "--methods", "random",
                                "--out", str(tmp_path / "out")], capsys)  # fmt: skip
        assert "--dataset ag_news has 4 classes (World, Sports" in err
        assert "the model has 2 (negative, positive)" in err
        assert not (tmp_path / "out").exists()


def _failing(argv, capsys):
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code in (1, 2, 130), exc.value.code
    return capsys.readouterr().err


def _listing(folder: Path):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize(
    "stage", ["arguments", "damaged corpus", "first unit", "interrupted"]
)
def test_failed_runs_leave_no_folder_they_made(
    stage, tiny_model_dir, tmp_path, capsys, monkeypatch
):
    """Item 10: a run failing in its checks, on a damaged corpus, or after
    loading (an error or Ctrl-C in its first unit) leaves no --out it made
    (nested folders too), and nothing of its own in an --out that was there."""
    from captum_iba.evaluation import RandomScorer

    data = _tiny_sst2(tmp_path / "data")
    extra = []
    if stage == "arguments":
        extra = ["--layer", "9"]
    elif stage == "damaged corpus":
        (data / "sst2" / "dev.tsv").write_text("sentence\tlabel\ngood\t7\n")
    else:
        error = KeyboardInterrupt if stage == "interrupted" else RuntimeError

        def fail(*args, **kwargs):
            raise error("fails in the first unit")

        monkeypatch.setattr(RandomScorer, "_scores", fail)
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")
    for out in (tmp_path / "new" / "nested" / "out", kept):
        _failing(["evaluate", "--model", tiny_model_dir, "--data-dir", str(data),
                  "--methods", "random", "--n", "8", "--out", str(out)]
                 + extra, capsys)  # fmt: skip
    assert not (tmp_path / "new").exists()
    assert _listing(kept) == ["notes.txt"]


def test_failed_resumed_run_keeps_the_earlier_work(
    tiny_model_dir, tmp_path, capsys, monkeypatch
):
    """Item 10: what a re-run resumes from (scored units) is never removed."""
    from captum_iba.evaluation import RandomScorer

    data = _tiny_sst2(tmp_path / "data")
    out = tmp_path / "out"
    argv = ["evaluate", "--model", tiny_model_dir, "--data-dir", str(data),
            "--methods", "random", "--n", "8", "--batch-size", "4",
            "--out", str(out)]  # fmt: skip
    real, calls = RandomScorer._scores, []

    def second_unit_fails(self, *args, **kwargs):
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("fails in the second unit")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(RandomScorer, "_scores", second_unit_fails)
    _failing(argv, capsys)
    shards = {p: p.read_bytes() for p in (out / "shards").glob("*.jsonl")}
    assert any(b'"kind": "row"' in b or b'"kind":"row"' in b for b in shards.values())
    calls.append(1)  # the next run fails at once
    _failing(argv, capsys)
    for path, content in shards.items():
        assert path.read_bytes().startswith(content)
    monkeypatch.setattr(RandomScorer, "_scores", real)
    assert main(argv) == 0 and (out / commands.MARKER).exists()


def test_failed_explain_leaves_no_html_folder(tiny_model_dir, tmp_path, capsys):
    html = tmp_path / "new" / "page.html"
    _failing(["explain", "x", "--model", tiny_model_dir, "--html", str(html),
              "--target", "1", "--layer", "7"], capsys)  # fmt: skip
    assert not (tmp_path / "new").exists()


def test_data_dir_is_named_as_the_command_line_spells_it(
    tiny_model_dir, tmp_path, capsys, no_weights
):
    """Issue 31, item 9: '--data-dir /nonexistent' is said so (it advised
    'pass data_dir=', the Python spelling)."""
    missing = tmp_path / "nonexistent"
    err = _fails(["evaluate", "--model", tiny_model_dir, "--data-dir", str(missing),
                  "--out", str(tmp_path / "out")], capsys)  # fmt: skip
    assert f"--data-dir {missing}: no such folder" in err and "data_dir=" not in err
    assert not (tmp_path / "out").exists()


def test_a_data_dir_without_the_corpus_names_every_spelling(tmp_path):
    from captum_iba.app.data import load_dataset

    with pytest.raises(FileNotFoundError) as caught:
        load_dataset("sst2", "dev", data_dir=tmp_path)
    message = str(caught.value)
    assert "--data-dir on the command line, data_dir= in Python" in message


def test_warnings_are_one_plain_line_while_a_command_runs(
    tiny_model_dir, monkeypatch, capsys
):
    """Issue 79 item 13: the CLI printed Python's warnings raw, with the
    package's file path and a source line; now one line each, without
    them, while the command runs (Python's own format restored after)."""
    import warnings

    before = warnings.formatwarning
    shown = []

    def command(args, request):
        shown.append(
            warnings.formatwarning(
                "iba: nearly flat -\n  read it with care",
                UserWarning,
                "/site-packages/captum_iba/app/explain_command.py",
                172,
                "return explain_answer(",
            )
        )
        return 0

    monkeypatch.setitem(commands.COMMANDS, "explain", command)
    assert main(["explain", "x", "--model", tiny_model_dir]) == 0
    assert shown == ["captum-iba: warning: iba: nearly flat - read it with care\n"]
    assert warnings.formatwarning is before


def test_the_nearly_flat_warning_suggests_no_method_by_name():
    """Issue 79 item 13: it told an iba-deletion user to 'compare
    iba-deletion'; it names no method, so never the one used."""
    from captum_iba.app.llm_explain_text import near_flat_said
    from captum_iba.registry import METHODS

    said = near_flat_said([0.5, 0.51, 0.52])
    assert "beside another method's ranking (--compare" in said
    assert not [m for m in METHODS.names() if f"compare {m.lower()}" in said.lower()]
