"""``iba-fast``: one deletion step, then one more on the prompt with the top
share of its tokens deleted for real (long prompts only)."""

import pytest
import torch

from captum_iba.attr.batches import scatter_back
from captum_iba.attr.llm import CausalLMLogLikelihood
from captum_iba.attr.llm_batch import prompt_batch
from captum_iba.evaluation import Resources, build_scorers
from captum_iba.evaluation.iba import IBAScorer, top_share
from captum_iba.registry import METHODS
from tests.helpers import no_hooks, tiny_causal_lm, tiny_word_tokenizer

PROMPTS = ["the cat sat on the mat the dog", "a dog ran"]
ANSWERS = [" ran in", " the"]


@pytest.fixture(scope="module")
def lm():
    return tiny_causal_lm("llama"), tiny_word_tokenizer()


def _scorer(lm, name, **options):
    model, tok = lm
    return build_scorers(
        [name], Resources(model, tok), method_options={name: options},
        kind="causal-lm",
    )[name]  # fmt: skip


def test_top_share_takes_the_highest_of_the_scored_positions():
    scores = torch.tensor([[0.1, 0.9, 0.5, 0.7, 0.2], [0.3, 0.8, 0.0, 0.0, 0.6]])
    scored = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 0, 0, 1]]).bool()
    assert top_share(scores, scored, 0.5).int().tolist() == [
        [0, 1, 0, 1, 0],  # 2 of 4: 0.9 and 0.7
        [0, 1, 0, 0, 1],  # round(1.5) = 2 of 3: 0.8 and 0.6
    ]
    # at least one, never an unscored position
    assert top_share(scores, scored, 0.01).sum(1).tolist() == [1, 1]
    assert not (top_share(scores, scored, 0.99) & ~scored).any()


def test_without_is_the_prompt_with_those_tokens_deleted(lm):
    """Deleting positions gives the batch of the shorter prompt: the same
    ids, padding and answer, and the same answer log-probability."""
    model, tok = lm
    batch = prompt_batch(tok, PROMPTS, ANSWERS, chat=False)
    words = PROMPTS[0].split()
    drop = torch.zeros_like(batch.scored)
    drop[0, [1, 3]] = True  # "cat", "on" of the first prompt
    short, columns = batch.without(drop, pad_token_id=0)
    shorter = " ".join(w for i, w in enumerate(words) if i not in (1, 3))
    again = prompt_batch(tok, [shorter, PROMPTS[1]], ANSWERS, chat=False)
    width = again.input_ids.shape[1]
    assert short.input_ids.shape[1] == width
    assert torch.equal(short.input_ids, again.input_ids)
    assert torch.equal(short.attention_mask, again.attention_mask)
    assert torch.equal(short.labels, again.labels)
    assert torch.equal(short.scored, again.scored)
    kept = columns[0][columns[0] >= 0].tolist()
    assert kept == [c for c in range(batch.input_ids.shape[1]) if c not in (1, 3)]
    ll = CausalLMLogLikelihood(model)
    assert torch.allclose(ll(**short.arguments()), ll(**again.arguments()))
    with pytest.raises(ValueError, match="answer's position"):
        batch.without(batch.answer_mask, pad_token_id=0)
    with pytest.raises(ValueError, match="drop must be"):
        batch.without(drop[:, :3], pad_token_id=0)


def test_scatter_back_puts_each_value_at_its_column_and_padding_nowhere():
    """Column 0 is kept in the first row while its new padding (-1) comes
    first: the padding writes nowhere, so column 0 keeps its value."""
    columns = torch.tensor([[-1, 0, 2, 3], [1, 2, 3, 4]])
    values = torch.tensor([[9.0, 1.0, 2.0, 3.0], [5.0, 6.0, 7.0, 8.0]])
    assert scatter_back(values, columns, 5).tolist() == [
        [1.0, 0.0, 2.0, 3.0, 0.0],
        [0.0, 5.0, 6.0, 7.0, 8.0],
    ]


def test_a_short_prompt_gets_one_step_a_long_one_the_rest_step_too(lm):
    """The scores are the mask averaged over the two steps: the top share
    counted as kept in the second, the rest holding the second step's mask
    on the prompt without them; a prompt under rest_from keeps one step's."""
    model, tok = lm
    batch = prompt_batch(tok, PROMPTS, ANSWERS, chat=False)
    one = _scorer(lm, "iba-deletion", steps=1)
    first = one.attribute(batch).answer
    fast = _scorer(lm, "iba-fast")
    assert fast.rest_share == 0.25 and fast.options.steps == 1
    assert torch.equal(fast.attribute(batch).answer, first)  # both under 128
    fast.rest_from = 4  # the first prompt (8 tokens) takes the step, not the second
    got = fast.attribute(batch).answer
    assert torch.equal(got[1], first[1])
    row = batch.rows([0])
    top = top_share(first[:1], row.scored.bool(), 0.25)
    assert top.sum() == 2  # round(8 * 0.25)
    short, columns = row.without(top, one.pad_token_id)
    second = one.attribute(short).answer[0]
    expected = first[0].clone()
    for column in range(batch.input_ids.shape[1]):
        if not batch.scored[0, column]:
            continue
        if top[0, column]:
            expected[column] = (first[0, column] + 1) / 2
        else:
            at = (columns[0] == column).nonzero().item()
            expected[column] = (first[0, column] + second[at]) / 2
    assert torch.allclose(got[0], expected, atol=1e-6)
    assert got[0][top[0]].min() > 0.5  # counted as kept in the second step
    assert no_hooks(model) and not model.training


def test_rest_share_is_checked(lm):
    model, tok = lm
    with pytest.raises(ValueError, match="rest_share must be in"):
        IBAScorer(model, config="deletion", tokenizer=tok, rest_share=1.0)
    with pytest.raises(ValueError, match="deletion configuration"):
        IBAScorer(model, config="paper", tokenizer=tok, rest_share=0.5)
    with pytest.raises(ValueError, match="rest_share"):
        _scorer(lm, "iba-fast", rest_share=1.5)
    assert "rest_share" in METHODS.entry("iba-fast").facts["options"]
    assert METHODS.entry("iba-fast").facts["models"] == ("causal-lm",)
