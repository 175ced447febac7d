"""``InformationBottleneckAttribution``: IBA as a Captum layer attribution method.

The mathematics is in :mod:`captum_iba.bottleneck`, the noise priors in
:mod:`captum_iba.priors`, and the hooks that read and replace a layer's output
in :mod:`captum_iba._layers`. This module runs the per-instance optimisation
in batches and follows Captum's conventions for arguments and return values.
"""

import inspect
import warnings
from contextlib import contextmanager
from typing import (
    Any,
    Callable,
    Dict,
    Iterator,
    List,
    Literal,
    Optional,
    Sequence,
    Tuple,
    Union,
)

import torch
from captum.attr._utils.attribution import GradientAttribution, LayerAttribution
from captum.log import log_usage
from torch import Tensor
from torch.nn import Module
from tqdm.auto import tqdm

from captum_iba import bottleneck as ib
from captum_iba._captum_compat import (
    ExpansionTypes,
    ModuleOrModuleList,
    TargetType,
    _expand_additional_forward_args,
    _format_additional_forward_args,
    _format_tensor_into_tuples,
    _run_forward,
    _select_targets,
)
from captum_iba._layers import (
    find_in_stack,
    recorded,
    replaced_by_hook,
    replayed_in_stack,
)
from captum_iba._outputs import logits_of
from captum_iba.priors import NoisePrior, PriorLike, resolve_prior

BetaType = Union[float, Literal["auto"]]


def _forward_signature(forward_func: Callable[..., Any]) -> List[str]:
    fn = forward_func
    while isinstance(fn, Module) and hasattr(fn, "module"):  # DataParallel
        fn = fn.module
    try:
        params = inspect.signature(fn.forward if isinstance(fn, Module) else fn)
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in params.parameters.values() if p.kind in kinds]


def _infer_token_mask(
    forward_func: Callable[..., Any], args: Tuple[Any, ...]
) -> Optional[Tensor]:
    """The argument passed in the ``attention_mask`` position of the forward."""
    for name, value in zip(_forward_signature(forward_func), args):
        if name == "attention_mask" and isinstance(value, Tensor):
            return value
    return None


def _normalise_target(
    target: TargetType, logits: Tensor, batch_size: int
) -> List[Tuple[int, ...]]:
    """One index tuple per instance into ``logits[i]``; None = predicted class."""
    if target is None:
        if logits.dim() != 2:
            raise ValueError(
                "target=None explains the predicted class and needs (B, C) scores; "
                f"the forward returned shape {tuple(logits.shape)}: pass a target."
            )
        return [(int(c),) for c in logits.argmax(dim=1).tolist()]
    if isinstance(target, Tensor):
        if target.numel() == 1:
            target = int(target.item())
        elif target.dim() == 1:
            target = [int(t) for t in target.tolist()]
        else:
            raise ValueError(
                f"A Tensor target must be a scalar or 1-D, got {tuple(target.shape)}."
            )
    if isinstance(target, int):
        per = [(target,)] * batch_size
    elif isinstance(target, tuple):
        per = [tuple(int(t) for t in target)] * batch_size
    elif isinstance(target, list):
        if len(target) != batch_size:
            raise ValueError(
                f"target has {len(target)} entries but inputs have {batch_size} "
                "instances."
            )
        per = [(int(t),) if not isinstance(t, tuple) else tuple(t) for t in target]
    else:
        raise TypeError(f"Unsupported target type {type(target).__name__}.")
    shape = tuple(logits.shape[1:])
    for i, idx in enumerate(per):
        if len(idx) != len(shape) or any(not (0 <= t < n) for t, n in zip(idx, shape)):
            raise ValueError(
                f"target {idx if len(idx) > 1 else idx[0]} for instance {i} is out "
                f"of range for forward output of shape {tuple(logits.shape)}."
            )
    return per


@contextmanager
def _evaluation_mode(
    forward_func: Callable[..., Any], layers: Sequence[Module]
) -> Iterator[None]:
    """Run with dropout off; put every ``training`` flag back afterwards."""
    if not isinstance(forward_func, Module):
        if any(layer.training for layer in layers):
            warnings.warn(
                "The layer is in training mode (dropout active) and forward_func is "
                "not a Module that could be switched to eval(): call model.eval() "
                "for deterministic attributions.",
                stacklevel=3,
            )
        yield
        return
    flags = [(m, m.training) for m in forward_func.modules()]
    forward_func.eval()
    try:
        yield
    finally:
        for module, flag in flags:
            module.training = flag


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
    ) -> None:
        LayerAttribution.__init__(self, forward_func, layer, device_ids)
        GradientAttribution.__init__(self, forward_func)
        layers = layer if isinstance(layer, list) else [layer]
        if not layers or not all(isinstance(m, Module) for m in layers):
            raise TypeError("layer must be a torch.nn.Module or a list of them.")
        self._layers: List[Module] = layers
        self.layer_stack = layer_stack
        #: Diagnostics of the last ``attribute`` call (per layer): the path
        #: used ("stack" or "hooks"), beta, final task loss and mean capacity.
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
        if not inputs_t or not all(isinstance(t, Tensor) for t in inputs_t):
            raise TypeError("inputs must be a Tensor or a tuple of Tensors.")
        batch = inputs_t[0].shape[0]
        extra = _format_additional_forward_args(additional_forward_args) or ()
        for name, group in (("inputs", inputs_t), ("additional_forward_args", extra)):
            for t in group:
                if isinstance(t, Tensor) and t.dim() > 0 and t.shape[0] != batch:
                    raise ValueError(
                        f"All {name} tensors must share the batch size {batch} of "
                        f"inputs[0]; got one of shape {tuple(t.shape)}."
                    )
        _check_int("steps", steps)
        _check_int("n_samples", n_samples)
        if beta != "auto" and not (isinstance(beta, (int, float)) and beta >= 0):
            raise ValueError(f"beta must be a float >= 0 or 'auto', got {beta!r}.")
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr}.")
        if internal_batch_size is not None and internal_batch_size < n_samples:
            raise ValueError(
                f"internal_batch_size ({internal_batch_size}) must be at least "
                f"n_samples ({n_samples}): one instance's noise copies run together."
            )
        _check_target_length(target, batch)
        noise_prior = resolve_prior(prior)
        mask_explicit = token_mask is not None
        if token_mask is None:
            token_mask = _infer_token_mask(self.forward_func, (*inputs_t, *extra))
        if token_mask is not None:
            if token_mask.dim() != 2 or token_mask.shape[0] != batch:
                raise ValueError(
                    f"token_mask must have shape (B, L) with B={batch}; got "
                    f"{tuple(token_mask.shape)}."
                )
            empty = (token_mask.sum(dim=1) == 0).nonzero().flatten().tolist()
            if empty:
                raise ValueError(
                    f"Instance(s) {empty} have no real token (all padding)."
                )
        if seed is None:
            seed = int(torch.randint(0, 2**31 - 1, (1,)).item())
        per_chunk = (
            batch
            if internal_batch_size is None
            else max(1, internal_batch_size // n_samples)
        )
        options = dict(
            beta=beta,
            steps=steps,
            n_samples=n_samples,
            lr=lr,
            init_alpha=float(init_alpha),
            prior=noise_prior,
            seed=seed,
            mask_explicit=mask_explicit,
        )

        chunks: List[List[Tensor]] = []
        self.last_run = [{} for _ in self._layers]
        starts = range(0, batch, per_chunk)
        with torch.enable_grad(), _evaluation_mode(self.forward_func, self._layers):
            for start in tqdm(starts, disable=not show_progress, desc="IBA"):
                rows = slice(start, start + per_chunk)
                chunks.append(
                    self._attribute_chunk(
                        tuple(t[rows] for t in inputs_t),
                        _slice_args(extra, rows, batch),
                        _slice_target(target, rows, batch),
                        None if token_mask is None else token_mask[rows],
                        options,
                    )
                )
        results = [torch.cat(parts) for parts in zip(*chunks)]
        return results if isinstance(self.layer, list) else results[0]

    # ------------------------------------------------------------------ #
    def _attribute_chunk(
        self,
        inputs: Tuple[Tensor, ...],
        extra: Tuple[Any, ...],
        target: TargetType,
        token_mask: Optional[Tensor],
        options: Dict[str, Any],
    ) -> List[Tensor]:
        batch = inputs[0].shape[0]
        with torch.no_grad(), recorded(self._layers) as records:
            clean = logits_of(_run_forward(self.forward_func, inputs, None, extra))
        targets = _normalise_target(target, clean, batch)
        results = []
        for k, layer in enumerate(self._layers):
            name = self._layer_name(layer)
            record = records[layer]
            if record.calls == 0:
                raise RuntimeError(
                    f"{name} was not run by forward_func, so no bottleneck can be "
                    "inserted after it."
                )
            expected = len(record.outputs)  # one call per replica under DataParallel
            if record.calls > expected:
                raise RuntimeError(
                    f"{name} ran {record.calls} times in one forward pass (shared or "
                    "tied module?); a bottleneck needs a layer that runs once."
                )
            x, x_in = record.gathered(self._device_ids())
            if not torch.isfinite(x).all():
                raise FloatingPointError(f"{name} produced non-finite activations.")
            template = next(iter(record.outputs.values()))
            mask = self._resolve_mask(token_mask, x, options["mask_explicit"])
            attr, info = self._optimise(
                layer, inputs, extra, targets, x, x_in, mask, template, clean, options
            )
            self.last_run[k] = info
            results.append(attr)
        return results

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

    def _optimise(
        self,
        layer: Module,
        inputs: Tuple[Tensor, ...],
        extra: Tuple[Any, ...],
        targets: List[Tuple[int, ...]],
        x_raw: Tensor,
        x_in: Optional[Tensor],
        mask: Tensor,
        template: Any,
        clean: Tensor,
        options: Dict[str, Any],
    ) -> Tuple[Tensor, Dict[str, Any]]:
        n = options["n_samples"]
        prior: NoisePrior = options["prior"]
        batch = x_raw.shape[0]
        x = x_raw.detach().float()
        mean, std = prior.statistics(
            x, None if x_in is None else x_in.detach().float(), mask
        )
        mask_f = mask.to(x.dtype).reshape(mask.shape + (1,) * (x.dim() - mask.dim()))
        per_instance = mask_f.expand_as(x).reshape(batch, -1).sum(dim=1)

        # The substitution: the bottleneck output for the current forward.
        current: Dict[str, Tensor] = {}
        stack = self._stack_for(layer)
        path = "hooks"
        if stack is not None:
            current["T"] = x_raw
            with (
                torch.no_grad(),
                replayed_in_stack(stack[0], stack[1], template, lambda: current["T"]),
            ):
                replay = logits_of(_run_forward(self.forward_func, inputs, None, extra))
            tol = 1e-4 if x_raw.dtype == torch.float32 else 2e-2
            scale = clean.abs().max().clamp_min(1.0)
            if torch.allclose(replay, clean, rtol=tol, atol=tol * scale):
                path = "stack"
            else:
                warnings.warn(
                    f"{self._layer_name(layer)}: re-running only the layers above "
                    "the bottleneck did not reproduce the model output; using "
                    "forward hooks (slower) instead.",
                    stacklevel=4,
                )

        rows_inputs = tuple(t.repeat_interleave(n, dim=0) for t in inputs)
        rows_extra = _expand_additional_forward_args(
            extra, n, ExpansionTypes.repeat_interleave
        )
        flat = torch.tensor(
            [t[0] for t in targets for _ in range(n)], device=clean.device
        )
        rows_target: TargetType = (
            flat
            if clean.dim() == 2
            else [t for t in targets for _ in range(n)]  # tuple targets
        )
        generators = _generators(options["seed"], batch, x.device)

        alpha = torch.full_like(x, options["init_alpha"], requires_grad=True)
        optimizer = torch.optim.Adam([alpha], lr=options["lr"])
        beta: Any = options["beta"]
        task = cap_mean = torch.zeros(batch)

        def replacement(out: Tensor) -> Tensor:
            return _scatter_for(current["T"], out, self._device_ids())

        ctx = (
            replayed_in_stack(stack[0], stack[1], template, lambda: current["T"])
            if path == "stack" and stack is not None
            else replaced_by_hook(layer, replacement)
        )
        with ctx:
            # Constant over the steps: X, the prior and the mask per noise copy.
            x_rows = x.repeat_interleave(n, dim=0)
            mean_rows, std_rows = _rows(mean, x, n), _rows(std, x, n)
            keep = mask_f.repeat_interleave(n, dim=0)
            for step in range(options["steps"]):
                noise = _draw_noise(generators, n, mask, x)
                t = ib.inject_noise(
                    x_rows,
                    alpha.repeat_interleave(n, dim=0),
                    mean_rows,
                    std_rows,
                    noise,
                )
                # Padding stays exactly as the model computed it.
                t = keep * t + (1 - keep) * x_rows
                current["T"] = t.to(x_raw.dtype)
                out = logits_of(
                    _run_forward(self.forward_func, rows_inputs, None, rows_extra)
                )
                logp = torch.log_softmax(out.float(), dim=-1)
                task = -_select_targets(logp, rows_target).reshape(batch, n).mean(1)
                cap = ib.capacity(x, alpha, mean, std) * mask_f
                cap_total = cap.reshape(batch, -1).sum(dim=1)
                cap_mean = cap_total / per_instance
                if step == 0 and beta == "auto":
                    beta = ib.empirical_beta(task, cap_total)
                loss = ib.information_bottleneck_loss(task, cap_mean, beta)
                if not torch.isfinite(loss).all():
                    raise FloatingPointError(
                        f"Non-finite IBA loss at step {step} for instance(s) "
                        f"{(~torch.isfinite(loss)).nonzero().flatten().tolist()}."
                    )
                (grad,) = torch.autograd.grad(loss.sum(), alpha)
                optimizer.zero_grad(set_to_none=True)
                alpha.grad = grad
                optimizer.step()
            current.clear()
        with torch.no_grad():
            attr = ib.capacity(x, alpha, mean, std) * mask_f
        info = {
            "path": path,
            "prior": prior.name,
            "beta": beta.detach().cpu() if isinstance(beta, Tensor) else beta,
            "task_loss": task.detach().cpu(),
            "mean_capacity": cap_mean.detach().cpu(),
        }
        return attr.to(x_raw.device), info


def _check_int(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}.")


def _check_target_length(target: TargetType, batch: int) -> None:
    if isinstance(target, Tensor) and target.numel() > 1 and target.dim() == 1:
        n = target.numel()
    elif isinstance(target, list):
        n = len(target)
    else:
        return
    if n != batch:
        raise ValueError(f"target has {n} entries but inputs have {batch} instances.")


def _slice_args(extra: Tuple[Any, ...], rows: slice, batch: int) -> Tuple[Any, ...]:
    return tuple(
        a[rows] if isinstance(a, Tensor) and a.dim() > 0 and a.shape[0] == batch else a
        for a in extra
    )


def _slice_target(target: TargetType, rows: slice, batch: int) -> TargetType:
    if isinstance(target, list):
        return target[rows]
    if isinstance(target, Tensor) and target.numel() > 1:
        return target[rows]
    return target


def _rows(stat: Tensor, x: Tensor, n: int) -> Tensor:
    """Repeat per-instance statistics (B, ...) for the n noise copies of each."""
    if stat.dim() == x.dim() and stat.shape[0] == x.shape[0]:
        return stat.repeat_interleave(n, dim=0)
    return stat  # shared by all instances: broadcasts as it is


def _generators(seed: int, batch: int, device: torch.device) -> List[torch.Generator]:
    """One generator per instance, all seeded alike: noise is batch-independent."""
    gens = []
    for _ in range(batch):
        g = torch.Generator(device=device)
        g.manual_seed(seed)
        gens.append(g)
    return gens


def _draw_noise(
    generators: List[torch.Generator], n: int, mask: Tensor, x: Tensor
) -> Tensor:
    """Standard normal noise (B*n, L, ...) drawn only at each instance's real
    tokens, in order, so that padding does not change the draws."""
    noise = torch.zeros((x.shape[0], n) + tuple(x.shape[1:]), device=x.device)
    for i, g in enumerate(generators):
        if x.dim() >= 3:
            real = mask[i]
            draw = torch.randn(
                (n, int(real.sum())) + tuple(x.shape[2:]),
                generator=g,
                device=x.device,
            )
            noise[i][:, real] = draw
        else:
            noise[i] = torch.randn(
                (n,) + tuple(x.shape[1:]), generator=g, device=x.device
            )
    return noise.reshape((-1,) + tuple(x.shape[1:]))


def _scatter_for(value: Tensor, out: Tensor, device_ids: Optional[List[int]]) -> Tensor:
    """The rows of ``value`` that the replica on ``out.device`` computes."""
    if value.shape[0] == out.shape[0]:
        return value.to(out.device)
    if device_ids is None:
        raise RuntimeError(
            "The layer saw a partial batch (DataParallel?) but no device_ids were "
            "given; pass device_ids to InformationBottleneckAttribution."
        )
    from torch.nn.parallel.scatter_gather import scatter

    for chunk in scatter(value, device_ids):
        if chunk.device == out.device:
            return chunk
    raise RuntimeError(f"No chunk of the bottleneck output for device {out.device}.")
