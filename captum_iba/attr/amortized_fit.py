r"""Fitting the amortized bottleneck over a corpus: IBA's own objective.

For a batch of instances :math:`x` with explained class :math:`c` (the gold
label, or the prediction), the explainer gives :math:`\alpha_t`
(:mod:`~captum_iba.attr.explainer`); the bottleneck of Eq. (2) is applied with
it, through :func:`~captum_iba.attr.bottleneck.inject_noise` with the prior's
:math:`\mu, \sigma` (the prior plug-in of ``settings.options``; by default
``"baseline"``: the layer's output with the removable tokens replaced by
[PAD], as ``iba-faithful``) and the model run through per-sample IBA's seam
(:class:`~captum_iba.attr._seam.Seam`), and the network's weights
:math:`\theta` follow the gradient of

.. math::

   \mathcal{L}(\theta) = \mathbb{E}_x\Big[
       \mathcal{L}_{CE}\big(c \mid f_{>l}(T_\theta(x))\big)
       + \beta\, \overline{D_{KL}}(x; \theta)
       + \gamma\, \big(\bar\lambda_\theta(x) - \rho\big)^2
       + \delta\, \mathrm{BCE}\big(\lambda_\theta(x), m(x)\big)\Big],

the first two terms Eq. (5) (mean capacity, :func:`~captum_iba.attr.
bottleneck.capacity`; ``options.beta`` = :math:`\beta`), the third the
**budget** (``keep`` = :math:`\rho`, the mean signal weight over the
instance's real tokens; ``keep_weight`` = :math:`\gamma`), the fourth the
optional **distillation** of a per-sample teacher's mask :math:`m(x)`
(``distil`` = :math:`\delta`). An optional
**complement** term (``options.complement`` = :math:`\kappa`) adds
:math:`\kappa\, p(c \mid f_{>l}(T^{\neg}_\theta(x)))`, the probability of the
class when the bottleneck runs with :math:`1 - \lambda` (the kept tokens
removed, as the deletion test does). The model is frozen (eval mode, no
parameter gradients) and left as it was.
"""

import dataclasses
import hashlib
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Module
from tqdm.auto import tqdm

from captum_iba._utils.common import model_device
from captum_iba._utils.hooks import evaluation_mode
from captum_iba.attr import _loop, _speed
from captum_iba.attr import amortized_store as store
from captum_iba.attr import bottleneck as ib
from captum_iba.attr._amortized_pass import Batch, Clean, Passes, unpack
from captum_iba.attr.explainer import ExplainerSettings, MaskExplainer
from captum_iba.attr.objectives import Objective

__all__ = ["fit_network"]

Teacher = Callable[[Batch, Optional[Tensor]], Tensor]

#: The most bytes of clean passes (scores and readout states) a fit on the
#: teacher alone keeps for its later epochs (:meth:`_FitState._clean`); past
#: it, batches are run again.
CLEAN_MEMO_BYTES = 2 * 1024**3


def explained_class(
    settings: ExplainerSettings, batch: Batch, clean: Clean
) -> Optional[Tensor]:
    """The class each instance is trained to explain: its label, or the
    prediction (``target="predicted"``, or a loader without labels); None for
    a model of one score per instance (a causal LM's answer log-probability:
    the score itself is explained)."""
    if clean.logits.dim() == 1:
        return None
    if settings.target == "label" and batch.labels is not None:
        return batch.labels
    return clean.logits.argmax(-1)


def ib_loss(
    passes: Passes,
    batch: Batch,
    clean: Clean,
    alpha: Tensor,
    targets: Tensor,
    objective: Objective,
    settings: ExplainerSettings,
    step: int,
) -> Tensor:
    """Eq. (5) per instance with the explainer's ``alpha`` (B, L), plus the
    budget and the complement terms; with ``removal="attention"`` the
    deletion objective instead (:func:`deletion_loss`)."""
    options = settings.options
    layer = passes.layer_of(batch, clean, options.prior, settings)
    if options.removal == "attention":
        layer = specials_kept(layer, batch, settings)
        return deletion_loss(passes, batch, clean, layer, alpha, targets, objective,
                             settings)  # fmt: skip
    x, n, size = layer.x, options.n_samples, layer.x.shape[0]
    a = alpha.reshape(alpha.shape + (1,) * (x.dim() - 2)).expand_as(x)
    gen = torch.Generator(device=x.device).manual_seed(options.seed * 1_000_003 + step)
    noise = torch.randn(
        (size * n,) + tuple(x.shape[1:]), generator=gen, device=x.device
    )
    rows = _loop.Rows(layer, n)
    rows_target = _loop.row_targets(targets, n)
    elements = layer.mask_f.expand_as(x).reshape(size, -1).sum(1)
    cap_mean = layer.capacity(a).reshape(size, -1).sum(1) / elements  # Eqs. 3-4
    with passes.seam(batch, clean, n) as seam:
        output = seam.run(rows.noisy(a, noise))  # Eq. 2
        loss_task = _loop.task_loss(objective, output, rows_target, size, n)
        loss = ib.information_bottleneck_loss(loss_task, cap_mean, options.beta)
        loss = loss + budget_term(settings, batch, alpha)
        if options.complement > 0:  # the kept tokens removed: the class should go
            output = seam.run(rows.noisy(-a, noise))
            inverted = _loop.task_loss(objective, output, rows_target, size, n)
            loss = loss + options.complement * torch.exp(-inverted)
    return loss


def specials_kept(
    layer: "_loop.Layer", batch: Batch, settings: ExplainerSettings
) -> "_loop.Layer":
    """``layer`` with the special tokens ([CLS], [SEP]...) not removable, as
    per-sample IBA keeps them."""
    specials = torch.tensor(settings.special_token_ids, dtype=batch.ids.dtype)
    removable = ~torch.isin(batch.ids, specials.to(batch.ids.device))
    return dataclasses.replace(layer, removable=removable)


def budget_term(settings: ExplainerSettings, batch: Batch, alpha: Tensor) -> Tensor:
    r"""The budget per instance: :math:`\gamma (\bar\lambda - \rho)^2`, the
    mean signal weight over the real tokens pulled to ``keep`` (0 without
    one)."""
    if settings.keep is None:
        return torch.zeros(alpha.shape[0], device=alpha.device)
    m = batch.mask.float()
    mean_lambda = (torch.sigmoid(alpha) * m).sum(1) / m.sum(1)
    return settings.keep_weight * (mean_lambda - settings.keep) ** 2


def deletion_loss(
    passes: Passes,
    batch: Batch,
    clean: Clean,
    layer: "_loop.Layer",
    alpha: Tensor,
    targets: Tensor,
    objective: Objective,
    settings: ExplainerSettings,
) -> Tensor:
    r"""``iba-deletion``'s objective learned across the corpus, per instance:

    .. math::

       \mathcal{L}_{task}\big(c \mid f_{>l}(X; \bar\lambda_\theta)\big)
       + \kappa\, e^{-\mathcal{L}_{task}(c \mid f_{>l}(X; 1 - \bar\lambda_\theta))}
       + \gamma (\bar\lambda_\theta - \rho)^2,

    every layer above the bottleneck reading token :math:`t` with weight
    :math:`\bar\lambda_t` (Eqs. R1-R2: deletion relaxed through attention,
    no noise, no capacity), the complement term of Eq. (R3) with the mask
    inverted (``options.complement`` = :math:`\kappa`) and the budget
    (:func:`budget_term`). The two masks' rows run side by side in one pass.
    """
    x, kappa = layer.x, settings.options.complement
    a = alpha.reshape(alpha.shape + (1,) * (x.dim() - 2)).expand_as(x)
    rows = _loop.Rows(layer, 1, removal="attention")
    masks = [rows.keep(a)] + ([rows.keep(-a)] if kappa > 0 else [])
    n = len(masks)  # the instance's rows side by side: kept[, inverted]
    keep = torch.stack(masks, 1).reshape((-1,) + masks[0].shape[1:])
    with passes.seam(batch, clean, n, attention=True) as seam:
        output = seam.run(x.repeat_interleave(n, dim=0), keep)
    loss = objective.loss(output[0::n], targets)
    if kappa > 0:  # the kept tokens removed: the class should go (Eq. R3)
        loss = loss + kappa * torch.exp(-objective.loss(output[1::n], targets))
    return loss + budget_term(settings, batch, alpha)


def _batch_digest(batch: Batch, target: Optional[Tensor]) -> str:
    """A digest of what the teacher's mask depends on: ids, mask, the
    forward's further tensors and the targets."""
    h = hashlib.sha1()
    for t in (batch.ids, batch.mask, target) + tuple(batch.extra):
        if isinstance(t, Tensor):
            h.update(str((t.dtype, tuple(t.shape))).encode())
            h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def summary_of(model: Module) -> str:
    """Which position the explainer reads as the input's summary
    (:class:`~captum_iba.attr.explainer.MaskExplainer`), as the explained
    forward says it (its ``summary_position``; a causal LM's answer
    log-probability, :class:`~captum_iba.attr.llm.CausalLMLogLikelihood`:
    ``"last"``), else the first (a classifier's [CLS])."""
    return str(getattr(model, "summary_position", "first"))


def make_teacher(model: Module, layer: Module, settings: ExplainerSettings) -> Teacher:
    """The per-sample teacher: IBA with ``settings.teacher``'s options and the
    ``"mask_mean"`` readout (its prior builds its own baselines), its mask
    averaged over the features, ``(B, L)``.

    The teacher is seeded, so its mask is a function of the batch: masks are
    memoised by the batch's content and later epochs pay nothing for it (the
    fit's cost is one teacher pass over the data, not one per epoch)."""
    from captum_iba.attr.iba import InformationBottleneckAttribution

    iba = InformationBottleneckAttribution(
        model,
        layer,
        pad_token_id=settings.pad_token_id,
        special_token_ids=settings.special_token_ids,
    )
    if settings.teacher is None:
        raise ValueError("a teacher needs settings.teacher (the IBA options).")
    options = settings.teacher.replace(readout="mask_mean")
    if options.seed is None:
        options = options.replace(seed=settings.options.seed)
    memo: Dict[str, Tensor] = {}

    def teacher(batch: Batch, target: Optional[Tensor]) -> Tensor:
        key = _batch_digest(batch, target)
        if key not in memo:
            attr = iba.attribute(
                batch.ids,
                target=target,
                additional_forward_args=batch.extra,
                token_mask=batch.mask,
                config=options,
            )
            memo[key] = attr.detach().float().reshape(attr.shape[:2] + (-1,)).mean(-1)
        return memo[key]

    return teacher


def batch_loss(
    net: MaskExplainer,
    passes: Passes,
    batch: Batch,
    clean: Clean,
    settings: ExplainerSettings,
    step: int,
    teacher: Optional[Teacher],
) -> Tuple[Tensor, Dict[str, float]]:
    """The mean loss of one batch and its parts (for the progress bar)."""
    objective = settings.options.objective.for_output(clean.logits)
    targets = explained_class(settings, batch, clean)
    alpha = net.alpha(clean.states, targets)
    m = batch.mask.float()
    loss = torch.zeros(alpha.shape[0], device=alpha.device)
    if not settings.distil_only:
        loss = ib_loss(passes, batch, clean, alpha, targets, objective, settings, step)
    if teacher is not None and settings.distil > 0:
        goal = teacher(batch, None if targets is None else targets.cpu())
        goal = goal.to(alpha.device)
        bce = F.binary_cross_entropy_with_logits(alpha, goal, reduction="none")
        loss = loss + settings.distil * (bce * m).sum(1) / m.sum(1)
    kept = (torch.sigmoid(alpha.detach()) * m).sum() / m.sum()
    parts = {"loss": float(loss.detach().mean()), "mean_lambda": float(kept)}
    return loss.mean(), parts


def fit_network(
    model: Module,
    layer: Module,
    readout: List[Module],
    data: Iterable[Any],
    settings: ExplainerSettings,
    key: Dict[str, Any],
    folder: Optional[Any] = None,
    show_progress: bool = True,
    checkpoint_seconds: float = 60.0,
) -> Tuple[MaskExplainer, Dict[str, Any]]:
    """Train the explainer over ``data`` for ``settings.epochs`` passes.

    Args:
        model (Module): The frozen model.
        layer (Module): The bottlenecked layer.
        readout (list of Module): The layers the explainer reads.
        data (Iterable): Batches (see :func:`~captum_iba.attr.
            _amortized_pass.unpack`), iterated once per epoch.
        settings (ExplainerSettings): The fit's settings.
        key (dict): The explainer's key (for the checkpoints).
        folder (PathLike, optional): Where checkpoints go (every
            ``checkpoint_seconds`` and on Ctrl-C); a checkpoint with the same
            key found there is resumed.
        show_progress (bool): A tqdm bar with the ETA (over all epochs when
            ``data`` has a length).

    Returns:
        (network, stats): The trained network (eval mode) and the fit's
        statistics: steps, instances, CPU- and wall-seconds, the last loss.
    """
    device = model_device(model)
    passes = Passes(model, layer, readout)
    per_epoch = len(data) if hasattr(data, "__len__") else None  # type: ignore[arg-type]
    total = None if per_epoch is None else per_epoch * settings.epochs
    bar = tqdm(
        total=total, desc="fit explainer", unit="batch", disable=not show_progress
    )
    fit = _FitState(settings, key, folder, checkpoint_seconds)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    try:
        with torch.enable_grad(), evaluation_mode(model, [layer]):
            with _speed.frozen_parameters(model):
                for _ in range(settings.epochs):
                    for raw in data:
                        fit.step_on(raw, device, passes, model, layer, bar)
    except KeyboardInterrupt:
        fit.checkpoint(force=True)
        raise
    finally:
        bar.close()
    if fit.net is None:
        raise ValueError("the fit got no data: the loader yielded no batch.")
    stats = dict(
        fit.stats,
        steps=fit.step,
        cpu_seconds=time.process_time() - cpu0,
        wall_seconds=time.perf_counter() - wall0,
    )
    return fit.net.eval(), stats


class _FitState:
    """The state of one fit: the network, Adam, the step, checkpoints."""

    def __init__(
        self,
        settings: ExplainerSettings,
        key: Dict[str, Any],
        folder: Optional[Any],
        seconds: float,
    ) -> None:
        self.settings, self.key, self.folder = settings, key, folder
        self.seconds, self.last = seconds, time.perf_counter()
        self.net: Optional[MaskExplainer] = None
        self.optimizer: Optional[torch.optim.Optimizer] = None
        self.teacher: Optional[Teacher] = None
        self.step, self.resume_at = 0, 0
        self.stats: Dict[str, Any] = {"instances": 0}
        self.memo: Dict[str, Clean] = {}
        self.memo_bytes = 0

    def step_on(
        self,
        raw: Any,
        device: torch.device,
        passes: Passes,
        model: Module,
        layer: Module,
        bar: Any,
    ) -> None:
        """One optimisation step on one batch (skipped while resuming; its
        longest input counted even then)."""
        batch = unpack(raw, device)
        longest = int(batch.extra[0].sum(1).max()) if batch.extra else 0
        self.stats["longest"] = max(self.stats.get("longest", 0), longest)
        if self.net is not None and self.step < self.resume_at:
            self.step += 1
            bar.update()
            return
        clean = self._clean(passes, batch)
        if self.net is None:
            self._build(clean, device, model, layer)
            if self.step < self.resume_at:
                self.step += 1
                bar.update()
                return
        loss, parts = batch_loss(
            self.net, passes, batch, clean, self.settings, self.step, self.teacher
        )
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.step += 1
        self.stats["instances"] += batch.ids.shape[0]
        self.stats.update(parts)
        bar.update()
        bar.set_postfix(loss=f"{parts['loss']:.3f}", kept=f"{parts['mean_lambda']:.2f}")
        self.checkpoint()

    def _clean(self, passes: Passes, batch: Batch) -> Clean:
        """The batch's clean pass; memoised by its content for a fit on the
        teacher alone (``distil_only``: the network reads nothing else of the
        model), so that later epochs pay no forward of the model, as long as
        the memo stays under :data:`CLEAN_MEMO_BYTES`."""
        if not (self.settings.distil_only and self.settings.distil > 0):
            return passes.clean(batch)
        key = _batch_digest(batch, None)
        if key in self.memo:
            return self.memo[key]
        clean = passes.clean(batch)
        kept = [clean.logits, clean.x] + clean.states
        size = sum(t.numel() * t.element_size() for t in kept)
        if self.memo_bytes + size <= CLEAN_MEMO_BYTES:
            self.memo[key] = Clean(clean.logits, clean.x, clean.states, None)
            self.memo_bytes += size
        return clean

    def _build(
        self, clean: Clean, device: torch.device, model: Module, layer: Module
    ) -> None:
        torch.manual_seed(self.settings.options.seed)
        widths = [s.shape[-1] for s in clean.states]
        classes = clean.logits.shape[-1] if clean.logits.dim() == 2 else 1
        summary = summary_of(model)
        self.net = MaskExplainer(
            widths, classes, self.settings.hidden, summary=summary
        ).to(device)
        self.optimizer = torch.optim.Adam(
            self.net.parameters(), lr=self.settings.network_lr
        )
        shape = {"widths": widths, "n_classes": classes, "summary": summary}
        self.key = dict(self.key, shape=shape)
        if self.settings.distil > 0:
            self.teacher = make_teacher(model, layer, self.settings)
        if self.folder is None:
            return
        found = store.read_checkpoint(self.folder, self.key)
        if found is not None:
            net_state, adam, self.resume_at = found
            self.net.load_state_dict(net_state)
            state = self.optimizer.state_dict()
            state["state"] = adam
            self.optimizer.load_state_dict(state)

    def checkpoint(self, force: bool = False) -> None:
        """Save the fit so far when ``checkpoint_seconds`` have passed."""
        if self.folder is None or self.net is None or self.step <= self.resume_at:
            return
        if force or time.perf_counter() - self.last >= self.seconds:
            store.write_checkpoint(
                self.folder, self.key, self.net.state_dict(), self.optimizer, self.step
            )
            self.last = time.perf_counter()
