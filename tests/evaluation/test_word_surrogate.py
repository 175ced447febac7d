"""iba-surrogate on words (captum_iba.evaluation.word_surrogate): the one
method explains a classifier's prediction and a causal LM's answer from
their words as it explains a context's sources - on a bag of words its
weights are each word's additive effect, on a tiny Llama trained to copy a
value from its prompt it finds the value, and it leaves the model as it
found it."""

import pytest
import torch

from captum_iba.app.context_tasks import layout_prompt
from captum_iba.attr.batches import TokenBatch
from captum_iba.attr.class_rows import ClassRows
from captum_iba.attr.llm_batch import prompt_batch
from captum_iba.evaluation import Resources, build_scorers
from captum_iba.evaluation.scorers import TokenScorer
from captum_iba.evaluation.surrogate import IBASurrogateScorer
from captum_iba.evaluation.word_surrogate import token_prior, word_ablations
from captum_iba.metrics.strategies import Replacement
from tests.copy_model import N_HELDOUT, copy_examples
from tests.evaluation.conftest import BagOfWords, check_scores
from tests.helpers import no_hooks


class FixedPrior(TokenScorer):
    """A prior whose mask weights are ``sigmoid(scale * effect)``, the
    effect a bag of words' additive effect of each token on the class's
    log-odds (so its log-odds are proportional to the true weights)."""

    reads_model = True

    def __init__(self, model, effects, scale=0.5, **kwargs):
        super().__init__(model, **kwargs)
        self.effects, self.scale = effects, scale

    def _scores(self, rows):
        return torch.sigmoid(self.scale * self.effects(rows))


def _effects(bow):
    """The additive effect of each token of the rows on the log-odds of the
    rows' class (two classes: the difference of the two logits)."""

    def effects(rows):
        w = bow.weight.detach().double()
        t = rows.target
        own = w[rows.input_ids, t[:, None]]
        other = w[rows.input_ids, 1 - t[:, None]]
        return (own - other) * rows.scored

    return effects


def _rows(scorer, ids, mask, tt, target):
    return ClassRows.pack(TokenBatch(ids, target, mask, tt), scorer)


def test_the_budget_is_the_smallest_power_of_two_above_the_words():
    got = {n: word_ablations(n) for n in (0, 1, 7, 15, 16, 31, 32, 63, 500)}
    assert got == {0: 16, 1: 16, 7: 16, 15: 16, 16: 32, 31: 32, 32: 64, 63: 64, 500: 64}


@pytest.mark.parametrize("n_ablations", [None, 16, 64])
def test_weights_are_each_words_additive_effect_on_a_bag_of_words(
    tokenizer, batch, n_ablations
):
    """On a bag of words with two classes the class's log-odds are exactly
    additive in the tokens kept; deleting a token of a bag of words is
    masking it. Fitted to the log-odds with a negligible prior weight, the
    surrogate is least squares over a design in which every word has its own
    column: each word's weight is its additive effect, whatever the budget
    (16 ablations for 5 and 7 words: a resolution IV design)."""
    ids, mask, tt = batch
    bow = BagOfWords(30).eval()
    target = torch.tensor([0, 1, 1])
    prior = FixedPrior(bow, lambda rows: torch.zeros(rows.input_ids.shape))
    scorer = IBASurrogateScorer(
        bow,
        tokenizer=tokenizer,
        n_ablations=n_ablations,
        outcome="log-odds",
        penalty=1e-9,
        prior_scorer=prior,
    )
    scores = scorer.attribute(ids, target, mask, tt)
    check_scores(scores, ids, mask)
    expected = _effects(bow)(_rows(scorer, ids, mask, tt, target)).float()
    torch.testing.assert_close(
        scores, expected[:, : scores.shape[1]], atol=1e-4, rtol=1e-4
    )


@pytest.mark.parametrize("penalty", [1e-3, 1.0, 1e3])
def test_a_prior_that_is_right_is_the_answer_at_any_weight(tokenizer, batch, penalty):
    """A prior proportional to the true effects, scaled to the outcomes by
    least squares, is the least-squares answer: the ridge toward it gives
    the true effects whatever its weight lambda."""
    ids, mask, tt = batch
    bow = BagOfWords(30).eval()
    target = torch.tensor([1, 0, 1])
    prior = FixedPrior(bow, _effects(bow))
    scorer = IBASurrogateScorer(
        bow, tokenizer=tokenizer, outcome="log-odds", penalty=penalty,
        prior_scorer=prior,
    )  # fmt: skip
    scores = scorer.attribute(ids, target, mask, tt)
    expected = _effects(bow)(_rows(scorer, ids, mask, tt, target)).float()
    torch.testing.assert_close(
        scores, expected[:, : scores.shape[1]], atol=1e-4, rtol=1e-4
    )


def test_ranks_keep_the_order_of_an_additive_model(tokenizer, batch):
    """Fitted to the outcomes' ranks (the default) over every subset of a
    row's words, a bag of words' weights keep the order of the true effects
    of each word (a monotone transform of an additive outcome)."""
    ids, mask, tt = batch
    bow = BagOfWords(30).eval()
    target = torch.tensor([0, 1, 1])
    prior = FixedPrior(bow, lambda rows: torch.zeros(rows.input_ids.shape))
    scorer = IBASurrogateScorer(
        bow, tokenizer=tokenizer, n_ablations=128, penalty=1e-9, prior_scorer=prior
    )
    scores = scorer.attribute(ids, target, mask, tt)
    rows = _rows(scorer, ids, mask, tt, target)
    effects = _effects(bow)(rows)
    for b in range(len(ids)):
        at = rows.scored[b]
        assert torch.equal(
            torch.argsort(scores[b, : at.shape[0]][at]), torch.argsort(effects[b][at])
        )


def test_the_prior_is_a_masks_log_odds():
    values = torch.tensor([[0.5, 0.9, 0.1, 0.0], [0.5, 1.0, 0.5, 0.5]])
    scored = torch.tensor([[False, True, True, True], [False, True, False, False]])
    got = token_prior(values, scored)
    logit = torch.logit(torch.tensor([0.9, 0.1, 1e-6, 1 - 1e-6], dtype=torch.float64))
    torch.testing.assert_close(got[0, 1:], logit[:3])
    torch.testing.assert_close(
        got[1], torch.tensor([0, float(logit[3]), 0, 0]).double()
    )


def test_a_replacement_removes_words_in_place(tokenizer, batch):
    """With the degradation test's replacement by [MASK], an ablation keeps
    every position: on a bag of words a word's effect is then its weight
    less [MASK]'s."""
    ids, mask, tt = batch
    bow = BagOfWords(30).eval()
    target = torch.tensor([0, 1, 0])
    prior = FixedPrior(bow, lambda rows: torch.zeros(rows.input_ids.shape))
    scorer = IBASurrogateScorer(
        bow, tokenizer=tokenizer, outcome="log-odds", penalty=1e-9,
        prior_scorer=prior, removal=Replacement.mask(tokenizer),
    )  # fmt: skip
    assert scorer.settings["word_removal"] == "mask"
    scores = scorer.attribute(ids, target, mask, tt)
    rows = _rows(scorer, ids, mask, tt, target)
    w = bow.weight.detach().double()
    mask_id = tokenizer.mask_token_id
    t = target[:, None]
    expected = (w[ids, t] - w[ids, 1 - t]) - (w[mask_id, t] - w[mask_id, 1 - t])
    expected = (expected * rows.scored).float()
    torch.testing.assert_close(scores, expected, atol=1e-4, rtol=1e-4)


def test_a_classifier_through_the_registry(model, tokenizer, pair_batch):
    """On a tiny BERT, built by name with its one-step iba-deletion prior:
    scores at the removable tokens only, the same in any batch, no hook left,
    the weights unchanged, the settings saying what ran."""
    ids, mask, tt = pair_batch
    before = {k: v.clone() for k, v in model.state_dict().items()}
    scorer = build_scorers(["iba-surrogate"], Resources(model, tokenizer))[
        "iba-surrogate"
    ]
    scores = scorer.attribute(ids, 1, mask, tt)
    check_scores(scores, ids, mask)
    removable = scorer._removable(ids, mask)
    assert (scores[~removable] == 0).all() and (scores[removable] != 0).any()
    one = scorer.attribute(ids[1:], 1, mask[1:], tt[1:])
    torch.testing.assert_close(one, scores[1:, : one.shape[1]], atol=1e-5, rtol=1e-4)
    assert no_hooks(model)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    assert scorer.settings["word_removal"] == "delete"
    assert scorer.settings["prior"].startswith("iba-deletion, 1 step")


def test_it_needs_no_tokenizer_for_words_and_refuses_bad_options(tokenizer, batch):
    ids, mask, tt = batch
    bow = BagOfWords(30).eval()
    prior = FixedPrior(bow, lambda rows: torch.zeros(rows.input_ids.shape))
    scorer = IBASurrogateScorer(bow, prior_scorer=prior, special_token_ids=[0, 2, 3])
    assert scorer.attribute(ids, 0, mask, tt).shape == ids.shape
    with pytest.raises(ValueError, match="n_ablations"):
        IBASurrogateScorer(bow, n_ablations=1, prior_scorer=prior)
    with pytest.raises(ValueError, match="unknown|removal"):
        IBASurrogateScorer(bow, removal="nothing", prior_scorer=prior)


def test_it_finds_the_key_a_causal_lm_copies_from_its_prompt(copy_model):
    """The copy model answers the value after ``key`` in its prompt: on the
    prompt's words (no sources: the words route, tokens deleted as the
    degradation test deletes them) the value ranks first on held-out
    prompts, where random ranks it first about once in 20 words."""
    model, tok = copy_model
    examples = copy_examples(N_HELDOUT, 999)
    prompts = [layout_prompt(ex.sources, ex.query)[0] for ex in examples]
    batch = prompt_batch(tok, prompts, [ex.answer for ex in examples], chat=True)
    scorers = build_scorers(["iba-surrogate", "random"], Resources(model, tok))
    hits = {}
    for name, scorer in scorers.items():
        found = scorer.attribute(batch).answer
        best = found.masked_fill(~batch.scored, float("-inf")).argmax(1)
        picked = batch.input_ids.gather(1, best[:, None]).squeeze(1)
        values = torch.tensor([tok.convert_tokens_to_ids(ex.answer) for ex in examples])
        hits[name] = int((picked == values).sum())
    assert hits["iba-surrogate"] >= N_HELDOUT - 1, hits
    assert hits["random"] <= N_HELDOUT // 2, hits
    assert no_hooks(model)
