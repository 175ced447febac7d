"""AT2 as an anchor of context attribution (issue 51) on a tiny Llama: its own
trainer runs on a few ablations and saves the weights, the loader refuses a
missing file and another model's weights, and the scores are one per source
for the given response. Skipped without the ``at2`` package, except the
install message."""

import copy
import sys

import pytest
import torch

from tests.helpers import tiny_causal_lm, tiny_word_tokenizer

#: A chat template of known words (the reply's opener ends with a space).
TEMPLATE = (
    "{% for m in messages %}very {{ m['content'] }} <eos> {% endfor %}"
    "{% if add_generation_prompt %}was {% endif %}"
)
SOURCES = ("the cat sat on the mat", "a dog ran in the park", "the big red cat")
EXAMPLES = [
    (SOURCES, "the cat is"),
    (("a small dog", "the cat ran", "the mat is blue"), "the dog is"),
    (("the park is big", "a cat sat", "the red dog"), "the park is"),
    (("the dog was very small", "a mat is red"), "the mat is"),
]


@pytest.fixture(scope="module")
def lm():
    tok = tiny_word_tokenizer()
    tok.chat_template = TEMPLATE
    return tiny_causal_lm("llama", layers=2, positions=128), tok


@pytest.fixture(scope="module")
def trained(lm, tmp_path_factory):
    """AT2's weights trained on the tiny Llama: 4 examples x 4 ablations."""
    pytest.importorskip("at2")
    from captum_iba.evaluation.at2 import at2_trainer, train_at2

    model, tok = lm
    folder = tmp_path_factory.mktemp("at2")
    trainer, seconds = at2_trainer(
        model, tok, EXAMPLES, folder / "work", ablations=4, max_new_tokens=3
    )
    path = folder / "tiny.pt"
    estimator = train_at2(trainer, 4, path, {"task": "toy"}, iterations=5)
    return estimator, path, seconds


def test_without_the_package_the_install_is_named(monkeypatch, lm):
    from captum_iba.evaluation.at2 import at2_scores

    model, tok = lm
    monkeypatch.setitem(sys.modules, "at2", None)
    with pytest.raises(ImportError, match="pip install at2"):
        at2_scores(model, tok, SOURCES, "the cat is", [4, 5], estimator=None)


def test_training_runs_and_saves_the_weights(lm, trained):
    from captum_iba.evaluation.at2 import load_at2

    model, _ = lm
    estimator, path, seconds = trained
    assert path.is_file() and len(seconds) == len(EXAMPLES)
    assert all(s >= 0 for s in seconds)
    # one weight per attention head (2 layers x 2 heads), L1-normalised by AT2
    weight = estimator.linear.weight.detach()
    assert weight.shape == (1, 4) and torch.isfinite(weight).all()
    assert torch.isclose(weight.abs().sum(), torch.tensor(1.0))
    loaded = load_at2(path, model)
    assert torch.equal(loaded.linear.weight, estimator.linear.weight)
    assert loaded.kwargs["extras"]["n"] == 4
    assert loaded.kwargs["extras"]["task"] == "toy"


def test_the_loader_refuses_another_model_and_a_missing_file(lm, trained, tmp_path):
    from captum_iba.evaluation.at2 import load_at2

    _, path, _ = trained
    for other in (tiny_causal_lm("llama", layers=3), tiny_causal_lm("llama", seed=1)):
        with pytest.raises(ValueError, match="trained for another model") as err:
            load_at2(path, other)
        assert str(path) in str(err.value) and "train_at2.py" in str(err.value)
    missing = tmp_path / "none.pt"
    with pytest.raises(FileNotFoundError, match="train_at2.py") as err:
        load_at2(missing, lm[0])
    assert str(missing) in str(err.value)


def test_scores_are_one_per_source_for_the_given_response(lm, trained):
    from captum_iba.evaluation.at2 import at2_scores

    model, tok = lm
    estimator = trained[0]
    response = tok.encode("the mat", add_special_tokens=False)
    scores = at2_scores(model, tok, SOURCES, "the cat is", response, estimator)
    assert scores.shape == (3,) and scores.dtype == torch.float64
    assert torch.isfinite(scores).all()
    again = at2_scores(model, tok, SOURCES, "the cat is", response, estimator)
    assert torch.equal(scores, again)
    two = at2_scores(model, tok, SOURCES[:2], "the cat is", response, estimator)
    assert two.shape == (2,)
    with pytest.raises(ValueError, match="at least two"):
        at2_scores(model, tok, SOURCES[:1], "the cat is", response, estimator)
    with pytest.raises(ValueError, match="empty"):
        at2_scores(model, tok, SOURCES, "the cat is", [], estimator)


def test_a_response_read_as_other_tokens_is_refused(lm, trained):
    from captum_iba.evaluation.at2 import at2_scores

    model, tok = lm
    tok = copy.deepcopy(tok)
    # the reply's opener "was" runs into the response's text ("wasthe mat")
    tok.chat_template = TEMPLATE.replace("was {%", "was{%")
    response = tok.encode("the mat", add_special_tokens=False)
    with pytest.raises(ValueError, match="reads the response as other tokens"):
        at2_scores(model, tok, SOURCES, "the cat is", response, trained[0])


def test_an_unknown_model_family_is_refused_before_any_work(lm, tmp_path):
    pytest.importorskip("at2")
    from captum_iba.evaluation.at2 import at2_trainer

    tok = lm[1]
    with pytest.raises(ValueError, match="gpt2"):
        at2_trainer(tiny_causal_lm("gpt2"), tok, EXAMPLES, tmp_path)
