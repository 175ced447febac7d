"""Study candidate for a causal LM's default at AttnLRP's cost (issue 78):
one deletion step whose gradient goes through the normalisations as through
fixed scales.

AttnLRP (Achtibat et al., ICML 2024) and the conservative propagation of Ali
et al. (ICML 2022) treat a LayerNorm's or RMSNorm's division by the spread
of its input as a constant when they propagate relevance: the gradient
through :math:`y = w \\odot x / \\mathrm{rms}(x)` then is
:math:`w / \\mathrm{rms}(x)` alone, without the term through
:math:`\\mathrm{rms}(x)` (the candidate's guess: that term blurs the
plain gradient of a long prompt; on IMDB's search split the rule lost,
docs/studies/llm_default.rst). :class:`NormRule` runs a scorer
(``iba-deletion`` with one step) with every RMS normalisation of the model
so linearised in the backward pass: its output is :math:`x \\odot c`,
:math:`c = y / x` detached, which is the same value (the forward pass, the
answer and the cost unchanged) with that gradient. The deletion's mask
still acts through attention's logits (Eq. R2), which keep their softmax.

Study code: RMS normalisations only (Llama's, SmolLM2's); a LayerNorm's
centring and bias would need their own rule.
"""

from typing import Any, List

import torch

from captum_iba.attr.batches import AnswerScores, PromptBatch


def _fixed_scale(module: Any, inputs: Any, output: Any) -> Any:
    """The output as ``x * (y / x)`` with the ratio detached (0 where x is)."""
    x = inputs[0]
    ratio = torch.where(x != 0, output / torch.where(x != 0, x, 1), 0).detach()
    return x * ratio


def rms_norms(model: Any) -> List[Any]:
    """The model's RMS normalisation modules (by class name)."""
    return [m for m in model.modules() if type(m).__name__.endswith("RMSNorm")]


class NormRule:
    """``one_step`` with its model's RMS norms linearised (module docstring)."""

    def __init__(self, one_step: Any) -> None:
        self.one_step = one_step
        self.settings = dict(one_step.settings, norm_rule="rms-fixed")
        if not rms_norms(one_step.model):
            raise ValueError("norm rule: the model has no RMSNorm module")

    def __getattr__(self, name: str) -> Any:  # the wrapped scorer's facts
        return getattr(self.__dict__["one_step"], name)

    def attribute(self, batch: PromptBatch) -> AnswerScores:
        handles = [m.register_forward_hook(_fixed_scale) for m in rms_norms(self.model)]
        try:
            return self.one_step.attribute(batch)
        finally:
            for handle in handles:
                handle.remove()
