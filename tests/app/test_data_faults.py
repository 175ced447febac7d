"""Where corpora come from (local folders, then the hub), and a battery of
damaged corpora: each ends in a one-line error naming the file and line (P5,
P6, P7)."""

import gzip
import json
import sys
import types
from pathlib import Path

import pytest

from captum_iba.app.data import DATA_ENV_VAR, _local, load_dataset
from captum_iba.app.data._local import CorpusError

# ---------------------------------------------------------------- the battery


def _sst2(folder: Path, body: str) -> Path:
    (folder / "sst2").mkdir(parents=True, exist_ok=True)
    path = folder / "sst2" / "train.tsv"
    path.write_text(body)
    return path


def _imdb(folder: Path, raw: bytes) -> Path:
    (folder / "imdb").mkdir(parents=True, exist_ok=True)
    path = folder / "imdb" / "train.csv.gz"
    path.write_bytes(raw)
    return path


def _gz(text: str) -> bytes:
    return gzip.compress(text.encode())


def _rte(folder: Path, lines) -> Path:
    (folder / "rte").mkdir(parents=True, exist_ok=True)
    path = folder / "rte" / "train.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def _ag(folder: Path, body: str, classes: str = "World\nSports\nBusiness\nSci\n"):
    (folder / "ag_news").mkdir(parents=True, exist_ok=True)
    (folder / "ag_news" / "classes.txt").write_text(classes)
    path = folder / "ag_news" / "test.csv"
    path.write_text(body)
    return path


GOOD_RTE = '{"sentence1": "A", "sentence2": "B", "label": 0}'
AG_ROWS = "".join(f'"{1 + i % 4}","title {i}","text {i}"\n' for i in range(8))
#: A closing quote lost in line 2: the field swallows what follows.
AG_CUT = AG_ROWS.replace('title 1"', "title 1", 1)
#: A file cut inside a quoted field, and another copy appended after it.
AG_CUT_JOINED = AG_ROWS[: AG_ROWS.index("text 3") + 2] + "\n" + AG_ROWS

#: name -> (make the damaged corpus in a folder, corpus, the line, what it says)
BATTERY = {
    "sst2 header only": (
        lambda d: _sst2(d, "sentence\tlabel\n"), "sst2", None, "no rows"),
    "sst2 empty": (lambda d: _sst2(d, ""), "sst2", 1, "header"),
    "sst2 short row": (
        lambda d: _sst2(d, "sentence\tlabel\ngood\t1\nno label here\n"), "sst2", 3,
        "sentence<TAB>label"),
    "sst2 label 7": (
        lambda d: _sst2(d, "sentence\tlabel\ngood\t1\nbad\t7\n"), "sst2", 3,
        "label '7'"),
    "sst2 label -1": (
        lambda d: _sst2(d, "sentence\tlabel\ngood\t-1\n"), "sst2", 2, "label '-1'"),
    "sst2 empty sentence": (
        lambda d: _sst2(d, "sentence\tlabel\n \t1\n"), "sst2", 2, "sentence"),
    "sst2 not utf-8": (
        lambda d: (d / "sst2").mkdir(parents=True) or (d / "sst2" / "train.tsv")
        .write_bytes(b"sentence\tlabel\n\xff\xfe\t1\n"), "sst2", None, "UTF-8"),
    "imdb empty": (lambda d: _imdb(d, b""), "imdb", 1, "header"),
    "imdb empty gzip": (lambda d: _imdb(d, _gz("")), "imdb", 1, "header"),
    "imdb not gzip": (lambda d: _imdb(d, b"id,label,text\n1,0,x\n"), "imdb", None,
                      "gzip"),
    "imdb truncated gzip": (
        lambda d: _imdb(d, _gz("id,rating,label,text\n" + "1,2,0,bad film\n" * 500)
                        [:-30]), "imdb", None, "gzip"),
    "imdb short row": (
        lambda d: _imdb(d, _gz("id,rating,label,text\n1,2,0,bad\n2,9\n")), "imdb", 3,
        "number of fields"),
    "imdb label 2": (
        lambda d: _imdb(d, _gz("id,rating,label,text\n1,2,2,bad\n")), "imdb", 2,
        "label '2'"),
    "imdb open quote": (
        lambda d: _imdb(d, _gz('id,rating,label,text\n1,2,0,"bad\n')), "imdb", 2,
        "CSV"),
    "rte empty": (lambda d: _rte(d, []), "rte", None, "no rows"),
    "rte null label": (
        lambda d: _rte(d, [GOOD_RTE, '{"sentence1": "A", "sentence2": "B", '
                           '"label": null}']), "rte", 2, "label None"),
    "rte json array line": (lambda d: _rte(d, [GOOD_RTE, '["A", "B", 0]']), "rte", 2,
                            "JSON object"),
    "rte broken json": (lambda d: _rte(d, [GOOD_RTE, '{"sentence1": "A"']), "rte", 2,
                        "JSON"),
    "rte None text": (
        lambda d: _rte(d, ['{"sentence1": null, "sentence2": "B", "label": 0}']),
        "rte", 1, "sentence1 is None"),
    "rte missing column": (lambda d: _rte(d, ['{"sentence1": "A", "label": 0}']),
                           "rte", 1, "sentence2"),
    "rte label 5": (
        lambda d: _rte(d, ['{"sentence1": "A", "sentence2": "B", "label": 5}']),
        "rte", 1, "label 5"),
    "ag_news empty": (lambda d: _ag(d, ""), "ag_news", None, "no rows"),
    "ag_news one-column rows": (lambda d: _ag(d, AG_ROWS + '"3"\n'), "ag_news", 9,
                                "1 field"),
    "ag_news lost quote": (lambda d: _ag(d, AG_CUT), "ag_news", 2, "CSV"),
    "ag_news cut inside a quoted field": (
        lambda d: _ag(d, AG_CUT_JOINED), "ag_news", 4, "quote"),
    "ag_news truncated in a quote": (lambda d: _ag(d, AG_ROWS[:-5]), "ag_news", 8,
                                     "CSV"),
    "ag_news class 7": (lambda d: _ag(d, AG_ROWS + '"7","t","x"\n'), "ag_news", 9,
                        "label '7'"),
    "ag_news class 0": (lambda d: _ag(d, '"0","t","x"\n'), "ag_news", 1, "label '0'"),
    "ag_news empty classes.txt": (lambda d: _ag(d, AG_ROWS, classes="\n"), "ag_news",
                                  None, "no class names"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BATTERY))
def test_damaged_corpus_ends_in_one_line_naming_file_and_line(case, tmp_path):
    make, corpus, line, says = BATTERY[case]
    make(tmp_path)
    split = "train"
    with pytest.raises(CorpusError) as err:
        load_dataset(corpus, split, data_dir=tmp_path)
    message = str(err.value)
    assert len(message.splitlines()) == 1, message
    assert str(tmp_path) in message and str(err.value.path).startswith(str(tmp_path))
    if line is not None:
        assert f", line {line}:" in message, message
    assert says in message, message


def test_damaged_corpus_through_the_cli_is_one_line(tmp_path, capsys, tiny_model_dir):
    """The CLI prints the loader's message (quotes intact), no traceback."""
    from captum_iba.app.cli import main

    BATTERY["sst2 label 7"][0](tmp_path)
    (tmp_path / "sst2" / "dev.tsv").write_text("sentence\tlabel\nit's 'fine'\t9\n")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["evaluate", "--data-dir", str(tmp_path), "--model", tiny_model_dir,
              "--out", str(tmp_path / "out")])  # fmt: skip
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "dev.tsv, line 2: label '9'" in err


def test_good_corpora_still_load(tmp_path):
    _sst2(tmp_path, "sentence\tlabel\ngood\t1\nbad\t0\n")
    _imdb(tmp_path, _gz('id,rating,label,text\n1,2,0,"bad, <br />bad"\n2,9,1,ok\n'))
    _rte(tmp_path, [GOOD_RTE])
    _ag(tmp_path, AG_ROWS)
    assert load_dataset("sst2", "train", data_dir=tmp_path).labels == [1, 0]
    imdb = load_dataset("imdb", "train", data_dir=tmp_path)
    assert imdb.texts == ["bad, bad", "ok"] and imdb.labels == [0, 1]
    assert load_dataset("rte", "train", data_dir=tmp_path).text_pairs == ["B"]
    ag = load_dataset("ag_news", "train", data_dir=tmp_path)
    held = load_dataset("ag_news", "heldout", data_dir=tmp_path)
    assert len(ag) + len(held) == 8 and ag.label_names[0] == "World"


@pytest.mark.parametrize("corpus", ["sst2", "imdb", "rte", "ag_news"])
def test_a_byte_order_mark_is_read_as_nothing(tmp_path, corpus):
    """Issue 20, item 11: a UTF-8 BOM at the start of a corpus file (some
    editors write one) is not part of the first line."""
    bom = "\ufeff"
    plain, marked = tmp_path / "plain", tmp_path / "bom"
    for folder, start in ((plain, ""), (marked, bom)):
        folder.mkdir()
        if corpus == "sst2":
            _sst2(folder, start + "sentence\tlabel\ngood\t1\nbad\t0\n")
        elif corpus == "imdb":
            _imdb(folder, _gz(start + "id,rating,label,text\n1,2,0,bad\n2,9,1,ok\n"))
        elif corpus == "rte":
            _rte(folder, [start + GOOD_RTE, GOOD_RTE])
        else:
            _ag(folder, start + AG_ROWS, classes=start + "World\nSports\nB\nS\n")
    a = load_dataset(corpus, "train", data_dir=plain)
    b = load_dataset(corpus, "train", data_dir=marked)
    assert (a.texts, a.labels, a.label_names) == (b.texts, b.labels, b.label_names)


# ------------------------------------------------- local, then hub, then advice


@pytest.fixture
def no_local_data(tmp_path, monkeypatch):
    """No CAPTUM_IBA_DATA, no ../shared/data, an empty cache: a fresh machine."""
    monkeypatch.delenv(DATA_ENV_VAR, raising=False)
    monkeypatch.setenv("CAPTUM_IBA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(_local, "_repo_root", lambda: tmp_path / "repo" / "x")
    monkeypatch.setitem(sys.modules, "datasets", None)  # not installed
    return tmp_path


def test_user_data_folder_is_the_local_default(no_local_data):
    _sst2(no_local_data / "cache" / "data", "sentence\tlabel\nnice\t1\n")
    assert load_dataset("sst2", "train").texts == ["nice"]


def test_repository_shared_data_is_a_local_default(no_local_data):
    _sst2(no_local_data / "repo" / "shared" / "data", "sentence\tlabel\nnice\t1\n")
    assert load_dataset("sst2", "train").texts == ["nice"]


def test_current_directory_is_not_a_default(no_local_data, monkeypatch):
    here = no_local_data / "cwd" / "sub"
    here.mkdir(parents=True)
    _sst2(no_local_data / "cwd" / "shared" / "data", "sentence\tlabel\nnice\t1\n")
    monkeypatch.chdir(here)
    with pytest.raises(FileNotFoundError):
        load_dataset("sst2", "train")


def test_no_corpus_anywhere_names_the_three_ways(no_local_data):
    with pytest.raises(FileNotFoundError) as err:
        load_dataset("sst2", "train")
    message = str(err.value)
    assert len(message.splitlines()) == 1
    assert DATA_ENV_VAR in message  # (1)
    assert str(no_local_data / "cache" / "data") in message  # (2)
    assert "pip install datasets" in message and "glue/sst2" in message  # (3)
    assert "not installed" in message
    # the files, their format and where they come from
    assert "sst2/train.tsv, sst2/dev.tsv" in message
    assert "header 'sentence<TAB>label'" in message
    assert "https://dl.fbaipublicfiles.com/glue/data/SST-2.zip" in message
    # a development checkout's ../shared/data is not shown where there is none
    assert "shared" not in message


@pytest.mark.parametrize("corpus", ["imdb", "rte", "ag_news"])
def test_every_corpus_names_its_files(no_local_data, corpus):
    from captum_iba.app.data.corpora import CORPUS_FILES

    with pytest.raises(FileNotFoundError) as err:
        load_dataset(corpus, "train")
    files, layout, source = CORPUS_FILES[corpus]
    message = str(err.value)
    assert files in message and layout in message and source in message


class _FakeSplit:
    def __init__(self, columns, names):
        self._columns = columns
        label = types.SimpleNamespace(names=names)
        self.features = {"label": label}

    def __getitem__(self, key):
        return self._columns[key]


def _fake_datasets(calls, fail=None):
    module = types.ModuleType("datasets")

    def load(path, config=None, split=None):
        calls.append((path, config, split))
        if fail:
            raise fail
        return _FakeSplit(
            {"sentence": ["a fine film", "dull"], "label": [1, 0]},
            ["negative", "positive"],
        )

    module.load_dataset = load
    return module


@pytest.fixture
def hub_online(monkeypatch):
    """The hub's host answers (the corpus route asks before the hub client)."""
    from captum_iba.app.data import load as load_module

    monkeypatch.setattr(load_module, "offline_reason", lambda: "")


def test_hub_is_the_third_way(no_local_data, monkeypatch, hub_online):
    calls = []
    monkeypatch.setitem(sys.modules, "datasets", _fake_datasets(calls))
    data = load_dataset("sst2", "dev")
    assert calls == [("glue", "sst2", "validation")]
    assert data.texts == ["a fine film", "dull"] and data.labels == [1, 0]
    assert "hub" in data.notes


def test_local_copy_wins_over_the_hub(no_local_data, monkeypatch):
    calls = []
    monkeypatch.setitem(sys.modules, "datasets", _fake_datasets(calls))
    _sst2(no_local_data / "cache" / "data", "sentence\tlabel\nnice\t1\n")
    assert load_dataset("sst2", "train").texts == ["nice"] and calls == []


def test_hub_unreachable_names_the_three_ways(no_local_data, monkeypatch, hub_online):
    calls = []
    offline = ConnectionError("Couldn't reach 'glue' on the Hub (LocalEntryNotFound)")
    monkeypatch.setitem(sys.modules, "datasets", _fake_datasets(calls, offline))
    with pytest.raises(FileNotFoundError) as err:
        load_dataset("sst2", "train")
    assert calls and "Couldn't reach" in str(err.value)
    assert DATA_ENV_VAR in str(err.value) and "(3) be online:" in str(err.value)
    # issue 53, item 13: `datasets` is installed, so it is not asked for
    assert "pip install datasets" not in str(err.value)


def test_cli_without_data_prints_the_three_ways(
    no_local_data, capsys, tmp_path, tiny_model_dir
):
    from captum_iba.app.cli import main

    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["evaluate", "--model", tiny_model_dir, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "Traceback" not in err
    assert DATA_ENV_VAR in err and "pip install datasets" in err
    assert not (tmp_path / "o").exists()  # issue 20, item 10


def test_json_in_notes_is_kept(tmp_path):
    """Sanity: a JSON field with quotes is read as text, quotes intact."""
    _rte(tmp_path, [json.dumps({"sentence1": "it's \"x\"", "sentence2": "y",
                                "label": 1})])  # fmt: skip
    assert load_dataset("rte", "train", data_dir=tmp_path).texts == ['it\'s "x"']


def test_explain_names_the_missing_corpus_before_any_fine_tuning(
    no_local_data, capsys, monkeypatch
):
    """Issue 20, item 11: without a cached model nor the corpus, explain says
    the corpus is missing and never "fine-tuning now"."""
    from captum_iba.app.cli import main
    from captum_iba.app.finetune import cache

    monkeypatch.setattr(cache, "fine_tune", lambda *a, **k: pytest.fail("ran"))
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["explain", "a fine film"])
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and "Traceback" not in err
    assert DATA_ENV_VAR in err and "fine-tuning now" not in out


class _NoNetwork:
    """``socket.create_connection`` of a machine without a network."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        raise OSError(-2, "Name or service not known")


@pytest.fixture
def offline_with_datasets(no_local_data, monkeypatch):
    """A fresh machine without a network, with `datasets` installed (whose hub
    client would retry for about 20 s); returns the refused connections."""
    import types

    from captum_iba.app import hub
    from captum_iba.app.data import load as load_module

    fake = types.ModuleType("datasets")
    fake.load_dataset = lambda *a, **k: pytest.fail("the hub client was asked")
    monkeypatch.setitem(sys.modules, "datasets", fake)
    monkeypatch.setattr(load_module, "datasets_available", lambda: True)
    refused = _NoNetwork()
    monkeypatch.setattr(hub.socket, "create_connection", refused)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    monkeypatch.delenv("https_proxy", raising=False)
    return refused


def test_offline_the_hub_is_not_asked_for_a_corpus(offline_with_datasets):
    """Issue 31, item 10: offline, the corpus route says so at once (the hub
    client printed 23 s of retries first); the model route already did."""
    with pytest.raises(FileNotFoundError) as err:
        load_dataset("sst2", "train")
    message = str(err.value)
    assert "hub: huggingface.co cannot be reached" in message and "offline?" in message
    assert DATA_ENV_VAR in message and offline_with_datasets.calls == 1


def test_hf_hub_offline_is_honoured_without_a_connection(
    offline_with_datasets, monkeypatch
):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError, match=r"hub: \$HF_HUB_OFFLINE is set"):
        load_dataset("sst2", "train")
    assert offline_with_datasets.calls == 0
