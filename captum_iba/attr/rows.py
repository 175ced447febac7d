"""What a method scores, whatever the model: rows of token ids and what the
model's forward reads of them - the one currency between a model's kind and a
method.

The kind of model (:class:`~captum_iba.attr.kinds.ModelKind`) is the adapter:
it packs a batch into :class:`Rows` (:meth:`ModelKind.pack
<captum_iba.attr.kinds.ModelKind.pack>`), a method scores the rows with its
one hook, ``_scores(rows)``, and the kind builds the result from the rows'
scores (:meth:`ModelKind.unpack <captum_iba.attr.kinds.ModelKind.unpack>`).
A method never learns which kind it explains, as a method wrapped by Captum's
``LLMAttribution`` never learns that it explains an LLM:

* a classifier's rows are its instances: the forward reads ``(input_ids,
  attention_mask[, token_type_ids])`` and returns the logits, ``target`` the
  class explained per row (:class:`ClassRows`);
* a causal LM's rows are its prompts with their answers and, where per-token
  scores are asked for, one more row per answer token; the forward is the
  explained tokens' log-likelihood
  (:class:`~captum_iba.attr.llm.CausalLMLogLikelihood`), ``target`` None
  (:class:`AnswerRows`).

What a method reads:

* :attr:`Rows.input_ids`, :attr:`Rows.attention_mask` and :attr:`Rows.scored`
  (the tokens a method scores and may remove), every row at the batch's full
  width;
* :meth:`Rows.read` - what the forward reads (the ids, the forward's further
  arguments, the tokens a mask may act on), narrower where the forward reads
  fewer columns (a causal LM's answers end in a token that predicts nothing);
* :meth:`Rows.captum` - one of Captum's attribution classes run on the rows:
  directly on a classifier's, through Captum's LLM API on a causal LM's (the
  kind's own runner).

A method's hook returns one score per row and token (``(R, L)``, or the
:meth:`read` width), or :class:`RowScores` where it has more to say.
"""

import dataclasses
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from captum_iba._utils import common

__all__ = ["Read", "RowScores", "Rows", "ClassRows", "AnswerRows"]


@dataclass(frozen=True)
class Read:
    """What a model's forward reads of a set of rows.

    Attributes:
        input_ids (Tensor): ``(R, L')`` the ids the forward reads.
        args (tuple of Tensor): The forward's further arguments, in order
            (``additional_forward_args`` in Captum's terms).
        token_mask (Tensor): ``(R, L')`` the tokens a mask acts on (IBA's
            ``token_mask``).
        target (Tensor, optional): ``(R,)`` the output explained per row; None
            when the forward returns one value per row.
        objective (str, optional): IBA's objective where the kind's output
            asks for another than its default (None: IBA's default).
    """

    input_ids: Tensor
    args: Tuple[Tensor, ...]
    token_mask: Tensor
    target: Optional[Tensor]
    objective: Optional[str] = None


@dataclass(frozen=True)
class RowScores:
    """A method's scores of rows with what it says of them beside.

    Attributes:
        values (Tensor): ``(R, L)`` one score per row and token.
        unit (str, optional): What a score is, where the method says it per
            call (None: the scorer's :attr:`unit`).
        flat (Tensor, optional): ``(R,)`` bool: the row's scores give no
            ranking.
        groups (Tensor, optional): ``(R, G)`` one score per group of tokens
            (a context's sources), where the method scores groups as such.
    """

    values: Tensor
    unit: Optional[str] = None
    flat: Optional[Tensor] = None
    groups: Optional[Tensor] = None


@dataclass(frozen=True)
class CaptumRun:
    """One of Captum's attribution classes as a method runs it on rows
    (:meth:`Rows.captum`): what every kind reads, and what a kind's own way
    of running it reads where it has one.

    Attributes:
        method (type): The Captum class (``LayerIntegratedGradients``,
            ``FeatureAblation``, ``Lime``, ...).
        arguments (Mapping): Arguments of the class itself (e.g.
            ``multiply_by_inputs``).
        options (Mapping): Arguments of its ``attribute`` (``n_steps``,
            ``n_samples``, ...).
        seed (int, optional): Seed of each row's draws (from its ids); None
            leaves torch's generator alone.
        layer (Module, optional): A layer method's layer on a model read
            directly (a causal LM's runner takes its token embeddings).
        output (str): ``"logits"`` or ``"probs"``: what a classifier's
            forward returns.
        baseline_token_id (int, optional): The id a removed token becomes
            (default the rows' pad id).
        mask_baseline (bool): A removed token also gets attention mask 0.
        baselines (bool): A layer method gets ``baselines``: the ids with
            the removable tokens replaced.
        features_only (bool): Zero the scores of tokens that are not
            removable (else of padding only).
        internal_batch_size (int, optional): Rows per pass of a method that
            runs many (integrated gradients' steps); None: sized by
            ``max_tokens_per_pass`` (a classifier's) or the rows' kind.
        max_tokens_per_pass (int, optional): Bounds a pass's tokens when
            ``internal_batch_size`` is None (None: no bound).
        direct_options (Mapping): Further options of ``attribute`` where the
            model is read directly (e.g. LIME's ``perturbations_per_eval``).
        per_row (Callable, optional): ``per_row(n, generator) -> dict``: the
            class's arguments for one row of ``n`` features (its draws from
            ``generator``, seeded per row) where the method builds it per row.
        own (Callable, optional): ``own(rows) -> Tensor``: the method's own
            run on rows a model reads directly (a classifier's), where it
            differs from Captum's class (a deletion instead of a baseline).
    """

    method: Any
    arguments: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    seed: Optional[int] = None
    layer: Any = None
    output: str = "logits"
    baseline_token_id: Optional[int] = None
    mask_baseline: bool = False
    baselines: bool = False
    features_only: bool = True
    internal_batch_size: Optional[int] = None
    max_tokens_per_pass: Optional[int] = None
    direct_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    per_row: Optional[Callable[[int, torch.Generator], Dict[str, Any]]] = None
    own: Optional[Callable[["Rows"], Tensor]] = None

    @property
    def is_layer_method(self) -> bool:
        """bool: Whether the class attributes to a layer."""
        from captum.attr import LayerAttribution

        return issubclass(self.method, LayerAttribution)


@dataclass(frozen=True)
class Rows:
    """Rows of token ids a method scores (see the module docstring).

    Attributes:
        input_ids (Tensor): ``(R, L)`` token ids, on the model's device.
        attention_mask (Tensor): ``(R, L)``, 0 at padding.
        scored (Tensor): ``(R, L)`` bool: the tokens a method scores and may
            remove (not padding, not special, not a chat template's).
        instances (int): The first ``instances`` rows are the batch's
            instances; the rest (where asked for) explain one output each.
        model (Any): The model the rows are explained on.
        special_token_ids (tuple of int): Ids a method never scores.
        pad_token_id (int): The id a removed token becomes.
    """

    input_ids: Tensor
    attention_mask: Tensor
    scored: Tensor
    instances: int
    model: Any = None
    special_token_ids: Tuple[int, ...] = ()
    pad_token_id: int = 0

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def groups(self) -> Optional[Tensor]:
        """Tensor, optional: ``(R, L)`` each token's group, -1 outside; None
        without groups."""
        return None

    @property
    def n_groups(self) -> int:
        """int: The most groups a row has (0 without groups)."""
        return 0

    @property
    def device(self) -> torch.device:
        """torch.device: Where the rows' tensors are."""
        return self.input_ids.device

    def read(self) -> Read:
        """What the forward reads of the rows (see :class:`Read`)."""
        raise NotImplementedError

    def forward(self, model: Any = None) -> Callable[..., Tensor]:
        """The function whose output is explained, of ``model`` (default the
        rows' model): ``forward(input_ids, *read().args)``."""
        raise NotImplementedError

    def logits(self, model: Any, inputs_embeds: Tensor) -> Tensor:
        """``(R,)`` the logits explained, of ``model`` (the rows' model or a
        copy of it) run on ``inputs_embeds`` (``(R, L', H)``, the embeddings
        of :meth:`read`'s ids): what a method that explains a logit (LRP)
        explains."""
        raise NotImplementedError

    def captum(self, run: CaptumRun) -> Tensor:
        """``(R, L)`` scores of Captum's attribution ``run`` on the rows (see
        :class:`CaptumRun`): a kind reads them directly (the default, see
        :class:`ClassRows`) or through its own wrapper (a causal LM's:
        Captum's LLM API)."""
        raise NotImplementedError

    def legacy(self, scorer: Any) -> Union[Tensor, RowScores]:
        """The scores of a user's class that implements a hook of 0.3 for
        this kind (the kind calls it as 0.3 did)."""
        raise TypeError(
            f"{type(scorer).__name__} has no hook for {type(self).__name__}"
        )

    def record(self, scorer: Any, cpu_seconds: float) -> None:
        """Records what a run on the rows took in the scorer's settings (a
        kind whose records hold it)."""

    def removable(self) -> Tensor:
        """``(R, L)`` bool: the rows' real tokens that are not special."""
        return common.removable_mask(
            self.input_ids, self.attention_mask, self.special_token_ids
        )

    def bottleneck(self, iba: Any, options: Any) -> RowScores:
        """IBA's per-token scores of the rows
        (:class:`~captum_iba.InformationBottleneckAttribution` built on
        :meth:`forward`'s model, ``options`` an
        :class:`~captum_iba.attr.options.IBAOptions`): one attribution of
        what the forward reads, its target explained, the mask acting on
        :attr:`Read.token_mask`; a score per token by the options'
        ``token_reduction``."""
        from captum_iba.attr.text import token_attributions

        read = self.read()
        objective = {} if read.objective is None else {"objective": read.objective}
        attr = iba.attribute(
            read.input_ids,
            target=read.target,
            additional_forward_args=read.args,
            config=options,
            token_mask=read.token_mask,
            **objective,
        )
        if attr.dim() == 3:
            attr = token_attributions(attr, reduction=options.token_reduction)
        return RowScores(attr)

    def sized(self, options: Any) -> Any:
        """IBA's ``options`` for a pass over these rows (as given)."""
        return options

    def part(self, index: Sequence[int]) -> "Rows":
        """The rows ``index`` (instances only)."""
        raise NotImplementedError(
            f"{type(self).__name__} cannot take a part of its rows for a further step"
        )

    def without(self, drop: Tensor) -> Tuple["Rows", Tensor]:
        """The rows with the tokens ``drop`` deleted (as the degradation test
        deletes them), and the original column of each position (-1 at new
        padding)."""
        raise NotImplementedError(
            f"{type(self).__name__} cannot delete tokens for a further step"
        )

    def with_ids(self, input_ids: Tensor) -> "Rows":
        """The rows with their token ids replaced by ``input_ids`` (same
        shape; positions, masks and what is explained unchanged): a removal
        that substitutes tokens in place."""
        raise NotImplementedError(f"{type(self).__name__} cannot replace its ids")

    @property
    def explained_tokens(self) -> Tensor:
        """``(R,)`` how many tokens the output each row explains spans (a
        class: 1; an answer: its explained tokens)."""
        raise NotImplementedError

    def log_probability(self, rows_per_pass: Optional[int] = None) -> Tensor:
        """``(R,)`` float64 on the CPU: the log-probability of the output each
        row explains (a class's; an answer's explained tokens'), without
        gradients, ``rows_per_pass`` rows a forward pass (None: as many as
        :func:`~captum_iba.attr.batches.rows_per_pass` allows)."""
        raise NotImplementedError


def _passes(rows: Rows, given: Optional[int]) -> Sequence[slice]:
    """The rows' forward passes: ``given`` rows each, or as many as
    :func:`~captum_iba.attr.batches.rows_per_pass` allows at their width."""
    from captum_iba.attr.batches import rows_per_pass

    step = rows_per_pass(int(rows.input_ids.shape[1]), given)
    return [slice(s, s + step) for s in range(0, len(rows), step)]


def _class_target(
    scorer: Any, target: Any, ids: Tensor, mask: Tensor, tt: Optional[Tensor]
) -> Tensor:
    """The class explained per instance: the scorer's fixed one, the given
    one or the predicted one."""
    batch = ids.shape[0]
    if scorer.target_class is not None:
        return torch.full((batch,), int(scorer.target_class), dtype=torch.long)
    if target is None:
        with torch.no_grad():
            return common.hf_call(scorer.model, ids, mask, tt).argmax(-1).cpu()
    formatted = common.format_target(target, batch)
    if formatted is None or formatted.dim() != 1:
        raise ValueError("target must be one class index per instance")
    return formatted


def _attribute_args(method: Any) -> Mapping[str, inspect.Parameter]:
    return inspect.signature(method.attribute).parameters


@dataclass(frozen=True)
class ClassRows(Rows):
    """A classifier's rows: each instance one row, the class explained
    ``target`` (see :class:`Rows`).

    Attributes:
        token_type_ids (Tensor, optional): ``(R, L)`` segment ids.
        target (Tensor): ``(R,)`` the class explained per row.
        output (Callable, optional): What the forward returns of the logits
            (None: the logits).
    """

    token_type_ids: Optional[Tensor] = None
    target: Optional[Tensor] = None
    use_attention_mask: bool = True
    batch_mask: Optional[Tensor] = None

    @classmethod
    def pack(cls, batch: Any, scorer: Any, per_token: bool = False) -> "ClassRows":
        """A classifier's :class:`~captum_iba.attr.batches.TokenBatch` as
        rows on the model's device: the inputs checked, the attention mask
        ``input_ids != pad`` where none is given, the class explained
        resolved (the scorer's fixed class, the given one, or the predicted
        one), the columns that are padding in every row left out
        (``per_token`` has no meaning for a class)."""
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
        """The class explained per row, on the rows' device (the scorer's
        fixed one, the given one, or the predicted one)."""
        return _class_target(scorer, given, ids, mask, tt).to(ids.device)

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
            for part in _passes(self, rows_per_pass):
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


@dataclass(frozen=True)
class AnswerRows(Rows):
    """A causal LM's rows: its prompts with their answers, then (where
    per-token scores are asked for) one row per answer token, that token's
    log-probability explained (see :class:`Rows`).

    Attributes:
        batch (PromptBatch): The prompts and answers.
        which (Tensor, optional): ``(R - instances, 2)`` the ``(instance,
            answer token)`` each further row explains.
        tokenizer (Any): The model's tokenizer (Captum's LLM API names the
            tokens with it).
    """

    batch: Any = None
    which: Optional[Tensor] = None
    tokenizer: Any = None

    @classmethod
    def pack(cls, batch: Any, scorer: Any, per_token: bool = False) -> "AnswerRows":
        """A causal LM's :class:`~captum_iba.attr.batches.PromptBatch` as rows:
        its prompts and, with ``per_token`` (where the method gives per-token
        scores: no ``per_token_note``), one row per answer token after them.

        Raises:
            ValueError: For a part of the answers explained by a method that
                explains whole answers only, or with ``per_token``.
        """
        if batch.explained is not None:
            _check_span(scorer, per_token)
        which = None
        rows = batch
        if per_token and not scorer.per_token_note:
            from captum_iba.attr.llm import concat_batches

            tokens, which = batch.per_token()
            rows = concat_batches([batch, tokens])
        return cls(
            rows.input_ids,
            rows.attention_mask,
            rows.scored,
            len(batch),
            scorer.model,
            tuple(scorer.special_token_ids),
            scorer.pad_token_id,
            rows,
            which,
            scorer.tokenizer,
        )

    def unpack(self, scorer: Any, scores: Union[Tensor, "RowScores"]) -> Any:
        """:class:`~captum_iba.attr.batches.AnswerScores`: the whole answers'
        scores and (with per-token rows) each output token's, zero wherever
        a token is not scored."""
        from captum_iba.attr.batches import AnswerScores

        found = with_values(scores)
        values = found.values
        width = self.input_ids.shape[1]
        if values.shape[1] < width:  # the answers' last token, read by none
            pad = values.new_zeros(values.shape[0], width - values.shape[1])
            values = torch.cat([values, pad], dim=1)
        B = self.instances
        scored = self.scored[:B]
        keep = scored.to(values.device)
        answer = values[:B] * keep
        tokens = None
        if self.which is not None:
            longest = int(self.which[:, 1].max()) + 1
            tokens = values.new_zeros(B, longest, width)
            tokens[self.which[:, 0], self.which[:, 1]] = values[B:]
            tokens = tokens * keep[:, None]
        unit = found.unit or scorer.unit
        return AnswerScores(answer, tokens, unit, found.flat, found.groups)

    @property
    def groups(self) -> Optional[Tensor]:
        return self.batch.sources

    @property
    def n_groups(self) -> int:
        return int(self.batch.n_sources)

    @property
    def prompts(self) -> Any:
        """PromptBatch: The instances' prompts and answers (without the
        per-token rows): the contract of a method that scores a context's
        sources as such (a prompt batch in, one score per source out)."""
        if self.which is None:
            return self.batch
        return self.batch.rows(list(range(self.instances)))

    def legacy(self, scorer: Any) -> Union[Tensor, RowScores]:
        """0.3's ``_prompt_scores(batch, per_token)`` of a causal LM."""
        hook = getattr(scorer, "_legacy_prompts", None)
        if hook is None:
            return super().legacy(scorer)
        found = hook(self.prompts, self.per_token)
        values = self.spread(found.answer, found.tokens)
        return RowScores(values, found.unit, found.flat, found.sources)

    def spread(self, instances: Tensor, per_token: Optional[Tensor]) -> Tensor:
        """``(R, W)`` row values from the instances' ``(B, W)`` and, where
        the rows hold per-token rows, each answer token's ``(B, T, W)``."""
        out = instances.new_zeros(len(self), instances.shape[1])
        out[: self.instances] = instances
        if self.which is not None and per_token is not None:
            out[self.instances :] = per_token[self.which[:, 0], self.which[:, 1]]
        return out

    @property
    def per_token(self) -> bool:
        """bool: Whether rows explain each answer token."""
        return self.which is not None

    def read(self) -> Read:
        args = self.batch.arguments()
        dev = common.model_device(self.model, self.device)
        mask, labels = args["attention_mask"].to(dev), args["labels"].to(dev)
        token_mask = self.scored[:, :-1].to(dev).bool()
        return Read(args["input_ids"].to(dev), (mask, labels), token_mask, None)

    def bottleneck(self, iba: Any, options: Any) -> RowScores:
        """IBA on every row in one call (:func:`~captum_iba.attr.llm.answer_rows`:
        the labelled tokens' log-likelihood kept high); a note where an
        instance's scores give no ranking."""
        from captum_iba.attr._ranking import say_if_flat
        from captum_iba.attr.llm import answer_rows, answer_unit

        scores, flat, used = answer_rows(iba, self.batch, {"config": options})
        flat = flat[: self.instances]
        say_if_flat(flat, iba, used)
        return RowScores(scores, answer_unit(used), flat)

    def record(self, scorer: Any, cpu_seconds: float) -> None:
        scorer.settings["cpu_seconds"] = cpu_seconds

    def sized(self, options: Any) -> Any:
        """``options`` with as many rows per pass as keep rows x tokens
        within :data:`~captum_iba.attr.batches.ROW_TOKENS` (a decoder keeps
        far more per token for its backward pass), unless they set
        ``internal_batch_size``."""
        from captum_iba.attr.batches import rows_per_pass

        rows = rows_per_pass(self.input_ids.shape[1], options.internal_batch_size)
        return options.replace(internal_batch_size=rows)

    def part(self, index: Sequence[int]) -> "AnswerRows":
        return self._of(self.batch.rows(list(index)))

    def without(self, drop: Tensor) -> Tuple["AnswerRows", Tensor]:
        shorter, columns = self.batch.without(drop, self.pad_token_id)
        return self._of(shorter), columns

    def with_ids(self, input_ids: Tensor) -> "AnswerRows":
        ids = input_ids.to(self.batch.input_ids.device)
        return self._of(dataclasses.replace(self.batch, input_ids=ids))

    @property
    def explained_tokens(self) -> Tensor:
        return self.batch.explained_mask.sum(1).cpu()

    def log_probability(self, rows_per_pass: Optional[int] = None) -> Tensor:
        """See :meth:`Rows.log_probability`: the explained tokens'
        log-likelihood (:class:`~captum_iba.attr.llm.CausalLMLogLikelihood`)."""
        read, forward = self.read(), self.forward()
        mask, labels = read.args
        out = []
        with torch.no_grad():
            for part in _passes(self, rows_per_pass):
                found = forward(read.input_ids[part], mask[part], labels[part])
                out.append(found.detach().double().reshape(-1).cpu())
        return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)

    def _of(self, batch: Any) -> "AnswerRows":
        """Rows of the instances of ``batch`` (no per-token rows)."""
        return dataclasses.replace(
            self,
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            scored=batch.scored,
            instances=len(batch),
            batch=batch,
            which=None,
        )

    def logits(self, model: Any, inputs_embeds: Tensor) -> Tensor:
        """The sum of each row's explained tokens' logits, each at the
        position that predicts it (see :meth:`Rows.logits`); padding on the
        left read with position ids counted over the real tokens."""
        from captum_iba.attr.batches import IGNORE_INDEX
        from captum_iba.attr.llm_batch import position_ids

        read = self.read()
        mask, labels = read.args
        target = labels[:, 1:]
        logits = model(
            inputs_embeds=inputs_embeds,
            attention_mask=mask,
            position_ids=position_ids(mask),
            use_cache=False,
        ).logits
        answer = target != IGNORE_INDEX
        picked = logits.gather(-1, target.clamp_min(0)[..., None].to(logits.device))
        return (picked.squeeze(-1) * answer).sum(1)

    def forward(self, model: Any = None) -> Callable[..., Tensor]:
        from captum_iba.attr.llm import CausalLMLogLikelihood

        return CausalLMLogLikelihood(self.model if model is None else model)

    def captum(self, run: CaptumRun) -> Tensor:
        """See :meth:`Rows.captum`: through Captum's LLM API (the module
        :mod:`~captum_iba.attr._llm_captum`), which replaces the method's
        forward by the answer's log-probability; a layer method at the
        token embeddings."""
        from captum_iba.attr._llm_captum import llm_captum

        return llm_captum(self, run)


def _check_span(scorer: Any, per_token: bool) -> None:
    """Refuses a batch that explains a part of each answer for a method
    that explains the whole answer only (``explains_spans``), or with
    per-token scores (each output token's are the whole answer's tokens,
    whatever part is explained)."""
    if not scorer.explains_spans:
        raise ValueError(
            f"{scorer.name} explains the whole answer only: it cannot explain "
            "a part of it (the batch's explained tokens); leave it out, or "
            "explain the whole answer"
        )
    if per_token:
        raise ValueError(
            "per_token scores each output token of the whole answer: explain "
            "a part of the answer without per_token"
        )


def with_values(scores: Union[Tensor, RowScores]) -> RowScores:
    """``scores`` as :class:`RowScores`."""
    if isinstance(scores, RowScores):
        return scores
    return RowScores(scores)


def replace(rows: Rows, **changes: Any) -> Rows:
    """``rows`` with ``changes`` (a dataclass's replace)."""
    return dataclasses.replace(rows, **changes)
