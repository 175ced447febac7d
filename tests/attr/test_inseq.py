"""IBA registered as an inseq attribution method (optional extra)."""

import pytest
import torch

inseq = pytest.importorskip(
    "inseq",
    reason="inseq is an optional extra (pip install --no-deps inseq jaxtyping "
    "'typeguard<=2.13.3' treescope wadler_lindig)",
)

from captum_iba.attr import inseq_method  # noqa: E402
from tests.helpers import tiny_causal_lm, tiny_word_tokenizer  # noqa: E402


def test_registered_and_attributes_a_generation() -> None:
    assert "information_bottleneck" in inseq.list_feature_attribution_methods()
    tok = tiny_word_tokenizer()
    model = tiny_causal_lm("gpt2")
    wrapped = inseq.load_model(
        model, "information_bottleneck", tokenizer=tok, target_layer="transformer.h.1"
    )
    assert isinstance(
        wrapped.attribution_method, inseq_method.InformationBottleneckInseqAttribution
    )
    out = wrapped.attribute(
        ["the cat sat", "a dog"],
        ["the cat sat on the mat", "a dog ran"],
        steps=2,
        n_samples=2,
        seed=0,
        show_progress=False,
    )
    first = out.sequence_attributions[0].target_attributions
    # 6 positions x 3 generated tokens x 16 features, capacities in nats
    assert tuple(first.shape) == (6, 3, 16)
    finite = first[~torch.isnan(first)]
    assert finite.numel() and (finite >= 0).all()
    assert wrapped.attribution_method.method.last_run[0]["objective"] == "score"
    assert all(
        not m._forward_hooks and not m._forward_pre_hooks for m in model.modules()
    )
