"""The one place that imports Captum's private helpers.

Captum's ``captum._utils`` modules move between releases; everything this
package needs from them is imported here so that a new Captum release needs at
most this file changed. Supported: Captum 0.8 and 0.9.
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
from captum._utils.typing import ModuleOrModuleList, TargetType

__all__ = [
    "ExpansionTypes",
    "ModuleOrModuleList",
    "TargetType",
    "_expand_additional_forward_args",
    "_format_additional_forward_args",
    "_format_tensor_into_tuples",
    "_run_forward",
    "_select_targets",
    "_sort_key_list",
]
