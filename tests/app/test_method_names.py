"""One name per method (issue 50): a name explains a classifier and a causal
LM alike (``captum_iba.explain``, the corpus loop, the resolver); the
``llm-*`` names (deprecated since 0.3) still work, with a
``DeprecationWarning``, and give the same scores; a method that cannot
explain the model's kind is refused before any model loads; what a method
is (its kinds, signed scores, word reduction) is stated once, in its
registry entry."""

import pytest
import torch

from captum_iba import explain
from captum_iba.attr.llm_batch import prompt_batch
from captum_iba.evaluation import Resources, build_scorers, evaluate_corpus
from captum_iba.evaluation.attnlrp import attnlrp_available
from captum_iba.evaluation.scorers import MethodFacts
from captum_iba.registry import LLM_NAMES, METHODS, MODEL_KINDS, method_entry
from tests.helpers import light_options, tiny_causal_lm, tiny_word_tokenizer

#: The methods the issue names, as a user writes them.
UNIFIED = ("iba-deletion", "iba-faithful", "iba", "ig", "ablation", "loo",
           "shapley", "lime", "kernel-shap", "saliency", "input-x-gradient",
           "attnlrp", "random")  # fmt: skip


def _lxt(method):
    name = METHODS.entry(method, warn=False).name
    if name in ("AttnLRP", "llm-attnlrp") and not attnlrp_available()[0]:
        pytest.skip("AttnLRP needs lxt (transformers 4.x)")


def test_every_named_method_explains_both_kinds():
    for name in UNIFIED:
        assert set(METHODS.entry(name).facts["models"]) == set(MODEL_KINDS), name
    assert METHODS.entry("ablation") is METHODS.entry("loo")  # one method
    assert not [m for m in METHODS.names() if m.lower().startswith("llm-")]


@pytest.mark.parametrize("old", sorted(LLM_NAMES))
def test_an_old_name_warns_and_scores_as_its_new_name(old):
    new = LLM_NAMES[old]  # as a user writes it
    _lxt(new)
    model, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    batch = prompt_batch(tok, ["the cat sat on the mat", "a dog"], [" ran", " sat"])
    resources = Resources(model, tok, options=light_options(new))
    with pytest.warns(
        DeprecationWarning,
        match=f"'{old}' is deprecated since 0.3; removed in 0.4: .*'{new}'",
    ):
        before = build_scorers([old], resources)[old]  # shown as it was
    shown = METHODS.entry(new).name
    after = build_scorers([new], resources, kind="causal-lm")[shown]
    assert type(before) is type(after)
    a, b = before.attribute(batch, per_token=True), after.attribute(batch, True)
    assert torch.equal(a.answer, b.answer)
    assert (a.tokens is None) == (b.tokens is None)
    assert a.tokens is None or torch.equal(a.tokens, b.tokens)


def test_an_old_name_warns_in_explain_and_gives_the_same_answer_scores():
    model, tok = tiny_causal_lm("gpt2"), tiny_word_tokenizer()
    given = dict(tokenizer=tok, target=" ran", steps=2)
    with pytest.warns(DeprecationWarning, match="write 'iba-deletion'"):
        old = explain("the cat sat", model, "llm-iba-deletion", **given)
    new = explain("the cat sat", model, "iba-deletion", **given)
    assert old.scores("llm-iba-deletion") == new.scores("iba-deletion")


@pytest.mark.parametrize("method", ["iba-deletion", "ig", "ablation", "saliency"])
def test_one_name_explains_a_causal_lm_and_a_classifier(method, tiny_model_dir):
    model, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    options = light_options(method)
    answer = explain("the cat sat", model, method, tokenizer=tok, target=" ran",
                     **options)  # fmt: skip
    text = explain("a fine film", tiny_model_dir, method, **options)
    shown = METHODS.entry(method).name
    for result in (answer, text):
        scores = result.scores(shown)
        assert len(scores) == 3 and all(map(torch.isfinite, torch.tensor(scores)))
    assert type(answer) is type(text)  # one class (issue 50)
    assert (answer.kind, text.kind) == ("causal-lm", "classifier")


def test_the_corpus_loop_runs_the_names_on_a_classifier(tiny_model_dir):
    """evaluate's loop on a classifier with the names of the LLM
    comparison (the command line on a causal LM: test_llm_evaluate)."""
    from captum_iba.app.models import load_classifier
    from tests.helpers import synthetic_sentiment

    model, tok = load_classifier(tiny_model_dir)
    data = synthetic_sentiment(4, 0)
    results = evaluate_corpus(
        model, tok, data, methods=("iba-deletion", "ig", "ablation"),
        ig_steps=3, steps=2, show_progress=False,
    )  # fmt: skip
    assert list(results) == ["iba-deletion", "IG", "LOO"]
    assert all(r.num_instances == 4 for r in results.values())


@pytest.mark.parametrize(
    "method, kind, fits",
    [("lime-text", "causal-lm", "iba-deletion"), ("llm-ig", "classifier", "IG")],
)
def test_a_method_for_the_other_kind_is_refused_before_any_load(
    method, kind, fits, tiny_model_dir, tmp_path, monkeypatch
):
    from captum_iba.app import causal_lm, models

    def forbidden(*args, **kwargs):
        raise AssertionError("a model was loaded before the method was refused")

    monkeypatch.setattr(models, "load_classifier", forbidden)
    monkeypatch.setattr(causal_lm, "load_causal_lm", forbidden)
    model = tiny_model_dir
    if kind == "causal-lm":
        model = str(tmp_path / "lm")
        lm = tiny_causal_lm("llama")
        lm.config.architectures = [type(lm).__name__]
        lm.save_pretrained(model)
        tiny_word_tokenizer().save_pretrained(model)
    with pytest.raises(ValueError, match=f"explains .*the methods for .*{fits}"):
        explain("the cat sat", model, method)


#: The package's own methods (not a user's class, which states its facts as
#: class attributes for the registry to read).
BUILT_IN = [
    n for n in METHODS.names() if str(METHODS.entry(n).target).startswith("captum_iba.")
]


@pytest.mark.parametrize("name", BUILT_IN)
def test_a_method_s_facts_have_one_home(name):
    """No class states whether its scores are signed or how a word's score
    is made: its registry entry does, and every kind's scorer reads it."""
    entry = METHODS.entry(name)
    for kind in entry.facts["models"]:
        cls = method_entry(name, kind).load()
        for fact in ("signed", "word_reduction"):
            stated = [k.__name__ for k in cls.__mro__ if fact in vars(k)]
            assert stated == ["MethodFacts"], (name, kind, fact, stated)
            assert isinstance(vars(MethodFacts)[fact], property)


def test_a_scorer_reads_its_facts_from_the_registry():
    model, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    for name in ("iba-deletion", "ig", "random"):
        scorer = build_scorers(
            [name], Resources(model, tok, options=light_options(name))
        )
        facts = METHODS.entry(name).facts
        built = next(iter(scorer.values()))
        assert built.signed == facts["signed"]
        assert built.word_reduction == facts["reduction"]


@pytest.mark.parametrize("name", BUILT_IN)
def test_a_method_s_class_implements_the_one_hook(name):
    """The class an entry names implements the one hook, ``_scores(rows)``
    (not the base's, which refuses), and no hook per kind of model."""
    import inspect

    from captum_iba.evaluation.scorers import TokenScorer

    for kind in METHODS.entry(name).facts["models"]:
        cls = method_entry(name, kind).load()
        assert cls._scores is not TokenScorer._scores, (name, kind, cls.__name__)
        assert list(inspect.signature(cls._scores).parameters) == ["self", "rows"]
        assert not hasattr(cls, "_prompt_scores"), (name, cls.__name__)


@pytest.mark.parametrize("name", BUILT_IN)
def test_a_method_is_one_class_for_every_kind(name):
    """One class per method: an entry names one class, whichever kind of
    model it explains, with the same fixed arguments."""
    entry = METHODS.entry(name)
    kinds = entry.facts["models"]
    found = {method_entry(name, k).target for k in kinds}
    assert len(found) == 1, (name, found)
    fixed = {tuple(sorted(method_entry(name, k).defaults.items())) for k in kinds}
    assert len(fixed) == 1, (name, fixed)


@pytest.mark.parametrize(
    "module, old, new",
    [
        ("llm_scorers", "LLMIBAScorer", "iba:IBAScorer"),
        ("llm_scorers", "LLMRandomScorer", "random_scorer:RandomScorer"),
        ("attnlrp", "LLMAttnLRPScorer", "attnlrp:AttnLRPScorer"),
    ],
)
def test_a_merged_class_s_old_name_warns_and_is_the_one_class(module, old, new):
    import importlib

    home, cls = new.split(":")
    ev = "captum_iba.evaluation"
    one = getattr(importlib.import_module(f"{ev}.{home}"), cls)
    with pytest.warns(
        DeprecationWarning,
        match=f"{old} is deprecated since 0.3; removed in 0.4: .*{cls}",
    ):
        found = getattr(importlib.import_module(f"{ev}.{module}"), old)
    assert found is one


def test_one_class_scores_either_kind_of_batch():
    """IBAScorer explains a classifier's TokenBatch and a causal LM's
    PromptBatch, what it explains decided once from the model's kind."""
    from captum_iba.evaluation.batches import TokenBatch
    from captum_iba.evaluation.iba import IBAScorer
    from tests.helpers import tiny_hf_model

    lm, tok = tiny_causal_lm("gpt2"), tiny_word_tokenizer()
    batch = prompt_batch(tok, ["the cat sat on the mat"], [" ran"])
    on_lm = IBAScorer(lm, "embeddings", "deletion", tokenizer=tok, steps=2)
    assert on_lm.kind == "causal-lm" and on_lm.settings["precision"] == "float32"
    assert type(on_lm.iba.forward_func).__name__ == "CausalLMLogLikelihood"
    assert on_lm.attribute(batch).answer.shape == batch.input_ids.shape
    torch.manual_seed(0)
    classifier = tiny_hf_model("bert")
    on_clf = IBAScorer(classifier, "embeddings", "deletion", steps=2)
    ids = torch.randint(5, 50, (2, 6), generator=torch.Generator().manual_seed(0))
    scores = on_clf.attribute(TokenBatch(ids, torch.tensor([0, 1])))
    assert on_clf.kind == "classifier" and scores.shape == ids.shape
    assert "options" not in on_clf.settings and "options" in on_lm.settings


def test_one_class_refuses_the_batch_of_the_other_kind():
    """What IBAScorer explains is decided at construction: built on a
    classifier it refuses a PromptBatch, built on a causal LM token ids."""
    from captum_iba.evaluation.iba import IBAScorer
    from tests.helpers import tiny_hf_model

    lm, tok = tiny_causal_lm("gpt2"), tiny_word_tokenizer()
    batch = prompt_batch(tok, ["the cat sat"], [" ran"])
    on_lm = IBAScorer(lm, "embeddings", "deletion", tokenizer=tok, steps=1)
    with pytest.raises(TypeError, match="built on a causal LM.*PromptBatch"):
        on_lm.attribute(batch.input_ids, torch.tensor([0]), batch.attention_mask)
    on_clf = IBAScorer(tiny_hf_model("bert"), "embeddings", "deletion", steps=1)
    with pytest.raises(TypeError, match="built on a classifier"):
        on_clf.attribute(batch)
