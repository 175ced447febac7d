"""Captum's methods, one class each for a classifier and a causal LM
(captum_iba.evaluation.captum_prompts): the registry names the same class for
both kinds, the class scores both kinds of batch, a classifier's arguments are
refused on a causal LM, and 0.3's CaptumLLMScorer is a deprecated shim."""

import pytest
import torch

import captum_iba.evaluation.llm_scorers as llm_scorers
from captum_iba.attr.llm_batch import prompt_batch
from captum_iba.evaluation import build_scorer, scorer_class
from captum_iba.evaluation.captum_methods import KernelShapScorer
from captum_iba.evaluation.captum_prompts import CaptumPromptScorer
from captum_iba.evaluation.ig import IntegratedGradientsScorer
from captum_iba.evaluation.loo import LeaveOneOutScorer
from captum_iba.registry import METHODS, MODEL_KINDS, method_entry
from tests.helpers import tiny_causal_lm, tiny_word_tokenizer

#: The methods that explain both kinds through Captum.
CAPTUM = ("IG", "LIME", "LOO", "kernel-shap", "shapley", "saliency", "input-x-gradient")


def _prompts(tok):
    return prompt_batch(
        tok, ["the cat sat on the mat", "a dog ran"], [" is big", " in park"]
    )


@pytest.mark.parametrize("method", CAPTUM)
def test_one_class_per_method_for_both_kinds(method):
    """A method is one class, whose one run of a Captum class serves both
    kinds; the registry fixes no per-kind argument; no string table."""
    classifier, causal = (method_entry(method, k) for k in MODEL_KINDS)
    assert classifier.target == causal.target
    assert not classifier.defaults and not causal.defaults
    cls = scorer_class(method)
    assert issubclass(cls, CaptumPromptScorer)
    assert cls._captum_run is not CaptumPromptScorer._captum_run
    assert not hasattr(llm_scorers, "CAPTUM_METHODS")


@pytest.mark.parametrize("method", ["occlusion", "grad-x-act"])
def test_classifier_only_anchors_name_no_captum_class_for_prompts(method):
    assert METHODS.entry(method).facts["models"] == ("classifier",)


def test_the_same_class_scores_both_kinds(model, tokenizer, batch):
    """LeaveOneOutScorer deletes a classifier's tokens and ablates a causal
    LM's prompt tokens through Captum (FeatureAblation)."""
    ids, mask, tt = batch
    on_classifier = LeaveOneOutScorer(model, tokenizer=tokenizer)
    scores = on_classifier.attribute(ids, target=[1, 0, 1], attention_mask=mask)
    assert scores.shape == ids.shape and on_classifier.kind == "classifier"
    lm, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    on_lm = LeaveOneOutScorer(lm, tokenizer=tok)
    prompts = _prompts(tok)
    found = on_lm.attribute(prompts, per_token=True)
    assert on_lm.kind == "causal-lm" and on_lm.settings["captum"] == "FeatureAblation"
    assert found.answer.shape == prompts.input_ids.shape
    assert (found.answer[~prompts.scored] == 0).all()
    assert (found.answer[prompts.scored] != 0).any()
    assert found.tokens is not None and found.tokens.shape[:2] == (2, 2)


def test_a_classifier_scorer_refuses_a_prompt_batch(model, tokenizer):
    scorer = IntegratedGradientsScorer(model, tokenizer=tokenizer)
    with pytest.raises(TypeError, match="built on a classifier: give it a TokenBatch"):
        scorer.attribute(_prompts(tiny_word_tokenizer()))


def test_a_classifiers_arguments_are_refused_on_a_causal_lm():
    """Arguments that mean nothing on Captum's LLM API are refused, named,
    not silently dropped."""
    lm, tok = tiny_causal_lm("gpt2"), tiny_word_tokenizer()
    with pytest.raises(ValueError, match="takes no output, normalize"):
        IntegratedGradientsScorer(lm, tokenizer=tok, output="probs", normalize="l2")
    with pytest.raises(ValueError, match="takes no attribute_options"):
        KernelShapScorer(
            lm, tokenizer=tok, attribute_options={"perturbations_per_eval": 2}
        )
    scorer = KernelShapScorer(lm, tokenizer=tok, n_samples=30)
    assert scorer.settings["n_samples"] == 30 and scorer.per_token_note


@pytest.mark.parametrize(
    "captum, method, options",
    [
        ("FeatureAblation", "ablation", {}),
        ("Lime", "lime", {"n_samples": 10}),
        ("LayerIntegratedGradients", "ig", {"n_steps": 4}),
    ],
)
def test_captum_llm_scorer_is_a_deprecated_shim(captum, method, options):
    """0.3's CaptumLLMScorer(model, captum=...) warns, naming the method, and
    builds the method's one class, which scores as the method does."""
    lm, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    with pytest.warns(DeprecationWarning, match=f"build_scorer\\('{method}', model"):
        old = llm_scorers.CaptumLLMScorer(lm, captum=captum, tokenizer=tok, **options)
    new = build_scorer(method, lm, tokenizer=tok, **options)
    assert type(old) is type(new) is scorer_class(method)
    assert old.settings == new.settings
    prompts = _prompts(tok)
    torch.testing.assert_close(
        old.attribute(prompts).answer, new.attribute(prompts).answer
    )
    with pytest.raises(ValueError, match="captum must be one of"):
        llm_scorers.CaptumLLMScorer(lm, captum="Occlusion", tokenizer=tok)
