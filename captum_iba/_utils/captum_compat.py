"""The one place that imports Captum's private helpers.

Captum's ``captum._utils`` modules move between releases; everything this
package needs from them is imported here so that a new Captum release needs at
most this file changed. Supported: Captum 0.8 and 0.9. Names Captum exports
publicly (``captum.attr.GradientAttribution``, ...) are imported from their
public module where they are used. ``tests/test_layering.py`` checks that no
other module imports a private Captum module.
"""

from captum._utils.common import (
    ExpansionTypes,
    _expand_additional_forward_args,
    _format_additional_forward_args,
    _format_tensor_into_tuples,
    _run_forward,
    _select_targets,
    _sort_key_list,
)

# Lime's interpretable models (already imported by ``captum.attr``; sklearn
# itself is imported only when a model is fitted).
from captum._utils.models.linear_model import SkLearnRidge
from captum._utils.typing import ModuleOrModuleList, TargetType

# Captum's LLM API: its pretty output tokens (no BPE space marks), and Lime's
# exponential-kernel similarity.
from captum.attr._core.lime import get_exp_kernel_similarity_function
from captum.attr._core.llm_attr import _convert_ids_to_pretty_tokens

__all__ = [
    "ExpansionTypes",
    "ModuleOrModuleList",
    "SkLearnRidge",
    "TargetType",
    "_convert_ids_to_pretty_tokens",
    "_expand_additional_forward_args",
    "_format_additional_forward_args",
    "_format_tensor_into_tuples",
    "_run_forward",
    "_select_targets",
    "_sort_key_list",
    "get_exp_kernel_similarity_function",
]
