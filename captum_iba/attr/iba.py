"""``InformationBottleneckAttribution``: IBA as a Captum layer attribution method.

The mathematics is in :mod:`captum_iba.attr.bottleneck`, the noise priors in
:mod:`captum_iba.attr.priors`, the batched optimisation loop in
:mod:`captum_iba.attr._loop` and the hooks that read and replace a layer's
output in :mod:`captum_iba._utils.hooks`. This module validates the options
once (:class:`IBAOptions`), splits the batch into chunks and follows Captum's
conventions for arguments and return values.
"""

import numbers
import warnings
from dataclasses import dataclass, field
from typing import (
    Any,
    Callable,
    ContextManager,
    Dict,
    List,
    Literal,
    Optional,
    Tuple,
    Union,
)

import torch
from captum.attr._utils.attribution import GradientAttribution, LayerAttribution
from captum.log import log_usage
from torch import Tensor
from torch.nn import Module
from tqdm.auto import tqdm

from captum_iba._utils.captum_compat import (
    ExpansionTypes,
    ModuleOrModuleList,
    TargetType,
    _expand_additional_forward_args,
    _format_additional_forward_args,
    _format_tensor_into_tuples,
    _run_forward,
)
from captum_iba._utils.common import check_target_range, format_target, logits_of
from captum_iba._utils.hooks import (
    LayerRecord,
    evaluation_mode,
    find_in_stack,
    recorded,
    replaced_by_hook,
    scatter_for,
)
from captum_iba.attr import _loop, _speed
from captum_iba.attr._inputs import (
    check_batch,
    check_token_mask,
    infer_token_mask,
    slice_rows,
)
from captum_iba.attr.priors import NoisePrior, PaperPrior, PriorLike, resolve_prior

BetaType = Union[float, Literal["auto"]]

__all__ = ["IBAOptions", "InformationBottleneckAttribution"]


def _check_int(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}.")


@dataclass(frozen=True)
class IBAOptions:
    """The options of one IBA run, validated once when built.

    See :meth:`InformationBottleneckAttribution.attribute` for their meaning.
    ``prior`` may be given as a name; it is resolved to a
    :class:`~captum_iba.attr.priors.NoisePrior` here.
    """

    beta: BetaType = 1e-5
    steps: int = 10
    n_samples: int = 10
    lr: float = 1.0
    init_alpha: float = 5.0
    prior: NoisePrior = field(default_factory=PaperPrior)
    seed: Optional[int] = None
    internal_batch_size: Optional[int] = None

    def __post_init__(self) -> None:
        _check_int("steps", self.steps)
        _check_int("n_samples", self.n_samples)
        beta_ok = self.beta == "auto" or (
            isinstance(self.beta, numbers.Real)
            and not isinstance(self.beta, bool)
            and self.beta >= 0
        )
        if not beta_ok:
            raise ValueError(f"beta must be a float >= 0 or 'auto', got {self.beta!r}.")
        if not (isinstance(self.lr, numbers.Real) and self.lr > 0):
            raise ValueError(f"lr must be > 0, got {self.lr!r}.")
        if not isinstance(self.init_alpha, numbers.Real):
            raise ValueError(f"init_alpha must be a number, got {self.init_alpha!r}.")
        object.__setattr__(self, "init_alpha", float(self.init_alpha))
        object.__setattr__(self, "prior", resolve_prior(self.prior))
        ibs = self.internal_batch_size
        if ibs is not None and ibs < self.n_samples:
            raise ValueError(
                f"internal_batch_size ({ibs}) must be at least n_samples "
                f"({self.n_samples}): one instance's noise copies run together."
            )

    def instances_per_chunk(self, batch: int) -> int:
        """How many instances go through one forward pass together."""
        if self.internal_batch_size is None:
            return batch
        return max(1, self.internal_batch_size // self.n_samples)


class InformationBottleneckAttribution(LayerAttribution, GradientAttribution):
    r"""Information Bottleneck Attribution (IBA) for a layer of a model.

    Inserts the per-sample information bottleneck of Jiang et al. (2020) after
    ``layer``: the layer output :math:`X` is replaced by
    :math:`T = \lambda X + (1-\lambda)\epsilon` (Eq. 2), and :math:`\alpha`
    (:math:`\lambda = \sigma(\alpha)`, one per instance, token and feature) is
    optimised with Adam to keep the target's cross-entropy low while letting
    as little information through as possible (Eq. 5). The attribution is the
    capacity :math:`D_{KL}[P(T|X)\|Q(T)]` of the final bottleneck, per element,
    in **nats** - how much of each token's features the prediction needed.

    The model is never changed: it is run in ``eval()`` mode (flags restored
    afterwards), parameters get no ``.grad`` (``torch.autograd.grad`` on
    :math:`\alpha` only), and no hook or stub outlives a call.

    When ``layer`` is an element of a ``ModuleList``/``Sequential`` that the
    model runs in order (e.g. ``model.bert.encoder.layer``), the layers below
    the bottleneck run once per batch and each optimisation step re-runs only
    the layers above it (checked against the model's own output once per
    batch; on any mismatch, Captum-style forward hooks are used instead).

    Args:
        forward_func (Callable): The model (e.g. a Hugging Face
            ``...ForSequenceClassification``) or a function returning class
            scores (logits) as a Tensor or an object with ``.logits``.
        layer (torch.nn.Module or list(torch.nn.Module)): The layer after
            which the bottleneck is inserted. A list of layers runs one
            independent bottleneck per layer (the paper's layer sweep) and
            ``attribute`` returns a list.
        device_ids (list[int], optional): Device ids, needed when
            ``forward_func`` applies ``DataParallel`` to the model, as in
            Captum's layer methods.
        layer_stack (bool or torch.nn.Module, optional): ``True`` (default)
            finds the ``ModuleList``/``Sequential`` holding ``layer`` inside
            ``forward_func`` (when it is a Module) to skip the lower layers;
            a container can be given for wrapped forward functions; ``False``
            always uses forward hooks.
        precision (str, optional): ``"float32"`` (default) or ``"bf16"``: the
            optimisation's forward and backward under bfloat16 autocast with
            eager attention (``alpha``, statistics, noise and capacity stay
            float32); see :mod:`captum_iba.attr._speed`.
        cuts (bool, optional): The exact cuts (frozen weights, embeddings
            once, the last layer's [CLS] row when the head reads only it,
            rows chunked per pass), each checked against or equal to the full
            computation. Default True.

    Examples::

        >>> model = AutoModelForSequenceClassification.from_pretrained(path).eval()
        >>> iba = InformationBottleneckAttribution(model, model.bert.encoder.layer[8])
        >>> attr = iba.attribute(input_ids, target=labels,
        ...                      additional_forward_args=(attention_mask,))
        >>> attr.shape            # (B, L, H), capacity in nats
        >>> token_scores = attr.sum(-1)
    """

    def __init__(
        self,
        forward_func: Callable[..., Any],
        layer: ModuleOrModuleList,
        device_ids: Union[None, List[int]] = None,
        layer_stack: Union[bool, Module] = True,
        precision: str = "float32",
        cuts: bool = True,
    ) -> None:
        if precision not in _speed.PRECISIONS:
            raise ValueError(f"precision must be one of {_speed.PRECISIONS}.")
        self.precision, self.cuts = precision, bool(cuts)
        LayerAttribution.__init__(self, forward_func, layer, device_ids)
        GradientAttribution.__init__(self, forward_func)
        layers = layer if isinstance(layer, list) else [layer]
        if not layers or not all(isinstance(m, Module) for m in layers):
            raise TypeError("layer must be a torch.nn.Module or a list of them.")
        self._layers: List[Module] = layers
        self.layer_stack = layer_stack
        #: Diagnostics of the last ``attribute`` call (per layer): the path
        #: used ("stack" or "hooks"), whether the exact cuts of the stack
        #: path were used, beta, final task loss and mean capacity.
        self.last_run: List[Dict[str, Any]] = []

    @property
    def multiplies_by_inputs(self) -> bool:
        return False

    def has_convergence_delta(self) -> bool:
        return False

    @log_usage()
    def attribute(
        self,
        inputs: Union[Tensor, Tuple[Tensor, ...]],
        target: TargetType = None,
        additional_forward_args: Optional[object] = None,
        beta: BetaType = 1e-5,
        steps: int = 10,
        n_samples: int = 10,
        lr: float = 1.0,
        init_alpha: float = 5.0,
        prior: PriorLike = "paper",
        token_mask: Optional[Tensor] = None,
        seed: Optional[int] = None,
        internal_batch_size: Optional[int] = None,
        show_progress: bool = False,
    ) -> Union[Tensor, List[Tensor]]:
        r"""Optimise one bottleneck per instance and return its capacity.

        Args:
            inputs (Tensor or tuple[Tensor, ...]): Inputs of ``forward_func``;
                dim 0 is the batch (e.g. ``input_ids`` of shape (B, L)).
            target (int, tuple, Tensor, list, optional): Captum's
                ``TargetType``: the output index (class) whose cross-entropy
                the bottleneck keeps low - one for all instances or one per
                instance. ``None`` explains the predicted class.
            additional_forward_args (Any, optional): Further positional
                arguments of ``forward_func`` after ``inputs`` (e.g. the
                attention mask); tensors are repeated with the noise copies.
            beta (float or "auto", optional): Weight of the information term
                (Eq. 5), >= 0. ``"auto"`` sets it per instance to
                10 x L_CE / L_IB at the start (Appendix A), L_IB being the
                instance's total capacity. Default: 1e-5 (the
                paper's value for BERT-base).
            steps (int, optional): Adam steps. Default: 10.
            n_samples (int, optional): Noise copies per instance and step.
                Default: 10.
            lr (float, optional): Adam learning rate. Default: 1.
            init_alpha (float, optional): Initial :math:`\alpha`
                (:math:`\lambda = \sigma(5) = 0.993`). Default: 5.
            prior (str or NoisePrior, optional): ``"paper"`` (statistics of the
                instance's own layer output), ``"reference"`` (the released
                code's prior) or a fitted :class:`~captum_iba.DatasetPrior`.
                Default: ``"paper"``.
            token_mask (Tensor, optional): (B, L) with 1 at real tokens and 0
                at padding. Padding gets zero capacity and takes no part in
                the loss or the statistics. When omitted, the argument passed
                in the ``attention_mask`` position of ``forward_func`` is used
                (Hugging Face models, or functions with such a parameter);
                otherwise every position counts.
            seed (int, optional): Seed of the noise. Every instance draws its
                own noise from it, so a result does not depend on the rest of
                the batch or on padding. ``None`` draws the seed from torch's
                global generator.
            internal_batch_size (int, optional): Maximum rows (instances x
                ``n_samples``) per forward pass, to bound memory; at least
                ``n_samples``. Default: the whole batch at once.
            show_progress (bool, optional): Show a tqdm progress bar over
                instance chunks. Default: False.

        Returns:
            Tensor or list[Tensor]: The capacity per element of the (first
            tensor of the) layer output, shape (B, L, H) for a transformer
            layer, in nats, zero at padding; a list when ``layer`` is a list.
            Reduce to tokens with ``attr.sum(-1)`` or
            :func:`captum_iba.token_attributions`.
        """
        inputs_t = _format_tensor_into_tuples(inputs)
        extra = _format_additional_forward_args(additional_forward_args) or ()
        batch, _ = check_batch(inputs_t, extra)
        options = IBAOptions(
            beta=beta,
            steps=steps,
            n_samples=n_samples,
            lr=lr,
            init_alpha=init_alpha,
            prior=prior,
            seed=seed,
            internal_batch_size=internal_batch_size,
        )
        target_t = format_target(target, batch)
        mask_explicit = token_mask is not None
        if token_mask is None:
            token_mask = infer_token_mask(self.forward_func, (*inputs_t, *extra))
        check_token_mask(token_mask, batch)
        run_seed = (
            int(torch.randint(0, 2**31 - 1, (1,)).item()) if seed is None else seed
        )
        per_chunk = options.instances_per_chunk(batch)
        if self.cuts and internal_batch_size is None:
            per_chunk = _speed.instances_per_chunk(batch, n_samples, inputs_t[0])
        chunks: List[List[Tensor]] = []
        self.last_run = [{} for _ in self._layers]
        starts = range(0, batch, per_chunk)
        frozen = _speed.frozen_parameters(self.forward_func if self.cuts else None)
        with (
            torch.enable_grad(),
            evaluation_mode(self.forward_func, self._layers),
            frozen,
        ):
            for start in tqdm(starts, disable=not show_progress, desc="IBA"):
                rows = slice(start, start + per_chunk)
                chunks.append(
                    self._attribute_chunk(
                        tuple(t[rows] for t in inputs_t),
                        tuple(slice_rows(a, rows, batch) for a in extra),
                        None if target_t is None else target_t[rows],
                        None if token_mask is None else token_mask[rows],
                        (options, run_seed, mask_explicit),
                    )
                )
        results = [torch.cat(parts) for parts in zip(*chunks)]
        return results if isinstance(self.layer, list) else results[0]

    # ------------------------------------------------------------------ #
    def _attribute_chunk(
        self,
        inputs: Tuple[Tensor, ...],
        extra: Tuple[Any, ...],
        target: Optional[Tensor],
        token_mask: Optional[Tensor],
        run: Tuple[IBAOptions, int, bool],
    ) -> List[Tensor]:
        options, seed, mask_explicit = run
        with torch.no_grad(), recorded(self._layers) as records:
            clean = logits_of(_run_forward(self.forward_func, inputs, None, extra))
        targets = self._targets(target, clean)
        n = options.n_samples
        rows = (
            tuple(t.repeat_interleave(n, dim=0) for t in inputs),
            _expand_additional_forward_args(extra, n, ExpansionTypes.repeat_interleave),
        )
        results = []
        for k, layer in enumerate(self._layers):
            x, x_in, template = self._layer_output(layer, records[layer])
            mask = self._resolve_mask(token_mask, x, mask_explicit)
            x_f = x.detach().float()
            in_f = None if x_in is None else x_in.detach().float()
            mean, std = options.prior.statistics(x_f, in_f, mask)
            path, substitute = self._substitution(
                layer, template, x, clean, (inputs, extra)
            )
            attr, info = self._optimise_layer(
                _loop.Layer(x_f, mean, std, mask),
                substitute,
                rows,
                (targets, options, seed, x.dtype),
            )
            cuts = getattr(substitute, "cuts", False)
            self.last_run[k] = dict(
                info, path=path, cuts=cuts, prior=options.prior.name
            )
            results.append(attr.to(x.device))
        return results

    def _optimise_layer(
        self,
        state: "_loop.Layer",
        substitute: Callable[[Callable[[], Tensor]], ContextManager[None]],
        rows: Tuple[Tuple[Tensor, ...], Any],
        run: Tuple[Tensor, IBAOptions, int, torch.dtype],
    ) -> Tuple[Tensor, Dict[str, Any]]:
        """Run :func:`_loop.optimise` with ``T`` substituted for the layer."""
        current: Dict[str, Tensor] = {}

        def forward(t: Tensor) -> Tensor:
            current["T"] = t
            return logits_of(_run_forward(self.forward_func, rows[0], None, rows[1]))

        precision = _speed.precision_context(
            self.forward_func, self.precision, state.x.device
        )
        try:
            with substitute(lambda: current["T"]), precision:
                return _loop.optimise(state, forward, *run)
        finally:
            current.clear()

    @staticmethod
    def _targets(target: Optional[Tensor], clean: Tensor) -> Tensor:
        if target is None:
            if clean.dim() != 2:
                raise ValueError(
                    "target=None explains the predicted class and needs (B, C) "
                    f"scores; the forward returned shape {tuple(clean.shape)}: pass "
                    "a target."
                )
            return clean.argmax(dim=1).cpu()
        check_target_range(target, clean.shape)
        return target

    def _layer_output(
        self, layer: Module, record: LayerRecord
    ) -> Tuple[Tensor, Optional[Tensor], Any]:
        """The bottlenecked tensor, the layer's input and an output template."""
        name = self._layer_name(layer)
        if record.calls == 0:
            raise RuntimeError(
                f"{name} was not run by forward_func, so no bottleneck can be "
                "inserted after it."
            )
        if record.calls > len(record.outputs):  # one call per replica under DP
            raise RuntimeError(
                f"{name} ran {record.calls} times in one forward pass (shared or "
                "tied module?); a bottleneck needs a layer that runs once."
            )
        x, x_in = record.gathered(self._device_ids())
        if not torch.isfinite(x).all():
            raise FloatingPointError(f"{name} produced non-finite activations.")
        return x, x_in, next(iter(record.outputs.values()))

    def _device_ids(self) -> Optional[List[int]]:
        """``device_ids``, or those of a ``DataParallel`` forward_func."""
        return self.device_ids or getattr(self.forward_func, "device_ids", None)

    def _layer_name(self, layer: Module) -> str:
        if isinstance(self.forward_func, Module):
            for name, module in self.forward_func.named_modules():
                if module is layer:
                    return f"layer '{name}'"
        return f"layer {type(layer).__name__}"

    @staticmethod
    def _resolve_mask(
        token_mask: Optional[Tensor], x: Tensor, explicit: bool
    ) -> Tensor:
        """(B, L) bool mask over the layer output's token axis."""
        full = torch.ones(x.shape[:2] if x.dim() >= 3 else x.shape[:1], device=x.device)
        if token_mask is None:
            return full.bool()
        if x.dim() >= 3 and tuple(token_mask.shape) == tuple(x.shape[:2]):
            return token_mask.to(x.device).bool()
        if explicit:
            raise ValueError(
                f"token_mask has shape {tuple(token_mask.shape)} but the layer output "
                f"has shape {tuple(x.shape)}: expected (B, L) = {tuple(x.shape[:2])}."
            )
        return full.bool()  # inferred mask does not fit this layer: ignore it

    def _stack_for(self, layer: Module) -> Optional[Tuple[Module, int]]:
        if self.layer_stack is False or self.device_ids is not None:
            return None
        if isinstance(self.layer_stack, Module):
            found = find_in_stack(self.layer_stack, layer)
            if found is None:
                raise ValueError("layer_stack does not contain the layer.")
            return found
        if isinstance(self.forward_func, Module) and not hasattr(
            self.forward_func, "device_ids"
        ):
            return find_in_stack(self.forward_func, layer)
        return None

    def _substitution(
        self,
        layer: Module,
        template: Any,
        x: Tensor,
        clean: Tensor,
        call: Tuple[Tuple[Tensor, ...], Tuple[Any, ...]],
    ) -> Tuple[str, Callable[[Callable[[], Tensor]], ContextManager[None]]]:
        """How ``T`` replaces the layer's output: the stack replay when it
        reproduces the model's output on the clean input, else a hook."""
        stack = self._stack_for(layer)
        if stack is not None:
            for cut in (True, False) if self.cuts else (False,):
                replay = _speed.stack_replay(self.forward_func, stack, template, cut)
                with torch.no_grad(), replay(lambda: x):
                    out = logits_of(
                        _run_forward(self.forward_func, call[0], None, call[1])
                    )
                tol = 1e-4 if x.dtype == torch.float32 else 2e-2
                scale = clean.abs().max().clamp_min(1.0)
                if torch.allclose(out, clean, rtol=tol, atol=tol * scale):
                    return "stack", replay
            warnings.warn(
                f"{self._layer_name(layer)}: re-running only the layers above the "
                "bottleneck did not reproduce the model output; using forward hooks "
                "(slower) instead.",
                stacklevel=5,
            )
        device_ids = self._device_ids()
        return "hooks", lambda value: replaced_by_hook(
            layer, lambda out: scatter_for(value(), out, device_ids)
        )
