"""Tests for the model-randomisation sanity check (captum_iba.metrics.randomization)."""

import math

import pytest
import torch
from torch import nn

from captum_iba.metrics import (
    RandomizationOptions,
    RandomizationResult,
    cascade_stages,
    cascading_randomization,
    rank_correlation,
    reinitialize,
)
from tests.helpers import MeanPoolModel, no_hooks, tiny_hf_model

CLS, SEP = 2, 3
STAGES = ["head", "layer 2", "layer 1", "layer 0", "embeddings"]
SPECIAL = RandomizationOptions(special_token_ids=[CLS, SEP])


def stages(plan) -> RandomizationOptions:
    return RandomizationOptions(stages=plan)


def trained_bert(seed: int = 0) -> nn.Module:
    """A tiny BERT whose every parameter is moved off its initial value (as
    training does), so that re-initialising any of them changes it."""
    torch.manual_seed(seed)
    model = tiny_hf_model("bert", layers=3)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model


def batch(n: int = 6, length: int = 9, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 60, (n, length), generator=g)
    ids[:, 0], ids[:, -1] = CLS, SEP
    mask = torch.ones_like(ids)
    mask[0, -3:] = 0  # padding in one row
    ids[0, -3:] = 0
    return ids, mask


def ids_only(model, input_ids, attention_mask, target):
    """An 'explanation' that ignores the model: the token ids themselves."""
    return input_ids.float()


def grad_x_input(model, input_ids, attention_mask, target):
    emb = model.get_input_embeddings()(input_ids).detach().requires_grad_(True)
    logits = model(inputs_embeds=emb, attention_mask=attention_mask).logits
    (grad,) = torch.autograd.grad(logits.gather(1, target[:, None]).sum(), emb)
    return (grad * emb).sum(-1)


class Recorder:
    """An explanation function that records the model's state at every call."""

    def __init__(self) -> None:
        self.states, self.targets = [], []

    def __call__(self, model, input_ids, attention_mask, target):
        self.states.append({k: v.clone() for k, v in model.state_dict().items()})
        self.targets.append(target.clone())
        return input_ids.float()


# ---- rank correlation: closed form -------------------------------------------------


def test_rank_correlation_closed_form():
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], [0.0, 5.0, 1.0, 2.0]])
    keep = torch.ones_like(x, dtype=torch.bool)
    y = torch.stack([x[0] * 10, -x[1], torch.tensor([3.0, 5.0, 3.0, 4.0])])
    rho = rank_correlation(x, y, keep)
    assert rho[0] == pytest.approx(1.0)
    assert rho[1] == pytest.approx(-1.0)
    # ranks (1, 4, 2, 3) against (1.5, 4, 1.5, 3): Pearson of the ranks
    expected = torch.corrcoef(torch.tensor([[1, 4, 2, 3], [1.5, 4, 1.5, 3]]))[0, 1]
    assert rho[2] == pytest.approx(float(expected))


def test_rank_correlation_absolute_and_masked_positions():
    x = torch.tensor([[1.0, -2.0, 3.0, 100.0]])
    y = -x
    keep = torch.tensor([[True, True, True, False]])
    assert rank_correlation(x, y, keep)[0] == pytest.approx(-1.0)
    assert rank_correlation(x, y, keep, absolute=True)[0] == pytest.approx(1.0)
    # the position left out cannot change the value
    y2 = y.clone()
    y2[0, 3] = -1e9
    assert rank_correlation(x, y2, keep)[0] == pytest.approx(-1.0)


def test_rank_correlation_undefined_is_nan():
    x = torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    y = torch.tensor([[5.0, 5.0, 5.0], [1.0, 2.0, 3.0]])
    keep = torch.tensor([[True, True, True], [True, False, False]])
    assert torch.isnan(rank_correlation(x, y, keep)).all()  # constant; one token
    with pytest.raises(ValueError, match="shapes differ"):
        rank_correlation(x, y[:1], keep)


# ---- the cascade ----------


def test_cascade_stages_of_a_bert_classifier_top_first():
    model = trained_bert()
    ids, mask = batch()
    stages = cascade_stages(model, ids[:1], mask[:1])
    assert [s for s, _ in stages] == STAGES
    assert stages[0][1] == ["bert.pooler.dense", "classifier"]
    assert stages[1][1] == ["bert.encoder.layer.2"]
    assert stages[-1][1][0] == "bert.embeddings.word_embeddings"
    assert no_hooks(model)


def test_cascade_stages_of_a_plain_module():
    model = MeanPoolModel(vocab=60)
    stages = cascade_stages(model, torch.tensor([[5, 6, 7]]))
    assert stages == [
        ("head", ["head"]),
        ("layer 1", ["layers.1"]),
        ("layer 0", ["layers.0"]),
        ("embeddings", ["embed"]),
    ]


def test_no_hook_is_left_when_the_forward_raises():
    class Raising(MeanPoolModel):
        def forward(self, input_ids, attention_mask=None):
            super().forward(input_ids, attention_mask)
            raise RuntimeError("boom")

    model = Raising(vocab=60)
    with pytest.raises(RuntimeError, match="boom"):
        cascade_stages(model, torch.tensor([[5, 6, 7]]))
    assert no_hooks(model)
    with pytest.raises(RuntimeError, match="boom"):
        cascading_randomization(ids_only, model, torch.tensor([[5, 6, 7]]))
    assert no_hooks(model)


def test_cascade_order_parameters_changed_per_stage():
    """At stage k exactly the parameters of stages 0..k differ from the trained
    model's, and each stage reports the parameters of its own modules."""
    model = trained_bert()
    trained = {k: v.clone() for k, v in model.state_dict().items()}
    ids, mask = batch()
    rec = Recorder()
    result = cascading_randomization(rec, model, ids, attention_mask=mask)
    stages = result.settings["stages"]
    assert result.stages == STAGES and len(rec.states) == len(STAGES) + 1
    params = dict(model.named_parameters())
    for k, name in enumerate(STAGES):
        own = sorted(
            p for p in params if any(p.startswith(m + ".") for m in stages[name])
        )
        assert sorted(result.randomized[k]) == own
        done = {p for s in STAGES[: k + 1] for p in result.randomized[STAGES.index(s)]}
        state = rec.states[k + 1]
        for p in params:
            changed = not torch.equal(state[p], trained[p])
            assert changed == (p in done), (name, p)
    assert all(torch.equal(rec.states[0][k], v) for k, v in trained.items())


def test_reinit_follows_the_model_init_and_is_seeded():
    model = trained_bert()
    a = reinitialize(model, ["classifier", "bert.encoder.layer.2"], seed=3)
    assert "classifier.bias" in a
    assert torch.count_nonzero(model.classifier.bias) == 0
    ln = model.bert.encoder.layer[2].output.LayerNorm
    assert torch.equal(ln.weight, torch.ones_like(ln.weight))
    std = float(model.bert.encoder.layer[2].output.dense.weight.detach().std())
    assert std == pytest.approx(model.config.initializer_range, rel=0.2)
    w = model.classifier.weight.clone()
    other = trained_bert()
    reinitialize(other, ["classifier"], seed=3)
    assert torch.equal(other.classifier.weight, w)
    reinitialize(other, ["classifier"], seed=4)
    assert not torch.equal(other.classifier.weight, w)
    with pytest.raises(ValueError, match="no module named 'nope'"):
        reinitialize(model, ["nope"])


def test_checkpoint_flags_do_not_stop_the_reinit():
    """transformers 5 skips tensors flagged as loaded from a checkpoint."""
    model = trained_bert()
    for p in model.parameters():
        p._is_hf_initialized = True
    assert "classifier.weight" in reinitialize(model, ["classifier"])


# ---- the check ----------


def test_model_is_never_modified_and_no_hook_is_left():
    model = trained_bert()
    model.train()
    model.classifier.weight.requires_grad_(False)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    flags = {n: p.requires_grad for n, p in model.named_parameters()}
    rng = torch.random.get_rng_state()
    ids, mask = batch()
    cascading_randomization(grad_x_input, model, ids, attention_mask=mask)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert {n: p.requires_grad for n, p in model.named_parameters()} == flags
    assert model.training and no_hooks(model)
    assert all(p.grad is None for p in model.parameters())
    assert torch.equal(torch.random.get_rng_state(), rng)


def test_an_attribution_that_ignores_the_model_fails_the_check():
    model = trained_bert()
    ids, mask = batch()
    result = cascading_randomization(
        ids_only, model, ids, attention_mask=mask, options=SPECIAL
    )
    for variant in ("spearman", "spearman_abs"):
        ones = torch.ones(len(STAGES), 6, dtype=torch.float64)
        assert torch.allclose(result.values(variant), ones, rtol=0, atol=1e-12)
    assert result.n_tokens.tolist() == [5] + [7] * 5  # padding, specials left out
    assert (result.agreement()[-1] <= 1).item()


def test_a_gradient_attribution_decorrelates():
    model = trained_bert()
    ids, mask = batch(n=40, length=12)
    result = cascading_randomization(
        grad_x_input, model, ids, attention_mask=mask, options=SPECIAL
    )
    final = result.mean("spearman")
    assert abs(float(final[-1])) < 0.2
    assert (result.mean("spearman").abs() < 0.5).all()
    low, high = result.interval("spearman")[-1].tolist()
    assert low <= float(final[-1]) <= high and low < 0 < high


def test_target_is_the_trained_prediction_at_every_stage():
    model = trained_bert()
    ids, mask = batch()
    rec = Recorder()
    result = cascading_randomization(rec, model, ids, attention_mask=mask)
    with torch.no_grad():
        predicted = model(ids, attention_mask=mask).logits.argmax(-1)
    assert torch.equal(result.target, predicted)
    assert all(torch.equal(t, predicted) for t in rec.targets)
    given = cascading_randomization(Recorder(), model, ids, 1, attention_mask=mask)
    assert given.target.tolist() == [1] * 6


def test_results_are_reproducible_and_independent_of_batching():
    model = trained_bert()
    ids, mask = batch()
    a = cascading_randomization(grad_x_input, model, ids, attention_mask=mask)
    b = cascading_randomization(
        grad_x_input,
        model,
        ids,
        attention_mask=mask,
        options=RandomizationOptions(max_examples_per_batch=4),
    )
    assert torch.allclose(a.spearman, b.spearman, atol=1e-6, equal_nan=True)
    c = cascading_randomization(
        grad_x_input,
        model,
        ids,
        attention_mask=mask,
        options=RandomizationOptions(seed=1),
    )
    assert not torch.allclose(a.spearman, c.spearman, equal_nan=True)


def test_explicit_stages_and_custom_reinit():
    model = MeanPoolModel(vocab=60)
    calls = []

    def reinit(module):
        calls.append(module)
        if isinstance(module, nn.Linear):
            nn.init.zeros_(module.weight)

    result = cascading_randomization(
        ids_only,
        model,
        torch.tensor([[5, 6, 7, 8]]),
        options=RandomizationOptions(stages=[("top", ["head"])], reinit=reinit),
    )
    assert result.stages == ["top"] and result.randomized == [["head.weight"]]
    assert calls and result.settings["reinit"] == "custom"


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"options": stages([("a", ["nope"])])}, "no module named 'nope'"),
        ({"options": stages([("a", ["head"]), ("b", ["head"])])}, "in two stages"),
        ({"options": stages([])}, "nothing to randomise"),
        ({"target": 7}, "out of range"),
        ({"attention_mask": torch.ones(1, 3)}, "attention_mask has shape"),
    ],
)
def test_bad_arguments_raise_clear_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        cascading_randomization(
            ids_only, MeanPoolModel(vocab=60), torch.tensor([[5, 6, 7, 8]]), **kwargs
        )


def test_old_keywords_warn_and_give_the_same_result():
    """The keywords of 0.2 (``seed=``, ``max_examples_per_batch=`` ...) are
    the options' fields: the same result, a DeprecationWarning at the caller
    naming the new form; with ``options=`` too, or misspelt, a TypeError."""
    model = MeanPoolModel(vocab=60)
    ids = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 12]])
    options = RandomizationOptions(seed=3, max_examples_per_batch=1)
    new = cascading_randomization(ids_only, model, ids, options=options)
    with pytest.warns(DeprecationWarning, match=r"RandomizationOptions\(max_ex") as w:
        old = cascading_randomization(
            ids_only, model, ids, seed=3, max_examples_per_batch=1
        )
    assert w[0].filename == __file__
    assert old.settings["seed"] == new.settings["seed"] == 3
    assert torch.equal(old.target_probs, new.target_probs)
    with pytest.raises(TypeError, match="options= and the old keyword"):
        cascading_randomization(ids_only, model, ids, options=options, seed=3)
    with pytest.raises(TypeError, match="unexpected keyword argument 'sed'"):
        cascading_randomization(ids_only, model, ids, sed=3)


def test_an_explanation_of_the_wrong_shape_is_named():
    def bad(model, ids, mask, target):
        return ids[:, :2].float()

    with pytest.raises(ValueError, match="shape \\(1, 2\\) at stage 'trained'"):
        cascading_randomization(bad, MeanPoolModel(vocab=60), torch.tensor([[5, 6, 7]]))


# ---- the result ----------


def test_result_json_round_trip_with_undefined_values(tmp_path):
    model = trained_bert()
    ids, mask = batch()
    result = cascading_randomization(grad_x_input, model, ids, attention_mask=mask)
    result.spearman[0, 0] = math.nan
    path = tmp_path / "r.json"
    result.to_json(path)
    back = RandomizationResult.from_json(path)
    assert torch.equal(back.spearman.isnan(), result.spearman.isnan())
    assert torch.allclose(back.spearman, result.spearman, equal_nan=True)
    assert back.stages == result.stages and back.randomized == result.randomized
    assert torch.equal(back.predictions, result.predictions)
    assert back.defined("spearman")[0] == 5
    assert back.summary()[0]["stage"] == "head"
    assert "| head |" in back.to_markdown()
    with pytest.raises(FileNotFoundError, match="no such file"):
        RandomizationResult.from_json(tmp_path / "none.json")
    with pytest.raises(ValueError, match="not a RandomizationResult"):
        RandomizationResult.from_json('{"format": "other"}')
