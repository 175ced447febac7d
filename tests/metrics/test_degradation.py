"""Tests for captum_iba.metrics.degradation: the test, with analytical answers."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from captum_iba.metrics import (
    PAPER_LEVELS,
    DegradationResult,
    degradation_test,
)

PAD, CLS, SEP, MASK, UNK = 0, 1, 2, 3, 4
SPECIALS = [CLS, SEP, MASK]
VOCAB, C = 20, 3


class BagOfWords(nn.Module):
    """logits = bias + sum over attended tokens of weight[token, segment]."""

    def __init__(self, seed: int = 0, pad_weight: float = 0.0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        w = torch.randn(VOCAB, 2, C, generator=g, dtype=torch.float64)
        w[PAD] = pad_weight
        self.weight = nn.Parameter(w)
        self.bias = nn.Parameter(torch.randn(C, generator=g, dtype=torch.float64))

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        seg = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids
        per_token = self.weight[input_ids, seg]  # (B, L, C)
        if attention_mask is not None:
            per_token = per_token * attention_mask[..., None].to(per_token.dtype)
        return self.bias + per_token.sum(1)


class NoMaskBagOfWords(BagOfWords):
    """Takes only input_ids: it sees (and weighs) padding."""

    def forward(self, input_ids):  # type: ignore[override]
        return super().forward(input_ids)


def softmax_p(logits, t):
    return torch.softmax(logits.double(), -1)[t].item()


def bow_prob(model, tokens, segments, t):
    """Probability of class t for an unpadded python list of tokens."""
    logits = model.bias.detach().clone()
    for tok, seg in zip(tokens, segments):
        logits = logits + model.weight.detach()[tok, seg]
    return softmax_p(logits, t)


def removal_order(ids, scores, removable, morf=True):
    pos = [i for i in range(len(ids)) if removable[i]]
    sign = -1.0 if morf else 1.0
    return sorted(pos, key=lambda i: (sign * scores[i], i))


def make_batch():
    # two instances, second right-padded; a pair in the first (segment 1 after SEP)
    ids = torch.tensor(
        [
            [CLS, 5, 6, 7, SEP, 8, 9, 10, 11, SEP],
            [CLS, 12, 13, 5, 14, 15, SEP, PAD, PAD, PAD],
        ]
    )
    mask = (ids != PAD).long()
    tt = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1, 1, 1], [0] * 10])
    scores = torch.tensor(
        [
            [9.0, 0.5, 3.0, -1.0, 9.0, 2.0, 0.1, 3.0, 1.5, 9.0],
            [9.0, 0.2, -0.3, 4.0, 1.0, 0.7, 9.0, 99.0, 99.0, 99.0],
        ]
    )
    target = torch.tensor([0, 2])
    return ids, mask, tt, scores, target


def expected_curve(model, ids, tt, scores, target, ks, mode="delete", morf=True):
    """Hand computation of p(target) after removing the first k tokens."""
    out = []
    for b in range(ids.shape[0]):
        row, segs, sc = ids[b].tolist(), tt[b].tolist(), scores[b].tolist()
        valid = [t != PAD for t in row]
        removable = [v and t not in SPECIALS for v, t in zip(valid, row)]
        order = removal_order(row, sc, removable, morf)
        probs = []
        for k in ks[b]:
            gone = set(order[:k])
            if mode == "delete":
                toks = [t for i, t in enumerate(row) if valid[i] and i not in gone]
                sgs = [s for i, s in enumerate(segs) if valid[i] and i not in gone]
            else:
                toks = [mode if i in gone else t for i, t in enumerate(row) if valid[i]]
                sgs = [s for i, s in enumerate(segs) if valid[i]]
            probs.append(bow_prob(model, toks, sgs, int(target[b])))
        out.append(probs)
    return torch.tensor(out, dtype=torch.float64)


@pytest.fixture
def bow():
    torch.manual_seed(0)
    return BagOfWords(seed=1).eval()


def run(model, **kw):
    ids, mask, tt, scores, target = make_batch()
    base = dict(
        target=target,
        attention_mask=mask,
        token_type_ids=tt,
        special_token_ids=SPECIALS,
        pad_token_id=PAD,
        mask_token_id=MASK,
        unk_token_id=UNK,
    )
    base.update(kw)
    return degradation_test(model, ids, scores, **base)


# ------------------------------------------------------------------- analytical answers


def test_delete_counts_match_hand_computation(bow):
    ids, mask, tt, scores, target = make_batch()
    res = run(bow, levels=[0, 1, 2, 3, 7, 100], level_unit="count")
    n = [7, 5]
    ks = [[min(c, n[b]) for c in [0, 1, 2, 3, 7, 100]] for b in range(2)]
    assert res.n_tokens.tolist() == n
    assert res.n_removed.tolist() == ks
    exp = expected_curve(bow, ids, tt, scores, target, ks)
    torch.testing.assert_close(res.probs, exp)
    orig = expected_curve(bow, ids, tt, scores, target, [[0], [0]])[:, 0]
    torch.testing.assert_close(res.original_probs, orig)
    # k larger than the number of tokens: everything removable is gone, specials stay
    full0 = bow_prob(bow, [CLS, SEP, SEP], [0, 0, 1], 0)
    assert res.probs[0, -1].item() == pytest.approx(full0)


def test_first_level_by_hand_explicit(bow):
    """Instance 1: the top token is id 5 at position 3 (score 4.0)."""
    ids, mask, tt, scores, target = make_batch()
    res = run(bow, levels=[1], level_unit="count")
    expected = bow_prob(bow, [CLS, 12, 13, 14, 15, SEP], [0] * 6, 2)
    assert res.probs[1, 0].item() == pytest.approx(expected, abs=1e-12)
    o = bow_prob(bow, [CLS, 12, 13, 5, 14, 15, SEP], [0] * 7, 2)
    assert res.original_probs[1].item() == pytest.approx(o, abs=1e-12)


@pytest.mark.parametrize(
    "removal,repl", [("mask", MASK), ("pad", PAD), ("unk", UNK), (17, 17)]
)
def test_replacement_modes(bow, removal, repl):
    ids, mask, tt, scores, target = make_batch()
    res = run(bow, levels=[1, 2, 4], level_unit="count", removal=removal)
    ks = [[1, 2, 4], [1, 2, 4]]
    exp = expected_curve(bow, ids, tt, scores, target, ks, mode=repl)
    torch.testing.assert_close(res.probs, exp)
    assert res.settings["replacement_id"] == repl


def test_lerf_order(bow):
    ids, mask, tt, scores, target = make_batch()
    res = run(bow, levels=[1, 3], level_unit="count", order="lerf")
    exp = expected_curve(bow, ids, tt, scores, target, [[1, 3], [1, 3]], morf=False)
    torch.testing.assert_close(res.probs, exp)
    assert res.settings["order"] == "lerf"


def test_sufficiency_keeps_only_top_k(bow):
    ids, mask, tt, scores, target = make_batch()
    res = run(bow, levels=[2], level_unit="count")
    # instance 0: removable order by score: pos 2 (3.0), 7 (3.0), 5 (2.0), ...
    kept = [CLS, 6, SEP, 10, SEP]
    segs = [0, 0, 0, 1, 1]
    assert res.kept_probs[0, 0].item() == pytest.approx(bow_prob(bow, kept, segs, 0))
    expected = (res.original_probs[:, None] - res.kept_probs).mean().item()
    assert res.sufficiency == pytest.approx(expected)
    res2 = run(bow, levels=[2], level_unit="count", compute_sufficiency=False)
    assert res2.kept_probs is None
    with pytest.raises(ValueError, match="compute_sufficiency"):
        _ = res2.sufficiency


def test_pairs_segment_ids_follow_deletion(bow):
    """Removing 'pos 2' shifts every later token; segment ids must shift with them."""
    ids, mask, tt, scores, target = make_batch()
    res = run(bow, levels=[1], level_unit="count")
    toks = [CLS, 5, 7, SEP, 8, 9, 10, 11, SEP]
    segs = [0, 0, 0, 0, 1, 1, 1, 1, 1]
    assert res.probs[0, 0].item() == pytest.approx(bow_prob(bow, toks, segs, 0))
    wrong = bow_prob(bow, toks, [0, 0, 0, 0, 0, 1, 1, 1, 1], 0)
    assert res.probs[0, 0].item() != pytest.approx(wrong)


def test_special_tokens_kept_and_optional(bow):
    ids, mask, tt, scores, target = make_batch()
    res = run(bow, levels=[1.0])
    assert res.probs[1, 0].item() == pytest.approx(bow_prob(bow, [CLS, SEP], [0, 0], 2))
    # specials removable: scores 9.0 on CLS/SEP put them first
    res2 = run(bow, levels=[1], level_unit="count", keep_special_tokens=False)
    assert res2.n_tokens.tolist() == [10, 7]
    toks = [5, 6, 7, SEP, 8, 9, 10, 11, SEP]
    assert res2.probs[0, 0].item() == pytest.approx(
        bow_prob(bow, toks, [0, 0, 0, 0, 1, 1, 1, 1, 1], 0)
    )


def test_empty_remainder_is_one_masked_pad(bow):
    ids, mask, tt, scores, target = make_batch()
    res = run(bow, levels=[1.0], keep_special_tokens=False)
    assert res.n_removed.tolist() == [[10], [7]]
    expected = [softmax_p(bow.bias.detach(), t) for t in target.tolist()]
    torch.testing.assert_close(res.probs[:, 0], torch.tensor(expected).double())


def test_padding_never_counted_without_mask():
    """No attention mask: padding found by pad id; sequences grouped by length."""
    model = NoMaskBagOfWords(seed=3, pad_weight=5.0).eval()
    ids, _, tt, scores, target = make_batch()
    res = degradation_test(
        model,
        ids,
        scores,
        target=target,
        levels=[0, 2],
        level_unit="count",
        special_token_ids=SPECIALS,
        pad_token_id=PAD,
    )
    assert res.settings["group_by_length"] is True
    assert res.n_tokens.tolist() == [7, 5]
    zeros = torch.zeros_like(tt)
    exp = expected_curve(model, ids, zeros, scores, target, [[0, 2], [0, 2]])
    torch.testing.assert_close(res.probs, exp)


def test_ties_are_deterministic_earlier_first(bow):
    ids, mask, tt, scores, target = make_batch()
    flat = torch.zeros_like(scores)
    for order in ("morf", "lerf"):
        res = degradation_test(
            bow,
            ids,
            flat,
            target=target,
            attention_mask=mask,
            token_type_ids=tt,
            levels=[2],
            level_unit="count",
            special_token_ids=SPECIALS,
            order=order,
        )
        toks = [CLS, 7, SEP, 8, 9, 10, 11, SEP]
        segs = [0, 0, 0, 1, 1, 1, 1, 1]
        assert res.probs[0, 0].item() == pytest.approx(bow_prob(bow, toks, segs, 0))
        again = degradation_test(
            bow,
            ids,
            flat,
            target=target,
            attention_mask=mask,
            token_type_ids=tt,
            levels=[2],
            level_unit="count",
            special_token_ids=SPECIALS,
            order=order,
        )
        assert torch.equal(res.probs, again.probs)


def test_hidden_dimension_is_summed(bow):
    ids, mask, tt, scores, target = make_batch()
    three_d = torch.stack([scores * 0.25, scores * 0.75], -1)
    a = run(bow, levels=[1, 2], level_unit="count")
    b = degradation_test(
        bow,
        ids,
        three_d,
        target=target,
        attention_mask=mask,
        token_type_ids=tt,
        levels=[1, 2],
        level_unit="count",
        special_token_ids=SPECIALS,
    )
    torch.testing.assert_close(a.probs, b.probs)


# -------------------------------------------------------------------- levels / k rules


def test_paper_levels_and_length_conventions(bow):
    ids = torch.tensor([[CLS] + [5] * 10 + [SEP]])  # n_full 12, n 10
    scores = torch.arange(12.0)[None]
    kw = dict(target=0, special_token_ids=SPECIALS, compute_sufficiency=False)
    tok = degradation_test(bow, ids, scores, **kw)
    pap = degradation_test(bow, ids, scores, length_convention="paper", **kw)
    assert tok.levels == list(PAPER_LEVELS)
    # tokens: round half up of k/9 * 10; paper: floor of k/9 * 12, capped at 10
    assert tok.n_removed[0].tolist() == [
        math.floor(k / 9 * 10 + 0.5) for k in range(1, 10)
    ]
    assert pap.n_removed[0].tolist() == [
        min(math.floor(k * 12 / 9 + 1e-9), 10) for k in range(1, 10)
    ]
    assert pap.n_removed[0].tolist() == [1, 2, 4, 5, 6, 8, 9, 10, 10]


# ----------------------------------------------------------------------- batching, BERT


def tiny_bert(num_labels=3):
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=num_labels,
        type_vocab_size=2,
        pad_token_id=PAD,
    )
    return BertForSequenceClassification(cfg).eval()


@pytest.mark.parametrize("removal", ["delete", "mask"])
@pytest.mark.parametrize("sufficiency", [True, False])
def test_batching_invariance_bert(removal, sufficiency):
    model = tiny_bert()
    ids, mask, tt, scores, target = make_batch()
    ids = torch.cat([ids, ids.flip(0)])
    mask, tt = torch.cat([mask, mask.flip(0)]), torch.cat([tt, tt.flip(0)])
    scores = torch.cat([scores, -scores.flip(0)])
    kw = dict(
        target=None,
        attention_mask=mask,
        token_type_ids=tt,
        special_token_ids=SPECIALS,
        removal=removal,
        mask_token_id=MASK,
        compute_sufficiency=sufficiency,
    )
    one = degradation_test(model, ids, scores, max_examples_per_batch=1, **kw)
    three = degradation_test(model, ids, scores, max_examples_per_batch=3, **kw)
    every = degradation_test(model, ids, scores, max_examples_per_batch=10**6, **kw)
    budget = degradation_test(model, ids, scores, max_tokens_per_batch=17, **kw)
    default = degradation_test(model, ids, scores, **kw)
    for other in (three, every, budget, default):
        torch.testing.assert_close(one.probs, other.probs, atol=1e-5, rtol=0)
        torch.testing.assert_close(one.original_probs, other.original_probs)
        assert torch.equal(one.preds, other.preds)
        if sufficiency:
            torch.testing.assert_close(
                one.kept_probs, other.kept_probs, atol=1e-5, rtol=0
            )
    assert one.settings["target"] == "predicted"
    assert torch.equal(one.target, one.original_preds)


@pytest.mark.parametrize("removal", ["delete", "mask"])
def test_default_batches_bounded_by_tokens(removal):
    """Without max_examples_per_batch a call holds as many sequences as keep
    sequences x width within max_tokens_per_batch (one sequence at least)."""
    model = tiny_bert()
    ids, mask, tt, scores, _ = make_batch()
    calls = []

    def forward(ids_, mask_, tt_):
        calls.append(tuple(ids_.shape))
        return model(ids_, mask_, tt_)

    kw = dict(
        attention_mask=mask,
        token_type_ids=tt,
        special_token_ids=SPECIALS,
        removal=removal,
        mask_token_id=MASK,
    )
    for budget in (1, 25, 10**6):
        calls.clear()
        res = degradation_test(forward, ids, scores, max_tokens_per_batch=budget, **kw)
        assert all(rows == 1 or rows * width <= budget for rows, width in calls)
        assert sum(rows for rows, _ in calls) == 2 * (1 + 2 * res.num_levels)
        if budget == 10**6:
            assert len(calls) == 2  # the originals, then every level at once


def test_hf_model_output_and_captum_style_args():
    """ModelOutput accepted; a mask passed Captum-style follows deletions."""
    model = tiny_bert()
    ids, mask, tt, scores, target = make_batch()
    kw = dict(target=target, special_token_ids=SPECIALS, pad_token_id=PAD)
    a = degradation_test(model, ids, scores, attention_mask=mask, **kw)
    b = degradation_test(model, ids, scores, additional_forward_args=(mask,), **kw)
    torch.testing.assert_close(a.probs, b.probs, atol=1e-5, rtol=0)
    # an unpadded single instance, evaluated on its own, agrees with the batch
    single = degradation_test(model, ids[1:, :7], scores[1:, :7], **kw | {"target": 2})
    torch.testing.assert_close(single.probs[0], a.probs[1], atol=1e-5, rtol=0)


def test_tokenizer_supplies_ids(bow):
    class Tok:
        pad_token_id, mask_token_id, unk_token_id = PAD, MASK, UNK
        all_special_ids = [PAD, CLS, SEP, MASK, UNK]

    ids, mask, tt, scores, target = make_batch()
    res = degradation_test(
        bow,
        ids,
        scores,
        target=target,
        attention_mask=mask,
        token_type_ids=tt,
        tokenizer=Tok(),
        removal="mask",
        levels=[1, 2],
        level_unit="count",
    )
    assert res.settings["special_token_ids"] == [CLS, SEP, MASK]
    exp = expected_curve(bow, ids, tt, scores, target, [[1, 2]] * 2, mode=MASK)
    torch.testing.assert_close(res.probs, exp)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_runs_on_gpu_model():
    model = tiny_bert().cuda()
    ids, mask, tt, scores, target = make_batch()
    kw = dict(target=target, attention_mask=mask, special_token_ids=SPECIALS)
    gpu = degradation_test(model, ids, scores, **kw)
    cpu = degradation_test(model.cpu(), ids, scores, **kw)
    torch.testing.assert_close(gpu.probs, cpu.probs, atol=1e-4, rtol=0)


# ------------------------------------------------------------------------ persistence


def test_json_round_trip(bow, tmp_path):
    res = run(bow, method="IG", seed=7, settings={"steps": 50, "target": "label"})
    text = res.to_json(tmp_path / "r.json")
    back = DegradationResult.from_json(text)
    back2 = DegradationResult.from_json(tmp_path / "r.json")
    back3 = DegradationResult.from_json(str(tmp_path / "r.json"))
    for other in (back, back2, back3):
        for name in ("probs", "kept_probs", "original_probs", "log_odds", "preds"):
            assert torch.equal(getattr(res, name), getattr(other, name)), name
        assert other.settings == res.settings
        assert other.levels == res.levels
    assert back.settings["method"] == "IG"
    assert back.settings["seed"] == 7
    assert back.settings["attribution"] == {"steps": 50, "target": "label"}
    assert back.aopc == res.aopc


# ------------------------------------------------------------------------- bad inputs


@pytest.mark.parametrize(
    "kw,err,match",
    [
        (dict(levels=[0.5, 1.5]), ValueError, "outside"),
        (dict(levels=[-0.1]), ValueError, "outside"),
        (dict(levels=[float("nan")]), ValueError, "outside"),
        (dict(levels=[-1], level_unit="count"), ValueError, "non-negative"),
        (dict(levels=[1.5], level_unit="count"), ValueError, "non-negative"),
        (dict(levels=[]), ValueError, "at least one"),
        (dict(level_unit="percent"), ValueError, "level_unit"),
        (dict(removal="erase"), ValueError, "unknown removal"),
        (dict(removal="mask", mask_token_id=None), ValueError, "mask_token_id"),
        (dict(order="random"), ValueError, "order"),
        (dict(length_convention="x"), ValueError, "length_convention"),
        (dict(target=torch.tensor([0, 3])), ValueError, "out of range"),
        (dict(target=-1), ValueError, "out of range"),
        (dict(target=[0, 1, 2]), ValueError, "entries"),
        (dict(target=[(0, 1), (1, 0)]), TypeError, "tuples"),
        (dict(max_examples_per_batch=0), ValueError, "positive"),
        (dict(max_tokens_per_batch=0), ValueError, "positive"),
    ],
)
def test_bad_inputs(bow, kw, err, match):
    with pytest.raises(err, match=match):
        run(bow, **kw)


def test_targets_one_index_per_instance(bow):
    """A tuple, a list, a column Tensor and a scalar all give one index each."""
    expected = run(bow, levels=[1], level_unit="count")
    for target in ((0, 2), [0, 2], torch.tensor([[0], [2]]), np.array([0, 2])):
        res = run(bow, levels=[1], level_unit="count", target=target)
        assert res.target.tolist() == [0, 2]
        assert torch.equal(res.probs, expected.probs)
    assert run(bow, levels=[1], level_unit="count", target=1).target.tolist() == [1, 1]
    with pytest.raises(TypeError, match="integer"):
        run(bow, target=[0.5, 1.0])


def test_bad_attribution_shapes(bow):
    ids, mask, tt, scores, target = make_batch()
    for bad in (scores[:, :5], scores[:1], scores[None], scores.reshape(-1)):
        with pytest.raises(ValueError, match="do not match"):
            degradation_test(bow, ids, bad, target=target)
    nan = scores.clone()
    nan[0, 3] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        degradation_test(bow, ids, nan, target=target, special_token_ids=SPECIALS)
    with pytest.raises(TypeError, match="integer"):
        degradation_test(bow, ids.float(), scores, target=target)
    with pytest.raises(ValueError, match="attention_mask"):
        degradation_test(bow, ids, scores, target=target, attention_mask=mask[:, :3])


def test_training_mode_warns():
    model = BagOfWords().train()
    ids, mask, tt, scores, target = make_batch()
    with pytest.warns(UserWarning, match="training mode"):
        degradation_test(model, ids, scores, target=target, attention_mask=mask)
