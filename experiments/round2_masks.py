"""Prototype mask-learning scorers for the second round on IBA (issue #19).

Everything here is a *prototype* for screening on held-in splits: one loop,
written for BERT-style Hugging Face classifiers (``model.base_model`` with
``embeddings`` and ``encoder.layer``), with forward hooks. What wins is ported
to ``captum_iba.attr`` (options, loop, tests); what loses stays documented in
``docs/faithfulness.rst``.

The mask ``lambda = sigmoid(alpha)`` is learned per instance. What a mask does
to the model (``removal``):

* ``"noise"``: the IBA bottleneck (Eq. 2) after each site in ``sites``
  (``-1`` the embeddings' output, ``i`` the output of encoder layer ``i``),
  ``T = lambda X + (1 - lambda)(mu + sigma z)`` with the deletion prior
  (``mu`` = the site's output on the input with the removable tokens replaced by
  [PAD], ``sigma`` the paper's per-feature std). With ``share="token"`` one
  ``alpha`` per token is shared by every site; with ``"feature"`` (one site
  only) ``alpha`` is per token and feature, as ``iba-faithful``.
* ``"attention"``: deletion relaxed: ``log lambda`` is added to the attention
  logits of every query towards the token, in every layer; at ``lambda -> 0``
  the token is gone from the computation, as deletion removes it (positions
  aside). Deterministic: no noise samples.
* ``"both"``: the two together.

The loss per instance, minimised by normalised gradient descent:

``task(lambda) + beta * info(lambda) + gamma * complement(1 - lambda)``

``task`` is the cross-entropy of the target (or ``-p`` with ``task="prob"``),
``info`` the mean capacity for noise removal (Eqs. 3-4) or the mean of
``lambda`` over the removable tokens for attention removal (the L1 of
Meaningful Perturbations), ``complement`` the target probability with the
mask inverted (the tokens kept by the mask removed: the comprehensiveness
that the deletion test measures).

Readouts over budgets: ``budgets`` runs one optimisation per beta (or per
kept area with ``area=True``: the rank-based area loss of extremal
perturbations, Fong et al. 2019) and averages the readouts.
"""

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from captum_iba.attr import encoder_layers
from captum_iba.attr._speed import frozen_parameters
from captum_iba.evaluation.scorers import TokenScorer


@dataclass(frozen=True)
class MaskConfig:
    sites: Tuple[int, ...] = (4,)
    removal: str = "noise"  # noise | attention | both
    share: str = "feature"  # feature | token
    only_removable: bool = False
    steps: int = 10
    lr: float = 3.0
    init: float = 0.0
    n_samples: int = 5
    beta: float = 1e-5
    gamma: float = 0.0  # complement weight
    task: str = "ce"  # ce | prob | none
    budgets: Tuple[float, ...] = ()  # several betas (or areas), readouts averaged
    area: bool = False  # budgets are kept areas (extremal perturbations)
    area_weight: float = 10.0
    readout: str = "mask_mean"  # mask_mean | mask_last | grad (first-step gradient)
    stop_tol: float = 0.0  # stop when max |d lambda| of the mask mean < tol
    anneal: Tuple[float, float] = ()  # beta from a to b over the steps (log-linear)
    seed: int = 0
    attn_from: int = 0  # the first layer whose attention the mask acts on
    gate: str = (
        "sigmoid"  # sigmoid | concrete (hard concrete, Louizos et al.; DiffMask)
    )


def _base_model(model: Any) -> Any:
    return model.base_model


class _Hooks:
    """Forward hooks that apply the current mask at every site."""

    def __init__(self, model: Any, cfg: MaskConfig) -> None:
        self.model, self.cfg = model, cfg
        self.layers = encoder_layers(model)
        self.handles: List[Any] = []
        self.state: Dict[str, Any] = {}

    def module(self, site: int) -> Any:
        return _base_model(self.model).embeddings if site < 0 else self.layers[site]

    def __enter__(self) -> "_Hooks":
        for k, site in enumerate(
            self.cfg.sites if self.cfg.removal != "attention" else ()
        ):
            self.handles.append(
                self.module(site).register_forward_hook(self._site_hook(k))
            )
        if self.cfg.removal in ("attention", "both"):
            for layer in list(self.layers)[self.cfg.attn_from :]:
                self.handles.append(
                    layer.register_forward_pre_hook(self._attn_hook, with_kwargs=True)
                )
        return self

    def __exit__(self, *exc: Any) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    def _site_hook(self, k: int) -> Any:
        def hook(module: Any, inputs: Any, output: Any) -> Any:
            s = self.state
            if "lam" not in s:
                return None
            x = output[0] if isinstance(output, tuple) else output
            lam = s["lam_site"](k)
            t = lam * x + (1 - lam) * (s["mean"][k] + s["std"][k] * s["noise"][k])
            t = torch.where(s["keep_rows"], t, x)
            return (t,) + tuple(output[1:]) if isinstance(output, tuple) else t

        return hook

    def _attn_hook(self, module: Any, args: Any, kwargs: Any) -> Any:
        s = self.state
        if "lam_tok" not in s:
            return None
        positional = len(args) > 1
        am = args[1] if positional else kwargs.get("attention_mask")
        lam = s["lam_tok"]  # (R, L)
        bias = torch.log(lam.clamp_min(1e-12))[:, None, None, :]
        if am is None:
            new = bias
        elif am.dtype == torch.bool:
            new = torch.where(am, 0.0, torch.finfo(bias.dtype).min) + bias
        else:
            new = am + bias
        if positional:
            return (args[0], new) + tuple(args[2:]), kwargs
        return args, dict(kwargs, attention_mask=new)


def _logits(model: Any, ids: Tensor, mask: Tensor, tt: Optional[Tensor]) -> Tensor:
    kw = {"attention_mask": mask}
    if tt is not None:
        kw["token_type_ids"] = tt
    return model(input_ids=ids, **kw).logits


def _record(
    model: Any, hooks: _Hooks, ids: Tensor, mask: Tensor, tt: Optional[Tensor]
) -> List[Tensor]:
    outs: List[Tensor] = []
    handles = []
    for site in hooks.cfg.sites:

        def rec(m: Any, i: Any, o: Any) -> None:
            outs.append((o[0] if isinstance(o, tuple) else o).detach())

        handles.append(hooks.module(site).register_forward_hook(rec))
    try:
        with torch.no_grad():
            _logits(model, ids, mask, tt)
    finally:
        for h in handles:
            h.remove()
    return outs


def _area_loss(lam: Tensor, removable: Tensor, area: float) -> Tensor:
    """Extremal perturbations' rank loss: the sorted mask over the removable
    tokens against a vector with ``round(area * n)`` ones (kept), per instance."""
    losses = []
    for i in range(lam.shape[0]):
        v = lam[i][removable[i]]
        n = v.numel()
        if n == 0:
            losses.append(lam.new_zeros(()))
            continue
        k = int(round(area * n))
        target = torch.zeros(n, device=lam.device)
        if k > 0:
            target[-k:] = 1
        losses.append(((torch.sort(v).values - target) ** 2).mean())
    return torch.stack(losses)


def optimise_masks(
    model: Any,
    ids: Tensor,
    mask: Tensor,
    tt: Optional[Tensor],
    target: Tensor,
    removable: Tensor,
    pad_id: int,
    cfg: MaskConfig,
    budget: Optional[float] = None,
) -> Tensor:
    """One optimisation per instance (batched); returns (B, L) token scores."""
    B, L = ids.shape
    H = model.config.hidden_size
    noise_on = cfg.removal in ("noise", "both")
    attn_on = cfg.removal in ("attention", "both")
    n = cfg.n_samples if (noise_on or cfg.gate == "concrete") else 1
    hooks = _Hooks(model, cfg)
    gate = removable if cfg.only_removable else mask.bool()
    base_ids = ids.masked_fill(removable, pad_id)
    stats_mean, stats_std = [], []
    if noise_on:
        clean = _record(model, hooks, ids, mask, tt)
        base = _record(model, hooks, base_ids, mask, tt)
        m = mask[..., None].float()
        for x, b in zip(clean, base):
            mu = (x * m).sum(1, keepdim=True) / m.sum(1, keepdim=True)
            var = (((x - mu) * m) ** 2).sum(1, keepdim=True) / m.sum(1, keepdim=True)
            stats_mean.append(b.repeat_interleave(n, 0))
            stats_std.append(var.sqrt().clamp_min(0.01).repeat_interleave(n, 0))
    per_feature = cfg.share == "feature"
    if per_feature and len(cfg.sites) != 1:
        raise ValueError("share='feature' needs one site")
    shape = (B, L, H) if (per_feature and noise_on) else (B, L, 1)
    alpha = torch.full(shape, float(cfg.init), requires_grad=True)
    g = torch.Generator().manual_seed(cfg.seed)
    rows = lambda t: t.repeat_interleave(n, 0)  # noqa: E731
    ids_r, mask_r = rows(ids), rows(mask)
    tt_r = None if tt is None else rows(tt)
    tgt_r = rows(target)
    gate_f = gate[..., None].float()
    keep_rows = rows(gate)[..., None]
    beta = budget if (budget is not None and not cfg.area) else cfg.beta
    mask_sum = torch.zeros(B, L)
    prev = None
    done_steps = 0
    n_rem = removable.sum(1).clamp_min(1).float()

    def lam_of(a: Tensor) -> Tensor:
        lam = torch.sigmoid(a)
        return lam * gate_f + (1 - gate_f)  # 1 where the mask does not apply

    def run(lam: Tensor, noise: List[Tensor]) -> Tensor:
        lam_r = rows(lam)
        hooks.state = {
            "lam": True,
            "lam_site": lambda k: lam_r,
            "mean": stats_mean,
            "std": stats_std,
            "noise": noise,
            "keep_rows": keep_rows,
        }
        if attn_on:
            lam_tok = lam_r.mean(-1) if lam_r.shape[-1] > 1 else lam_r[..., 0]
            if cfg.gate == "concrete":
                lam_tok = (
                    _hard_concrete(lam_tok, g) * rows(gate) + (~rows(gate)).float()
                )
            hooks.state["lam_tok"] = lam_tok
        if not noise_on:
            hooks.state.pop("lam")
        out = _logits(model, ids_r, mask_r, tt_r)
        hooks.state = {}
        return out

    with hooks, torch.enable_grad():
        for step in range(cfg.steps):
            noise = (
                [torch.randn((B * n, L, H), generator=g) for _ in cfg.sites]
                if noise_on
                else []
            )
            lam = lam_of(alpha)
            if cfg.task == "none":  # the complement term alone (the deletion game)
                task = torch.zeros(B)
            else:
                out = run(lam, noise)
                logp = F.log_softmax(out, -1).gather(1, tgt_r[:, None])[:, 0]
                if cfg.task == "ce":
                    task = (-logp).reshape(B, n).mean(1)
                else:
                    task = (-logp.exp()).reshape(B, n).mean(1)
            if cfg.anneal:
                a, b = cfg.anneal
                frac = step / max(cfg.steps - 1, 1)
                beta = a * (b / a) ** frac
            if cfg.area:
                info = _area_loss(
                    lam.mean(-1), removable, budget if budget is not None else 0.5
                )
                loss = task + cfg.area_weight * info
            elif noise_on and not attn_on:
                cap = _mean_capacity(alpha, lam, stats_mean, stats_std, clean, gate, n)
                loss = task + beta * cap
            else:
                info = (lam.mean(-1) * removable.float()).sum(1) / n_rem
                loss = task + beta * info
            if cfg.gamma:
                comp_noise = (
                    [torch.randn((B * n, L, H), generator=g) for _ in cfg.sites]
                    if noise_on
                    else []
                )
                out_c = run(lam_of(-alpha), comp_noise)
                p_c = F.softmax(out_c, -1).gather(1, tgt_r[:, None])[:, 0]
                loss = loss + cfg.gamma * p_c.reshape(B, n).mean(1)
            (grad,) = torch.autograd.grad(loss.sum(), alpha)
            if step == 0 and cfg.readout == "grad":
                first_grad = -grad
            scale = grad.abs().reshape(B, -1).amax(1).clamp_min(1e-30)
            with torch.no_grad():
                alpha -= cfg.lr * grad / scale.reshape(B, 1, 1)
            cur = torch.sigmoid(alpha.detach()).mean(-1)
            mask_sum += cur
            done_steps += 1
            if cfg.stop_tol and prev is not None:
                if (cur - prev).abs().max() < cfg.stop_tol:
                    break
            prev = cur
    if cfg.readout == "mask_last":
        return torch.sigmoid(alpha.detach()).mean(-1)
    if cfg.readout == "grad":
        return first_grad.sum(-1)
    return mask_sum / done_steps


def _hard_concrete(lam: Tensor, g: torch.Generator) -> Tensor:
    """A hard-concrete sample with location logit(lam) (temperature 2/3,
    stretched to (-0.1, 1.1) and clipped): near-binary gates whose mean
    follows lam."""
    u = torch.rand(lam.shape, generator=g).clamp(1e-6, 1 - 1e-6)
    logit = torch.log(lam.clamp(1e-6, 1 - 1e-6)) - torch.log1p(
        -lam.clamp(1e-6, 1 - 1e-6)
    )
    s = torch.sigmoid((torch.log(u) - torch.log1p(-u) + logit) / (2 / 3))
    return (s * 1.2 - 0.1).clamp(0, 1)


def _mean_capacity(
    alpha: Tensor,
    lam: Tensor,
    means: List[Tensor],
    stds: List[Tensor],
    clean: List[Tensor],
    gate: Tensor,
    n: int,
) -> Tensor:
    """Eqs. (3)-(4): the capacity per element, averaged over the gated tokens,
    features and sites (the clean outputs as X)."""
    total = 0.0
    gf = gate[..., None].float()
    count = gf.sum((1, 2)) * clean[0].shape[-1]
    for x, mu_r, sd_r in zip(clean, means, stds):
        mu, sd = mu_r[::n], sd_r[::n]
        mu_z = lam * (x - mu) / sd
        log_var = 2.0 * F.logsigmoid(-alpha)
        cap = 0.5 * (log_var.exp() + mu_z**2 - 1 - log_var)
        total = total + (cap * gf).sum((1, 2)) / count
    return total / len(clean)


class MaskScorer(TokenScorer):
    """A prototype candidate as a registered-style scorer."""

    name = "mask-proto"

    def __init__(self, model: Any, cfg: MaskConfig, **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        self.cfg = cfg
        self.settings.update({k: str(v) for k, v in cfg.__dict__.items()})

    def _scores(
        self, ids: Tensor, mask: Tensor, tt: Optional[Tensor], target: Tensor
    ) -> Tensor:
        removable = self._removable(ids, mask)
        cfg = self.cfg
        budgets = cfg.budgets or (None,)
        total = torch.zeros(ids.shape)
        with frozen_parameters(self.model):
            for b in budgets:
                total += optimise_masks(
                    self.model, ids, mask, tt, target, removable,
                    self.pad_token_id, cfg, b,
                )  # fmt: skip
        return total / len(budgets)
