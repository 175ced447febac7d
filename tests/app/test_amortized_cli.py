"""``--methods iba-amortized`` on the command line: fitted once on the corpus's
training split and cached; ``explain --method iba-amortized`` uses the cache."""

import json

import pytest

from captum_iba.app.cli import main
from captum_iba.app.finetune.recipes import CACHE_ENV_VAR

SENTENCES = [
    "a gripping , beautifully acted film",
    "dull",
    "it never drags and the cast is superb",
    "far too long",
    "a charming and often affecting journey",
    "bleak and desperate",
]


@pytest.fixture
def corpus(tmp_path, monkeypatch):
    """SST-2 train and dev splits of six sentences; the cache in tmp_path."""
    folder = tmp_path / "data" / "sst2"
    folder.mkdir(parents=True)
    lines = ["sentence\tlabel"] + [f"{s}\t{i % 2}" for i, s in enumerate(SENTENCES)]
    for split in ("train", "dev"):
        (folder / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "cache"))
    return tmp_path / "data"


def _code(argv):
    """The exit code of ``main(argv)`` (errors exit through SystemExit)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def _evaluate(model, data, out, *more):
    return _code(
        ["evaluate", "--dataset", "sst2", "--model", model, "--data-dir", str(data)]
        + ["--methods", "iba-amortized,random", "--n", "4"]
        + ["--batch-size", "2", "--out", str(out), *more]
    )


def test_evaluate_fits_and_caches_then_explain_uses_it(
    tiny_model_dir, corpus, tmp_path, capsys
):
    """iba-amortized sits at the embeddings, taught by iba-deletion (the
    registry's default for it), and one cached explainer serves every later
    run; --layer moves it (another explainer, taught by iba-faithful)."""
    explain = ["explain", "a fine film", "--model", tiny_model_dir]
    assert _code(explain + ["--method", "iba-amortized"]) == 2
    err = capsys.readouterr().err
    assert "no fitted explainer" in err and "--methods iba-amortized" in err
    assert _evaluate(tiny_model_dir, corpus, tmp_path / "run") == 0
    out = capsys.readouterr().out
    assert "iba-amortized" in out and "fitting the amortized explainer" in out
    found = (tmp_path / "cache" / "explainers").glob("sst2-lembeddings-*")
    (folder,) = [f for f in found if f.is_dir()]
    record = json.loads((folder / "explainer.json").read_text())
    assert record["key"]["layer"].endswith("embeddings")
    assert record["key"]["settings"]["teacher"]["removal"] == "attention"
    assert record["key"]["settings"]["readout"][-1].endswith("layer.1")
    assert record["stats"]["instances"] == 2 * len(SENTENCES)  # 2 epochs
    # a second run loads it (nothing fitted again)
    assert _evaluate(tiny_model_dir, corpus, tmp_path / "run2") == 0
    assert "fitting" not in capsys.readouterr().out
    assert main(explain + ["--method", "iba-amortized"]) == 0
    assert "amortized IBA" in capsys.readouterr().out
    other = explain + ["--layer", "0", "--method", "iba-amortized"]
    assert _code(other) == 2  # none fitted at layer 0
    assert "no fitted explainer" in capsys.readouterr().err
    assert _evaluate(tiny_model_dir, corpus, tmp_path / "run3", "--layer", "0") == 0
    found = (tmp_path / "cache" / "explainers").glob("sst2-l0-*")
    (folder,) = [f for f in found if f.is_dir()]
    record = json.loads((folder / "explainer.json").read_text())
    assert record["key"]["layer"].endswith("layer.0")
    assert main(other) == 0
    # the last layer (1 of 0..1) is refused before anything loads: its
    # teacher, iba-faithful, would rank nothing there (issue 31, item 1)
    assert _evaluate(tiny_model_dir, corpus, tmp_path / "run4", "--layer", "1") == 2
    assert "--layer 1 is the last encoder layer" in capsys.readouterr().err


def test_an_explainer_fitted_on_other_data_is_not_reused(
    tiny_model_dir, corpus, tmp_path, capsys
):
    """Issue 31, item 6: fitted with --max-length 32, it was reused silently
    for --max-length 128. One explainer per data setting; explain takes the
    default's, else names the one it takes."""
    assert _evaluate(tiny_model_dir, corpus, tmp_path / "r1", "--max-length", "8") == 0
    assert "fitting the amortized explainer" in capsys.readouterr().out
    root = tmp_path / "cache" / "explainers"
    assert [f.name.split("-")[2] for f in root.glob("sst2-*") if f.is_dir()] == ["len8"]
    explain = ["explain", "a fine film", "--model", tiny_model_dir, "--method",
               "iba-amortized"]  # fmt: skip
    assert main(explain) == 0
    assert "fitted with --max-length 8" in capsys.readouterr().out
    assert _evaluate(tiny_model_dir, corpus, tmp_path / "r2") == 0  # 128
    assert "fitting the amortized explainer" in capsys.readouterr().out
    lengths = sorted(f.name.split("-")[2] for f in root.glob("sst2-*") if f.is_dir())
    assert lengths == ["len128", "len8"]
    assert main(explain) == 0
    assert "fitted with --max-length" not in capsys.readouterr().out  # the default


def test_an_explainer_fitted_with_other_settings_is_not_taken(
    tiny_model_dir, corpus, tmp_path, capsys, monkeypatch
):
    """Issue 30: when iba-amortized's fit settings change (a release's new
    default), an explainer cached with the old ones is neither loaded by
    explain nor reused by evaluate: its folder names the settings."""
    from captum_iba.app import amortized as app_amortized
    from captum_iba.evaluation import amortized as eval_amortized

    assert _evaluate(tiny_model_dir, corpus, tmp_path / "r1") == 0
    root = tmp_path / "cache" / "explainers"
    first = [f.name for f in root.glob("sst2-*") if f.is_dir()]
    assert (
        len(first) == 1
        and f"-s{app_amortized.settings_digest(eval_amortized.objective_settings())}-"
        in first[0]
    )
    changed = dict(eval_amortized.AMORTIZED_SETTINGS, epochs=1)
    monkeypatch.setattr(eval_amortized, "AMORTIZED_SETTINGS", changed)
    capsys.readouterr()
    explain = ["explain", "a fine film", "--model", tiny_model_dir, "--method",
               "iba-amortized"]  # fmt: skip
    assert _code(explain) == 2
    assert "no fitted explainer" in capsys.readouterr().err
    assert _evaluate(tiny_model_dir, corpus, tmp_path / "r2") == 0
    assert "fitting the amortized explainer" in capsys.readouterr().out
    assert len([f for f in root.glob("sst2-*") if f.is_dir()]) == 2


def test_explainer_objective_deletion_trains_its_own_explainer(
    tiny_model_dir, corpus, tmp_path, capsys
):
    """Issue 30: --explainer-objective deletion trains iba-amortized's
    explainer on iba-deletion's objective (budget 0.3, warm-started by
    distillation), cached apart from the default's; explain takes it only
    with the same flag and names the flag when none is cached; a bad value is
    refused before anything loads."""
    from captum_iba.app.amortized import settings_digest
    from captum_iba.evaluation.amortized import EXPLAINER_OBJECTIVES as SETTINGS
    from captum_iba.evaluation.amortized import objective_settings
    from captum_iba.registry import EXPLAINER_OBJECTIVES

    assert SETTINGS is EXPLAINER_OBJECTIVES  # one home of the names and settings
    flag = ["--explainer-objective", "deletion"]
    explain = ["explain", "a fine film", "--model", tiny_model_dir, "--method",
               "iba-amortized"]  # fmt: skip
    assert _code(explain + flag) == 2
    assert "--methods iba-amortized --explainer-objective deletion" in (
        capsys.readouterr().err
    )
    assert _evaluate(tiny_model_dir, corpus, tmp_path / "r1", *flag) == 0
    assert "fitting the amortized explainer" in capsys.readouterr().out
    root = tmp_path / "cache" / "explainers"
    (folder,) = [f for f in root.glob("sst2-*") if f.is_dir()]
    deletion = settings_digest(objective_settings("deletion"))
    assert f"-s{deletion}-" in folder.name
    assert deletion != settings_digest(objective_settings())
    settings = json.loads((folder / "explainer.json").read_text())["key"]["settings"]
    assert settings["options"]["removal"] == "attention"
    assert (settings["keep"], settings["distil"], settings["distil_only"]) == (
        0.3, 1.0, False,
    )  # fmt: skip
    assert settings["teacher"]["removal"] == "attention"
    assert main(explain + flag) == 0
    assert "amortized IBA" in capsys.readouterr().out
    assert _code(explain) == 2  # the default's explainer is not fitted
    assert "no fitted explainer" in capsys.readouterr().err
    bad = _evaluate(
        tiny_model_dir, corpus, tmp_path / "r2", "--explainer-objective", "x"
    )
    assert bad == 2
    err = capsys.readouterr().err
    assert "--explainer-objective" in err and "'distil', 'deletion'" in err


def test_default_teacher_follows_the_layer(tiny_model_dir) -> None:
    from transformers import AutoModelForSequenceClassification

    from captum_iba.attr.text import resolve_layer
    from captum_iba.evaluation.amortized import default_teacher

    model = AutoModelForSequenceClassification.from_pretrained(tiny_model_dir)
    embeddings, block = model.bert.embeddings, model.bert.encoder.layer[1]
    assert default_teacher(model, embeddings) == "deletion"
    assert default_teacher(model, block) == "faithful"
    assert resolve_layer(model, embeddings).index is None
    assert resolve_layer(model, block).index == 1


def test_corpus_without_training_split_is_named(
    tiny_model_dir, corpus, tmp_path, capsys
):
    (corpus / "sst2" / "train.tsv").unlink()
    assert _evaluate(tiny_model_dir, corpus, tmp_path / "run") == 2
    err = capsys.readouterr().err
    assert "training split" in err and "sst2" in err


def test_explain_fit_on_names_the_corpus_of_a_classifier_s_explainer(
    tiny_model_dir, corpus, tmp_path, capsys
):
    """A classifier's explainer is fitted on ``evaluate --dataset`` 's
    training split; ``explain`` takes the model's own corpus's (here sst2),
    or the corpus ``--fit-on`` names, as for a causal LM's prompt task. The
    imdb explainer is the sst2 one moved under imdb's name (the key holds no
    corpus)."""
    assert _evaluate(tiny_model_dir, corpus, tmp_path / "r1") == 0
    root = tmp_path / "cache" / "explainers"
    (sst2,) = [f for f in root.glob("sst2-*") if f.is_dir()]
    sst2.rename(sst2.with_name("imdb-" + sst2.name.split("-", 1)[1]))
    capsys.readouterr()
    explain = ["explain", "a fine film", "--model", tiny_model_dir]
    amortized = explain + ["--method", "iba-amortized"]
    assert _code(amortized) == 2  # the model's own corpus's is gone
    assert "--dataset sst2 --methods iba-amortized" in capsys.readouterr().err
    assert main(amortized + ["--fit-on", "imdb"]) == 0
    assert "amortized IBA" in capsys.readouterr().out
    assert _code(amortized + ["--fit-on", "rte"]) == 2
    assert "--dataset rte --methods iba-amortized" in capsys.readouterr().err
    assert _code(explain + ["--method", "random", "--fit-on", "imdb"]) == 2
    err = capsys.readouterr().err
    assert "--fit-on imdb chooses iba-amortized's cached explainer" in err, err
    assert _code(amortized + ["--fit-on", "wiki"]) == 2
    err = capsys.readouterr().err
    assert "--fit-on wiki: not a corpus" in err and "sst2, imdb, rte" in err, err
