"""AT2's head weights taught by IBA (issue 52; ``captum_iba.evaluation.
at2_taught`` and ``experiments/teach_at2.py``) on a tiny Llama: the features
times the weights are AT2's own source scores, the teacher's outcomes are its
linear prediction of each half, the fit recovers a teacher that is linear in
the features, and the study scores the sources with the weights saved.
The tests that run AT2's code are skipped without the ``at2`` package."""

import argparse

import numpy as np
import pytest
import torch

from captum_iba.app.context_tasks import ContextExample
from tests.helpers import experiment, no_hooks, tiny_causal_lm, tiny_word_tokenizer
from tests.lab.test_at2 import TEMPLATE, _sourced_batch

EXAMPLES = [
    ContextExample(
        ("the cat sat on the mat", "a dog ran in the park", "the big red cat"),
        "the cat is", 0, "mat", "toy",
    ),
    ContextExample(
        ("a small dog", "the cat ran", "the mat is blue"), "the dog is", 1, "cat",
        "toy",
    ),
]  # fmt: skip


@pytest.fixture(scope="module")
def lm():
    tok = tiny_word_tokenizer()
    tok.chat_template = TEMPLATE
    return tiny_causal_lm("llama", layers=2, positions=128), tok


def _heads():
    """AT2's features of a 2-layer, 2-head Llama."""
    from captum_iba_lab.at2 import import_at2

    return import_at2().AT2FeatureExtractor(2, 2, model_type="llama")


def _pearson(a, b):
    a, b = np.asarray(a, float) - np.mean(a), np.asarray(b, float) - np.mean(b)
    return float(a @ b / np.sqrt((a @ a) * (b @ b)))


def test_the_outcomes_are_the_teachers_prediction_of_each_half():
    """Row j: AT2's features of half m_j, (2 m_j - 1) F, and the outcome
    m_j t; for a teacher t = F w the rows times w are 2 m_j t - sum(t), so
    their correlation with the outcomes is exactly 1."""
    from captum_iba_lab.at2_taught import taught_outcomes

    F = np.array([[1.0, 0.0, 2.0, 1.0], [0.5, 1.0, 0.0, 0.0], [0.0, 3.0, 1.0, 2.0]])
    w = np.array([0.1, 0.2, 0.3, 0.4])
    feats, outs = taught_outcomes(F, F @ w, 32, np.random.default_rng(0))
    m = np.random.default_rng(0).random((32, 3)) < 0.5
    assert feats.shape == (1, 32, 4) and feats.dtype == np.float16
    assert np.allclose(outs[0], m @ (F @ w))
    assert np.allclose(feats[0], (2 * m - 1) @ F, atol=1e-2)
    assert np.allclose(
        feats[0].astype(float) @ w, 2 * outs[0] - (F @ w).sum(), atol=1e-2
    )
    assert _pearson(feats[0].astype(float) @ w, outs[0]) > 0.9999


def test_the_fit_recovers_a_teacher_linear_in_the_heads():
    """A teacher that weights the heads by w: AT2's trainer, fed its
    outcomes, learns weights whose source scores order held-out sources as
    F w does (L1-normalised, as AT2 saves them)."""
    pytest.importorskip("at2")
    from captum_iba_lab.at2_taught import fit_taught

    rng = np.random.default_rng(1)
    w = np.array([0.6, 0.3, 0.1, 0.0])
    feats = [rng.random((int(rng.integers(3, 7)), 4)) for _ in range(64)]
    estimator = fit_taught(feats, [f @ w for f in feats], _heads())
    learned = estimator.linear.weight.detach().double().numpy()[0]
    assert np.isclose(np.abs(learned).sum(), 1.0)
    held = rng.random((200, 4))
    assert _pearson(held @ learned, held @ w) > 0.95
    assert np.argmax(learned) == 0


def test_the_fit_refuses_unpaired_examples():
    from captum_iba_lab.at2_taught import fit_taught

    with pytest.raises(ValueError, match="as many features as teachers"):
        fit_taught([], [], None)
    with pytest.raises(ValueError, match="example 0: 3 sources' features, 2 teacher"):
        fit_taught([np.ones((3, 4))], [np.ones(2)], None)


def test_features_times_the_weights_are_at2s_source_scores(lm, tmp_path):
    """The features are what AT2's scorer weights: with any weights, the
    sources' features times them are its source scores; the model is left
    without hooks."""
    pytest.importorskip("at2")
    from captum_iba_lab.at2 import AT2Scorer
    from captum_iba_lab.at2_taught import (
        fit_taught,
        save_at2_weights,
        source_features,
    )

    model, tok = lm
    batch = _sourced_batch(tok)
    feats = [source_features(model, tok, batch, b) for b in range(2)]
    assert feats[0].shape == (3, 4) and feats[1].shape == (2, 4)
    assert all((f >= 0).all() for f in feats) and no_hooks(model)
    estimator = fit_taught(
        [f.numpy() for f in feats], [np.arange(3.0), np.ones(2)], _heads(), iterations=5
    )
    path = tmp_path / "taught.pt"
    save_at2_weights(estimator, model, path, {"n": 2, "teacher": "toy"})
    found = AT2Scorer(model, weights=path, tokenizer=tok, method_name="at2").attribute(
        batch
    )
    weight = estimator.linear.weight.detach()[0]
    for b, f in enumerate(feats):
        assert torch.allclose(
            found.sources[b, : len(f)], (f @ weight).double(), atol=1e-5
        )


def test_taught_weights_are_named_apart():
    from captum_iba_lab.at2 import at2_weights_path
    from captum_iba_lab.at2_taught import TEACHER

    taught = at2_weights_path("org/tiny", "context-facts", 2, 0, "w", TEACHER)
    assert taught.name == "tiny-context-facts-n2-iba-deletion-steps1.pt"
    own = at2_weights_path("org/tiny", "context-facts", 1, 32, "w")
    assert own.name == "tiny-context-facts-n1-a32.pt"


def test_the_study_refuses_a_bad_or_missing_taught_method_before_any_model():
    study = experiment("context_study")
    args = argparse.Namespace(model="org/tiny", at2_task="context-facts", at2_dir="w")
    for wrong in ("at2-iba-x", "at2-iba-nope-2", "at2-context-facts-2"):
        with pytest.raises(SystemExit, match=r"at2-iba-\[<task>-\]<n>"):
            study.at2_scorers(args, [wrong])
    with pytest.raises(SystemExit, match=r"teach_at2.py .*--task context-topics --n 2"):
        study.at2_scorers(args, ["at2-iba-context-topics-2"])


def test_taught_weights_are_never_taken_for_at2s(lm, tmp_path):
    pytest.importorskip("at2")
    from captum_iba_lab.at2 import at2_weights_path, find_at2_weights
    from captum_iba_lab.at2_taught import TEACHER, fit_taught, save_at2_weights

    model, _ = lm
    taught = at2_weights_path("org/tiny", "context-facts", 2, 0, tmp_path, TEACHER)
    own = at2_weights_path("org/tiny", "context-facts", 1, 32, tmp_path)
    estimator = fit_taught([np.ones((2, 4))], [np.arange(2.0)], _heads(), iterations=2)
    save_at2_weights(estimator, model, taught, {"n": 2, "teacher": TEACHER})
    with pytest.raises(FileNotFoundError, match="no AT2 weights"):
        find_at2_weights(model, tmp_path)
    save_at2_weights(estimator, model, own, {"n": 1, "ablations": 32})
    assert find_at2_weights(model, tmp_path) == own


def test_the_script_teaches_and_the_study_scores_with_it(
    at2_package, lm, tmp_path, capsys
):
    """``experiments/teach_at2.py`` keeps each context's features and
    teacher scores, fits a budget (a larger one skipped, said), and the
    study's ``at2-iba-<n>`` scores the sources with the weights; a missing
    budget names the script before any model loads."""
    teach, study = experiment("teach_at2"), experiment("context_study")
    model, tok = lm
    work = tmp_path / "work"
    teach.collect_taught(model, tok, EXAMPLES, work)
    kept = [np.load(work / f"{i:05d}.npz") for i in range(2)]
    assert [k["features"].shape for k in kept] == [(3, 4), (3, 4)]
    assert all(k["teacher"].shape == (3,) and (k["cpu"] >= 0).all() for k in kept)
    assert no_hooks(model)
    extras = dict(model_name="org/tiny", task="context-facts", seed=0, masks=8)
    done = teach.fit_taught_budgets(model, work, 2, [2, 3], extras, tmp_path / "w")
    assert [d["n"] for d in done] == [
        2
    ] and "budget 3 skipped" in capsys.readouterr().out
    args = argparse.Namespace(
        model="org/tiny", at2_task="context-facts", at2_dir=str(tmp_path / "w")
    )
    makers = study.at2_scorers(args, ["at2-iba-2", "random"])
    rows = study.study_example(
        model, tok, EXAMPLES[0], {"at2-iba-2": makers["at2-iba-2"](model, tok)},
        max_new_tokens=3,
    )  # fmt: skip
    assert len(rows["at2-iba-2"]["pooled"]["-"]["scores"]) == 3
    with pytest.raises(SystemExit, match=r"teach_at2.py .*--n 5"):
        study.at2_scorers(args, ["at2-iba-5"])
    assert list(study.at2_scorers(args, ["at2-iba-context-facts-2"])) == [
        "at2-iba-context-facts-2"
    ]


def test_the_method_takes_taught_weights_only(lm, tmp_path, monkeypatch):
    """``iba-heads`` finds the taught weights cached for the model, refuses
    AT2's own and a prompt without sources, and names the command that
    teaches them when none are cached."""
    pytest.importorskip("at2")
    from captum_iba_lab.at2_taught import (
        TEACHER,
        TaughtHeadsScorer,
        fit_taught,
        save_at2_weights,
    )

    from captum_iba._utils.io import CACHE_ENV_VAR
    from captum_iba.attr.llm_batch import prompt_batch
    from captum_iba.evaluation import Resources, build_scorers

    model, tok = lm
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path))
    with pytest.raises(
        FileNotFoundError, match="teach_at2.py --model MODEL --task context-facts"
    ):
        build_scorers(["iba-heads"], Resources(model, tok), kind="causal-lm")
    estimator = fit_taught([np.ones((2, 4))], [np.arange(2.0)], _heads(), iterations=2)
    own = tmp_path / "at2" / "own.pt"
    own.parent.mkdir()
    save_at2_weights(estimator, model, own, {"n": 9, "ablations": 32})
    with pytest.raises(ValueError, match="not taught by iba-deletion-steps1"):
        TaughtHeadsScorer(model, heads=own, tokenizer=tok)
    taught = tmp_path / "at2" / "taught.pt"
    save_at2_weights(
        estimator, model, taught, {"n": 1, "teacher": TEACHER, "task": "toy"}
    )
    scorer = build_scorers(["iba-heads"], Resources(model, tok), kind="causal-lm")
    scorer = scorer["iba-heads"]
    assert scorer.settings["weights"] == str(taught)
    assert scorer.settings["teacher"] == TEACHER
    assert "taught by one iba-deletion step" in scorer.prompt_meaning
    given = TaughtHeadsScorer(model, heads=lambda: taught, tokenizer=tok)
    assert given.settings["weights"] == str(taught)
    plain = prompt_batch(tok, ["the cat sat"], ["the mat"], chat=True)
    with pytest.raises(ValueError, match="with_sources"):
        scorer.attribute(plain)
    assert scorer.attribute(_sourced_batch(tok)).sources.shape == (2, 3)


def test_without_the_package_the_method_names_the_install(monkeypatch, lm):
    import sys

    from captum_iba.evaluation import Resources, build_scorers

    model, tok = lm
    monkeypatch.setitem(sys.modules, "at2", None)
    with pytest.raises(ImportError, match="pip install at2"):
        build_scorers(["iba-heads"], Resources(model, tok), kind="causal-lm")


def test_the_weights_are_saved_with_the_model_s_fingerprint(lm, tmp_path):
    """``save_at2_weights`` (what the command line's ``iba-heads`` and the
    study's ``train_at2`` save with; no AT2 package needed): the estimator's
    own save, with the extras, the model's fingerprint and its name."""
    from captum_iba_lab.at2 import model_fingerprint
    from captum_iba_lab.at2_taught import save_at2_weights

    saved = []

    class Estimator:
        def save(self, path, extras):
            saved.append((path, extras))

    model = lm[0]
    estimator = Estimator()
    path = str(tmp_path / "w.pt")
    assert save_at2_weights(estimator, model, path, {"n": 2}) is estimator
    ((where, extras),) = saved
    assert where == tmp_path / "w.pt"
    assert extras["n"] == 2 and extras["model"] == model_fingerprint(model)
    assert extras["model_name"] == str(getattr(model, "name_or_path", ""))
    save_at2_weights(estimator, model, path, {"model_name": "org/tiny"})
    assert saved[-1][1]["model_name"] == "org/tiny"
