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
  class explained per row (:class:`~captum_iba.attr.class_rows.ClassRows`);
* a causal LM's rows are its prompts with their answers and, where per-token
  scores are asked for, one more row per answer token; the forward is the
  explained tokens' log-likelihood
  (:class:`~captum_iba.attr.llm.CausalLMLogLikelihood`), ``target`` None
  (:class:`~captum_iba.attr.answer_rows.AnswerRows`).

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
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from captum_iba._utils import common

__all__ = ["CaptumRun", "Read", "RowScores", "Rows", "row_passes", "with_values"]


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
        :class:`CaptumRun`): a kind reads them directly (a classifier's,
        :class:`~captum_iba.attr.class_rows.ClassRows`) or through its own
        wrapper (a causal LM's: Captum's LLM API)."""
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


def row_passes(rows: Rows, given: Optional[int]) -> Sequence[slice]:
    """The rows' forward passes: ``given`` rows each, or as many as
    :func:`~captum_iba.attr.batches.rows_per_pass` allows at their width."""
    from captum_iba.attr.batches import rows_per_pass

    step = rows_per_pass(int(rows.input_ids.shape[1]), given)
    return [slice(s, s + step) for s in range(0, len(rows), step)]


def with_values(scores: Union[Tensor, RowScores]) -> RowScores:
    """``scores`` as :class:`RowScores`."""
    if isinstance(scores, RowScores):
        return scores
    return RowScores(scores)
