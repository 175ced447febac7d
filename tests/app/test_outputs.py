"""What ``evaluate`` and ``attribute`` print and write reads on its own: the
output folder named first, every column explained with its better direction,
rows in the order asked, one summary line, bars in plain words, and the units
of the JSON lines in ``settings.json``."""

import json

from captum_iba.app.cli import main
from captum_iba.app.engine import World
from captum_iba.app.engine.merge import ROW_FIELDS
from captum_iba.app.engine.progress import Progress
from tests.app.test_cli_faults import _tiny_sst2


def _corpus(tmp_path):
    return str(_tiny_sst2(tmp_path / "data"))


def test_evaluate_output_explains_itself(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["evaluate", "--model", tiny_model_dir, "--data-dir", _corpus(tmp_path),
            "--methods", "random,loo", "--n", "8", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("captum-iba evaluate: sst2 dev, methods random, LOO")
    assert f"results go to {out}/" in lines[0]
    table = [ln for ln in lines if ln.startswith("| ")]
    assert "drop @ 11.1 % ↑" in table[0] and "sufficiency ↓" in table[0]
    assert [row.split("|")[1].strip() for row in table[1:]] == ["random", "LOO"]
    legend = " ".join(lines[lines.index(table[-1]) + 1 :])
    assert legend.startswith("Columns: n: instances.")
    for column in ("p(class):", "AOPC:", "comprehensiveness:", "log-odds:"):
        assert column in legend, column
    summary = [ln for ln in lines if "instances/s" in ln]
    assert len(summary) == 1 and summary[0].startswith("done: 8 instances x 2")
    assert "model accuracy" in summary[0] and str(out) in summary[0]


def test_attribute_settings_say_what_each_field_holds(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["attribute", "--model", tiny_model_dir, "--data-dir", _corpus(tmp_path),
            "--methods", "iba-faithful,ig", "--n", "4", "--out", str(out),
            "--degradation"]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "fields and units" in printed and printed.count("instances/s") == 1
    settings = json.loads((out / "settings.json").read_text())
    rows = [json.loads(ln) for ln in (out / "attributions.jsonl").open()]
    assert set().union(*rows) == set(settings["fields"]) <= set(ROW_FIELDS)
    assert "text_pair" not in settings["fields"]  # single sentences
    assert settings["fields"]["target"].endswith(": the gold label")
    scores = settings["scores"]
    assert scores["iba-faithful"]["signed"] is False
    assert "no direction" in scores["iba-faithful"]["meaning"]
    assert scores["IG"]["signed"] is True and "+ for" in scores["IG"]["meaning"]


def test_evaluate_settings_describe_this_run(tiny_model_dir, tmp_path, capsys):
    """Issue 31, item 9: no '--target predicted' (evaluate has no such
    option), no prior, beta or seed for iba-deletion (it uses none)."""
    out = tmp_path / "out"
    argv = ["evaluate", "--model", tiny_model_dir, "--data-dir", _corpus(tmp_path),
            "--methods", "iba-deletion,iba-faithful", "--steps", "2", "--n", "4",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    settings = json.loads((out / "settings.json").read_text())
    assert "--target" not in json.dumps(settings["fields"])
    assert settings["fields"]["degradation"].startswith("the instance's degradation")
    deletion, faithful = (
        settings["methods"][m] for m in ("iba-deletion", "iba-faithful")
    )
    assert not {"prior", "beta", "seed"} & set(deletion)
    assert deletion["removal"] == "attention" and deletion["steps"] == 2
    assert faithful["prior"] == "baseline" and "beta" in faithful
    rows = [json.loads(ln) for ln in (out / "attributions.jsonl").open()]
    assert set().union(*rows) == set(settings["fields"])


def test_predicted_targets_are_said_so(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["attribute", "--model", tiny_model_dir, "--data-dir", _corpus(tmp_path),
            "--methods", "random", "--n", "4", "--target", "predicted",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    fields = json.loads((out / "settings.json").read_text())["fields"]
    assert fields["target"] == "the class explained (index): the predicted class"
    assert "degradation" not in fields


def test_progress_bars_say_what_they_count(tmp_path, monkeypatch):
    from captum_iba.app.engine import progress

    seen = {}
    monkeypatch.setattr(progress, "tqdm", lambda **kw: seen.update(kw))
    (tmp_path / "shards").mkdir()
    Progress(tmp_path, World(), 10, {}, [])
    assert seen["desc"] == "instances x methods scored" and seen["unit"] == "score"


def test_the_docs_list_every_field_of_the_json_lines():
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[2] / "docs" / "scaling.rst").read_text()
    table = docs.split("what it holds, and its unit")[1].split("settings.json`` holds")[
        0
    ]
    missing = [f for f in ROW_FIELDS if f"``{f}``" not in table]
    assert not missing, missing


def test_a_model_of_another_corpus_is_said_so(tiny_model_dir, tmp_path, capsys):
    """Issue 31, item 4: '--model <sst2 model> --dataset rte' printed
    'accuracy 50.0 %' without a word; explain --pair warned from the same
    record."""
    import shutil

    model = tmp_path / "sst2-model"
    shutil.copytree(tiny_model_dir, model)
    (model / "captum_iba_finetune.json").write_text(json.dumps({"dataset": "sst2"}))
    data = tmp_path / "data" / "rte"
    data.mkdir(parents=True)
    rows = [{"sentence1": f"a man {i}", "sentence2": "a person", "label": i % 2}
            for i in range(4)]  # fmt: skip
    (data / "validation.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    argv = ["evaluate", "--model", str(model), "--data-dir", str(data.parent),
            "--dataset", "rte", "--methods", "random", "--out",
            str(tmp_path / "out")]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    said = "this model was fine-tuned on 'sst2' (its fine-tuning record says so)"
    assert out.count("warning: ") == 2 and out.count(said) == 2
    assert "not on --dataset rte" in " ".join(out.splitlines()[-3:])
    same = ["evaluate", "--model", tiny_model_dir, "--data-dir", _corpus(tmp_path),
            "--methods", "random", "--n", "4",
            "--out", str(tmp_path / "o2")]  # fmt: skip
    assert main(same) == 0 and "warning" not in capsys.readouterr().out


def test_piped_progress_is_plain_lines(tiny_model_dir, tmp_path, capsys):
    """Issue 31, item 13: piped, nothing was said for 45 s; now a line when
    scoring starts (what runs first), then progress lines, the last at 100 %."""
    out = tmp_path / "out"
    argv = ["evaluate", "--model", tiny_model_dir, "--data-dir", _corpus(tmp_path),
            "--methods", "random,loo", "--n", "8", "--batch-size", "4",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    err = capsys.readouterr().err  # not a terminal here
    lines = [ln for ln in err.splitlines() if ln.startswith("[captum_iba]")]
    assert lines[0].startswith("[captum_iba] scoring 16 of 16 instances x methods")
    assert lines[1] == "[captum_iba] working on unit 1 of 2: random"
    assert lines[-1].startswith(
        "[captum_iba] 16 of 16 instances x methods scored (100 %)"
    )


def test_the_bar_moves_per_method_and_names_what_runs(tmp_path, monkeypatch):
    """Issue 31, item 13: in a terminal the bar stood at 0/60 for 35 s, then
    jumped by units; it moves as each method finishes a unit and says which
    unit and method run."""
    from captum_iba.app.engine import progress

    class Bar:
        disable, n = False, 0

        def __init__(self, **kw):
            self.calls = []

        def set_postfix_str(self, text, refresh=True):
            self.calls.append(("now", text))

        def update(self, n):
            self.calls.append(("update", n))

        def close(self):
            pass

    monkeypatch.setattr(progress, "tqdm", Bar)
    shards = tmp_path / "shards"
    shards.mkdir()

    class SecondRank(World):  # no process group needed
        def gather(self, value):
            return [value, value]

    bar = Progress(tmp_path, SecondRank(rank=1, size=2), 16, {0: ["a", "b"]}, [4])
    bar.working(0, "a")
    bar.update(4)
    bar.working(0, "b")
    assert bar.bar.calls == [
        ("now", "unit 1 of 1: a"),
        ("update", 4),
        ("now", "unit 1 of 1: b"),
    ]


def _lines_progress(tmp_path, clock, stream):
    (tmp_path / "shards").mkdir()
    return Progress(tmp_path, World(), 4, {0: ["llm-iba"]}, [4], stream, clock)


def test_a_long_unit_says_it_still_works(tmp_path, monkeypatch):
    """Issue 53, item 10: a causal LM's unit ran 16 minutes without a line,
    though a line comes at least every 10 s. A fake clock: the heartbeat
    says the unit still runs once 10 s passed with nothing said, and is
    silent between units."""
    import io

    from captum_iba.app.engine import progress

    monkeypatch.setattr(progress, "WAKE_EVERY", 3600.0)  # beats by hand below
    now, out = [0.0], io.StringIO()
    bar = _lines_progress(tmp_path, lambda: now[0], out)
    bar.working(0, "llm-iba")
    said = []
    for t in (9.0, 10.5, 15.0, 21.0, 80.0):
        now[0] = t
        before = out.getvalue()
        bar.beat()
        said.append(out.getvalue()[len(before) :])
    assert [bool(s) for s in said] == [False, True, False, True, True]
    assert "still working on unit 1 of 1: llm-iba (10 s in it)" in said[1]
    assert "0 of 4 instances x methods scored" in said[1]
    assert "(80 s in it)" in said[4]
    bar.update(4)
    now[0] = 500.0
    before = out.getvalue()
    bar.beat()  # no unit runs: nothing to say
    assert out.getvalue() == before
    bar.close()


def test_the_heartbeat_thread_beats_until_closed(tmp_path, monkeypatch):
    """The thread calls beat by itself (a fake clock 11 s further at every
    look; the test waits for the line, it times nothing) and stops on close."""
    import threading

    from captum_iba.app.engine import progress

    monkeypatch.setattr(progress, "WAKE_EVERY", 0.001)
    heard = threading.Event()

    class Stream:
        def write(self, text):
            if "still working" in text:
                heard.set()

        def flush(self):
            pass

        def isatty(self):  # plain lines, as in a log
            return False

    ticks = iter(range(0, 10**9, 11))
    bar = _lines_progress(tmp_path, lambda: float(next(ticks)), Stream())
    bar.working(0, "llm-iba")
    assert heard.wait(60), "no heartbeat line"
    bar.close()
    assert not bar._beat.is_alive()
