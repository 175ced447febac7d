"""The per-instance optimisation of one bottleneck, batched (Section 3, Eq. 5).

:func:`optimise` is the whole loop, on one screen: per step, the bottleneck
output ``T`` (or the attention weights ``keep``) from ``alpha``, the model run
through the seam (:class:`~captum_iba.attr._seam.Seam`), the task loss, the
capacity, Eq. (5) (plus the complement term R3), the gradient and the step;
then the readout. Every instance has its own ``alpha``, its own loss term and
its own noise generator, so that its result does not depend on the rest of
the batch. How ``T`` takes the layer's place (hooks or the stack replay) is
the seam's business, not the loop's.
"""

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Protocol, Tuple, Union

import torch
from torch import Tensor

from captum_iba.attr import bottleneck as ib
from captum_iba.attr._tokens import tie_groups
from captum_iba.attr.objectives import Objective

#: Which rows a pass takes: a slice of them, or their indices (repeats allowed).
RowSelection = Union[slice, Tensor]


class Bottlenecked(Protocol):
    """What the loop runs: the model with ``T`` in the layer's place (a
    :class:`~captum_iba.attr._seam.Seam`)."""

    def run(
        self,
        t: Tensor,
        keep: Optional[Tensor] = None,
        rows: Optional[RowSelection] = None,
    ) -> Tensor:
        """The scores of the ``B * n`` rows (or of the slice or indices
        ``rows`` of them) with ``t`` in the layer's place and, when
        ``keep`` (one row per row run, ``(rows, L)``) is given, every layer
        above it reading token ``t`` with weight ``keep[:, t]`` (Eq. R2)."""
        ...


@dataclass
class Layer:
    """What the loop needs to know of the bottlenecked layer's output.

    Attributes:
        x (Tensor): The layer output :math:`X`, float32, ``(B, L, ...)`` or
            ``(B, ...)``.
        mean (Tensor): :math:`\\mu` of the prior, broadcastable to ``x``.
        std (Tensor): :math:`\\sigma` of the prior, broadcastable to ``x``.
        mask (Tensor): ``(B, L)`` (or ``(B,)``) bool, True at real tokens.
        removable (Tensor, optional): ``(B, L)`` bool, True at the tokens
            ``removal="attention"`` may remove (real and not special);
            None: every real token.
        groups (Tensor, optional): ``(B, L)`` long: tokens of one group (a
            value >= 0) share one mask weight (the ``feature_mask`` of
            :meth:`~captum_iba.attr.iba.InformationBottleneckAttribution.attribute`:
            a source of a context); -1 or None: a weight of its own.
    """

    x: Tensor
    mean: Tensor
    std: Tensor
    mask: Tensor
    removable: Optional[Tensor] = None
    groups: Optional[Tensor] = None

    @classmethod
    def from_prior(
        cls,
        prior: Any,
        x: Tensor,
        mask: Tensor,
        layer_input: Optional[Tensor] = None,
        baseline: Optional[Tensor] = None,
        removable: Optional[Tensor] = None,
    ) -> "Layer":
        """The layer output (as float32) with the noise statistics of ``prior``.

        Args:
            prior (NoisePrior): The prior plug-in.
            x (Tensor): The layer output, any dtype.
            mask (Tensor): ``(B, L)`` bool, True at real tokens.
            layer_input (Tensor, optional): The layer's input (for priors that
                ``needs_layer_input``).
            baseline (Tensor, optional): The layer's output on the prior's
                baselines (for priors that ``needs_baseline``).
            removable (Tensor, optional): As the attribute.
        """
        x_f = x.detach().float()
        in_f = None if layer_input is None else layer_input.detach().float()
        known = {} if baseline is None else {"baseline": baseline.detach().float()}
        mean, std = prior.statistics(x_f, in_f, mask, **known)
        return cls(x_f, mean, std, mask, removable)

    @property
    def removable_mask(self) -> Tensor:
        """``removable``, or ``mask`` when none was given."""
        return self.mask if self.removable is None else self.removable & self.mask

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


class Rows:
    r"""The ``B * n`` rows of the noise copies: :math:`X`, the prior and the
    masks repeated once (they are constant over the steps), and what ``alpha``
    makes of them.

    Args:
        layer (Layer): The layer output, the prior's statistics and the masks.
        n (int): Noise copies per instance.
        removal (str, optional): ``"noise"`` (Eq. 2) or ``"attention"``
            (Eqs. R1-R2), for :meth:`bottleneck`.
        gens (list of torch.Generator, optional): One noise generator per
            instance, for :meth:`bottleneck` with ``removal="noise"``.
    """

    def __init__(
        self,
        layer: Layer,
        n: int,
        removal: str = "noise",
        gens: Optional[List[torch.Generator]] = None,
    ) -> None:
        x = layer.x
        self.layer, self.n, self.removal, self.gens = layer, n, removal, gens
        self.x = x.repeat_interleave(n, dim=0)
        self.mean = repeat_rows(layer.mean, x, n)
        self.std = repeat_rows(layer.std, x, n)
        self.real = layer.mask_f.repeat_interleave(n, dim=0)
        if removal == "attention":
            if x.dim() < 3:
                raise ValueError(
                    "removal='attention' needs a (B, L, ...) layer output with a "
                    f"token axis; got shape {tuple(x.shape)}."
                )
            self.gate = layer.removable_mask.repeat_interleave(n, dim=0).to(x.dtype)

    def noisy(self, alpha: Tensor, noise: Tensor) -> Tensor:
        """Eq. (2) on every row with the standard normal draws ``noise``;
        padding keeps its computed value."""
        alpha_rows = alpha.repeat_interleave(self.n, dim=0)
        t = ib.inject_noise(self.x, alpha_rows, self.mean, self.std, noise)
        return self.real * t + (1 - self.real) * self.x

    def keep(self, alpha: Tensor) -> Tensor:
        r"""Eq. (R1) on every row: :math:`\bar\lambda_t` at the removable
        tokens, 1 where nothing is removed."""
        lam = ib.token_lambda(alpha.repeat_interleave(self.n, dim=0))
        return lam * self.gate + (1 - self.gate)

    def bottleneck(self, alpha: Tensor) -> Tuple[Tensor, Optional[Tensor]]:
        """``(T, keep)`` for ``alpha``: Eq. (2) with fresh noise and no
        ``keep`` (``removal="noise"``), or ``T = X`` and Eq. (R1)'s ``keep``
        (``"attention"``)."""
        if self.removal == "attention":
            return self.x, self.keep(alpha)
        if self.gens is None:
            raise ValueError("fresh noise needs one generator per instance (gens=).")
        noise = draw_noise(self.gens, self.n, self.layer.mask, self.layer.x)
        return self.noisy(alpha, noise), None


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
    seam: Bottlenecked,
    task: Task,
    options: Any,
    seed: int,
    init: Optional[Tensor] = None,
    rows_per_pass: Optional[int] = None,
    pair_terms: bool = False,
) -> Tuple[Tensor, Dict[str, Any]]:
    r"""Optimise ``alpha`` per instance and return the attribution.

    Args:
        layer (Layer): The layer output, the prior's statistics and the masks.
        seam (Bottlenecked): The model with ``T`` in the layer's place (a
            :class:`~captum_iba.attr._seam.Seam`, entered).
        task (Task): The objective and the targets.
        options (IBAOptions): ``beta``, ``steps``, ``n_samples``, ``lr``,
            ``init_alpha``, ``optimizer``, ``readout``, ``removal``,
            ``complement``, ``complement_skip``.
        seed (int): Seed of every instance's noise generator.
        init (Tensor, optional): Initial ``alpha`` (broadcastable to ``x``,
            e.g. an amortized explainer's), instead of ``options.init_alpha``
            everywhere.
        rows_per_pass (int, optional): The most rows (of the ``B * n`` noise
            copies) one forward and backward pass takes; each step runs the
            rows in passes of that many and adds their gradients (memory
            bounded by one pass; the same gradient). None: all in one pass.
        pair_terms (bool): With ``removal="attention"`` and the complement
            term, run both terms in one pass when their rows fit in one
            (:func:`paired_gradient`), and at the first step from alpha = 0
            read both from one set of rows even when they do not
            (:func:`symmetric_start`); exact cuts: the same gradient up to
            rounding.

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
    rows = Rows(layer, n, options.removal, generators(seed, batch, x.device))
    alpha = initial_alpha(x, options, init)
    if layer.groups is not None:  # one weight per group: start from its mean
        with torch.no_grad():
            alpha.copy_(tie_groups(alpha, layer.groups, mean=True))
    adam = options.optimizer == "adam"
    optimizer = torch.optim.Adam([alpha], lr=options.lr) if adam else None
    mask_sum = torch.zeros_like(x)
    beta: Any = options.beta
    loss_task = cap_mean = torch.zeros(batch)
    passes = row_passes(batch * n, rows_per_pass)
    paired = pair_terms and options.removal == "attention" and bool(options.complement)
    paired = paired and (rows_per_pass is None or 2 * batch * n <= rows_per_pass)
    terms = torch.zeros(batch * n)
    last_complement = options.steps - options.complement_skip  # the last k without
    for step in range(options.steps):
        complement = options.complement if step < last_complement else 0.0
        # at alpha = 0 the mask's own rows give R3's gradient too (one set)
        same = bool(complement) and pair_terms and symmetric_start(alpha, options)
        if paired and complement and not same:  # Eqs. R1-R2 and R3 in one pass
            grad, losses, terms = paired_gradient(
                seam, rows, alpha, task, rows_target, n, options.complement
            )
        else:  # Eq. 2, or Eqs. R1-R2 (with R3 from the same rows at alpha = 0)
            grad, losses = task_gradient(
                seam, rows.bottleneck(alpha), task, rows_target, passes, alpha, n,
                both=complement if same else 0.0,
            )  # fmt: skip
        loss_task = losses.reshape(batch, n).mean(1)
        cap_total = layer.capacity(alpha).reshape(batch, -1).sum(dim=1)  # Eqs. 3-4
        cap_mean = cap_total / per_instance
        if step == 0 and beta == "auto":  # Appendix A
            beta = ib.empirical_beta(loss_task.abs(), cap_total)
        info_weight = 0.0 if options.removal == "attention" else beta
        loss = ib.information_bottleneck_loss(loss_task, cap_mean, info_weight)  # Eq. 5
        grad = grad + torch.autograd.grad(loss.sum(), alpha)[0]
        if same:  # Eq. R3's gradient is in grad already
            terms = ib.complement_term(losses, complement)
        elif complement and not paired:  # Eq. R3: the mask inverted
            more, terms = task_gradient(
                seam, rows.bottleneck(-alpha), task, rows_target, passes, alpha, n,
                complement,
            )  # fmt: skip
            grad = grad + more
        if complement:
            loss = loss + terms.reshape(batch, n).mean(1)
        _check_finite(loss, step)
        if layer.groups is not None:  # a shared weight's gradient: its tokens' sum
            grad = tie_groups(grad, layer.groups)
        if optimizer is None:
            normalized_step(alpha, grad, options.lr)
        else:
            optimizer.zero_grad(set_to_none=True)
            alpha.grad = grad
            optimizer.step()
        mask_sum += ib.bottleneck_lambda(alpha.detach())
    with torch.no_grad():  # the readout
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


def initial_alpha(x: Tensor, options: Any, init: Optional[Tensor]) -> Tensor:
    """``alpha`` to optimise: one per element of ``x``, or with
    ``options.mask == "token"`` one per token (``(B, L, 1)``, broadcast over
    the features: its gradient sums theirs), from ``options.init_alpha`` or
    ``init`` (averaged over the features for token masks).

    Raises:
        ValueError: For token masks on a layer output that is not
            ``(B, L, features)``.
    """
    if init is None:
        start = torch.full_like(x, options.init_alpha)
    else:
        start = init.detach().float().expand_as(x)
    if options.mask in ("token", "source"):
        if x.dim() != 3:
            raise ValueError(
                f"mask={options.mask!r} shares one weight among a token's features: "
                "it needs a (B, L, features) layer output, got shape "
                f"{tuple(x.shape)}; use mask='feature'."
            )
        start = start.mean(-1, keepdim=True)
    return start.clone().requires_grad_(True)


def row_passes(rows: int, per_pass: Optional[int]) -> List[slice]:
    """The ``rows`` noise copies cut into passes of at most ``per_pass``."""
    step = rows if per_pass is None else max(1, min(per_pass, rows))
    return [slice(start, start + step) for start in range(0, rows, step)]


def task_gradient(
    seam: Bottlenecked,
    bottleneck: Tuple[Tensor, Optional[Tensor]],
    task: Task,
    rows_target: Optional[Tensor],
    passes: List[slice],
    alpha: Tensor,
    n: int,
    complement: float = 0.0,
    both: float = 0.0,
) -> Tuple[Tensor, Tensor]:
    r"""The gradient in ``alpha`` of the task term - the rows' task losses
    averaged over each instance's ``n`` copies (Eq. 5's
    :math:`\mathcal{L}_{task}`), or with ``complement`` > 0 Eq. (R3)'s term
    of the inverted mask - and the per-row values, running the rows of
    ``bottleneck`` (``(T, keep)`` of every row) pass by pass so that one
    pass's graph at a time is held. With ``both`` > 0 (only where
    :func:`symmetric_start` holds) the gradient is of both terms, Eq. (R3)'s
    with weight ``both`` read from the same rows as in
    :func:`paired_gradient`; the values are the task losses.

    Returns:
        (grad, per_row): The gradient (``alpha``'s shape) and the per-row
        losses or terms, detached, ``(B * n,)``.
    """
    t, keep = bottleneck
    whole = len(passes) == 1
    grad = torch.zeros_like(alpha)
    values = []
    for part in passes:
        if whole:  # one pass: the seam sees every row, as always
            output = seam.run(t, keep)
        else:
            output = seam.run(t[part], None if keep is None else keep[part], part)
        targets = None if rows_target is None else rows_target[part]
        value = task.objective.loss(output, targets)
        if complement:
            value = ib.complement_term(value, complement)
        total = value - ib.complement_term(value, both) if both else value
        if value.requires_grad:  # (not when this pass's scores ignore alpha)
            (part_grad,) = torch.autograd.grad(
                total.sum() / n, alpha, retain_graph=part is not passes[-1]
            )
            grad = grad + part_grad
        values.append(value.detach())
    return grad, torch.cat(values)


def symmetric_start(alpha: Tensor, options: Any) -> bool:
    r"""Whether the inverted mask is the mask: deletion through the attention
    (no noise) while ``alpha`` is 0 everywhere (the first step from
    ``init_alpha=0``), where :math:`\lambda(\alpha) = \lambda(-\alpha)`
    and one set of rows serves Eq. (5)'s term and Eq. (R3)'s, the inverted
    mask's gradient being :math:`\partial_\alpha C(\lambda(-\alpha)) =
    -\partial_a C(\lambda(a))` at :math:`a = \alpha = 0`."""
    return options.removal == "attention" and not bool(alpha.detach().any())


def paired_gradient(
    seam: Bottlenecked,
    rows: Rows,
    alpha: Tensor,
    task: Task,
    rows_target: Optional[Tensor],
    n: int,
    complement: float,
) -> Tuple[Tensor, Tensor, Tensor]:
    r"""The gradient in ``alpha`` of both terms of ``removal="attention"`` -
    Eq. (5)'s task term with the mask (Eqs. R1-R2) and Eq. (R3)'s term with
    the mask inverted - from one forward and backward pass: the ``B * n``
    rows of each side by side in one batch. The same values and gradient as
    two calls of :func:`task_gradient`, up to rounding. (While ``alpha`` is
    0 everywhere, :func:`symmetric_start`, one set of rows serves both
    terms: :func:`task_gradient` with ``both``.)

    Returns:
        (grad, losses, terms): The gradient (``alpha``'s shape), the per-row
        task losses and complement terms, detached, ``(B * n,)`` each.
    """
    t, keep = rows.bottleneck(alpha)
    count = t.shape[0]
    _, inverted = rows.bottleneck(-alpha)
    both = torch.arange(count, device=t.device).repeat(2)
    output = seam.run(torch.cat([t, t]), torch.cat([keep, inverted]), both)
    losses = task.objective.loss(output[:count], rows_target)
    inverted_loss = task.objective.loss(output[count:], rows_target)
    terms = ib.complement_term(inverted_loss, complement)
    value = losses + terms
    grad = torch.zeros_like(alpha)
    if value.requires_grad:  # (not when the scores ignore alpha)
        (grad,) = torch.autograd.grad(value.sum() / n, alpha)
    return grad, losses.detach(), terms.detach()


def _check_finite(loss: Tensor, step: int) -> None:
    if not torch.isfinite(loss).all():
        bad: Optional[List[int]] = (~torch.isfinite(loss)).nonzero().flatten().tolist()
        raise FloatingPointError(
            f"Non-finite IBA loss at step {step} for instance(s) {bad}."
        )
