"""The faithfulness anchors: leave-one-out, occlusion, gradient x activation,
KernelSHAP, Shapley sampling, the generic Captum adapter and AttnLRP.

Where a model is exactly linear in its tokens (a bag of words), every method's
expected scores are known in closed form.
"""

import importlib

import pytest
import torch
from captum.attr import FeatureAblation, LayerIntegratedGradients
from torch import nn

from captum_iba.evaluation import (
    AttnLRPScorer,
    CaptumScorer,
    GradientXActivationScorer,
    KernelShapScorer,
    LeaveOneOutScorer,
    OcclusionMaskScorer,
    OcclusionScorer,
    ShapleySamplingScorer,
    attnlrp_available,
    make_scorers,
    scorer_class,
)
from captum_iba.evaluation import attnlrp as attnlrp_module
from tests.evaluation.conftest import BagOfWords, check_scores
from tests.helpers import install_fake_lxt

MASK_ID = 4


def _bow_logits(bow, ids, mask):
    with torch.no_grad():
        return bow(ids, mask).double()


def test_loo_is_the_probability_drop_of_deleting_each_token(tokenizer, batch):
    ids, mask, tt = batch
    bow = BagOfWords(30).eval()
    target = torch.tensor([0, 1, 1])
    loo = LeaveOneOutScorer(bow, tokenizer=tokenizer)
    scores = loo.attribute(ids, target, mask, tt)
    removable = loo._removable(ids, mask)
    p = _bow_logits(bow, ids, mask).softmax(-1)
    for b in range(ids.shape[0]):
        for i in range(ids.shape[1]):
            if not removable[b, i]:
                assert scores[b, i] == 0
                continue
            kept = mask[b : b + 1].clone()
            kept[0, i] = 0  # deleting a token of a bag of words = masking it
            q = _bow_logits(bow, ids[b : b + 1], kept).softmax(-1)
            expected = p[b, target[b]] - q[0, target[b]]
            assert scores[b, i].item() == pytest.approx(expected.item(), abs=1e-6)


def test_loo_passes_and_batch_do_not_change_scores(model, tokenizer, pair_batch):
    ids, mask, tt = pair_batch
    whole = LeaveOneOutScorer(model, tokenizer=tokenizer).attribute(ids, 1, mask, tt)
    small = LeaveOneOutScorer(model, tokenizer=tokenizer, max_tokens_per_pass=8)
    torch.testing.assert_close(small.attribute(ids, 1, mask, tt), whole)
    one = LeaveOneOutScorer(model, tokenizer=tokenizer).attribute(
        ids[1:], 1, mask[1:], tt[1:]
    )
    torch.testing.assert_close(one, whole[1:], atol=1e-6, rtol=1e-5)
    check_scores(whole, ids, mask)
    with pytest.raises(ValueError, match="output"):
        LeaveOneOutScorer(model, output="logits")
    with pytest.raises(ValueError, match="max_tokens_per_pass"):
        LeaveOneOutScorer(model, max_tokens_per_pass=0)


@pytest.mark.parametrize(
    "cls, replacement", [(OcclusionScorer, None), (OcclusionMaskScorer, MASK_ID)]
)
def test_occlusion_on_a_bag_of_words(tokenizer, batch, cls, replacement):
    """Logit scores: removing token i lowers the target logit by its weight
    (masked [PAD]), or by its weight minus [MASK]'s (replaced by [MASK])."""
    ids, mask, tt = batch
    bow = BagOfWords(30).eval()
    target = torch.tensor([1, 0, 1])
    scorer = cls(bow, tokenizer=tokenizer)
    scores = scorer.attribute(ids, target, mask, tt)
    w = bow.weight.detach()
    expected = w[ids, target[:, None]]
    if replacement is not None:
        expected = expected - w[replacement, target][:, None]
    expected = expected * scorer._removable(ids, mask)
    torch.testing.assert_close(scores, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("cls", [KernelShapScorer, ShapleySamplingScorer])
def test_shapley_methods_are_exact_on_a_linear_model(tokenizer, batch, cls):
    ids, mask, tt = batch
    bow = BagOfWords(30).eval()
    target = torch.tensor([0, 1, 0])
    state = torch.get_rng_state()
    scorer = cls(bow, tokenizer=tokenizer, n_samples=300)
    scores = scorer.attribute(ids, target, mask, tt)
    assert torch.equal(torch.get_rng_state(), state)  # the caller's RNG untouched
    expected = bow.weight.detach()[ids, target[:, None]] * scorer._removable(ids, mask)
    torch.testing.assert_close(scores, expected, atol=1e-3, rtol=1e-3)
    again = cls(bow, tokenizer=tokenizer, n_samples=300).attribute(
        ids, target, mask, tt
    )
    assert torch.equal(scores, again)  # seeded
    with pytest.raises(ValueError, match="n_samples"):
        cls(bow, n_samples=0)


class LinearEmbedding(nn.Module):
    """logits = sum over tokens of embedding . v (linear in the embeddings)."""

    def __init__(self, vocab: int = 30, dim: int = 4) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(2)
        self.embed = nn.Embedding(vocab, dim)
        self.head = nn.Parameter(torch.randn(dim, 2, generator=g))

    def get_input_embeddings(self) -> nn.Module:
        return self.embed

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        e = self.embed(input_ids) * attention_mask[..., None]
        return e.sum(1) @ self.head


def test_gradient_x_activation_is_each_tokens_contribution(tokenizer, batch):
    ids, mask, tt = batch
    lin = LinearEmbedding().eval()
    target = torch.tensor([1, 1, 0])
    scorer = GradientXActivationScorer(lin, tokenizer=tokenizer)
    scores = scorer.attribute(ids, target, mask, tt)
    with torch.no_grad():
        contrib = lin.embed(ids) @ lin.head  # (B, L, 2)
    expected = contrib.gather(2, target[:, None, None].expand(-1, ids.shape[1], 1))
    expected = expected[..., 0] * scorer._removable(ids, mask)
    torch.testing.assert_close(scores, expected, atol=1e-5, rtol=1e-5)


def test_any_captum_method_through_the_adapter(model, tokenizer, batch):
    ids, mask, tt = batch
    bow = BagOfWords(30).eval()
    ablation = CaptumScorer(bow, method=FeatureAblation, tokenizer=tokenizer)
    occlusion = OcclusionScorer(bow, tokenizer=tokenizer)
    torch.testing.assert_close(
        ablation.attribute(ids, 1, mask, tt), occlusion.attribute(ids, 1, mask, tt)
    )
    lig = CaptumScorer(
        model,
        method=LayerIntegratedGradients,
        tokenizer=tokenizer,
        attribute_options={"n_steps": 8},
    )
    check_scores(lig.attribute(ids, 0, mask, tt), ids, mask)
    assert lig.settings["implementation"] == "captum.attr.LayerIntegratedGradients"
    with pytest.raises(TypeError, match="Captum attribution class"):
        CaptumScorer(model, method=len)
    with pytest.raises(ValueError, match="baseline"):
        CaptumScorer(bow, method=FeatureAblation, baseline="eos")


def test_every_registered_anchor_runs_in_the_fair_suite(model, tokenizer, batch):
    ids, mask, tt = batch
    names = ["LOO", "occlusion", "occlusion-mask", "grad-x-act", "kernel-shap"]
    names.append("shapley")
    scorers = make_scorers(
        model,
        tokenizer,
        "fair",
        methods=[n.upper() for n in names],  # the registry's lookup ignores case
        method_options={"kernel-shap": {"n_samples": 20}, "shapley": {"n_samples": 2}},
    )
    assert list(scorers) == names
    for name, scorer in scorers.items():
        check_scores(
            scorer.attribute(ids, torch.tensor([1, 0, 1]), mask, tt), ids, mask
        )
        assert scorer.settings["method"] == name
        assert scorer_class(name) is type(scorer)


def test_attnlrp_explains_what_blocks_it(model, monkeypatch):
    ok, reason = attnlrp_available()
    if ok:  # pragma: no cover - only where lxt imports (transformers 4.x)
        pytest.skip("lxt imports here")
    assert "transformers" in reason and "lxt" in reason
    with pytest.raises(ImportError, match="lxt"):
        AttnLRPScorer(model)


def test_attnlrp_restores_everything_it_patched(model, tokenizer, batch, monkeypatch):
    """lxt patches transformers and torch.nn at the class level: with a fake
    lxt that does the same, the scorer must leave both exactly as found and
    never touch the caller's model."""
    import transformers.models.bert.modeling_bert as modeling_bert

    calls = []

    original_norm = nn.LayerNorm.forward

    class PatchedAttention(modeling_bert.BertSelfAttention):
        pass

    def monkey_patch(module):
        calls.append(module)
        module.BertSelfAttention = PatchedAttention
        module.added_by_lxt = True
        nn.LayerNorm.forward = lambda self, x: original_norm(self, x)

    install_fake_lxt(monkeypatch, monkey_patch)
    before_module = dict(vars(modeling_bert))
    before_norm = nn.LayerNorm.forward
    state = {k: v.clone() for k, v in model.state_dict().items()}
    ids, mask, tt = batch
    scorer = AttnLRPScorer(model, tokenizer=tokenizer)
    scores = scorer.attribute(ids, 1, mask, tt)
    check_scores(scores, ids, mask)
    assert calls == [modeling_bert]
    assert dict(vars(modeling_bert)) == before_module
    assert nn.LayerNorm.forward is before_norm
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in state.items())
    assert all(p.requires_grad for p in model.parameters())
    with pytest.raises(ValueError, match="model types"):
        AttnLRPScorer(BagOfWords(30))
    assert attnlrp_module._MODULES["bert"] == modeling_bert.__name__


@pytest.mark.parametrize("model_type", sorted(attnlrp_module._MODULES))
def test_attnlrp_names_a_transformers_module_of_each_family(model_type):
    """Each family AttnLRP is offered for names a module transformers has
    (the module lxt patches) that holds the family's causal LM class
    (``...ForCausalLM`` or ``...LMHeadModel``), which
    :func:`~captum_iba.evaluation.attnlrp.patched_copy` rebuilds."""
    module = importlib.import_module(attnlrp_module._MODULES[model_type])
    assert any(name.endswith(("ForCausalLM", "LMHeadModel")) for name in vars(module))
