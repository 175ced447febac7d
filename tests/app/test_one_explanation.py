"""One explanation class for a classifier and a causal LM (issue 50, item 4):
``captum_iba.explain`` returns an :class:`Explanation` for either kind, with
the same methods; what differs is its subject. The names of 0.2
(``AnswerExplanation``, ``AnswerScores``) still import, with a warning."""

import copy
import pickle
from pathlib import Path

import pytest

from captum_iba.app.explanation import Explanation, MethodScores, explain
from captum_iba.app.subjects import ClassifierSubject, PromptSubject
from tests.helpers import tiny_causal_lm, tiny_word_tokenizer


@pytest.fixture
def both(tiny_model_dir):
    """A classifier's explanation and a causal LM's, by the same method."""
    text = explain("a fine film", tiny_model_dir, "random")
    model, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    answer = explain(
        "the cat sat", model, "random", tokenizer=tok, target=" ran in", per_token=True
    )
    return text, answer


def test_explain_returns_one_class_for_either_kind(both, tmp_path):
    text, answer = both
    assert type(text) is Explanation and type(answer) is Explanation
    assert isinstance(text.subject, ClassifierSubject) and text.kind == "classifier"
    assert isinstance(answer.subject, PromptSubject) and answer.kind == "causal-lm"
    for result in both:  # the same methods, whatever the model
        assert set(result.methods) == {"random"}
        assert len(result.scores()) == len(result.tokens()) == 3
        assert len(result.scores(pieces=True)) == len(result.tokens(pieces=True))
        assert [w for w, _ in result.top(3)] == sorted(
            result.tokens(), key=lambda w: -result.scores()[result.tokens().index(w)]
        )
        assert result.facts()[0][0] == "Model"
        assert result.details("random").endswith((" s", " CPU-s"))
        assert result.notes() and str(result) == result.to_text()
        page = result.save_html(tmp_path / f"{result.kind}.html").read_text()
        assert page == result.to_html() and "random" in page
    assert text.matrix() is None  # a classifier has no output tokens
    assert len(answer.matrix()) == 2 and len(answer.matrix()[0]) == 3
    assert text.to_text().startswith("prediction: ")
    assert answer.to_text().startswith("prompt: 'the cat sat'")
    assert "did the prediction rely on" in text.to_html()
    assert "did the answer need" in answer.to_html()


def test_the_subjects_fields_read_as_the_explanations_own(both):
    text, answer = both
    assert answer.answer == answer.subject.answer == "ran in"
    assert answer.output_tokens == ["ran", "in"] and answer.odds.prob < 1
    assert text.probabilities == text.subject.probabilities
    assert text.label(text.predicted) in ("negative", "positive")
    with pytest.raises(
        AttributeError, match="a classifier's prediction has no .*'answer'"
    ):
        _ = text.answer
    with pytest.raises(AttributeError, match="a causal LM's answer has no .*'pair'"):
        _ = answer.pair
    assert not hasattr(answer, "probabilities") and "answer" in dir(answer)
    for result in both:
        assert pickle.loads(pickle.dumps(result)) == result == copy.deepcopy(result)


def test_method_scores_are_flat_when_they_rank_nothing():
    scores = MethodScores("m", "", [0.5, 0.5], False, "a share", 0.0)
    assert not scores.flat and scores.per_token is None
    scores.no_ranking = "all tied"
    assert scores.flat


@pytest.mark.parametrize(
    "old, new", [("AnswerExplanation", Explanation), ("AnswerScores", MethodScores)]
)
def test_the_names_of_0_2_warn_and_give_the_one_class(old, new):
    from captum_iba.app import llm_explanation

    with pytest.warns(
        DeprecationWarning,
        match=f"{old} is deprecated since 0.3; removed in 0.4: .*{new.__name__}",
    ):
        assert getattr(llm_explanation, old) is new
    with pytest.raises(AttributeError, match="no attribute 'AnswerNothing'"):
        llm_explanation.AnswerNothing  # noqa: B018


def test_a_pair_and_a_prompt_render_through_their_subjects():
    """What depends on the kind comes from the subject: the pair's break and
    the encoder layer of a classifier, a causal LM's answer and its
    per-output-token rows."""
    pair = Explanation(
        ClassifierSubject(
            text="good", pair="bad film", segment=[0, 1, 1], labels=["neg", "pos"],
            probabilities=[0.25, 0.75], target=0, n_layers=2,
        ),
        pieces=["[CLS]", "good", "[SEP]", "bad", "film", "[SEP]"],
        special=[True, False, True, False, False, True],
        words=["good", "bad", "film"], word_of_piece=[None, 0, None, 1, 2, None],
        model_name="tiny",
        methods={"iba": MethodScores(
            "iba", "IBA", [0.0, 0.9, 0.0, 0.1, 0.5, 0.0], False, "nats", 1.0, layer=1,
        )},
    )  # fmt: skip
    listing = pair.to_text()
    assert listing.splitlines()[0] == (
        "prediction: pos (p = 0.750); explaining class 'neg' (index 0, not the "
        "predicted class)"
    )
    assert "| (second text)" in listing and pair.breaks() == [1]
    assert pair.details("iba") == "IBA; after encoder layer 1 of 0..1; 1.0 s"
    pair.methods["iba"].settings = {"options": {"steps": 1}, "precision": "float32"}
    assert pair.details("iba") == (
        "IBA; after encoder layer 1 of 0..1; 1 step; float32; 1.0 s"
    )
    pair.methods["iba"].settings = {"steps": 7}
    assert pair.details("iba") == "IBA; after encoder layer 1 of 0..1; 7 steps; 1.0 s"
    assert ("Second text", "bad film") in pair.facts()
    prompt = Explanation(
        PromptSubject(
            prompt="a b", chat=True, answer=" x y", output_tokens=["x", "y"],
            generated=False, per_token=True,
        ),
        pieces=["a", "b"], special=[False, False], words=["a", "b"],
        word_of_piece=[0, 1],
        methods={"ig": MethodScores(
            "ig", "IG", [0.2, 0.8], True, "a share", 2.0, settings={"layer": "x"},
            per_token=[[0.1, 0.9], [0.7, 0.3]],
        )},
    )  # fmt: skip
    listing = prompt.to_text()
    assert listing.splitlines()[:2] == [
        "prompt: 'a b'  (as a user turn)",
        "answer (given, 2 tokens): ' x y'",
    ]
    assert "    'y'            <- a (0.7), b (0.3)" in listing
    assert prompt.details("ig") == "IG; at x; 2.0 CPU-s" and prompt.breaks() == []
    assert prompt.matrix("ig") == [[0.1, 0.9], [0.7, 0.3]]
    assert 'table class="m"' in prompt.to_html()
    assert 'table class="m"' not in pair.to_html()


def test_one_kind_rule_for_a_name_a_configuration_and_a_model(tiny_model_dir, tmp_path):
    """A folder's kind by its name, its configuration and its loaded model
    agree (one rule: ``config_kind``, and a model's class); the causal-LM
    loader refuses a classifier folder by the same rule."""
    import json

    from captum_iba.app.causal_lm import load_lm_tokenizer
    from captum_iba.app.model_kind import config_kind, decide_kind, kind_hint
    from captum_iba.app.models import ModelLoadError, load_classifier
    from captum_iba.attr.kinds import CAUSAL_LM, CLASSIFIER, kind_of_config

    lm = tiny_causal_lm("gpt2")
    lm.config.architectures = [type(lm).__name__]
    folder = tmp_path / "lm"  # (tmp_path holds the classifier)
    lm.save_pretrained(folder)
    tiny_word_tokenizer().save_pretrained(folder)
    for name, model, kind in [
        (tiny_model_dir, load_classifier(tiny_model_dir)[0], CLASSIFIER),
        (str(folder), lm, CAUSAL_LM),
    ]:
        config = json.loads((Path(name) / "config.json").read_text())
        assert config_kind(config) == kind.name
        assert kind_hint(name) is decide_kind(name) is kind
        assert kind_of_config(model.config) is decide_kind(model) is kind
    with pytest.raises(ModelLoadError, match="is a sequence classifier, not a causal"):
        load_lm_tokenizer(tiny_model_dir)


def test_a_one_token_answer_is_said_in_the_singular():
    """'1 token', not '1 tokens', in the listing and the page's facts."""
    one = PromptSubject(
        prompt="a b", chat=False, answer=" x", output_tokens=["x"], generated=True
    )
    assert one.length() == "1 token"
    assert ("Answer explained", "' x' (the model's greedy answer, 1 token)") in (
        one.facts()
    )
    two = PromptSubject(
        prompt="a b", chat=False, answer=" x y", output_tokens=["x", "y"],
        generated=True,
    )  # fmt: skip
    assert two.length() == "2 tokens"
