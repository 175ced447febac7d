"""Tests for captum_iba.metrics.result and .compare: aggregates by hand."""

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from captum_iba.metrics import DegradationResult, compare, normalized_drop


def handmade_result():
    return DegradationResult(
        levels=[0.5, 1.0],
        target=torch.tensor([0, 1]),
        original_probs=torch.tensor([0.9, 0.7], dtype=torch.float64),
        original_preds=torch.tensor([0, 1]),
        original_log_odds=torch.tensor([math.log(9), math.log(7 / 3)]).double(),
        probs=torch.tensor([[0.5, 0.2], [0.3, 0.1]], dtype=torch.float64),
        preds=torch.tensor([[0, 1], [0, 0]]),
        log_odds=torch.tensor(
            [[0.0, math.log(0.25)], [math.log(3 / 7), -2.0]]
        ).double(),
        n_tokens=torch.tensor([4, 6]),
        n_removed=torch.tensor([[2, 4], [3, 6]]),
        kept_probs=torch.tensor([[0.8, 0.9], [0.6, 0.7]], dtype=torch.float64),
        settings={"method": "hand", "level_unit": "fraction"},
    )


def test_aggregates_by_hand():
    r = handmade_result()
    assert r.original_probability == pytest.approx(0.8)
    torch.testing.assert_close(r.curve, torch.tensor([0.4, 0.15]).double())
    assert r.first_level_drop == pytest.approx(0.4)
    assert r.absolute_drop(1) == pytest.approx(0.65)
    assert r.aopc == pytest.approx((0 + 0.4 + 0.65) / 3)
    assert r.comprehensiveness == pytest.approx((0.4 + 0.65) / 2)
    assert r.sufficiency == pytest.approx((0.1 + 0.0 + 0.1 + 0.0) / 4)
    lo = torch.tensor(
        [
            (0 - math.log(9) + math.log(3 / 7) - math.log(7 / 3)) / 2,
            (math.log(0.25) - math.log(9) - 2 - math.log(7 / 3)) / 2,
        ]
    ).double()
    torch.testing.assert_close(r.log_odds_curve, lo)
    assert r.original_accuracy == 1.0
    torch.testing.assert_close(r.accuracy_curve, torch.tensor([0.5, 0.0]).double())
    d = r.normalized_curve(m=0.1)
    torch.testing.assert_close(d, torch.tensor([1.0, 3 / 7, 0.05 / 0.7]).double())


def test_compare_uses_min_across_methods():
    a = handmade_result()
    b = handmade_result()
    b.probs = b.probs * 0.5  # last-level mean 0.075
    table = compare({"A": a, "B": b})
    assert table.m == pytest.approx(0.075)
    torch.testing.assert_close(
        table.normalized_curves["A"],
        torch.tensor([1.0, (0.4 - 0.075) / 0.725, (0.15 - 0.075) / 0.725]).double(),
    )
    md = table.to_markdown()
    assert "| A |" in md and "| B |" in md and "AOPC" in md and "sufficiency" in md
    assert "drop @ 50.0 % ↑" in md and "sufficiency ↓" in md and "p(class)" in md
    legend = table.legend()
    for column in ("n:", "p(class):", "drop @ 50.0 %:", "AOPC:", "sufficiency:"):
        assert column in legend, column
    assert "higher is better" in legend and "lower is better" in legend
    assert "| B |" in table.curves_markdown()
    c = handmade_result()
    c.levels = [0.25, 1.0]
    with pytest.raises(ValueError, match="levels"):
        compare({"A": a, "C": c})
    d = handmade_result()
    d.original_probs = d.original_probs * 0.5
    with pytest.warns(UserWarning, match="same instances"):
        compare({"A": a, "D": d})


# -------------------------------------------------------------------- normalised drop


def test_normalized_drop_by_hand():
    # d = (p - m) / (o - m); m = min of the last values = 0.2
    (a, b), m = normalized_drop([np.array([0.8, 0.5, 0.2]), np.array([0.6, 0.5, 0.4])])
    assert m == pytest.approx(0.2)
    np.testing.assert_allclose(a, [1.0, 0.5, 0.0])
    np.testing.assert_allclose(b, [1.0, 0.75, 0.5])
    assert isinstance(a, np.ndarray)
    # a given floor; Tensors stay Tensors
    (t,), m = normalized_drop([torch.tensor([0.9, 0.5, 0.3]).double()], m=0.1)
    assert m == 0.1
    torch.testing.assert_close(t, torch.tensor([1.0, 0.5, 0.25]).double())
    # origins given: curves without level 0
    (c,), m = normalized_drop([torch.tensor([0.5, 0.3]).double()], origins=[0.9])
    assert m == pytest.approx(0.3)
    torch.testing.assert_close(c, torch.tensor([1 / 3, 0.0]).double())


def test_normalized_drop_degenerate():
    (flat,), _ = normalized_drop([np.array([0.4, 0.4])])
    assert np.isnan(flat).all()
    (flat_t,), _ = normalized_drop([torch.tensor([0.4, 0.4])])
    assert torch.isnan(flat_t).all()
    with pytest.raises(ValueError, match="no curve"):
        normalized_drop([])


def test_result_and_compare_use_normalized_drop():
    a = handmade_result()
    b = handmade_result()
    b.probs = b.probs * 0.5
    drops, m = normalized_drop(
        [a.full_curve, b.full_curve],
        origins=[a.original_probability, b.original_probability],
    )
    table = compare({"A": a, "B": b})
    assert table.m == m
    assert torch.equal(table.normalized_curves["A"], drops[0])
    assert torch.equal(table.normalized_curves["B"], drops[1])
    assert torch.equal(a.normalized_curve(m), drops[0])
    (own,), _ = normalized_drop([a.curve], origins=[a.original_probability])
    assert torch.equal(a.normalized_curve(include_origin=False), own)


def test_instance_records_round_trip_exactly():
    """Per-instance records (as a corpus run stores them), split and joined."""
    import json

    res = handmade_result()
    rows = [json.loads(json.dumps(r)) for r in res.instance_records()]
    assert len(rows) == res.num_instances and "probs" in rows[0]
    back = DegradationResult.from_instance_records(rows, res.levels, res.settings)
    for name in DegradationResult._FLOAT_FIELDS + DegradationResult._LONG_FIELDS:
        a, b = getattr(res, name), getattr(back, name)
        assert (a is None and b is None) or torch.equal(a, b), name
    assert back.settings["num_instances"] == res.num_instances
    with pytest.raises(ValueError, match="no instance"):
        DegradationResult.from_instance_records([], res.levels)


# ------------------------------------------------------------- aggregates, one home


def test_properties_are_the_aggregate_functions():
    from captum_iba.metrics import aggregates as agg

    r = handmade_result()
    o, p = r.original_probs, r.probs
    assert torch.equal(r.curve, agg.mean_curve(p))
    assert torch.equal(r.full_curve, agg.full_curve(o, p))
    assert torch.equal(r.drop_curve, agg.drop_curve(o, p))
    assert r.absolute_drop(1) == agg.absolute_drop(o, p, 1)
    assert r.aopc == agg.aopc(o, p) == pytest.approx((0 + 0.4 + 0.65) / 3)
    assert r.comprehensiveness == agg.comprehensiveness(o, p)
    assert r.sufficiency == agg.sufficiency(o, r.kept_probs)
    assert torch.equal(
        r.log_odds_curve, agg.log_odds_curve(r.original_log_odds, r.log_odds)
    )
    assert r.log_odds_score == agg.log_odds_score(r.original_log_odds, r.log_odds)
    assert r.original_accuracy == agg.accuracy(r.original_preds, r.target)
    assert torch.equal(r.accuracy_curve, agg.accuracy_curve(r.preds, r.target))
    assert math.isnan(agg.mean(torch.zeros(0)))


# ----------------------------------------------------------------------- concat


def test_concat_of_shards_equals_the_whole_batch():
    """Bit for bit when every model call holds one sequence (CPU float sums
    depend on the padded width of a call, so a shard's call must be the
    whole batch's)."""
    from tests.metrics.bow import OPTIONS, BagOfWords, make_batch, run

    bow = BagOfWords(seed=1).eval()
    batch = make_batch()
    options = replace(OPTIONS, max_examples_per_batch=1)
    meta = {"method": "IG", "attribution": {"steps": 5}}
    whole = run(bow, batch, options, metadata=meta)
    shards = [
        run(bow, batch.rows(slice(i, i + 1)), options, metadata=meta) for i in (0, 1)
    ]
    merged = DegradationResult.concat(shards)
    assert merged.to_dict() == whole.to_dict()
    assert merged.settings["num_instances"] == 2
    assert shards[0].settings["num_instances"] == 1  # the shards are untouched
    assert merged.aopc == whole.aopc and merged.sufficiency == whole.sufficiency


def test_concat_of_copies_keeps_the_means():
    r = handmade_result()
    twice = DegradationResult.concat([r, r])
    assert twice.num_instances == 4
    assert torch.equal(twice.probs, torch.cat([r.probs, r.probs]))
    assert twice.aopc == pytest.approx(r.aopc)
    assert twice.sufficiency == pytest.approx(r.sufficiency)


def test_concat_refuses_different_tests():
    a = handmade_result()
    other_levels = handmade_result()
    other_levels.levels = [0.25, 1.0]
    no_suff = handmade_result()
    no_suff.kept_probs = None
    lerf = handmade_result()
    lerf.settings = dict(lerf.settings, order="lerf")
    a.settings["order"] = "morf"
    with pytest.raises(ValueError, match="levels"):
        DegradationResult.concat([a, other_levels])
    with pytest.raises(ValueError, match="compute_sufficiency"):
        DegradationResult.concat([a, no_suff])
    with pytest.raises(ValueError, match="order"):
        DegradationResult.concat([a, lerf])
    with pytest.raises(ValueError, match="no result"):
        DegradationResult.concat([])


# ------------------------------------------------------------- aggregates as plug-ins


@pytest.fixture
def own_registry(monkeypatch):
    """The aggregates' registry, restored after the test."""
    from captum_iba.metrics.aggregates import AGGREGATES

    monkeypatch.setattr(AGGREGATES, "_entries", dict(AGGREGATES._entries))
    return AGGREGATES


def test_a_registered_aggregate_reaches_summary_attribute_table_and_legend(
    own_registry,
):
    """One function and its registration: the result's summary and attribute,
    the comparison's column (after the others, which stay as they were) and
    its legend."""
    from captum_iba.metrics.aggregates import drop_curve, register_aggregate

    a, b = handmade_result(), handmade_result()
    b.probs = b.probs * 0.5
    before = compare({"A": a, "B": b})
    md, legend = before.to_markdown(), before.legend()

    @register_aggregate(
        "last_drop",
        column="drop @ last",
        better="higher",
        legend="the fall at the last level.",
    )
    def last_drop(original_probs, probs):
        """The mean drop at the last level."""
        return float(drop_curve(original_probs, probs)[-1])

    assert a.last_drop == pytest.approx(0.65) == a.summary()["last_drop"]
    assert list(a.summary())[-1] == "last_drop" and "last_drop" in dir(a)
    table = compare({"A": a, "B": b})
    head, rule, *rows = table.to_markdown().splitlines()
    old_head, old_rule, *old_rows = md.splitlines()
    assert head == old_head[:-1] + "| drop @ last ↑ |"
    assert rule == old_rule + "---:|"
    assert rows[0] == old_rows[0] + " 0.650 |"
    assert rows[1] == old_rows[1] + f" {0.8 - 0.075:.3f} |"
    assert table.legend() == legend.replace(
        " ↑ higher", " drop @ last: the fall at the last level. ↑ higher"
    )
    assert own_registry.entry("last_drop").summary == "The mean drop at the last level."


def test_an_aggregate_without_a_column_is_in_the_summary_only(own_registry):
    from captum_iba.metrics.aggregates import register_aggregate

    @register_aggregate("kept_mean", attribute="kept_mean_probability")
    def kept_mean(kept_probs):
        return float(kept_probs.mean())

    r = handmade_result()
    table = compare({"A": r})
    assert r.kept_mean_probability == pytest.approx(0.75)
    assert r.summary()["kept_mean"] == pytest.approx(0.75)
    assert table.rows[0]["kept_mean"] == pytest.approx(0.75)
    own_registry._entries.pop("kept_mean")
    without = compare({"A": r})
    assert table.to_markdown() == without.to_markdown()
    assert table.legend() == without.legend()
    register_aggregate("kept_mean", attribute="kept_mean_probability")(kept_mean)
    no_kept = replace(r, kept_probs=None)
    assert no_kept.summary()["kept_mean"] is None
    with pytest.raises(ValueError, match="compute_sufficiency=True"):
        getattr(no_kept, "kept_mean_probability")  # noqa: B009
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        getattr(r, "nothing")  # noqa: B009


def test_registration_is_checked(own_registry):
    from captum_iba.metrics.aggregates import register_aggregate

    with pytest.raises(ValueError, match="better"):
        register_aggregate("x", better="up")
    with pytest.raises(ValueError, match="legend"):
        register_aggregate("x", column="X")
    with pytest.raises(ValueError, match="already registered"):
        register_aggregate("AOPC")(lambda probs: 0.0)
