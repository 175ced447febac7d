"""The removal itself: which tokens go, the degraded inputs, the model calls.

Everything here works on CPU tensors that :mod:`captum_iba.metrics._inputs`
has checked: a :class:`TokenBatch` (the instances), a removal rank per token
(:func:`removal_rank`), ``k`` per instance and level (:func:`level_counts`),
and a :class:`Runner` that builds the degraded inputs of a list of jobs
(instance, ``k``, keep-only flag), batches them into model calls and returns
the logits in job order. A job removes the first ``k`` tokens of the order, or
with the keep-only flag (sufficiency) every removable token but those ``k``.
"""

from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from captum_iba._utils.common import delete_tokens, logits_of
from captum_iba.metrics.strategies import Deletion, RemovalStrategy

# Guards floor() against products like 3/9 * 18 = 5.999999999999999.
_EPS = 1e-9

#: Default bound of one model call of the test: sequences x padded width.
DEFAULT_TOKENS_PER_BATCH = 2048

#: How an additional forward argument follows the jobs: ``"token"`` - a
#: ``(B, L, ...)`` tensor that follows the tokens; ``"row"`` - a ``(B, ...)``
#: tensor indexed per instance; ``"const"`` - passed unchanged.
ExtraArg = Tuple[str, Any]


def removal_rank(scores: Tensor, removable: Tensor, order: str) -> Tensor:
    """Rank of each position in the removal order; non-removable positions get L.

    Args:
        scores (Tensor): ``(B, L)`` float scores.
        removable (Tensor): ``(B, L)`` bool.
        order (str): ``"morf"`` (highest score first) or ``"lerf"``.

    Returns:
        Tensor: ``(B, L)`` long ranks; ties go to the earlier position.
    """
    B, L = scores.shape
    key = -scores if order == "morf" else scores
    by_score = torch.sort(key, dim=1, stable=True).indices  # ties: earlier first
    non_rem = (~removable).gather(1, by_score).to(torch.uint8)
    by_flag = torch.sort(non_rem, dim=1, stable=True).indices
    order_idx = by_score.gather(1, by_flag)
    rank = torch.empty_like(order_idx)
    rank.scatter_(1, order_idx, torch.arange(L).expand(B, L).contiguous())
    return rank.masked_fill(~removable, L)


def level_counts(
    levels: Sequence[Union[float, int]],
    unit: str,
    convention: str,
    n_rem: Tensor,
    n_full: Tensor,
) -> Tensor:
    """``k``, the number of tokens removed, per instance and level.

    Args:
        levels (Sequence): Fractions or counts (``unit``).
        unit (str): ``"fraction"`` or ``"count"``.
        convention (str): ``"tokens"`` or ``"paper"`` (see
            :mod:`captum_iba.metrics.degradation`).
        n_rem (Tensor): ``(B,)`` removable tokens per instance.
        n_full (Tensor): ``(B,)`` non-padding tokens per instance.

    Returns:
        Tensor: ``(B, K)`` long, capped at ``n_rem``.
    """
    cols = []
    for lv in levels:
        if unit == "count":
            k = torch.full_like(n_rem, int(lv))
        elif convention == "paper":
            k = torch.floor(float(lv) * n_full.double() + _EPS).long()
        else:
            k = torch.floor(float(lv) * n_rem.double() + 0.5 + _EPS).long()
        cols.append(torch.minimum(k, n_rem))
    return torch.stack(cols, 1)


def target_stats(logits: Tensor, target: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """Target probability, predicted label and target log-odds of each row.

    Args:
        logits (Tensor): ``(N, C)`` float64.
        target (Tensor): ``(N,)`` long.

    Returns:
        (Tensor, Tensor, Tensor): ``p(target)``, ``argmax``, and
        ``log p(target) - log(1 - p(target))``, each ``(N,)``.
    """
    logp = torch.log_softmax(logits, dim=1)
    lp_t = logp.gather(1, target[:, None]).squeeze(1)
    others = logp.scatter(1, target[:, None], float("-inf"))
    log_odds = lp_t - torch.logsumexp(others, dim=1)
    return lp_t.exp(), logits.argmax(1), log_odds


def removed_positions(
    rank: Tensor, removable: Tensor, ks: Tensor, keep_only: Tensor
) -> Tensor:
    """``(N, L)`` bool: the positions each job removes."""
    k = ks[:, None]
    return torch.where(keep_only[:, None], removable & (rank >= k), rank < k)


def _length_groups(lengths: Tensor, by_length: bool) -> Tuple[List[Tensor], List[int]]:
    """Row groups and the width each is trimmed to (at least one position)."""
    if by_length:
        groups = [
            (lengths == n).nonzero().reshape(-1) for n in torch.unique(lengths).tolist()
        ]
        return groups, [max(int(lengths[g[0]]), 1) for g in groups]
    width = int(lengths.max()) if len(lengths) else 1
    return [torch.arange(len(lengths))], [max(width, 1)]


def checked_logits(output: Any) -> Tensor:
    """The ``(N, C)`` logits of a forward's output (see :func:`logits_of`)."""
    out = logits_of(output)
    if out.dim() != 2:
        raise ValueError(
            f"forward_func must return logits of shape (B, C); got {tuple(out.shape)}"
        )
    if not bool(torch.isfinite(out).all()):
        raise FloatingPointError(
            "forward_func returned NaN or infinite logits: the model's weights or "
            "inputs are not finite, so no probability can be measured"
        )
    return out


@dataclass
class TokenBatch:
    """The instances of a test, on the CPU, as the removal sees them.

    Attributes:
        input_ids (Tensor): ``(B, L)`` long.
        valid (Tensor): ``(B, L)`` bool, True at tokens (not padding).
        removable (Tensor): ``(B, L)`` bool, the tokens a level may remove.
        attention_mask (Tensor, optional): ``(B, L)``, passed to the model.
        token_type_ids (Tensor, optional): ``(B, L)``, passed to the model.
        extra (list): The additional forward arguments, classified
            (:data:`ExtraArg`).
    """

    input_ids: Tensor
    valid: Tensor
    removable: Tensor
    attention_mask: Optional[Tensor]
    token_type_ids: Optional[Tensor]
    extra: List[ExtraArg]

    @property
    def n_removable(self) -> Tensor:
        """Tensor: ``(B,)`` removable tokens per instance ``n``."""
        return self.removable.sum(1)

    @property
    def n_full(self) -> Tensor:
        """Tensor: ``(B,)`` non-padding tokens per instance."""
        return self.valid.sum(1)


@dataclass(frozen=True)
class Removal:
    """A removal strategy, resolved for one test.

    Attributes:
        strategy (RemovalStrategy): :class:`~captum_iba.metrics.strategies.Deletion`,
            or a strategy with an ``apply(input_ids, removed)`` method
            (:class:`~captum_iba.metrics.strategies.Replacement`,
            :class:`~captum_iba.metrics.strategies.CustomRemoval`).
        pad_id (int): Deletion's fill for the freed tail.
        group_by_length (bool): Deletion: one model call per remaining length.
    """

    strategy: RemovalStrategy
    pad_id: int
    group_by_length: bool

    @property
    def deletes(self) -> bool:
        """bool: True when removed tokens leave the sequence."""
        return isinstance(self.strategy, Deletion)


class Runner:
    """Builds the degraded inputs of jobs and runs the model on them in batches.

    Args:
        forward_func (Callable): The model.
        batch (TokenBatch): The instances.
        rank (Tensor): ``(B, L)`` from :func:`removal_rank`.
        removal (Removal): How tokens are removed.
        device (torch.device): Where the model runs.
        max_examples_per_batch (int, optional): Most sequences per call; None:
            as many as fit ``max_tokens_per_batch``.
        show_progress (bool): Show a progress bar.
        max_tokens_per_batch (int): Bound of a call (sequences x padded
            width) when ``max_examples_per_batch`` is None.
    """

    def __init__(
        self,
        forward_func: Callable[..., Any],
        batch: TokenBatch,
        rank: Tensor,
        removal: Removal,
        device: torch.device,
        max_examples_per_batch: Optional[int] = None,
        show_progress: bool = False,
        max_tokens_per_batch: int = DEFAULT_TOKENS_PER_BATCH,
    ) -> None:
        self.forward_func = forward_func
        self.batch = batch
        self.rank = rank
        self.removal = removal
        vocab = getattr(getattr(forward_func, "config", None), "vocab_size", None)
        removal.strategy.check_vocabulary(vocab)
        self.device = device
        self.max_examples_per_batch = max_examples_per_batch
        self.max_tokens_per_batch = max_tokens_per_batch
        self.show_progress = show_progress

    def run_originals(self) -> Tensor:
        """Logits ``(B, C)`` (float64, CPU) of the original inputs."""
        B = self.batch.input_ids.shape[0]
        zeros = torch.zeros(B, dtype=torch.long)
        return self.run(torch.arange(B), zeros, zeros.bool(), "original")

    def run_levels(
        self, k_table: Tensor, target: Tensor, keep_only_too: bool
    ) -> Tuple[Tensor, Tensor, Tensor]:
        """:func:`target_stats` at every level, ``(B, V, K)`` each.

        ``V`` is 1, or 2 with ``keep_only_too`` (index 1: only the first ``k``
        tokens kept, for sufficiency).
        """
        B, K = k_table.shape
        variants = [False, True] if keep_only_too else [False]
        V = len(variants)
        instances = torch.arange(B).repeat_interleave(K * V)
        keep_only = torch.tensor(variants).repeat_interleave(K).repeat(B)
        ks = k_table[:, None, :].expand(B, V, K).reshape(-1)
        logits = self.run(instances, ks, keep_only, "levels")
        stats = target_stats(logits, target[instances])
        return tuple(s.reshape(B, V, K) for s in stats)  # type: ignore[return-value]

    def run(
        self, instances: Tensor, ks: Tensor, keep_only: Tensor, desc: str
    ) -> Tensor:
        """Logits (float64, CPU) of jobs - the instance each degrades (an
        index into the batch), ``k`` and the keep-only flag - in job order, in
        batches.

        Jobs are sorted by remaining length when deleting (less padding per
        batch); results do not depend on the batching (up to float rounding).
        """
        n = len(instances)
        if self.removal.deletes:
            removed = torch.where(keep_only, self.batch.n_removable[instances] - ks, ks)
            widths = (self.batch.n_full[instances] - removed).clamp_min(1)
            by_len = torch.sort(widths, stable=True).indices
            widths = widths[by_len]
        else:
            by_len = torch.arange(n)
            widths = torch.full((n,), self.batch.input_ids.shape[1])
        bounds = self._batch_bounds(widths)
        if self.show_progress:
            from tqdm.auto import tqdm

            bounds = tqdm(bounds, desc=desc)
        outs = []
        for start, stop in bounds:
            sel = by_len[start:stop]
            outs.append(self._run_batch(instances[sel], ks[sel], keep_only[sel]))
        out = torch.empty_like(torch.cat(outs, 0))
        out[by_len] = torch.cat(outs, 0)
        return out

    def _batch_bounds(self, widths: Tensor) -> List[Tuple[int, int]]:
        """``(start, stop)`` of each call over jobs of ascending ``widths``: a
        fixed number of jobs (``max_examples_per_batch``), or as many as keep
        jobs x widest job within ``max_tokens_per_batch`` (at least one)."""
        n = len(widths)
        if self.max_examples_per_batch is not None:
            step = max(self.max_examples_per_batch, 1)
            return [(s, min(s + step, n)) for s in range(0, n, step)]
        bounds, start = [], 0
        for i, width in enumerate(widths.tolist()):
            if i > start and (i - start + 1) * width > self.max_tokens_per_batch:
                bounds.append((start, i))
                start = i
        return bounds + [(start, n)] if n else bounds

    def _degraded(
        self, instances: Tensor, ks: Tensor, keep_only: Tensor
    ) -> Tuple[List[Optional[Tensor]], List[Tensor], List[int]]:
        """Per-token tensors of the jobs (ids, mask, segments, token extras),
        and the row groups and widths of the model calls."""
        b = self.batch
        removed = removed_positions(
            self.rank[instances], b.removable[instances], ks, keep_only
        )
        tensors = [
            None if t is None else t[instances]
            for t in (b.input_ids, b.attention_mask, b.token_type_ids)
        ]
        tensors += [a[instances] for scope, a in b.extra if scope == "token"]
        if self.removal.deletes:
            fills = [self.removal.pad_id] + [0] * (len(tensors) - 1)
            tensors, lengths = delete_tokens(
                b.valid[instances] & ~removed, tensors, fills
            )
            groups, widths = _length_groups(lengths, self.removal.group_by_length)
            return tensors, groups, widths
        tensors[0] = self.removal.strategy.apply(tensors[0], removed)  # type: ignore
        return tensors, [torch.arange(len(instances))], [tensors[0].shape[1]]  # type: ignore

    def _run_batch(self, instances: Tensor, ks: Tensor, keep_only: Tensor) -> Tensor:
        """Logits (float64, CPU) of one batch of jobs (instance row, k, keep-only)."""
        tensors, groups, widths = self._degraded(instances, ks, keep_only)
        out: Optional[Tensor] = None
        for g, w in zip(groups, widths):
            args = [t[g, :w] for t in tensors[:3] if t is not None]
            token_extra = iter(tensors[3:])
            for scope, a in self.batch.extra:
                if scope == "token":
                    args.append(next(token_extra)[g, :w])  # type: ignore[index]
                else:
                    args.append(a[instances[g]] if scope == "row" else a)
            args = [x.to(self.device) if isinstance(x, Tensor) else x for x in args]
            logits = checked_logits(self.forward_func(*args))
            if logits.shape[0] != len(g):
                raise ValueError(
                    f"forward_func returned {logits.shape[0]} rows for a batch of "
                    f"{len(g)}"
                )
            if out is None:
                out = torch.empty(len(instances), logits.shape[1], dtype=torch.float64)
            out[g] = logits.detach().to("cpu", torch.float64)
        return out  # type: ignore[return-value]
