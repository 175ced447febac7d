"""Issue 88, the door, for the methods built on a loaded model
(:func:`~captum_iba.evaluation.build_scorers`,
:func:`~captum_iba.evaluation.make_scorers`, a scorer's constructor): a
Hugging Face model of another head is refused before anything is built,
naming its class; a forward function or a plain ``nn.Module`` stays a
classifier's forward, as Captum takes one. And the kind of a loaded model:
nothing is called a kind it is not."""

import pytest
import torch

from captum_iba.app.model_kind import decide_kind
from captum_iba.attr import InformationBottleneckAttribution
from captum_iba.attr.kinds import (
    CAUSAL_LM,
    CLASSIFIER,
    NotExplainedError,
    config_kind,
    kind_of,
)
from captum_iba.evaluation import Resources, build_scorer, build_scorers, make_scorers
from tests.helpers import (
    OTHER_HEADS,
    PlainClassifier,
    forward_fails,
    other_head_model,
    tiny_causal_lm,
    tiny_word_tokenizer,
)


@pytest.mark.parametrize("name", list(OTHER_HEADS))
def test_methods_on_a_model_of_another_head_are_refused(name):
    model, tok = forward_fails(other_head_model(name)), tiny_word_tokenizer()
    cls = OTHER_HEADS[name][0]
    calls = {
        "build_scorers": lambda: build_scorers(["IG", "random"], Resources(model, tok)),
        "make_scorers": lambda: make_scorers(model, tok, methods=["IG"]),
        "build_scorer": lambda: build_scorer("IG", model, tokenizer=tok),
        "kind_of": lambda: kind_of(model),
    }  # fmt: skip
    for what, call in calls.items():
        with pytest.raises(NotExplainedError) as err:
            call()
        message = str(err.value)
        assert cls in message and "...ForSequenceClassification" in message, what
        assert "...ForCausalLM" in message and len(message.splitlines()) == 1


def test_nothing_is_called_a_kind_it_is_not():
    """Before: a LlamaForTokenClassification was a causal LM by its
    configuration's ``model_type`` (the application's kind by name), a BertForMaskedLM a
    classifier (``kind_of``), a GPT-2 classifier built without
    ``architectures`` a causal LM."""
    import transformers as tf

    for name in ("llama-token-classification", "bert-masked-lm"):
        model = other_head_model(name)
        for decide in (kind_of, decide_kind):
            with pytest.raises(NotExplainedError, match=OTHER_HEADS[name][0]):
                decide(model)
    gpt2 = tf.GPT2ForSequenceClassification(
        tf.GPT2Config(n_embd=8, n_layer=1, n_head=2, vocab_size=20, pad_token_id=0)
    )
    assert gpt2.config.architectures is None
    assert kind_of(gpt2) is CLASSIFIER and decide_kind(gpt2) is CLASSIFIER
    assert kind_of(tiny_causal_lm("llama")) is CAUSAL_LM
    # transformers' causal-LM table holds a class the name's ending does not
    gemma = {
        "model_type": "gemma3",
        "architectures": ["Gemma3ForConditionalGeneration"],
    }
    assert config_kind(gemma) == "causal-lm"


def test_a_forward_function_and_a_plain_module_stay_classifiers():
    """Captum users pass functions and modules: both are a classifier's
    forward for the scorers and for IBA. A method without a layer needs no
    layer stack (before, the default layer was resolved for every method:
    "No layer list (ModuleList) found in PlainClassifier")."""
    module = PlainClassifier()
    ids = torch.tensor([[1, 2, 3, 4]])
    for model in (module, lambda input_ids, *rest: module(input_ids)):
        assert kind_of(model) is CLASSIFIER
        scorers = make_scorers(model, None, methods=["random", "ablation", "LIME"])
        if model is module:  # (the IBA scorer finds its layer in a module)
            scorers.update(
                make_scorers(model, methods=["IBA"], layer=module.embeddings)
            )
        for scorer in scorers.values():
            assert scorer.model_kind is CLASSIFIER
            assert scorer.attribute(ids, target=torch.tensor([1])).shape == (1, 4)
        iba = InformationBottleneckAttribution(model, module.embeddings)
        assert iba.attribute(ids, target=1).shape[:2] == (1, 4)
