"""Information Bottleneck Attribution as a per-token scorer."""

from typing import Any, Callable, Optional

from torch import Tensor, nn

from captum_iba.attr.iba import InformationBottleneckAttribution
from captum_iba.attr.options import IBAOptions
from captum_iba.evaluation.scorers import TokenScorer, register_scorer

__all__ = ["FAITHFUL_OPTIONS", "IBAFaithfulScorer", "IBAScorer"]

#: ``iba-faithful``'s settings: the most faithful IBA configuration found by
#: ``experiments/faithfulness_study.py`` (docs/faithfulness.rst), not the
#: paper's: a deletion-like prior (the layer's output on the input with every
#: removable token replaced by [PAD]), alpha from 0 (lambda = 0.5) moved by
#: normalised gradient descent, 5 noise samples, the mask averaged over the
#: steps as the score.
FAITHFUL_OPTIONS = dict(
    prior="baseline",
    beta=1e-5,
    steps=10,
    n_samples=5,
    lr=3.0,
    init_alpha=0.0,
    optimizer="normalized_gd",
    readout="mask_mean",
)


@register_scorer
class IBAScorer(TokenScorer):
    """Information Bottleneck Attribution (the project's own class), summed per token.

    Args:
        model (Callable): HF model (``(ids, mask[, tt])`` positionally).
        layer (nn.Module): The layer after which the bottleneck goes.
        prior (str or prior): ``"paper"``, ``"reference"`` or a ``DatasetPrior``.
        beta (float), steps (int), n_samples (int), lr (float), init_alpha
            (float), optimizer (str), readout (str): IBA's settings (see
            :meth:`~captum_iba.InformationBottleneckAttribution.attribute`).
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
        init_alpha: float = 5.0,
        optimizer: str = "adam",
        readout: str = "capacity",
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
            init_alpha=init_alpha,
            optimizer=optimizer,
            readout=readout,
            prior=prior,
            seed=seed,
            internal_batch_size=internal_batch_size,
        )
        #: Whether the prior takes its mean from [PAD] baselines.
        self.needs_baseline = IBAOptions(**self.options).prior.needs_baseline
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
        base = None
        if self.needs_baseline:  # what deletion leaves: removable tokens -> [PAD]
            base = ids.masked_fill(self._removable(ids, mask), self.pad_token_id)
        attr = self.iba.attribute(
            ids,
            target=target,
            additional_forward_args=extra,
            token_mask=mask,
            baselines=base,
            **self.options,
        )
        return attr.sum(-1) if attr.dim() == 3 else attr


@register_scorer
class IBAFaithfulScorer(IBAScorer):
    """IBA in the ``iba-faithful`` configuration (:data:`FAITHFUL_OPTIONS`);
    any of them can still be overridden by keyword.

    Args:
        model (Callable): HF model (``(ids, mask[, tt])`` positionally).
        layer (nn.Module): The layer after which the bottleneck goes (pick it
            with :func:`~captum_iba.evaluation.choose_layer`).
        **kwargs: See :class:`IBAScorer`.
    """

    name = "iba-faithful"
    suite_options = {
        "seed": "seed",
        "internal_batch_size": "internal_batch_size",
        "iba_layer": "layer",
    }

    def __init__(
        self, model: Callable[..., Any], layer: nn.Module, **kwargs: Any
    ) -> None:
        super().__init__(model, layer, **{**FAITHFUL_OPTIONS, **kwargs})
