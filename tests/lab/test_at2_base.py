"""AT2 on a base model (issue 51): a tokenizer without a chat template (and
with a BOS, as Gemma 3's) reads the prompt as plain text, exactly the ids
the study's other methods explain; its own trainer runs on that layout; a
Gemma 3 text model is read through a view whose recomputed attention is the
model's own. Skipped without the ``at2`` package."""

import math

import pytest
import torch

from captum_iba.attr.llm_batch import prompt_batch
from captum_iba.evaluation.sources import pool_sources, with_sources
from tests.helpers import (
    TINY_WORDS,
    no_hooks,
    study_module,
    tiny_causal_lm,
    tiny_word_tokenizer,
)

SOURCES = ("the cat sat on the mat", "a dog ran in the park", "the big red cat")
EXAMPLES = [
    (SOURCES, "the cat is"),
    (("a small dog", "the cat ran", "the mat is blue"), "the dog is"),
    (("the park is big", "a cat sat", "the red dog"), "the park is"),
]


def base_tokenizer():
    """The word tokenizer without a chat template, opening every text with
    a BOS (``<eos>``, the tiny models' ``bos_token_id``), as Gemma 3's."""
    from tokenizers import processors

    tok = tiny_word_tokenizer()
    tok.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="<eos> $A", special_tokens=[("<eos>", 1)]
    )
    assert not getattr(tok, "chat_template", None)
    assert tok("the cat")["input_ids"] == [1, 3, 4]
    return tok


@pytest.fixture(scope="module")
def base():
    """A tiny Llama and a base tokenizer (skipped without AT2's package)."""
    pytest.importorskip("at2")
    model, tok = tiny_causal_lm("llama", layers=2, positions=128), base_tokenizer()
    return model, tok


def test_the_trainer_and_the_scores_read_a_base_model_s_plain_text(base, tmp_path):
    """Before: AT2 refused a tokenizer without a chat template. Now, with
    ``chat=False``, its trainer runs on the plain-text layout, and the
    method reads each row's ids (BOS + prompt + response) as the batch has
    them, its source scores the sums of its token scores over our sources."""
    from captum_iba_lab.at2 import at2_scores, at2_token_scores, layout

    from captum_iba.evaluation import Resources, build_scorers

    training = study_module("at2_training")
    at2_trainer, train_at2 = training.at2_trainer, training.train_at2

    model, tok = base
    with pytest.raises(ValueError, match="chat=True.*none.*chat=False"):
        at2_trainer(model, tok, EXAMPLES, tmp_path / "work", ablations=4)
    trainer, _ = at2_trainer(
        model, tok, EXAMPLES, tmp_path / "work", ablations=4, max_new_tokens=3,
        chat=False, suffix=" is",
    )  # fmt: skip
    task = trainer.get_task(0)
    assert task.input_text == "<eos>" + layout(*EXAMPLES[0], " is")[0]
    assert task.get_input_tokens()["input_ids"][0] == 1  # the BOS, once
    path = tmp_path / "base.pt"
    estimator = train_at2(trainer, 3, path, iterations=5)
    assert no_hooks(model)

    # a trailing space: the word tokenizer decodes a response without its own
    laid = [
        layout(SOURCES, "the cat is "),
        layout(("a small dog", "the cat ran"), "the dog is "),
    ]
    batch = prompt_batch(tok, [p for p, _ in laid], ["the mat", "red"], chat=False)
    batch = with_sources(tok, batch, [s for _, s in laid], chat=False)
    assert batch.input_ids[0, batch.attention_mask[0].bool()][0] == 1
    scorer = build_scorers(
        ["at2"], Resources(model, tok), kind="causal-lm",
        method_options={"at2": {"weights": path}},
    )["at2"]  # fmt: skip
    found = scorer.attribute(batch, per_token=True)
    assert found.sources.shape == (2, 3) and math.isnan(found.sources[1, 2])
    assert torch.isfinite(found.sources[0]).all()
    pooled = pool_sources(found.answer, batch.sources, batch.n_sources, "sum")
    assert torch.allclose(pooled[0], found.sources[0], atol=1e-5)
    response = tok.encode("the mat", add_special_tokens=False)
    own = at2_scores(
        model, tok, SOURCES, "the cat is ", response, estimator, chat=False
    )
    assert torch.allclose(found.sources[0], own)
    with pytest.raises(ValueError, match="chat=True.*has none"):  # still refused
        at2_token_scores(model, tok, *laid[0], response, estimator, chat=True)
    assert no_hooks(model) and not model.training


def tiny_gemma3(window: int = 16):
    """A tiny random Gemma 3 text model (one sliding layer, one full)."""
    import transformers as tf

    torch.manual_seed(0)
    cfg = tf.Gemma3TextConfig(
        vocab_size=len(TINY_WORDS), hidden_size=16, intermediate_size=32,
        num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
        head_dim=8, query_pre_attn_scalar=8, sliding_window=window,
        layer_types=["sliding_attention", "full_attention"],
        max_position_embeddings=64, pad_token_id=0, eos_token_id=1,
        bos_token_id=1, attn_implementation="eager",
    )  # fmt: skip
    return tf.Gemma3ForCausalLM(cfg).eval()


def test_a_gemma3_text_model_is_read_through_a_view_with_its_attention():
    """Before: AT2 refused ``gemma3_text`` (Gemma 3 270M) and its code asks
    transformers 5's Gemma 3 for rotary embeddings it no longer has. Now
    the package's recomputed attention, through the view, is the model's
    own (eager) attention, the model is unchanged, and a text past the
    sliding window is refused."""
    pytest.importorskip("at2")
    from at2.attribution.attention import get_attention_weights
    from captum_iba_lab.at2_model import (
        at2_model,
        check_window,
        model_type_of,
    )

    model = tiny_gemma3()
    assert model.config.model_type == "gemma3_text"
    assert model_type_of(model) == "gemma3"
    view = at2_model(model)
    assert view is not model and not hasattr(model.model, "rotary_emb_local")
    ids = torch.tensor([[1, 3, 4, 5, 6, 3, 7, 8, 9, 10, 11]])
    with torch.no_grad():
        out = model(ids, output_hidden_states=True, output_attentions=True)
        found = get_attention_weights(view, out.hidden_states, model_type="gemma3")
    for layer, own in enumerate(out.attentions):
        assert torch.allclose(found[layer], own[0], atol=1e-5)
    assert at2_model(tiny_causal_lm("llama")).config.model_type == "llama"
    check_window(model, 16)
    with pytest.raises(ValueError, match="17 tokens.*sliding window \\(16\\)"):
        check_window(model, 17)
    check_window(tiny_causal_lm("llama"), 1000)  # no sliding layers
