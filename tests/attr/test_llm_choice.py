"""CausalLMChoice: a causal LM's choice among answer words as a (B, C)
classifier - each word's log-probability at the position that predicts the
answer, as the full model gives it, whatever the padding and whether the
logits are kept for a few positions only."""

import pytest
import torch

from captum_iba.attr.llm_batch import prompt_batch
from captum_iba.attr.llm_choice import CausalLMChoice
from tests.helpers import tiny_causal_lm, tiny_word_tokenizer

PROMPTS = ["the cat sat on the mat", "a dog ran", "big red"]


def _by_hand(model, ids, choices):
    """log p(word | prompt) of one unpadded prompt, from the full logits."""
    with torch.no_grad():
        logits = model(input_ids=ids[None]).logits[0, -1]
    return torch.log_softmax(logits.float(), -1)[choices]


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_each_word_s_log_probability_where_the_answer_starts(kind):
    model, tok = tiny_causal_lm(kind), tiny_word_tokenizer()
    choices = tok.convert_tokens_to_ids(["is", "was", "in"])
    batch = prompt_batch(tok, PROMPTS, [" is"] * 3)  # padded on the left
    choice = CausalLMChoice(model, choices)
    with torch.no_grad():
        got = choice(batch.input_ids, batch.attention_mask, batch.answer_mask)
    assert got.shape == (3, 3)
    for row in range(3):
        prompt = batch.input_ids[row][batch.prompt_mask[row]]
        expected = _by_hand(model, prompt, choices)
        torch.testing.assert_close(got[row], expected, atol=1e-5, rtol=0)
    # the prompt alone, padded on the right: read after the last real token
    prompts = [batch.input_ids[r][batch.prompt_mask[r]] for r in range(3)]
    width = max(len(p) for p in prompts)
    ids = torch.zeros(3, width, dtype=torch.long)
    mask = torch.zeros(3, width, dtype=torch.long)
    for r, p in enumerate(prompts):
        ids[r, : len(p)], mask[r, : len(p)] = p, 1
    with torch.no_grad():
        right = choice(ids, mask)
    torch.testing.assert_close(right, got, atol=1e-5, rtol=0)


def test_without_logits_to_keep_the_same_numbers():
    """A model whose forward takes no ``logits_to_keep``: the full logits,
    read at the same positions."""
    model, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    choices = tok.convert_tokens_to_ids(["is", "was"])
    batch = prompt_batch(tok, PROMPTS, [" is"] * 3)

    class Plain(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, input_ids, attention_mask, position_ids, use_cache):
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask,
                position_ids=position_ids, use_cache=use_cache,
            )  # fmt: skip

    args = (batch.input_ids, batch.attention_mask, batch.answer_mask)
    with torch.no_grad():
        kept = CausalLMChoice(model, choices)(*args)
        full = CausalLMChoice(Plain(), choices)(*args)
    assert not CausalLMChoice(Plain(), choices)._keeps
    torch.testing.assert_close(full, kept, atol=1e-5, rtol=0)


def test_bad_choices_and_answers_are_named():
    model = tiny_causal_lm("llama")
    with pytest.raises(ValueError, match="two or more distinct"):
        CausalLMChoice(model, [3])
    with pytest.raises(ValueError, match="two or more distinct"):
        CausalLMChoice(model, [3, 3])
    choice = CausalLMChoice(model, [3, 4])
    ids = torch.tensor([[5, 6, 7]])
    with pytest.raises(ValueError, match="marks no answer token"):
        choice(ids, None, torch.zeros_like(ids, dtype=torch.bool))
    with pytest.raises(ValueError, match="position 0"):
        choice(ids, None, torch.tensor([[True, False, False]]))


def test_the_model_keeps_its_mode():
    model = tiny_causal_lm("llama").train()
    choice = CausalLMChoice(model, [3, 4])
    assert model.training and not choice.training
