"""``llm-attnlrp`` (AttnLRP for causal LMs through lxt) on a tiny random
Llama. lxt cannot be imported under transformers 5, so a fake lxt patches
the Llama classes in place as lxt 2.1 does (the MLP's and the RMS norm's
forward, the module's attention functions); with patches that keep the
mathematics, AttnLRP's relevance is the gradient x input of the answer
tokens' logits, computed here by hand."""

import pytest
import torch
from transformers.models.llama import modeling_llama

from captum_iba.attr.llm_batch import IGNORE_INDEX, position_ids, prompt_batch
from captum_iba.evaluation.attnlrp import AttnLRPScorer, attnlrp_available
from tests.helpers import (
    hide_lxt,
    install_fake_lxt,
    no_hooks,
    tiny_causal_lm,
    tiny_word_tokenizer,
)


@pytest.fixture
def fake_lxt(monkeypatch):
    """An lxt whose monkey_patch patches the Llama module as lxt 2.1 does,
    with patches that keep the forward's values and gradients."""
    calls = []

    def monkey_patch(module):
        calls.append(module)
        mlp, norm = module.LlamaMLP.forward, module.LlamaRMSNorm.forward
        module.LlamaMLP.forward = lambda self, x: mlp(self, x)
        module.LlamaRMSNorm.forward = lambda self, x: norm(self, x)
        attention = module.eager_attention_forward
        module.eager_attention_forward = lambda *a, **k: attention(*a, **k)

    install_fake_lxt(monkeypatch, monkey_patch)
    return calls


def _by_hand(model, batch):
    """Gradient x input of the sum of the answer tokens' logits."""
    args = batch.arguments()
    mask = args["attention_mask"]
    embeds = model.get_input_embeddings()(args["input_ids"]).detach()
    embeds.requires_grad_(True)
    logits = model(
        inputs_embeds=embeds, attention_mask=mask, position_ids=position_ids(mask)
    ).logits
    target = args["labels"][:, 1:]
    picked = logits.gather(-1, target.clamp_min(0)[..., None]).squeeze(-1)
    (grad,) = torch.autograd.grad((picked * (target != IGNORE_INDEX)).sum(), embeds)
    relevance = (embeds * grad).sum(-1).detach()
    return torch.cat([relevance, relevance.new_zeros(len(relevance), 1)], 1)


def test_llm_attnlrp_is_gradient_x_input_of_the_answer_logits_and_restores_all(
    fake_lxt,
):
    model, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    batch = prompt_batch(
        tok, ["the cat sat on the mat", "a dog ran"], [" is big", " in park"]
    )
    before = {
        n: (p.requires_grad, p.detach().clone()) for n, p in model.named_parameters()
    }
    saved = {
        "mlp": modeling_llama.LlamaMLP.forward,
        "norm": modeling_llama.LlamaRMSNorm.forward,
        "attention": modeling_llama.eager_attention_forward,
    }
    scorer = AttnLRPScorer(model, tokenizer=tok)
    found = scorer.attribute(batch)
    expected = _by_hand(model, batch) * batch.scored
    torch.testing.assert_close(found.answer, expected, rtol=1e-4, atol=1e-6)
    assert (found.answer[~batch.scored] == 0).all() and found.tokens is None
    # every class patched in place and the module's functions are put back
    assert fake_lxt == [modeling_llama]
    assert modeling_llama.LlamaMLP.forward is saved["mlp"]
    assert modeling_llama.LlamaRMSNorm.forward is saved["norm"]
    assert modeling_llama.eager_attention_forward is saved["attention"]
    # the caller's model is untouched
    assert no_hooks(model) and not model.training
    for name, p in model.named_parameters():
        assert p.requires_grad == before[name][0] and p.grad is None
        assert torch.equal(p.detach(), before[name][1]), name
    # the copy is reused while the weights stay, rebuilt when they change
    first = scorer._copies.get(model, modeling_llama)
    assert scorer._copies.get(model, modeling_llama) is first
    with torch.no_grad():
        model.lm_head.weight.mul_(2.0)
    assert scorer._copies.get(model, modeling_llama) is not first
    torch.testing.assert_close(
        scorer.attribute(batch).answer, _by_hand(model, batch) * batch.scored,
        rtol=1e-4, atol=1e-6,
    )  # fmt: skip


def test_llm_attnlrp_refuses_what_it_cannot_explain(fake_lxt):
    with pytest.raises(ValueError, match="model types.*got 'opt'"):
        model = tiny_causal_lm("llama")
        model.config.model_type = "opt"
        AttnLRPScorer(model)


def test_llm_attnlrp_says_what_blocks_it():
    ok, reason = attnlrp_available()
    if ok:  # pragma: no cover - only where lxt imports (transformers 4.x)
        pytest.skip("lxt imports here")
    with pytest.raises(ImportError, match="lxt.*transformers"):
        AttnLRPScorer(tiny_causal_lm("llama"))


def test_the_reason_says_whether_lxt_is_missing_or_fails_to_import(
    monkeypatch, tmp_path
):
    """lxt not installed: the install command; lxt installed but failing
    (lxt 2.1 under transformers 5: ``No module named
    'transformers.modeling_attn_mask_utils'``): its own error, and in both
    the transformers version installed and the one lxt needs."""
    import sys
    import types
    from importlib.metadata import version

    here = f"transformers {version('transformers')} is installed here"
    hide_lxt(monkeypatch)
    ok, reason = attnlrp_available()
    assert not ok and reason.startswith(
        "AttnLRP needs the optional package lxt, which is not installed "
        "(pip install 'captum-iba[attnlrp]')"
    )
    assert here in reason and "transformers>=4.51,<5" in reason
    monkeypatch.undo()
    broken = tmp_path / "lxt"
    (broken / "efficient").mkdir(parents=True)
    (broken / "efficient" / "__init__.py").write_text(
        "import transformers.a_module_this_test_lacks\n"
    )
    package = types.ModuleType("lxt")
    package.__path__ = [str(broken)]
    monkeypatch.setitem(sys.modules, "lxt", package)
    ok, reason = attnlrp_available()
    assert not ok and reason.startswith(
        "AttnLRP needs the optional package lxt, which does not import here "
        "(ModuleNotFoundError: No module named 'transformers.a_module_this_test_lacks')"
    )
    assert here in reason and "\n" not in reason
