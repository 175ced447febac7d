"""Information Bottleneck Attribution as a per-token scorer."""

from typing import Any, Callable, Optional

from torch import Tensor, nn

from captum_iba.attr.iba import IBAOptions, InformationBottleneckAttribution
from captum_iba.evaluation.scorers import TokenScorer, register_scorer

__all__ = ["IBAScorer"]


@register_scorer
class IBAScorer(TokenScorer):
    """Information Bottleneck Attribution (the project's own class), summed per token.

    Args:
        model (Callable): HF model (``(ids, mask[, tt])`` positionally).
        layer (nn.Module): The layer after which the bottleneck goes.
        prior (str or prior): ``"paper"``, ``"reference"`` or a ``DatasetPrior``.
        beta (float), steps (int), n_samples (int), lr (float): IBA's settings.
        seed (int, optional): Noise seed. Default 0.
        internal_batch_size (int, optional): IBA's ``internal_batch_size``.
        precision (str): ``"float32"`` (default) or ``"bf16"`` (bfloat16
            autocast, see :class:`~captum_iba.InformationBottleneckAttribution`).
        iba_class (type, optional): The attribution class (default
            ``captum_iba.InformationBottleneckAttribution``), for tests.
        **kwargs: See :class:`TokenScorer`.
    """

    name = "IBA"
    suite_options = {
        "seed": "seed",
        "internal_batch_size": "internal_batch_size",
        "iba_prior": "prior",
        "iba_layer": "layer",
    }
    required = ("layer",)

    def __init__(
        self,
        model: Callable[..., Any],
        layer: nn.Module,
        prior: Any = "paper",
        beta: float = 1e-5,
        steps: int = 10,
        n_samples: int = 10,
        lr: float = 1.0,
        seed: Optional[int] = 0,
        internal_batch_size: Optional[int] = None,
        precision: str = "float32",
        iba_class: Optional[type] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, **kwargs)
        speed = {} if precision == "float32" else {"precision": precision}
        self.iba = (iba_class or InformationBottleneckAttribution)(
            model, layer, **speed
        )
        self.options = dict(
            beta=beta,
            steps=steps,
            n_samples=n_samples,
            lr=lr,
            prior=prior,
            seed=seed,
            internal_batch_size=internal_batch_size,
        )
        IBAOptions(**self.options)  # validated once, here
        prior_name = (
            prior
            if isinstance(prior, str)
            else getattr(prior, "name", type(prior).__name__)
        )
        self.settings.update(
            {**self.options, "prior": prior_name, "layer": type(layer).__name__},
            precision=precision,
        )

    def _scores(
        self, ids: Tensor, mask: Tensor, tt: Optional[Tensor], target: Tensor
    ) -> Tensor:
        extra = (mask,) if tt is None else (mask, tt)
        attr = self.iba.attribute(
            ids,
            target=target,
            additional_forward_args=extra,
            token_mask=mask,
            **self.options,
        )
        return attr.sum(-1) if attr.dim() == 3 else attr
