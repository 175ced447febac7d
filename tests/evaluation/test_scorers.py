"""Tests for captum_iba.evaluation scorers: per-token scorers on a tiny random BERT."""

import re

import pytest
import torch

from captum_iba.evaluation import (
    CaptumLimeScorer,
    IBAScorer,
    IntegratedGradientsScorer,
    LimeTextScorer,
    RandomScorer,
    make_scorers,
    run_degradation_suite,
)
from captum_iba.metrics import compare
from tests.evaluation.conftest import WORDS, BagOfWords, check_scores

# ------------------------------------------------------------------------------ shapes


def all_scorers(model, tokenizer, setting):
    paper_only = {"lime_max_length": 24} if setting == "paper" else {}
    return make_scorers(
        model,
        tokenizer,
        setting=setting,
        methods=("random", "IG", "LIME", "LIME-text"),
        ig_steps=8,
        lime_samples=30,
        **paper_only,
    )


@pytest.mark.parametrize("setting", ["paper", "fair"])
def test_every_scorer_returns_finite_token_scores(model, tokenizer, batch, setting):
    ids, mask, tt = batch
    for name, scorer in all_scorers(model, tokenizer, setting).items():
        scores = scorer.attribute(ids, torch.tensor([1, 0, 1]), mask, tt)
        check_scores(scores, ids, mask)
        assert scorer.settings["setting"] == setting, name
        assert scorer.settings["method"] == name


def test_scorers_handle_sentence_pairs(model, tokenizer, pair_batch):
    ids, mask, tt = pair_batch
    for scorer in all_scorers(model, tokenizer, "fair").values():
        check_scores(scorer.attribute(ids, 1, mask, tt), ids, mask)


def test_settings_recorded(model, tokenizer):
    paper = make_scorers(model, tokenizer, "paper", methods=("IG", "LIME-text"))
    fair = make_scorers(model, tokenizer, "fair", methods=("IG", "LIME-text", "LIME"))
    assert paper["IG"].settings["n_steps"] == 10
    assert paper["IG"].settings["explains"] == "class 0"
    assert paper["IG"].settings["normalize"] == "l2"
    assert paper["LIME-text"].settings["n_samples"] == 100
    assert paper["LIME-text"].settings["explains"] == "class 1"
    assert paper["LIME-text"].settings["attention_mask"] is False
    assert fair["IG"].settings["n_steps"] == 50
    assert fair["IG"].settings["explains"] == "given target"
    assert fair["LIME-text"].settings["n_samples"] == 500
    assert fair["LIME"].settings["n_samples"] == 500
    with pytest.raises(ValueError, match="setting"):
        make_scorers(model, tokenizer, "best")
    with pytest.raises(ValueError, match="(?i)unknown method"):
        make_scorers(model, tokenizer, "fair", methods=("SHAP",))


# ---------------------------------------------------------------------------------- IG


def test_ig_honours_target_and_completeness(model, tokenizer, batch):
    ids, mask, tt = batch
    ig = IntegratedGradientsScorer(model, tokenizer=tokenizer, n_steps=64)
    baseline = ids.masked_fill(ig._removable(ids, mask), tokenizer.pad_token_id)
    with torch.no_grad():
        diff = model(ids, mask, tt).logits - model(baseline, mask, tt).logits
    for t in (0, 1):
        scores = ig.attribute(ids, torch.full((3,), t), mask, tt)
        torch.testing.assert_close(scores.sum(1), diff[:, t], atol=2e-3, rtol=1e-2)
    s0 = ig.attribute(ids, 0, mask, tt)
    s1 = ig.attribute(ids, 1, mask, tt)
    assert not torch.allclose(s0, s1)
    # specials are in the baseline: zero attribution there
    special = torch.isin(ids, torch.tensor(ig.special_token_ids))
    assert (s0[special] == 0).all()


def test_ig_token_budget_splits_passes_not_scores(model, tokenizer, batch):
    ids, mask, tt = batch
    whole = IntegratedGradientsScorer(model, tokenizer=tokenizer, n_steps=16)
    split = IntegratedGradientsScorer(
        model, tokenizer=tokenizer, n_steps=16, max_tokens_per_pass=ids.shape[1]
    )
    rows = []
    handle = split.layer.register_forward_hook(lambda m, i, o: rows.append(o.shape[0]))
    try:
        scores = split.attribute(ids, 1, mask, tt)
    finally:
        handle.remove()
    torch.testing.assert_close(scores, whole.attribute(ids, 1, mask, tt))
    # the budget allows one row of L tokens, and a pass holds at least the batch
    assert max(rows) == ids.shape[0] and len(rows) > 2
    with pytest.raises(ValueError, match="max_tokens_per_pass"):
        IntegratedGradientsScorer(model, tokenizer=tokenizer, max_tokens_per_pass=0)


def test_paper_ig_always_explains_class_zero(model, tokenizer, batch):
    ids, mask, tt = batch
    paper = make_scorers(model, tokenizer, "paper", methods=("IG",), ig_steps=10)["IG"]
    a = paper.attribute(ids, torch.tensor([1, 1, 1]), mask, tt)
    b = paper.attribute(ids, torch.tensor([0, 0, 0]), mask, tt)
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(a.norm(dim=1), torch.ones(3))
    manual = IntegratedGradientsScorer(
        model,
        layer=model.bert.embeddings,
        n_steps=10,
        output="probs",
        normalize="l2",
        tokenizer=tokenizer,
    ).attribute(ids, 0, mask, tt)
    torch.testing.assert_close(a, manual)


# ------------------------------------------------------------------------------ random


def test_random_is_seeded(batch):
    ids, mask, tt = batch
    a = RandomScorer(seed=3).attribute(ids, None, mask)
    b = RandomScorer(seed=3).attribute(ids, None, mask)
    c = RandomScorer(seed=4).attribute(ids, None, mask)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    check_scores(a, ids, mask)
    assert (a[mask == 1] > 0).all()


def test_random_scores_depend_only_on_the_instance(batch):
    """Per-instance seeds: alone, reordered or padded wider, the same scores."""
    ids, mask, tt = batch
    together = RandomScorer(seed=3).attribute(ids, None, mask)
    scorer = RandomScorer(seed=3)
    for b in reversed(range(ids.shape[0])):
        n = int(mask[b].sum())
        wide = torch.cat([ids[b : b + 1, :n], torch.zeros(1, 5, dtype=ids.dtype)], 1)
        wide_mask = (torch.arange(n + 5) < n).long()[None]
        alone = scorer.attribute(wide, None, wide_mask)
        assert torch.equal(alone[0, :n], together[b, :n])


# -------------------------------------------------------------------------------- LIME


@pytest.mark.filterwarnings("ignore::scipy.linalg.LinAlgWarning")
def test_captum_lime_recovers_linear_weights(tokenizer, batch):
    """Logits of a bag of words are linear in the binary vector: LIME is exact."""
    ids, mask, tt = batch
    bow = BagOfWords(len(WORDS)).eval()
    lime = CaptumLimeScorer(
        bow, n_samples=200, output="logits", ridge_alpha=1e-6, tokenizer=tokenizer
    )
    target = torch.tensor([0, 1, 1])
    scores = lime.attribute(ids, target, mask, tt)
    removable = lime._removable(ids, mask)
    expected = bow.weight.detach()[ids, target[:, None]] * removable
    torch.testing.assert_close(scores, expected, atol=1e-3, rtol=1e-3)
    again = CaptumLimeScorer(
        bow, n_samples=200, output="logits", ridge_alpha=1e-6, tokenizer=tokenizer
    ).attribute(ids, target, mask, tt)
    assert torch.equal(scores, again)  # seeded
    last = CaptumLimeScorer(
        bow, n_samples=200, output="logits", ridge_alpha=1e-6, tokenizer=tokenizer
    ).attribute(ids[2:], target[2:], mask[2:], None if tt is None else tt[2:])
    assert torch.equal(last[0], scores[2])  # seeded per instance, not per call


def test_paper_lime_mapping_unmatched_pieces_get_max():
    pieces = ["[CLS]", "play", "##ing", "the", "movie", "!", "[SEP]", "[PAD]"]
    removable = [False, True, True, True, True, True, False, False]
    words = {"playing": 0.3, "the": -0.2, "movie": 0.1, "great": 0.5}
    mapped = LimeTextScorer.map_paper_weights(pieces, removable, words)
    assert mapped.tolist() == pytest.approx([0, 0.5, 0.5, -0.2, 0.1, 0.5, 0, 0])


def test_word_units_group_pieces():
    pieces = ["[CLS]", "play", "##ing", "it", "!", "[SEP]", "[PAD]"]
    removable = [False, True, True, True, True, False, False]
    assert LimeTextScorer.word_units(pieces, removable) == [-1, 0, 0, 1, 2, -1, -1]
    sp = ["\u2581play", "ing", "\u2581it"]
    assert LimeTextScorer.word_units(sp, [True] * 3) == [0, 0, 1]


class SpyExplainer:
    """Wraps LimeTextExplainer to record the labels it is asked to explain."""

    def __init__(self, inner, calls):
        self.inner, self.calls = inner, calls

    def explain_instance(self, text, classifier, labels, **kw):
        self.calls.append((text, tuple(labels)))
        return self.inner.explain_instance(text, classifier, labels=labels, **kw)


@pytest.mark.parametrize("mode", ["paper", "fair"])
def test_lime_text_target(model, tokenizer, batch, mode, monkeypatch):
    ids, mask, tt = batch
    scorer = LimeTextScorer(
        model,
        tokenizer,
        mode=mode,
        n_samples=20,
        max_length=24,
        target_class=1 if mode == "paper" else None,
    )
    calls = []
    make = scorer._explainer
    monkeypatch.setattr(scorer, "_explainer", lambda: SpyExplainer(make(), calls))
    scorer.attribute(ids, torch.tensor([0, 0, 0]), mask, tt)
    assert [c[1] for c in calls] == ([(1,)] * 3 if mode == "paper" else [(0,)] * 3)
    if mode == "paper":
        assert calls[0][0] == "the movie was great!"
    else:
        assert calls[0][0] == "w0 w1 w2 w3 w4"


def test_fair_lime_text_deletes_whole_words_with_masks(tokenizer, pair_batch):
    ids, mask, tt = pair_batch
    seen = []

    class Spy(BagOfWords):
        def forward(self, input_ids, attention_mask=None, token_type_ids=None):
            seen.append((input_ids, attention_mask, token_type_ids))
            return super().forward(input_ids, attention_mask, token_type_ids)

    spy = Spy(len(WORDS)).eval()
    scorer = LimeTextScorer(spy, tokenizer, mode="fair", n_samples=40, batch_size=7)
    scores = scorer.attribute(ids[1:], 1, mask[1:], tt[1:])
    row, seg = ids[1][mask[1] == 1].tolist(), tt[1][mask[1] == 1].tolist()
    # [CLS] play ##ing it [SEP] not bad [SEP]: 4 words, pieces share their word's score
    assert scores[0, 1] == scores[0, 2]
    for s_ids, s_mask, s_tt in seen[1:]:
        for r in range(s_ids.shape[0]):
            n = int(s_mask[r].sum())
            assert (s_mask[r, :n] == 1).all() and (s_mask[r, n:] == 0).all()
            kept = s_ids[r, :n].tolist()
            assert kept.count(3) == 2 and kept[0] == 2  # specials kept
            assert (10 in kept) == (11 in kept)  # "play ##ing" go together
            # a subsequence of the original, segment ids following
            it = iter(zip(row, seg))
            for tok, sg in zip(kept, s_tt[r, :n].tolist()):
                assert any((tok, sg) == pair for pair in it)


# --------------------------------------------------------------------------------- IBA


class StubIBA:
    calls = []

    def __init__(self, forward_func, layer):
        self.forward_func, self.layer = forward_func, layer

    def attribute(self, inputs, target=None, additional_forward_args=None, **kw):
        StubIBA.calls.append(dict(target=target, extra=additional_forward_args, **kw))
        B, L = inputs.shape
        return torch.arange(B * L * 4, dtype=torch.float).reshape(B, L, 4)


def test_iba_scorer_with_stub(model, tokenizer, batch):
    ids, mask, tt = batch
    scorer = IBAScorer(
        model,
        model.bert.encoder.layer[0],
        prior="reference",
        steps=3,
        tokenizer=tokenizer,
        iba_class=StubIBA,
    )
    scores = scorer.attribute(ids, torch.tensor([1, 0, 1]), mask, tt)
    full = torch.arange(ids.numel() * 4, dtype=torch.float).reshape(*ids.shape, 4)
    torch.testing.assert_close(scores, full.sum(-1) * mask)
    call = StubIBA.calls[-1]
    assert call["target"].tolist() == [1, 0, 1]
    assert torch.equal(call["token_mask"], mask)
    assert call["config"].prior.name == "reference" and call["config"].steps == 3
    assert scorer.settings["prior"] == "reference"


def test_iba_scorer_real_class(model, tokenizer, batch):
    pytest.importorskip("captum_iba.attr.iba")
    ids, mask, tt = batch
    scorer = IBAScorer(model, model.bert.encoder.layer[0], steps=2, n_samples=2)
    scores = scorer.attribute(ids, torch.tensor([1, 0, 1]), mask, tt)
    check_scores(scores, ids, mask)


# ----------------------------------------------------------------------------- harness


@pytest.mark.parametrize("setting", ["paper", "fair"])
def test_suite_end_to_end(model, tokenizer, batch, setting):
    ids, mask, tt = batch
    scorers = all_scorers(model, tokenizer, setting)
    scorers["IBA"] = IBAScorer(
        model, model.bert.encoder.layer[1], tokenizer=tokenizer, iba_class=StubIBA
    )
    labels = torch.tensor([1, 0, 1])
    results = run_degradation_suite(
        model, scorers, ids, labels, mask, tt, tokenizer=tokenizer, setting=setting,
        batch_size=2,
    )  # fmt: skip
    assert set(results) == {"random", "IG", "LIME", "LIME-text", "IBA"}
    for name, res in results.items():
        assert res.settings["method"] == name
        assert res.settings["attribution"]["setting"] == setting
        assert res.settings["length_convention"] == (
            "paper" if setting == "paper" else "tokens"
        )
        assert res.target.tolist() == [1, 0, 1]
        assert res.num_levels == 9
    table = compare(results)
    md = table.to_markdown()
    assert all(re.search(rf"\| {n} \|", md) for n in results)


def test_suite_takes_the_test_options_as_keywords(model, tokenizer, batch, capsys):
    """``levels=...`` as keywords; ``test_kwargs=`` (0.2) the same, warned
    at the caller; ``show_progress`` still shows the scoring's bars."""
    ids, mask, tt = batch
    labels = torch.tensor([1, 0, 1])
    run = dict(tokenizer=tokenizer, batch_size=2)
    scorers = {"random": RandomScorer(seed=1)}
    options = dict(levels=[1, 2], level_unit="count")
    new = run_degradation_suite(model, scorers, ids, labels, mask, tt, **run, **options)
    assert new["random"].levels == [1, 2]
    with pytest.warns(DeprecationWarning, match="levels=") as w:
        old = run_degradation_suite(
            model, scorers, ids, labels, mask, tt, **run, test_kwargs=options
        )
    assert w[0].filename == __file__
    same = [r["random"].to_dict() for r in (old, new)]
    for d in same:  # the only difference: the measured time
        d["settings"]["attribution"].pop("seconds_per_instance")
    assert same[0] == same[1]
    capsys.readouterr()
    run_degradation_suite(
        model, scorers, ids, labels, mask, tt, **run, show_progress=True
    )
    assert "random" in capsys.readouterr().err  # the scoring's bar
    with pytest.raises(ValueError, match="levls"):
        run_degradation_suite(model, scorers, ids, labels, mask, tt, levls=[1])


def test_every_scorer_names_lengths_past_the_positions(model, tokenizer):
    """Issue 20: every method refuses tokens past the model's positions with
    the same line as IBA and the degradation test (no error from inside)."""
    ids = torch.randint(5, len(WORDS), (1, 513))
    scorers = dict(all_scorers(model, tokenizer, "fair"))
    scorers["IBA"] = IBAScorer(model, model.bert.encoder.layer[0], steps=1)
    for scorer in scorers.values():
        with pytest.raises(ValueError, match="513 tokens, more than the model's 512"):
            scorer.attribute(ids, 0, torch.ones_like(ids))


def test_iba_scores_are_in_the_unit_their_legend_states(model, tokenizer, batch):
    """Issue 31, item 16: iba-deletion's scores were in the hundreds (the sum
    over 384 features of one weight) while its legend began "the mask lambda
    in [0, 1]". The mask readouts give its mean over the features, in [0, 1]
    (the same ranking); the capacity stays a sum, in nats."""
    ids, mask, tt = batch
    target = torch.tensor([1, 0, 1])
    scorers = make_scorers(
        model, tokenizer, "fair", methods=["iba-faithful", "IBA"], layer=0, steps=2
    )
    faithful = scorers["iba-faithful"]
    scores = faithful.attribute(ids, target, mask, tt)
    assert bool(((scores >= 0) & (scores <= 1)).all()) and scores.max() > 0
    assert "lambda in [0, 1]" in faithful.score_meaning
    attr = faithful.iba.attribute(
        ids, target=target, additional_forward_args=(mask, tt),
        config=faithful.options, token_mask=mask,
    )  # fmt: skip
    torch.testing.assert_close(scores, attr.mean(-1) * mask)
    paper = scorers["IBA"]
    assert "in nats" in paper.score_meaning and "summed" in paper.score_meaning


def test_token_attributions_reduce_by_mean_or_sum():
    from captum_iba import token_attributions

    attr = torch.tensor([[[0.2, 0.4], [1.0, 1.0]]])
    torch.testing.assert_close(token_attributions(attr), torch.tensor([[0.6, 2.0]]))
    torch.testing.assert_close(
        token_attributions(attr, torch.tensor([[1, 0]]), reduction="mean"),
        torch.tensor([[0.3, 0.0]]),
    )
    with pytest.raises(ValueError, match="reduction must be 'sum' or 'mean'"):
        token_attributions(attr, reduction="max")
