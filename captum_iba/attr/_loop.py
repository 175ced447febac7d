"""The per-instance optimisation of one bottleneck, batched (Section 3, Eq. 5).

:func:`optimise` runs Adam (or :func:`normalized_step`) on ``alpha`` for
every instance of a batch at once:
each instance has its own ``alpha``, its own loss term and its own noise
generator, so that its result does not depend on the rest of the batch. The
forward pass itself is given as a function: the caller decides how the
bottleneck output ``T`` replaces the layer's output (hooks or the stack replay).
"""

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch import Tensor

from captum_iba.attr import bottleneck as ib
from captum_iba.attr.objectives import Objective


@dataclass
class Layer:
    """What the loop needs to know of the bottlenecked layer's output.

    Attributes:
        x (Tensor): The layer output :math:`X`, float32, ``(B, L, ...)`` or
            ``(B, ...)``.
        mean (Tensor): :math:`\\mu` of the prior, broadcastable to ``x``.
        std (Tensor): :math:`\\sigma` of the prior, broadcastable to ``x``.
        mask (Tensor): ``(B, L)`` (or ``(B,)``) bool, True at real tokens.
    """

    x: Tensor
    mean: Tensor
    std: Tensor
    mask: Tensor

    @property
    def mask_f(self) -> Tensor:
        """The mask as float, broadcastable to ``x``."""
        m = self.mask.to(self.x.dtype)
        return m.reshape(m.shape + (1,) * (self.x.dim() - m.dim()))

    def capacity(self, alpha: Tensor) -> Tensor:
        """Eqs. (3)-(4) per element, zero at padding."""
        return ib.capacity(self.x, alpha, self.mean, self.std) * self.mask_f


def generators(seed: int, batch: int, device: torch.device) -> List[torch.Generator]:
    """One generator per instance, all seeded alike: noise is batch-independent."""
    gens = []
    for _ in range(batch):
        g = torch.Generator(device=device)
        g.manual_seed(seed)
        gens.append(g)
    return gens


def draw_noise(gens: List[torch.Generator], n: int, mask: Tensor, x: Tensor) -> Tensor:
    """Standard normal noise ``(B * n, ...)`` drawn only at each instance's real
    tokens, in order, so that padding does not change the draws."""
    noise = torch.zeros((x.shape[0], n) + tuple(x.shape[1:]), device=x.device)
    for i, g in enumerate(gens):
        if x.dim() >= 3:
            real = mask[i]
            shape = (n, int(real.sum())) + tuple(x.shape[2:])
            noise[i][:, real] = torch.randn(shape, generator=g, device=x.device)
        else:
            shape = (n,) + tuple(x.shape[1:])
            noise[i] = torch.randn(shape, generator=g, device=x.device)
    return noise.reshape((-1,) + tuple(x.shape[1:]))


def repeat_rows(stat: Tensor, x: Tensor, n: int) -> Tensor:
    """Per-instance statistics ``(B, ...)`` repeated for the ``n`` noise copies;
    statistics shared by all instances broadcast as they are."""
    if stat.dim() == x.dim() and stat.shape[0] == x.shape[0]:
        return stat.repeat_interleave(n, dim=0)
    return stat


@dataclass(frozen=True)
class Task:
    """What the bottleneck keeps: the objective and the per-instance targets.

    Attributes:
        objective (Objective): The concrete task loss.
        targets (Tensor or None): ``(B,)`` or ``(B, d)`` target indices, or
            None when the output is one score per instance.
    """

    objective: Objective
    targets: Optional[Tensor]


def row_targets(targets: Optional[Tensor], n: int) -> Optional[Tensor]:
    """Targets of the ``B * n`` rows (None stays None)."""
    return None if targets is None else targets.repeat_interleave(n, dim=0)


def task_loss(
    objective: Objective,
    output: Tensor,
    rows_target: Optional[Tensor],
    batch: int,
    n: int,
) -> Tensor:
    """:math:`\\mathcal{L}_{task}` per instance: the objective's loss (e.g. the
    cross-entropy of the target), averaged over the instance's noise copies."""
    return objective.loss(output, rows_target).reshape(batch, n).mean(1)


def normalized_step(alpha: Tensor, grad: Tensor, lr: float) -> None:
    r"""One step of normalised gradient descent, per instance, in place:
    :math:`\alpha \leftarrow \alpha - \eta\, g / \max_j |g_j|`, the maximum
    taken over the instance's elements (so every instance moves by at most
    ``lr`` per element and step, whatever the scale of its loss)."""
    scale = grad.abs().reshape(grad.shape[0], -1).amax(dim=1).clamp_min(1e-30)
    with torch.no_grad():
        alpha -= lr * grad / scale.reshape((-1,) + (1,) * (grad.dim() - 1))


def optimise(
    layer: Layer,
    forward: Callable[[Tensor], Tensor],
    task: Task,
    options: Any,
    seed: int,
    out_dtype: torch.dtype,
    init: Optional[Tensor] = None,
) -> Tuple[Tensor, Dict[str, Any]]:
    r"""Optimise ``alpha`` per instance and return the final capacity.

    Args:
        layer (Layer): The layer output, the prior's statistics and the mask.
        forward (Callable): Runs the model with the given bottleneck output
            ``T`` (``(B * n, ...)``) in place of the layer's output and
            returns the scores.
        task (Task): The objective and the targets.
        options (IBAOptions): ``beta``, ``steps``, ``n_samples``, ``lr``,
            ``init_alpha``.
        seed (int): Seed of every instance's noise generator.
        out_dtype (torch.dtype): The layer's own dtype (``T`` is cast to it).
        init (Tensor, optional): Initial ``alpha`` (broadcastable to ``x``,
            e.g. an amortized explainer's), instead of ``options.init_alpha``
            everywhere.

    Returns:
        (attribution, info): Per element, zero at padding: the final capacity
        in nats (``options.readout == "capacity"``) or the signal weight
        :math:`\lambda` averaged over the steps (``"mask_mean"``); and the
        diagnostics (beta, final task loss and mean capacity).
    """
    x, n = layer.x, options.n_samples
    batch = x.shape[0]
    per_instance = layer.mask_f.expand_as(x).reshape(batch, -1).sum(dim=1)
    rows_target = row_targets(task.targets, n)
    gens = generators(seed, batch, x.device)
    if init is None:
        alpha = torch.full_like(x, options.init_alpha, requires_grad=True)
    else:
        alpha = init.detach().float().expand_as(x).clone().requires_grad_(True)
    adam = options.optimizer == "adam"
    optimizer = torch.optim.Adam([alpha], lr=options.lr) if adam else None
    mask_sum = torch.zeros_like(x)
    beta: Any = options.beta
    loss_task = cap_mean = torch.zeros(batch)
    # Constant over the steps: X, the prior and the mask per noise copy.
    x_rows = x.repeat_interleave(n, dim=0)
    mean_rows, std_rows = repeat_rows(layer.mean, x, n), repeat_rows(layer.std, x, n)
    keep = layer.mask_f.repeat_interleave(n, dim=0)
    for step in range(options.steps):
        noise = draw_noise(gens, n, layer.mask, x)
        t = ib.inject_noise(
            x_rows, alpha.repeat_interleave(n, dim=0), mean_rows, std_rows, noise
        )
        t = keep * t + (1 - keep) * x_rows  # padding stays as the model computed it
        output = forward(t.to(out_dtype))
        loss_task = task_loss(task.objective, output, rows_target, batch, n)
        cap_total = layer.capacity(alpha).reshape(batch, -1).sum(dim=1)
        cap_mean = cap_total / per_instance
        if step == 0 and beta == "auto":
            beta = ib.empirical_beta(loss_task.abs(), cap_total)
        loss = ib.information_bottleneck_loss(loss_task, cap_mean, beta)
        _check_finite(loss, step)
        (grad,) = torch.autograd.grad(loss.sum(), alpha)
        if optimizer is None:
            normalized_step(alpha, grad, options.lr)
        else:
            optimizer.zero_grad(set_to_none=True)
            alpha.grad = grad
            optimizer.step()
        mask_sum += ib.bottleneck_lambda(alpha.detach())
    with torch.no_grad():
        if options.readout == "capacity":
            attr = layer.capacity(alpha)
        else:
            attr = mask_sum / options.steps * layer.mask_f
    info = {
        "beta": beta.detach().cpu() if isinstance(beta, Tensor) else beta,
        "task_loss": loss_task.detach().cpu(),
        "mean_capacity": cap_mean.detach().cpu(),
    }
    return attr, info


def _check_finite(loss: Tensor, step: int) -> None:
    if not torch.isfinite(loss).all():
        bad: Optional[List[int]] = (~torch.isfinite(loss)).nonzero().flatten().tolist()
        raise FloatingPointError(
            f"Non-finite IBA loss at step {step} for instance(s) {bad}."
        )
