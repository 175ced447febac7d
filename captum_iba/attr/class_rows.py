"""A classifier's rows (:class:`ClassRows`): each instance one row, the class
explained its target, the model read directly - how a classifier's kind
(:data:`~captum_iba.attr.kinds.CLASSIFIER`) packs a
:class:`~captum_iba.attr.batches.TokenBatch` for a method's one hook and runs
the families of attribution on it (:mod:`captum_iba.attr.rows`)."""

import dataclasses
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from captum_iba._utils import common
from captum_iba.attr.rows import (
    CaptumRun,
    Read,
    Rows,
    RowScores,
    row_passes,
    with_values,
)

__all__ = ["ClassRows"]


def _attribute_args(method: Any) -> Mapping[str, inspect.Parameter]:
    return inspect.signature(method.attribute).parameters


@dataclass(frozen=True)
class ClassRows(Rows):
    """A classifier's rows: each instance one row, the class explained
    ``target`` (see :class:`Rows`).

    Attributes:
        token_type_ids (Tensor, optional): ``(R, L)`` segment ids.
        target (Tensor, optional): ``(R,)`` the class explained per row (None
            for a method that reads no model).
        use_attention_mask (bool): Whether the forward is given the mask and
            the segment ids (the scorer's setting).
        batch_mask (Tensor, optional): ``(B, L)`` the batch's own attention
            mask, at its full width (the result is zero at its padding).
    """

    token_type_ids: Optional[Tensor] = None
    target: Optional[Tensor] = None
    use_attention_mask: bool = True
    batch_mask: Optional[Tensor] = None

    @classmethod
    def pack(cls, batch: Any, scorer: Any) -> "ClassRows":
        """A classifier's :class:`~captum_iba.attr.batches.TokenBatch` as
        rows on the model's device: the inputs checked, the attention mask
        ``input_ids != pad`` where none is given, the class explained
        resolved (the scorer's fixed class, the given one, or the predicted
        one), the columns that are padding in every row left out."""
        input_ids = batch.input_ids
        if input_ids.dim() != 2:
            raise ValueError("input_ids must be (B, L)")
        model = scorer.model
        common.check_length(model, input_ids.shape[1], "input_ids")
        mask = batch.attention_mask
        if mask is None:
            mask = (input_ids != scorer.pad_token_id).long()
        dev = common.model_device(model)
        ids, dmask = input_ids.to(dev), mask.to(dev)
        tt = batch.token_type_ids
        tt = tt.to(dev) if tt is not None else None
        target = None
        if getattr(scorer, "reads_model", True):
            target = cls._target_of(scorer, batch.target, ids, dmask, tt)
        # Columns that are padding in every row (a slice of a data set padded
        # to its longest instance) are dropped for the method and put back.
        real = dmask.bool().any(dim=0).nonzero()
        width = int(real.max()) + 1 if real.numel() else ids.shape[1]
        cut_ids, cut_mask = ids[:, :width], dmask[:, :width]
        return cls(
            cut_ids,
            cut_mask,
            common.removable_mask(cut_ids, cut_mask, scorer.special_token_ids),
            ids.shape[0],
            model,
            tuple(scorer.special_token_ids),
            scorer.pad_token_id,
            None if tt is None else tt[:, :width],
            target,
            scorer.use_attention_mask,
            mask,
        )

    @classmethod
    def _target_of(
        cls, scorer: Any, given: Any, ids: Tensor, mask: Tensor, tt: Optional[Tensor]
    ) -> Optional[Tensor]:
        """The class explained per row, on the rows' device: the scorer's
        fixed one, the given one, or the predicted one."""
        batch = ids.shape[0]
        if scorer.target_class is not None:
            found = torch.full((batch,), int(scorer.target_class), dtype=torch.long)
        elif given is None:
            with torch.no_grad():
                found = common.hf_call(scorer.model, ids, mask, tt).argmax(-1)
        else:
            found = common.format_target(given, batch)
            if found is None or found.dim() != 1:
                raise ValueError("target must be one class index per instance")
        return found.to(ids.device)

    def unpack(self, scorer: Any, scores: Union[Tensor, "RowScores"]) -> Tensor:
        """``(B, L)`` float scores on the CPU, zero at padding."""
        values = with_values(scores).values
        assert self.batch_mask is not None
        B, L = self.batch_mask.shape
        width = self.input_ids.shape[1]
        if tuple(values.shape) != (B, width):
            raise RuntimeError(
                f"{scorer.name} returned {tuple(values.shape)}; expected {(B, width)}"
            )
        out = torch.zeros(B, L)
        out[:, :width] = values.detach().float().cpu()
        return out.masked_fill(~self.batch_mask.bool().cpu(), 0.0)

    def read(self) -> Read:
        mask, tt = self.attention_mask, self.token_type_ids
        args = (mask,) if tt is None else (mask, tt)
        return Read(self.input_ids, args, mask, self.target)

    def forward(
        self,
        model: Any = None,
        output: str = "logits",
        removed: Optional[int] = None,
    ) -> Callable[..., Tensor]:
        """The classifier's forward, ``forward(ids, mask[, tt]) -> (R, C)``:
        the logits, or their softmax for ``output="probs"``; with
        ``removed`` a token id whose positions get attention mask 0 (the
        removed tokens of a perturbation)."""
        model = self.model if model is None else model
        use_mask = self.use_attention_mask

        def forward(ids: Tensor, mask: Tensor, tt: Optional[Tensor] = None) -> Tensor:
            if removed is not None:
                mask = mask * (ids != removed).to(mask.dtype)
            logits = common.hf_call(
                model, ids, mask if use_mask else None, tt if use_mask else None
            )
            return logits.softmax(-1) if output == "probs" else logits

        return forward

    def part(self, index: Sequence[int]) -> "ClassRows":
        """The rows ``index`` (in that order; a row may repeat)."""
        at = torch.as_tensor(list(index), dtype=torch.long, device=self.device)

        def pick(t: Optional[Tensor]) -> Optional[Tensor]:
            return None if t is None else t[at.to(t.device)]

        return dataclasses.replace(
            self,
            input_ids=self.input_ids[at],
            attention_mask=self.attention_mask[at],
            scored=self.scored[at],
            instances=len(at),
            token_type_ids=pick(self.token_type_ids),
            target=pick(self.target),
            batch_mask=pick(self.batch_mask),
        )

    def without(self, drop: Tensor) -> Tuple["ClassRows", Tensor]:
        """The rows with the tokens ``drop`` (``(R, L)`` bool) deleted as the
        degradation test deletes them (:func:`~captum_iba._utils.common.delete_tokens`:
        each row compacted to the left, the segment ids following, the freed
        tail padding), as narrow as the longest row left; and ``(R, L')`` the
        original column of each position (-1 at new padding)."""
        if tuple(drop.shape) != tuple(self.input_ids.shape):
            raise ValueError(
                f"drop must be (R, L) like the rows {tuple(self.input_ids.shape)}, "
                f"got {tuple(drop.shape)}"
            )
        keep = self.attention_mask.bool() & ~drop.bool().to(self.device)
        columns = torch.arange(keep.shape[1], device=self.device).expand_as(keep)
        tensors = [self.input_ids, self.attention_mask, self.token_type_ids, columns]
        fills = [self.pad_token_id, 0, 0, -1]
        (ids, mask, tt, cols), lengths = common.delete_tokens(keep, tensors, fills)
        width = max(int(lengths.max()) if len(lengths) else 1, 1)
        ids, mask = ids[:, :width], mask[:, :width]  # type: ignore[index]
        rows = dataclasses.replace(
            self,
            input_ids=ids,
            attention_mask=mask,
            scored=common.removable_mask(ids, mask, self.special_token_ids),
            token_type_ids=None if tt is None else tt[:, :width],
            batch_mask=mask,
        )
        return rows, cols[:, :width]  # type: ignore[index]

    def with_ids(self, input_ids: Tensor) -> "ClassRows":
        return dataclasses.replace(self, input_ids=input_ids.to(self.device))

    @property
    def explained_tokens(self) -> Tensor:
        return torch.ones(len(self), dtype=torch.long)

    def log_probability(self, rows_per_pass: Optional[int] = None) -> Tensor:
        """See :meth:`Rows.log_probability`: the log-softmax of the class
        explained, each pass without the columns that are padding in all its
        rows."""
        read, forward = self.read(), self.forward()
        assert read.target is not None
        out = []
        with torch.no_grad():
            for part in row_passes(self, rows_per_pass):
                real = self.attention_mask[part].bool().any(0).nonzero()
                width = int(real.max()) + 1 if real.numel() else 1
                args = [a[part, :width] for a in read.args]
                logits = forward(read.input_ids[part, :width], *args).double()
                picked = logits.log_softmax(-1).gather(1, read.target[part, None])
                out.append(picked.squeeze(1).cpu())
        return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)

    def legacy(self, scorer: Any) -> Union[Tensor, RowScores]:
        """0.3's ``_scores(ids, mask, tt, target)`` of a classifier."""
        hook = getattr(scorer, "_legacy_tokens", None)
        if hook is None:
            return super().legacy(scorer)
        tt = self.token_type_ids
        return hook(self.input_ids, self.attention_mask, tt, self.target)

    def logits(self, model: Any, inputs_embeds: Tensor) -> Tensor:
        """The class's logit per row (see :meth:`Rows.logits`)."""
        extra: Dict[str, Tensor] = {"attention_mask": self.attention_mask}
        if self.token_type_ids is not None:
            extra["token_type_ids"] = self.token_type_ids
        logits = model(inputs_embeds=inputs_embeds, **extra).logits
        assert self.target is not None
        return logits.gather(1, self.target[:, None].to(logits.device)).squeeze(1)

    def captum(self, run: CaptumRun) -> Tensor:
        """See :meth:`Rows.captum`: the model read directly. A layer method
        runs on every row at once (summed over the layer's features); a
        perturbation method one row at a time, one feature per removable
        token, its draws seeded per row; the method's ``own`` run where it
        has one."""
        if run.own is not None:
            return run.own(self)
        baseline = (
            self.pad_token_id
            if run.baseline_token_id is None
            else run.baseline_token_id
        )
        removed = baseline if run.mask_baseline else None
        forward = self.forward(output=run.output, removed=removed)
        removable = self.removable()
        read = self.read()
        opts = {**run.options, **run.direct_options}
        if run.is_layer_method:
            attribution = run.method(forward, run.layer, **run.arguments)
            if run.baselines:
                opts["baselines"] = self.input_ids.masked_fill(removable, baseline)
            rows = run.internal_batch_size
            steps = int(opts.get("n_steps", 1))
            bound = run.max_tokens_per_pass
            ids = self.input_ids
            if rows is None and bound is not None and ids.numel() * steps > bound:
                rows = max(ids.shape[0], bound // ids.shape[1])
            if bound is not None or run.internal_batch_size is not None:
                opts["internal_batch_size"] = rows
            attr = attribution.attribute(
                self.input_ids,
                target=self.target,
                additional_forward_args=read.args,
                **opts,
            )
            attr = attr.reshape(attr.shape[:2] + (-1,)).sum(-1)
            return attr * (removable if run.features_only else self.attention_mask)
        out = torch.zeros(self.input_ids.shape, dtype=torch.float32, device=self.device)
        shared = None if run.per_row else run.method(forward, **run.arguments)
        for b in range(len(self)):
            n = int(removable[b].sum())
            if n == 0:
                continue
            with common.kept_random_state(self.device):
                real = self.input_ids[b][self.attention_mask[b].bool()]
                seed = run.seed
                if seed is not None:
                    seed = common.instance_seed(seed, real)
                    torch.manual_seed(seed)
                attribution = shared
                if run.per_row is not None:
                    gen = torch.Generator()
                    if seed is not None:
                        gen.manual_seed(seed)
                    built = {**run.arguments, **run.per_row(n, gen)}
                    attribution = run.method(forward, **built)
                out[b] = self._row(attribution, removable, b, baseline, opts, read)
        return out

    def _row(
        self,
        attribution: Any,
        removable: Tensor,
        b: int,
        baseline: int,
        options: Dict[str, Any],
        read: Read,
    ) -> Tensor:
        """A perturbation method's token scores of row ``b``: one feature
        per removable token."""
        row = slice(b, b + 1)
        rem = removable[b]
        n = int(rem.sum())
        args: Dict[str, Any] = dict(
            baselines=self.input_ids[row].masked_fill(rem[None], baseline),
            target=None if self.target is None else int(self.target[b]),
            additional_forward_args=tuple(a[row] for a in read.args),
        )
        params = _attribute_args(attribution)
        if "feature_mask" in params:
            fmask = torch.full_like(self.input_ids[b], n)  # specials: one no-op
            fmask[rem] = torch.arange(n, device=self.device)
            args["feature_mask"] = fmask[None]
        if "sliding_window_shapes" in params:
            args["sliding_window_shapes"] = (1,)
        if "perturbations_per_eval" in params:
            args["perturbations_per_eval"] = max(1, n)
        args.update(options)
        attr = attribution.attribute(self.input_ids[row], **args)
        return attr[0].float() * rem
