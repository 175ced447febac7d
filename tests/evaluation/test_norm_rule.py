"""Issue 78's candidate ``studylib.norm_rule``: one deletion step with the
RMS normalisations passed as fixed scales - the forward values unchanged,
the gradient through a norm its scale alone, no hook left behind."""

import pytest
import torch

from captum_iba.evaluation.iba import one_step_deletion
from tests.evaluation.test_context_anchors import _batch
from tests.helpers import no_hooks, study_module, tiny_causal_lm, tiny_word_tokenizer


@pytest.fixture(scope="module")
def lm():
    return tiny_causal_lm("llama", layers=2, positions=64), tiny_word_tokenizer()


def test_a_fixed_scale_keeps_the_value_and_drops_the_spreads_gradient(lm):
    """Through ``y = w * x / rms(x)`` with rms(x) fixed, dy_i/dx_j is
    ``w_i / rms(x)`` on the diagonal and 0 off it."""
    rule = study_module("norm_rule")
    norm = rule.rms_norms(lm[0])[0]
    x = torch.tensor([[1.0, -2.0, 0.0, 3.0] * (norm.weight.numel() // 4)])
    x.requires_grad_(True)
    y = norm(x)
    fixed = rule._fixed_scale(norm, (x,), y)
    assert torch.allclose(fixed, y)
    (grad,) = torch.autograd.grad(fixed[0, 0], x)
    rms = x.detach().pow(2).mean().add(norm.variance_epsilon).sqrt()
    expected = torch.zeros_like(x)
    expected[0, 0] = norm.weight[0].detach() / rms
    assert torch.allclose(grad, expected, atol=1e-6)


def test_the_step_runs_with_the_rule_and_leaves_no_hook(lm):
    model, tok = lm
    batch = _batch(tok)
    step = one_step_deletion(model, tok)
    plain = step.attribute(batch).answer
    ruled = study_module("norm_rule").NormRule(step).attribute(batch).answer
    assert no_hooks(model)
    assert ruled.shape == plain.shape and torch.isfinite(ruled[batch.scored]).all()
    assert not torch.allclose(ruled, plain)  # the gradient took the rule
