"""The degradation test for prompts (captum_iba.metrics.prompts): the answer's
probability per level, computed by hand on a toy log-likelihood, and on a
tiny random Llama through CausalLMLogLikelihood (the labels follow the
tokens when deletion compacts a prompt; the instruction and the answer are
never removed)."""

import math

import pytest
import torch
from captum.testing.helpers.basic import BaseTest, assertTensorAlmostEqual
from torch import Tensor, nn

from captum_iba.attr.llm import CausalLMLogLikelihood
from captum_iba.attr.llm_batch import prompt_batch
from captum_iba.metrics import (
    DegradationOptions,
    Deletion,
    Replacement,
    choice_degradation_test,
    prompt_degradation_test,
)
from captum_iba.metrics.prompts import AnswerOdds
from tests.helpers import tiny_causal_lm, tiny_word_tokenizer

#: Token id -> weight of the toy log-likelihood (ids 0-1 are pad / eos).
WEIGHTS = torch.tensor([0.0, 0.0, 2.0, -1.0, 0.5, 1.5, 0.25, 3.0], dtype=torch.float64)


class ToyAnswer(nn.Module):
    """log p(answer) = log sigmoid(sum of the present tokens' weights)."""

    def __init__(self) -> None:
        super().__init__()
        self.weights = nn.Parameter(WEIGHTS.clone(), requires_grad=False)

    def forward(self, ids: Tensor, mask: Tensor, labels: Tensor) -> Tensor:
        assert bool(((labels == 1).sum(1) == 1).all()), "one answer token per row"
        assert bool(((labels == 1) | (labels == -100)).all())
        return nn.functional.logsigmoid((self.weights[ids] * mask).sum(1))


def _p(tokens) -> float:
    return 1.0 / (1.0 + math.exp(-float(sum(WEIGHTS[t] for t in tokens))))


class TestToyAnswer(BaseTest):
    def setUp(self) -> None:
        # one prompt: an instruction (7, kept), content 2 3 4 5 6, answer 1
        self.ids = torch.tensor([[7, 2, 3, 4, 5, 6, 1]])
        self.mask = torch.ones_like(self.ids)
        self.answer = self.ids == 1
        self.content = torch.tensor([[False, True, True, True, True, True, False]])
        self.scores = WEIGHTS[self.ids].clone()

    def _test(self, **kw):
        options = DegradationOptions(
            levels=[0, 1, 2, 5], level_unit="count", special_token_ids=()
        )
        return prompt_degradation_test(
            ToyAnswer().eval(), self.ids, self.scores, self.answer,
            attention_mask=self.mask,
            removable=self.content, options=options, **kw,
        )  # fmt: skip

    def test_probabilities_per_level(self) -> None:
        """Order by score 2 (2.0) > 5 (1.5) > 4 > 6 > 3; the instruction 7
        stays at every level, even when all content is gone."""
        result = self._test()
        expected = [
            _p([7, 2, 3, 4, 5, 6]),
            _p([7, 3, 4, 5, 6]),
            _p([7, 3, 4, 6]),
            _p([7]),
        ]
        assertTensorAlmostEqual(self, result.probs[0], expected, delta=1e-12)
        self.assertAlmostEqual(float(result.original_probs[0]), expected[0], places=12)
        self.assertEqual(int(result.n_tokens[0]), 5)  # the content only
        self.assertEqual(result.settings["target"], "answer")

    def test_a_model_in_training_mode_is_named(self) -> None:
        with pytest.warns(UserWarning, match="training mode"):
            prompt_degradation_test(
                ToyAnswer().train(), self.ids, self.scores, self.answer,
                removable=self.content,
                options=DegradationOptions(special_token_ids=()),
            )  # fmt: skip

    def test_nothing_kept_before_the_answer_is_refused(self) -> None:
        """By default everything but the answer may go: here that leaves the
        answer nothing to be predicted from."""
        with self.assertRaisesRegex(ValueError, r"row\(s\) \[0\] keep no token"):
            prompt_degradation_test(
                ToyAnswer().eval(), self.ids, self.scores, self.answer,
                options=DegradationOptions(special_token_ids=()),
            )  # fmt: skip

    def test_answer_odds_are_exact(self) -> None:
        logp = torch.tensor([-0.1, -3.0, 0.0])
        ids = torch.zeros(3, 2, dtype=torch.long)
        logits = AnswerOdds(lambda *args: logp)(ids, ids, ids == 0)
        probs = torch.softmax(logits, dim=1)
        assertTensorAlmostEqual(self, probs[:, 0], logp.double().exp(), delta=1e-15)

    def test_replacement_keeps_positions(self) -> None:
        """Replaced by token 1 (weight 0): the same sums as deletion here."""
        options = DegradationOptions(
            levels=[0, 2], level_unit="count", removal=Replacement(1),
            special_token_ids=(),
        )  # fmt: skip
        result = prompt_degradation_test(
            ToyAnswer().eval(), self.ids, self.scores, self.answer,
            attention_mask=self.mask,
            removable=self.content, options=options,
        )  # fmt: skip
        assertTensorAlmostEqual(
            self, result.probs[0], [_p([7, 2, 3, 4, 5, 6]), _p([7, 3, 4, 6])],
            delta=1e-12,
        )  # fmt: skip

    def test_bad_removable_and_forward(self) -> None:
        with self.assertRaisesRegex(ValueError, "removable has shape"):
            prompt_degradation_test(
                ToyAnswer().eval(), self.ids, self.scores, self.answer,
            attention_mask=self.mask,
                removable=self.content[:, :3],
            )  # fmt: skip
        with self.assertRaisesRegex(ValueError, r"instance\(s\) \[0\] no token"):
            prompt_degradation_test(
                ToyAnswer().eval(), self.ids, self.scores, self.answer,
            attention_mask=self.mask,
                removable=torch.zeros_like(self.content),
            )  # fmt: skip
        with self.assertRaisesRegex(ValueError, r"shape \(N,\); got \(1, 2\)"):
            prompt_degradation_test(
                lambda ids, mask, labels: torch.zeros(ids.shape[0], 2), self.ids,
                self.scores, self.answer, attention_mask=self.mask,
                removable=self.content,
                options=DegradationOptions(special_token_ids=()),
            )  # fmt: skip


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_a_causal_lm_with_its_labels_following(kind):
    """Left-padded prompts, deletion: level 0 is the model's own answer
    probability; at the last level every content token but each prompt's
    first word is gone, and the probability is that of the first word +
    answer alone, computed by hand (the answer followed its tokens)."""
    model, tok = tiny_causal_lm(kind), tiny_word_tokenizer()
    batch = prompt_batch(
        tok, ["the cat sat on the mat", "a dog ran"], [" is big", " in park"]
    )
    answer = batch.answer_mask
    generator = torch.Generator().manual_seed(0)
    scores = torch.rand(batch.input_ids.shape, generator=generator)
    assert batch.input_ids.shape[0] == 2
    content = batch.scored.clone()
    first_word = content.float().argmax(1)  # keep each prompt's first word
    content[torch.arange(2), first_word] = False
    options = DegradationOptions(
        levels=[0.0, 1.0], pad_token_id=tok.pad_token_id, removal=Deletion(),
        special_token_ids=tuple(tok.all_special_ids),
    )  # fmt: skip
    log_likelihood = CausalLMLogLikelihood(model)
    result = prompt_degradation_test(
        log_likelihood, batch.input_ids, scores, answer,
        attention_mask=batch.attention_mask, removable=content, options=options,
    )  # fmt: skip
    with torch.no_grad():
        labels = batch.input_ids.masked_fill(~answer, -100)
        own = log_likelihood(batch.input_ids, batch.attention_mask, labels).exp()
    torch.testing.assert_close(result.probs[:, 0], own.double(), atol=1e-6, rtol=0)
    for i in range(2):
        keep = batch.attention_mask[i].bool() & ~content[i]
        ids, lab = batch.input_ids[i][keep][None], labels[i][keep][None]
        with torch.no_grad():
            alone = log_likelihood(ids, torch.ones_like(ids), lab).exp()
        assert abs(float(result.probs[i, 1]) - float(alone)) < 1e-6
        assert int(answer[i][keep].sum()) == int(answer[i].sum())  # all answer kept


def test_one_answer_word_in_the_content_is_not_taken_for_a_special_token(recwarn):
    """Every row ends with its answer (id 1): kept, so that it also stands in
    the content is no sign of options made for another tokenizer."""
    ids = torch.tensor([[7, 2, 1, 4, 5, 6, 1], [3, 2, 3, 1, 5, 6, 1]])
    content = torch.tensor([[False] + [True] * 5 + [False]] * 2)
    choice_degradation_test(
        ToyChoice().eval(), ids, WEIGHTS[ids].clone(), ids == 1, removable=content,
        options=DegradationOptions(levels=[0, 1], level_unit="count",
                                   special_token_ids=(0,)),
    )  # fmt: skip
    assert not [w for w in recwarn if "special token id" in str(w.message)]


class ToyChoice(nn.Module):
    """Two answer words whose logits are [s, -s], s = the sum of the present
    prompt tokens' weights; the answer token (id 1) is read for its position
    only."""

    def forward(self, ids: Tensor, mask: Tensor, answer: Tensor) -> Tensor:
        assert bool((ids[answer] == 1).all()), "the answer followed its token"
        s = (WEIGHTS[ids] * mask * ~answer).sum(1)
        return torch.stack([s, -s], dim=1)


def _choice(tokens, target: int) -> float:
    s = float(sum(WEIGHTS[t] for t in tokens))
    return 1.0 / (1.0 + math.exp(-2 * s if target == 0 else 2 * s))


class TestToyChoice(BaseTest):
    """The answer's probability among two words, level by level, by hand."""

    ids = torch.tensor([[7, 2, 3, 4, 5, 6, 1], [3, 2, 3, 4, 5, 6, 1]])
    content = torch.tensor([[False] + [True] * 5 + [False]] * 2)
    options = DegradationOptions(
        levels=[0, 1, 5], level_unit="count", special_token_ids=()
    )

    def test_probabilities_per_level_and_the_model_s_own_choice(self) -> None:
        """The sums are 6.25 and 2.25 (both choose word 0); with target None
        each row explains its own choice."""
        scores = WEIGHTS[self.ids].clone()
        result = choice_degradation_test(
            ToyChoice().eval(), self.ids, scores, self.ids == 1,
            removable=self.content, options=self.options,
        )  # fmt: skip
        for row, lead in enumerate((7, 3)):
            expected = [
                _choice([lead, 2, 3, 4, 5, 6], 0),
                _choice([lead, 3, 4, 5, 6], 0),  # 2 (weight 2.0) goes first
                _choice([lead], 0),
            ]
            assertTensorAlmostEqual(self, result.probs[row], expected, delta=1e-6)
        self.assertEqual(result.settings["target"], "choice")
        self.assertEqual(result.target.tolist(), [0, 0])

    def test_a_given_target_and_the_answer_kept(self) -> None:
        """Target 1 (the other word) for row 1; the answer is never removed,
        even when it scores highest; the instruction needs keeping."""
        scores = WEIGHTS[self.ids].clone()
        scores[:, -1] = 100.0
        result = choice_degradation_test(
            ToyChoice().eval(), self.ids, scores, self.ids == 1, target=[0, 1],
            removable=self.content, options=self.options,
        )  # fmt: skip
        self.assertAlmostEqual(float(result.probs[1, 2]), _choice([3], 1), places=6)
        with self.assertRaisesRegex(ValueError, r"row\(s\) \[0, 1\] keep no token"):
            choice_degradation_test(
                ToyChoice().eval(), self.ids, scores, self.ids == 1,
                options=DegradationOptions(special_token_ids=()),
            )  # fmt: skip
