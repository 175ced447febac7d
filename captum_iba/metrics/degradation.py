r"""The degradation test of Jiang et al. (2020), Section 4.1, for token attributions.

The test asks how fast a classifier's confidence in a target class falls when the
tokens an attribution method ranks highest are removed:

1. score every token with an attribution method (IBA, any Captum method, or scores
   computed elsewhere);
2. sort the tokens by score (most relevant first, or least relevant first);
3. remove the first ``k`` tokens, for every removal level ``k``;
4. record the softmax probability of the target class on the degraded input, with
   the original model.

:func:`degradation_test` runs it on token ids (no decoding, no re-tokenising) and
returns a :class:`~captum_iba.metrics.result.DegradationResult`. How it runs is one
:class:`~captum_iba.metrics.options.DegradationOptions` (removal strategies in
:mod:`~captum_iba.metrics.strategies`); the data arguments are checked in
:mod:`~captum_iba.metrics._inputs`, the removal and the batched model calls are in
:mod:`~captum_iba.metrics._removal`, and the old keyword arguments are converted in
:mod:`~captum_iba.metrics._compat`.

How many tokens a level removes (``k``), precisely:

* ``level_unit="fraction"`` and ``length_convention="tokens"`` (the default):
  :math:`k = \lfloor f \cdot n + 1/2 \rfloor` (round half up), where :math:`n` is the
  number of *removable* tokens of the instance: not padding and, when
  ``options.keep_special_tokens`` is True, not a special token.
* ``level_unit="fraction"`` and ``length_convention="paper"``: the paper's code takes
  the fraction of the *full* length, special tokens counted:
  :math:`k = \min(\lfloor f \cdot n_{full} \rfloor, n)`, :math:`n_{full}` the number
  of non-padding tokens ([CLS] and [SEP] included). The special tokens are still never
  removed, so at :math:`f = 1` every removable token is gone.
* ``level_unit="count"``: :math:`k = \min(c, n)` for a non-negative integer ``c``.

``k`` is recorded per instance and level in
:attr:`~captum_iba.metrics.result.DegradationResult.n_removed`.
"""

import dataclasses
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

import torch
from captum.log import log_usage
from torch import Tensor

from captum_iba._utils.common import model_device
from captum_iba.metrics._compat import accepts_legacy_keywords
from captum_iba.metrics._inputs import (
    TargetLike,
    check_inputs,
    check_model_inputs,
    check_original_logits,
    check_scores,
    check_token_ids,
    resolve_target,
    token_batch,
    warn_if_training,
    warn_special_tokens,
)
from captum_iba.metrics._removal import (
    Removal,
    Runner,
    TokenBatch,
    level_counts,
    removal_rank,
    target_stats,
)
from captum_iba.metrics.options import PAPER_LEVELS, DegradationOptions, KnownInputs
from captum_iba.metrics.result import DegradationResult
from captum_iba.metrics.strategies import Deletion

__all__ = [
    "FIRST_PASS_FIELDS",
    "PAPER_LEVELS",
    "degradation_test",
    "original_logits_of",
    "same_first_pass",
]

#: The keys of ``metadata``.
METADATA_KEYS = ("method", "seed", "attribution")
#: The fields of :class:`DegradationOptions` that decide the test's first pass
#: (the model calls on the original inputs: how they are batched, padded and
#: trimmed); the others (levels, order, special tokens, ...) do not.
FIRST_PASS_FIELDS = (
    "removal",
    "pad_token_id",
    "max_examples_per_batch",
    "max_tokens_per_batch",
    "group_by_length",
)


@log_usage()
@accepts_legacy_keywords
def degradation_test(
    forward_func: Callable[..., Any],
    inputs: Tensor,
    attributions: Tensor,
    target: TargetLike = None,
    additional_forward_args: Optional[Any] = None,
    attention_mask: Optional[Tensor] = None,
    token_type_ids: Optional[Tensor] = None,
    options: Optional[DegradationOptions] = None,
    metadata: Optional[Mapping[str, Any]] = None,
    known: Optional[KnownInputs] = None,
) -> DegradationResult:
    r"""Degradation test (Jiang et al., 2020, Section 4.1) of token attributions.

    Tokens are ranked by their attribution, the first ``k`` of that order are removed
    at each level, and the target-class softmax probability of the original model is
    recorded on every degraded input. Removal works on the token ids: nothing is
    decoded or re-tokenised. How (levels, order, removal strategy, special tokens,
    batching) is one :class:`~captum_iba.metrics.options.DegradationOptions`.

    The model is called as ``forward_func(input_ids, [attention_mask],
    [token_type_ids], *additional_forward_args)``: ``attention_mask`` and
    ``token_type_ids`` are passed positionally when given (so a Hugging Face
    ``...ForSequenceClassification`` model can be the forward function). It must
    return logits ``(N, C)``, a tuple whose first element they are, or an object with
    ``.logits`` (a ``ModelOutput``). Probabilities are the softmax of the logits,
    computed in float64. Everything runs under ``torch.no_grad()`` on the device of
    the model's parameters (``forward_func`` an ``nn.Module``) or of ``inputs``. The
    model is not switched to eval mode: switch dropout off yourself (a warning is
    given for a module in training mode).

    Removal (:mod:`~captum_iba.metrics.strategies`):
    :class:`~captum_iba.metrics.strategies.Deletion` (the paper's, the default)
    compacts each sequence, the attention mask, the segment ids and every
    per-token tensor of ``additional_forward_args`` (shape ``(B, L, ...)``)
    following; :class:`~captum_iba.metrics.strategies.Replacement` and
    :class:`~captum_iba.metrics.strategies.CustomRemoval` change the removed
    ids in place. Without any attention mask a model would see deletion's
    padding, so sequences are then grouped by remaining length
    (``options.group_by_length``) and each group trimmed exactly.

    Special tokens (``options.special_token_ids``) are never removed when
    ``options.keep_special_tokens`` is True. Padding (attention mask 0, or
    ``options.pad_token_id`` when no mask is given) is never a token: it is neither
    counted nor removed. Ties between scores are broken by position: the earlier
    token comes first, in both orders.

    Args:
        forward_func (Callable): The model (see above).
        inputs (Tensor): ``input_ids`` ``(B, L)``, integer.
        attributions (Tensor): Per-token scores ``(B, L)`` aligned with ``inputs``,
            from any method. ``(B, L, H)`` (e.g. a layer attribution or IBA's
            capacity) is summed over the last dimension. Only the order matters.
        target (int, sequence, Tensor or None): The class whose probability is
            tracked: one index for all, or one per instance (the gold labels, in the
            paper). None: the class predicted on the original input.
        additional_forward_args (Any, optional): Extra positional arguments, after
            ``attention_mask``/``token_type_ids``; a tuple for several. Tensors of
            shape ``(B, L, ...)`` follow the tokens, tensors ``(B, ...)`` are indexed
            per instance, anything else is passed unchanged.
        attention_mask (Tensor, optional): ``(B, L)``, 1 for tokens, 0 for padding.
        token_type_ids (Tensor, optional): ``(B, L)`` segment ids (sentence pairs).
            Given without an attention mask, a mask is built from
            ``options.pad_token_id`` (all ones when that is unknown).
        options (DegradationOptions, optional): How the test runs. Default
            ``DegradationOptions()``: deletion at the paper's levels ``k/9`` of the
            removable tokens, no special token known, no progress bar
            (``show_progress=True`` shows one). Build it from your tokenizer
            once: ``DegradationOptions.for_tokenizer(tokenizer)``.
        metadata (Mapping, optional): What the result records about the
            attribution method, in its ``settings``: ``"method"`` (its name),
            ``"seed"``, and ``"attribution"`` (its own settings, e.g. steps or
            samples, kept under ``settings["attribution"]``; its ``"method"``
            names the method when ``"method"`` is not given).
        known (KnownInputs, optional): What is known of the inputs: the
            positions that may be removed (``removable``, ``(B, L)`` bool;
            levels count these tokens) and the original logits
            (``original_logits``, ``(B, C)``, from :func:`original_logits_of`
            with the same inputs and options of the same
            :data:`FIRST_PASS_FIELDS`: the test skips its first pass, with
            identical results). Default None: every real token that is not
            special may go, and the test computes the logits.

    Returns:
        DegradationResult: Per-instance probabilities and labels, the aggregates, and
        ``settings``.

    Raises:
        ValueError: On attributions whose shape does not match the tokens, NaN
            scores, a target out of range, a replacement id outside the model's
            vocabulary, bad ``metadata``, or ``original_logits`` that are not
            ``(B, C)`` and finite.
        TypeError: On non-integer token ids or targets, ``options`` that are
            not a :class:`DegradationOptions`, ``known`` that is not a
            :class:`~captum_iba.metrics.options.KnownInputs`, or
            ``original_logits`` that are no Tensor.

    The keyword arguments of earlier versions (``levels=``, ``removal=``,
    ``tokenizer=``, ``pad_token_id=``, ``method=``, ``seed=``, ``settings=``,
    ``show_progress=`` ...) still work, with a DeprecationWarning: they are
    converted once into ``options`` and ``metadata``.

    Examples::

        >>> options = DegradationOptions.for_tokenizer(tokenizer)
        >>> result = degradation_test(model, input_ids, attributions, target=labels,
        ...                           attention_mask=attention_mask,
        ...                           options=options, metadata={"method": "IG"})
        >>> result.first_level_drop, result.aopc
        >>> print(compare({"IG": result, "IBA": iba_result}).to_markdown())
    """
    ids, scores = check_inputs(inputs, attributions)
    check_model_inputs(forward_func, ids, attention_mask)
    options = _check_options(options)
    meta = _check_metadata(metadata)
    known = _check_known(known)
    given = None
    if known.original_logits is not None:
        given = check_original_logits(known.original_logits, ids.shape[0])
    batch = token_batch(
        ids, attention_mask, token_type_ids, additional_forward_args, options,
        known.removable,
    )  # fmt: skip
    rank = removal_rank(
        check_scores(scores, batch.removable), batch.removable, options.order
    )
    warn_if_training(forward_func)
    warn_special_tokens(forward_func, batch, options)
    runner = _runner(forward_func, batch, rank, options, inputs)
    k_table = level_counts(
        options.levels,
        options.level_unit,
        options.length_convention,
        batch.n_removable,
        batch.n_full,
    )
    with torch.no_grad():
        # phase 1: the original inputs (k = 0), unless given
        logits0 = runner.run_originals() if given is None else given
        tgt, target_name = resolve_target(target, logits0)
        original = target_stats(logits0, tgt)
        # phase 2: every level (and the keep-only inputs for sufficiency)
        degraded = runner.run_levels(k_table, tgt, options.compute_sufficiency)
    record = options.record(
        method=meta.get("method"),
        target=target_name,
        num_instances=ids.shape[0],
        num_classes=logits0.shape[1],
        group_by_length=runner.removal.group_by_length,
        seed=meta.get("seed"),
        settings=meta.get("attribution"),
    )
    return _result(options, batch, k_table, tgt, original, degraded, record)


@log_usage()
def original_logits_of(
    forward_func: Callable[..., Any],
    inputs: Tensor,
    attention_mask: Optional[Tensor] = None,
    token_type_ids: Optional[Tensor] = None,
    additional_forward_args: Optional[Any] = None,
    options: Optional[DegradationOptions] = None,
) -> Tensor:
    """The logits of the original inputs, computed as :func:`degradation_test`
    computes them in its first pass: the same model calls, batches and padding
    widths (which :data:`FIRST_PASS_FIELDS` of ``options`` decide).

    Pass them on as ``degradation_test(...,
    known=KnownInputs(original_logits=...))``: every test
    of these inputs with options of the same :data:`FIRST_PASS_FIELDS` then
    skips its first pass, with identical results. (A forward of another batch
    composition may differ from them in the last bits.)

    Args:
        forward_func (Callable): The model, as for :func:`degradation_test`.
        inputs (Tensor): ``input_ids`` ``(B, L)``, integer.
        attention_mask (Tensor, optional): ``(B, L)``.
        token_type_ids (Tensor, optional): ``(B, L)``.
        additional_forward_args (Any, optional): As for :func:`degradation_test`.
        options (DegradationOptions, optional): The test's options. Default
            ``DegradationOptions()``.

    Returns:
        Tensor: ``(B, C)`` float64 logits on the CPU.
    """
    ids = check_token_ids(inputs)
    check_model_inputs(forward_func, ids, attention_mask)
    options = _check_options(options)
    batch = token_batch(
        ids, attention_mask, token_type_ids, additional_forward_args, options
    )
    rank = torch.zeros_like(ids)  # k = 0 removes nothing: any order will do
    runner = _runner(
        forward_func,
        batch,
        rank,
        dataclasses.replace(options, show_progress=False),
        inputs,
    )
    with torch.no_grad():
        return runner.run_originals()


def same_first_pass(a: DegradationOptions, b: DegradationOptions) -> bool:
    """Whether two tests' options run the same first pass (equal
    :data:`FIRST_PASS_FIELDS`), so that one's original logits serve both."""
    return all(getattr(a, name) == getattr(b, name) for name in FIRST_PASS_FIELDS)


def _runner(
    forward_func: Callable[..., Any],
    batch: TokenBatch,
    rank: Tensor,
    options: DegradationOptions,
    inputs: Tensor,
) -> Runner:
    """The model calls of a test of ``batch`` (on the model's device, else
    that of ``inputs``)."""
    return Runner(
        forward_func,
        batch,
        rank,
        _removal(options, batch),
        model_device(forward_func, inputs.device),
        options.max_examples_per_batch,
        options.show_progress,
        options.max_tokens_per_batch,
    )


def _check_options(options: Any) -> DegradationOptions:
    """``options``, or the defaults for None."""
    example = "DegradationOptions.for_tokenizer(tokenizer)"
    return _instance_or_default(options, DegradationOptions, "options", example)


def _check_known(known: Any) -> KnownInputs:
    """``known``, or nothing known for None."""
    example = "KnownInputs(removable=mask)"
    return _instance_or_default(known, KnownInputs, "known", example)


def _instance_or_default(value: Any, cls: type, name: str, example: str) -> Any:
    """``value``, ``cls()`` for None, else a TypeError naming ``name``."""
    if value is None:
        return cls()
    if not isinstance(value, cls):
        raise TypeError(
            f"{name} must be a {cls.__name__} (e.g. {example}); "
            f"got {type(value).__name__}"
        )
    return value


def _check_metadata(metadata: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """``metadata`` as a dict, its keys and values checked."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise ValueError(f"metadata must be a mapping; got {type(metadata).__name__}")
    unknown = sorted(set(metadata) - set(METADATA_KEYS))
    if unknown:
        raise ValueError(f"metadata has unknown key(s) {unknown}: use {METADATA_KEYS}")
    attribution = metadata.get("attribution")
    if attribution is not None and not isinstance(attribution, Mapping):
        raise ValueError(
            "metadata['attribution'] must be a mapping of the method's settings; "
            f"got {type(attribution).__name__}"
        )
    return dict(metadata)


def _removal(options: DegradationOptions, batch: TokenBatch) -> Removal:
    """The options' removal strategy, resolved for ``batch``: deletion's fill is
    its own pad id, else the options', else 0; ``group_by_length`` defaults to
    True when deleting without an attention mask or per-token additional
    argument."""
    strategy = options.removal
    deletes = isinstance(strategy, Deletion)
    group = options.group_by_length
    if group is None:
        group = (
            deletes
            and batch.attention_mask is None
            and not any(kind == "token" for kind, _ in batch.extra)
        )
    pad = strategy.pad_token_id if deletes else None  # type: ignore[union-attr]
    if pad is None:
        pad = options.pad_token_id if options.pad_token_id is not None else 0
    return Removal(strategy, int(pad), bool(group))


def _result(
    options: DegradationOptions,
    batch: TokenBatch,
    k_table: Tensor,
    target: Tensor,
    original: Tuple[Tensor, Tensor, Tensor],
    degraded: Tuple[Tensor, Tensor, Tensor],
    record: Dict[str, Any],
) -> DegradationResult:
    """The result from the original and the ``(B, V, K)`` degraded statistics."""
    probs, preds, log_odds = degraded
    return DegradationResult(
        levels=list(options.levels),
        target=target.clone(),
        original_probs=original[0],
        original_preds=original[1],
        original_log_odds=original[2],
        probs=probs[:, 0].contiguous(),
        preds=preds[:, 0].contiguous(),
        log_odds=log_odds[:, 0].contiguous(),
        n_tokens=batch.n_removable,
        n_removed=k_table,
        kept_probs=probs[:, 1].contiguous() if options.compute_sufficiency else None,
        settings=record,
    )
