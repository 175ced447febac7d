"""Any registered method as an ``explanation_func`` for the metrics layer.

The metrics take the attribution method as a callable
``explanation_func(model, input_ids, attention_mask, target) -> (B, L)``
(e.g. :func:`~captum_iba.metrics.cascading_randomization`, which calls it on
a different model at each stage). :func:`method_explainer` builds one from a
method name: the name is resolved once, and the scorer is built for the model
it is given at each call, with :func:`~captum_iba.evaluation.suite.make_scorers`
(the preset's arguments, then the options given).
"""

from typing import Any, Callable, Mapping, Optional

from torch import Tensor, nn

from captum_iba.evaluation.resolve import Resources, build_scorers
from captum_iba.registry import METHODS

__all__ = ["method_explainer"]


def method_explainer(
    method: str,
    tokenizer: Any = None,
    setting: str = "fair",
    layer_index: Optional[int] = None,
    method_options: Optional[Mapping[str, Any]] = None,
    **resources: Any,
) -> Callable[..., Tensor]:
    """An ``explanation_func`` running the registered ``method`` on any model.

    Args:
        method (str): A registered method name (any case), e.g. ``"IG"``,
            ``"LIME"``, ``"IBA"``, ``"iba-faithful"``, ``"AttnLRP"``.
        tokenizer (Any): The model's tokenizer (special and pad ids).
        setting (str): The preset, ``"fair"`` (default) or ``"paper"``.
        layer_index (int, optional): For methods that take a layer (IBA): the
            encoder layer, resolved in each model the function is given.
            Default :func:`~captum_iba.attr.text.default_layer_index`.
        method_options (Mapping, optional): More constructor arguments of the
            method's scorer (e.g. ``{"n_samples": 200}`` for LIME).
        **resources: Further :class:`~captum_iba.evaluation.Resources`
            (``seed``, ``prior``, ``internal_batch_size``, ...).

    Returns:
        Callable: ``explain(model, input_ids, attention_mask, target,
        token_type_ids=None) -> (B, L)`` CPU scores, zero at padding.

    Raises:
        ValueError: For an unknown method name (before any work).
    """
    name = METHODS.entry(method).name
    options = {name: dict(method_options or {})}

    def explain(
        model: nn.Module,
        input_ids: Tensor,
        attention_mask: Optional[Tensor],
        target: Any,
        token_type_ids: Optional[Tensor] = None,
    ) -> Tensor:
        res = Resources(model, tokenizer, layer=layer_index, **resources)
        scorer = build_scorers([name], res, setting, options)[name]
        return scorer.attribute(
            input_ids,
            target=target,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
        )

    explain.__name__ = f"explain_{name}"
    return explain
