"""Tests for captum_iba.metrics.degradation: the test, with analytical answers."""

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from captum_iba.metrics import (
    PAPER_LEVELS,
    DegradationOptions,
    DegradationResult,
    Replacement,
    degradation_test,
)
from tests.metrics.bow import (
    CLS,
    MASK,
    OPTIONS,
    PAD,
    SEP,
    SPECIALS,
    UNK,
    BagOfWords,
    NoMaskBagOfWords,
    Tok,
    bow_prob,
    counts,
    expected_curve,
    run,
    softmax_p,
)

# ------------------------------------------------------------------- analytical answers


def test_delete_counts_match_hand_computation(bow, batch):
    res = run(bow, batch, counts(0, 1, 2, 3, 7, 100))
    n = [7, 5]
    ks = [[min(c, n[b]) for c in [0, 1, 2, 3, 7, 100]] for b in range(2)]
    assert res.n_tokens.tolist() == n
    assert res.n_removed.tolist() == ks
    torch.testing.assert_close(res.probs, expected_curve(bow, batch, ks))
    orig = expected_curve(bow, batch, [[0], [0]])[:, 0]
    torch.testing.assert_close(res.original_probs, orig)
    # k larger than the number of tokens: everything removable is gone, specials stay
    full0 = bow_prob(bow, [CLS, SEP, SEP], [0, 0, 1], 0)
    assert res.probs[0, -1].item() == pytest.approx(full0)


def test_first_level_by_hand_explicit(bow, batch):
    """Instance 1: the top token is id 5 at position 3 (score 4.0)."""
    res = run(bow, batch, counts(1))
    expected = bow_prob(bow, [CLS, 12, 13, 14, 15, SEP], [0] * 6, 2)
    assert res.probs[1, 0].item() == pytest.approx(expected, abs=1e-12)
    o = bow_prob(bow, [CLS, 12, 13, 5, 14, 15, SEP], [0] * 7, 2)
    assert res.original_probs[1].item() == pytest.approx(o, abs=1e-12)


@pytest.mark.parametrize(
    "removal,repl",
    [
        (Replacement(MASK, name="mask"), MASK),
        (Replacement(PAD, name="pad"), PAD),
        (Replacement(UNK, name="unk"), UNK),
        (Replacement(17), 17),
    ],
)
def test_replacement_modes(bow, batch, removal, repl):
    res = run(bow, batch, counts(1, 2, 4, removal=removal))
    exp = expected_curve(bow, batch, [[1, 2, 4], [1, 2, 4]], mode=repl)
    torch.testing.assert_close(res.probs, exp)
    assert res.settings["replacement_id"] == repl
    assert res.settings["removal"] == removal.name


def test_lerf_order(bow, batch):
    res = run(bow, batch, counts(1, 3, order="lerf"))
    exp = expected_curve(bow, batch, [[1, 3], [1, 3]], morf=False)
    torch.testing.assert_close(res.probs, exp)
    assert res.settings["order"] == "lerf"


def test_sufficiency_keeps_only_top_k(bow, batch):
    res = run(bow, batch, counts(2))
    # instance 0: removable order by score: pos 2 (3.0), 7 (3.0), 5 (2.0), ...
    kept = [CLS, 6, SEP, 10, SEP]
    segs = [0, 0, 0, 1, 1]
    assert res.kept_probs[0, 0].item() == pytest.approx(bow_prob(bow, kept, segs, 0))
    expected = (res.original_probs[:, None] - res.kept_probs).mean().item()
    assert res.sufficiency == pytest.approx(expected)
    res2 = run(bow, batch, counts(2, compute_sufficiency=False))
    assert res2.kept_probs is None
    with pytest.raises(ValueError, match="compute_sufficiency"):
        _ = res2.sufficiency


def test_pairs_segment_ids_follow_deletion(bow, batch):
    """Removing 'pos 2' shifts every later token; segment ids must shift with them."""
    res = run(bow, batch, counts(1))
    toks = [CLS, 5, 7, SEP, 8, 9, 10, 11, SEP]
    segs = [0, 0, 0, 0, 1, 1, 1, 1, 1]
    assert res.probs[0, 0].item() == pytest.approx(bow_prob(bow, toks, segs, 0))
    wrong = bow_prob(bow, toks, [0, 0, 0, 0, 0, 1, 1, 1, 1], 0)
    assert res.probs[0, 0].item() != pytest.approx(wrong)


def test_special_tokens_kept_and_optional(bow, batch):
    res = run(bow, batch, replace(OPTIONS, levels=[1.0]))
    assert res.probs[1, 0].item() == pytest.approx(bow_prob(bow, [CLS, SEP], [0, 0], 2))
    # specials removable: scores 9.0 on CLS/SEP put them first
    res2 = run(bow, batch, counts(1, keep_special_tokens=False))
    assert res2.n_tokens.tolist() == [10, 7]
    toks = [5, 6, 7, SEP, 8, 9, 10, 11, SEP]
    assert res2.probs[0, 0].item() == pytest.approx(
        bow_prob(bow, toks, [0, 0, 0, 0, 1, 1, 1, 1, 1], 0)
    )


def test_empty_remainder_is_one_masked_pad(bow, batch):
    res = run(bow, batch, replace(OPTIONS, levels=[1.0], keep_special_tokens=False))
    assert res.n_removed.tolist() == [[10], [7]]
    expected = [softmax_p(bow.bias.detach(), t) for t in batch.target.tolist()]
    torch.testing.assert_close(res.probs[:, 0], torch.tensor(expected).double())


def test_padding_never_counted_without_mask(batch):
    """No attention mask: padding found by pad id; sequences grouped by length."""
    model = NoMaskBagOfWords(seed=3, pad_weight=5.0).eval()
    res = run(model, batch, counts(0, 2), attention_mask=None, token_type_ids=None)
    assert res.settings["group_by_length"] is True
    assert res.n_tokens.tolist() == [7, 5]
    zeros = torch.zeros_like(batch.tt)
    exp = expected_curve(model, batch, [[0, 2], [0, 2]], tt=zeros)
    torch.testing.assert_close(res.probs, exp)


@pytest.mark.parametrize("order", ["morf", "lerf"])
def test_ties_are_deterministic_earlier_first(bow, batch, order):
    flat = batch._replace(scores=torch.zeros_like(batch.scores))
    options = counts(2, order=order, pad_token_id=None)
    res = run(bow, flat, options)
    toks = [CLS, 7, SEP, 8, 9, 10, 11, SEP]
    segs = [0, 0, 0, 1, 1, 1, 1, 1]
    assert res.probs[0, 0].item() == pytest.approx(bow_prob(bow, toks, segs, 0))
    assert torch.equal(res.probs, run(bow, flat, options).probs)


def test_hidden_dimension_is_summed(bow, batch):
    three_d = torch.stack([batch.scores * 0.25, batch.scores * 0.75], -1)
    a = run(bow, batch, counts(1, 2))
    b = run(bow, batch._replace(scores=three_d), counts(1, 2))
    torch.testing.assert_close(a.probs, b.probs)


# -------------------------------------------------------------------- levels / k rules


def test_paper_levels_and_length_conventions(bow):
    ids = torch.tensor([[CLS] + [5] * 10 + [SEP]])  # n_full 12, n 10
    scores = torch.arange(12.0)[None]
    options = DegradationOptions(special_token_ids=SPECIALS, compute_sufficiency=False)
    tok = degradation_test(bow, ids, scores, target=0, options=options)
    paper = replace(options, length_convention="paper")
    pap = degradation_test(bow, ids, scores, target=0, options=paper)
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


@pytest.mark.parametrize("removal", ["delete", MASK])
@pytest.mark.parametrize("sufficiency", [True, False])
def test_batching_invariance_bert(tiny_bert, batch, removal, sufficiency):
    twice = batch._replace(
        ids=torch.cat([batch.ids, batch.ids.flip(0)]),
        mask=torch.cat([batch.mask, batch.mask.flip(0)]),
        tt=torch.cat([batch.tt, batch.tt.flip(0)]),
        scores=torch.cat([batch.scores, -batch.scores.flip(0)]),
    )
    base = DegradationOptions(
        special_token_ids=SPECIALS, removal=removal, compute_sufficiency=sufficiency
    )
    results = [
        run(tiny_bert, twice, replace(base, **batching), target=None)
        for batching in (
            dict(max_examples_per_batch=1),
            dict(max_examples_per_batch=3),
            dict(max_examples_per_batch=10**6),
            dict(max_tokens_per_batch=17),
            dict(),
        )
    ]
    one = results[0]
    for other in results[1:]:
        torch.testing.assert_close(one.probs, other.probs, atol=1e-5, rtol=0)
        torch.testing.assert_close(one.original_probs, other.original_probs)
        assert torch.equal(one.preds, other.preds)
        if sufficiency:
            torch.testing.assert_close(
                one.kept_probs, other.kept_probs, atol=1e-5, rtol=0
            )
    assert one.settings["target"] == "predicted"
    assert torch.equal(one.target, one.original_preds)


@pytest.mark.parametrize("removal", ["delete", MASK])
def test_default_batches_bounded_by_tokens(tiny_bert, batch, removal):
    """Without max_examples_per_batch a call holds as many sequences as keep
    sequences x width within max_tokens_per_batch (one sequence at least)."""
    calls = []

    def forward(ids_, mask_, tt_):
        calls.append(tuple(ids_.shape))
        return tiny_bert(ids_, mask_, tt_)

    base = DegradationOptions(special_token_ids=SPECIALS, removal=removal)
    for budget in (1, 25, 10**6):
        calls.clear()
        options = replace(base, max_tokens_per_batch=budget)
        res = run(forward, batch, options, target=None)
        assert all(rows == 1 or rows * width <= budget for rows, width in calls)
        assert sum(rows for rows, _ in calls) == 2 * (1 + 2 * res.num_levels)
        if budget == 10**6:
            assert len(calls) == 2  # the originals, then every level at once


def test_hf_model_output_and_captum_style_args(tiny_bert, batch):
    """ModelOutput accepted; a mask passed Captum-style follows deletions."""
    a = run(tiny_bert, batch, token_type_ids=None)
    b = run(
        tiny_bert,
        batch,
        attention_mask=None,
        token_type_ids=None,
        additional_forward_args=(batch.mask,),
    )
    torch.testing.assert_close(a.probs, b.probs, atol=1e-5, rtol=0)
    # an unpadded single instance, evaluated on its own, agrees with the batch
    single = batch.rows(slice(1, 2))._replace(
        ids=batch.ids[1:, :7], scores=batch.scores[1:, :7]
    )
    one = run(tiny_bert, single, attention_mask=None, token_type_ids=None, target=2)
    torch.testing.assert_close(one.probs[0], a.probs[1], atol=1e-5, rtol=0)


def test_tokenizer_supplies_ids(bow, batch):
    options = DegradationOptions.for_tokenizer(
        Tok(), removal="mask", levels=[1, 2], level_unit="count"
    )
    res = run(bow, batch, options)
    assert res.settings["special_token_ids"] == [CLS, SEP, MASK]
    assert res.settings["pad_token_id"] == PAD
    exp = expected_curve(bow, batch, [[1, 2]] * 2, mode=MASK)
    torch.testing.assert_close(res.probs, exp)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_runs_on_gpu_model(tiny_bert, batch):
    gpu = run(tiny_bert.cuda(), batch, token_type_ids=None)
    cpu = run(tiny_bert.cpu(), batch, token_type_ids=None)
    torch.testing.assert_close(gpu.probs, cpu.probs, atol=1e-4, rtol=0)


# ------------------------------------------------------------------------ persistence


def test_json_round_trip(bow, batch, tmp_path):
    meta = {"method": "IG", "seed": 7, "attribution": {"steps": 50, "target": "label"}}
    res = run(bow, batch, metadata=meta)
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


def test_metadata_method_from_the_attribution_settings(bow, batch):
    res = run(bow, batch, counts(1), metadata={"attribution": {"method": "LIME"}})
    assert res.method == "LIME" and res.settings["seed"] is None
    assert run(bow, batch, counts(1)).settings["method"] is None


# ------------------------------------------------------------------------- bad inputs


@pytest.mark.parametrize(
    "kw,err,match",
    [
        (dict(target=torch.tensor([0, 3])), ValueError, "out of range"),
        (dict(target=-1), ValueError, "out of range"),
        (dict(target=[0, 1, 2]), ValueError, "entries"),
        (dict(target=[(0, 1), (1, 0)]), TypeError, "tuples"),
        (dict(options={"levels": [1]}), TypeError, "DegradationOptions"),
        (dict(metadata={"methods": "IG"}), ValueError, "unknown key"),
        (dict(metadata={"attribution": 3}), ValueError, "attribution"),
        (dict(metadata="IG"), ValueError, "mapping"),
    ],
)
def test_bad_inputs(bow, batch, kw, err, match):
    with pytest.raises(err, match=match):
        run(bow, batch, **kw)


def test_targets_one_index_per_instance(bow, batch):
    """A tuple, a list, a column Tensor and a scalar all give one index each."""
    expected = run(bow, batch, counts(1))
    for target in ((0, 2), [0, 2], torch.tensor([[0], [2]]), np.array([0, 2])):
        res = run(bow, batch, counts(1), target=target)
        assert res.target.tolist() == [0, 2]
        assert torch.equal(res.probs, expected.probs)
    assert run(bow, batch, counts(1), target=1).target.tolist() == [1, 1]
    with pytest.raises(TypeError, match="integer"):
        run(bow, batch, target=[0.5, 1.0])


def test_bad_attribution_shapes(bow, batch):
    ids, mask, _, scores, target = batch
    for bad in (scores[:, :5], scores[:1], scores[None], scores.reshape(-1)):
        with pytest.raises(ValueError, match="do not match"):
            degradation_test(bow, ids, bad, target=target)
    nan = scores.clone()
    nan[0, 3] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        degradation_test(bow, ids, nan, target=target, options=OPTIONS)
    with pytest.raises(TypeError, match="integer"):
        degradation_test(bow, ids.float(), scores, target=target)
    with pytest.raises(ValueError, match="attention_mask"):
        degradation_test(bow, ids, scores, target=target, attention_mask=mask[:, :3])


def test_training_mode_warns_at_the_caller(batch):
    model = BagOfWords().train()
    with pytest.warns(UserWarning, match="training mode") as caught:
        degradation_test(
            model,
            batch.ids,
            batch.scores,
            target=batch.target,
            attention_mask=batch.mask,
        )
    assert caught[0].filename == __file__


# ------------------------------------------- special tokens (issue 31, item 3)


@pytest.fixture(scope="module")
def bert_inputs():
    """A tiny BERT and its tokenizer, two sentences with [CLS] ... [SEP]."""
    from tests.helpers import bert_tokenizer, tiny_bert

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "fine", "dull", "film"]
    words += [f"w{i}" for i in range(20)]  # the other tokenizer's ids land here
    tok = bert_tokenizer(words)
    model = tiny_bert(len(words), seed=0, pad_token_id=0)
    enc = tok(["a fine film", "a dull dull film"], padding=True, return_tensors="pt")
    scores = torch.rand(
        enc["input_ids"].shape, generator=torch.Generator().manual_seed(0)
    )
    return model, tok, enc, scores


def _test(model, enc, scores, options):
    return degradation_test(
        model, enc["input_ids"], scores, target=0,
        attention_mask=enc["attention_mask"], options=options,
    )  # fmt: skip


def test_without_special_ids_it_warns_as_iba_does(bert_inputs):
    model, tok, enc, scores = bert_inputs
    with pytest.warns(UserWarning, match=r"No special token ids known.*\[CLS\]") as w:
        result = _test(model, enc, scores, None)
    assert w[0].filename == __file__
    assert "DegradationOptions.for_tokenizer(tokenizer)" in str(w[0].message)
    assert result.n_tokens.tolist() == [5, 6]  # [CLS] and [SEP] counted, as said


def test_options_of_another_tokenizer_are_named(bert_inputs):
    from tests.helpers import bert_tokenizer

    model, tok, enc, scores = bert_inputs
    other = bert_tokenizer(  # its [CLS], [SEP], [MASK] are other ids
        [f"w{i}" for i in range(9)] + ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    )
    options = DegradationOptions.for_tokenizer(other, removal="mask", pad_token_id=0)
    with pytest.warns(UserWarning, match=r"special token id\(s\) \[2, 3\].*another"):
        _test(model, enc, scores, options)
    wrong_pad = DegradationOptions.for_tokenizer(tok, pad_token_id=1)
    with pytest.warns(UserWarning, match="pad_token_id is 1 but the model's .* 0"):
        _test(model, enc, scores, wrong_pad)


def test_the_model_s_own_tokenizer_gives_no_warning(bert_inputs, recwarn):
    model, tok, enc, scores = bert_inputs
    _test(model, enc, scores, DegradationOptions.for_tokenizer(tok, removal="mask"))
    _test(model, enc, scores, DegradationOptions(keep_special_tokens=False))
    assert not [w for w in recwarn if "special" in str(w.message)]
