"""Re-exported: :class:`SummedLLMGradientAttribution` lives with Captum's
other LLM classes in :mod:`captum_iba.attr.summed_gradient`, beside the
causal LM's Captum runner (:mod:`captum_iba.attr._llm_captum`)."""

from captum_iba.attr.summed_gradient import (
    LINEAR_METHODS,
    SummedLLMGradientAttribution,
)

__all__ = ["LINEAR_METHODS", "SummedLLMGradientAttribution"]
