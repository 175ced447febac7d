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
returns a :class:`~captum_iba.metrics.result.DegradationResult`. Its arguments are
checked in :mod:`~captum_iba.metrics._inputs`; the removal and the batched model calls
are in :mod:`~captum_iba.metrics._removal`.

How many tokens a level removes (``k``), precisely:

* ``level_unit="fraction"`` and ``length_convention="tokens"`` (the default):
  :math:`k = \lfloor f \cdot n + 1/2 \rfloor` (round half up), where :math:`n` is the
  number of *removable* tokens of the instance: not padding and, when
  ``keep_special_tokens`` is True, not a special token.
* ``level_unit="fraction"`` and ``length_convention="paper"``: the paper's code takes
  the fraction of the *full* length, special tokens counted:
  :math:`k = \min(\lfloor f \cdot n_{full} \rfloor, n)`, :math:`n_{full}` the number
  of non-padding tokens ([CLS] and [SEP] included). The special tokens are still never
  removed, so at :math:`f = 1` every removable token is gone.
* ``level_unit="count"``: :math:`k = \min(c, n)` for a non-negative integer ``c``.

``k`` is recorded per instance and level in
:attr:`~captum_iba.metrics.result.DegradationResult.n_removed`.
"""

from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Tuple, Union

import torch
from captum.log import log_usage
from torch import Tensor

from captum_iba._utils.common import model_device
from captum_iba.metrics._inputs import (
    PAPER_LEVELS,
    DegradationOptions,
    TargetLike,
    check_inputs,
    check_model_inputs,
    check_scores,
    resolve_target,
    token_batch,
    warn_if_training,
)
from captum_iba.metrics._removal import (
    DEFAULT_TOKENS_PER_BATCH,
    Runner,
    TokenBatch,
    removal_rank,
    target_stats,
)
from captum_iba.metrics.result import DegradationResult

__all__ = ["PAPER_LEVELS", "degradation_test"]


@log_usage()
def degradation_test(
    forward_func: Callable[..., Any],
    inputs: Tensor,
    attributions: Tensor,
    target: TargetLike = None,
    additional_forward_args: Optional[Any] = None,
    attention_mask: Optional[Tensor] = None,
    token_type_ids: Optional[Tensor] = None,
    levels: Optional[Union[float, int, Iterable[Union[float, int]]]] = None,
    level_unit: str = "fraction",
    length_convention: str = "tokens",
    removal: Union[str, int] = "delete",
    order: str = "morf",
    special_token_ids: Optional[Iterable[int]] = None,
    tokenizer: Optional[Any] = None,
    keep_special_tokens: bool = True,
    pad_token_id: Optional[int] = None,
    mask_token_id: Optional[int] = None,
    unk_token_id: Optional[int] = None,
    compute_sufficiency: bool = True,
    max_examples_per_batch: Optional[int] = None,
    max_tokens_per_batch: int = DEFAULT_TOKENS_PER_BATCH,
    group_by_length: Optional[bool] = None,
    method: Optional[str] = None,
    seed: Optional[int] = None,
    settings: Optional[Mapping[str, Any]] = None,
    show_progress: bool = False,
) -> DegradationResult:
    r"""Degradation test (Jiang et al., 2020, Section 4.1) of token attributions.

    Tokens are ranked by their attribution, the first ``k`` of that order are removed
    at each level, and the target-class softmax probability of the original model is
    recorded on every degraded input. Removal works on the token ids: nothing is
    decoded or re-tokenised.

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

    Removal modes:

    * ``"delete"`` (the paper's): removed tokens leave the sequence, which is
      compacted; the attention mask, the segment ids and every other per-token
      tensor of ``additional_forward_args`` (shape ``(B, L, ...)``) follow, and the
      freed tail is padding (``pad_token_id``, mask 0, other tensors 0). Each batch
      is trimmed to its longest remaining sequence. Without any attention mask the
      model would see that padding, so sequences are then grouped by remaining length
      (``group_by_length``) and each group trimmed exactly. An empty remainder is
      evaluated as one padding token (mask 0).
    * ``"mask"``, ``"pad"``, ``"unk"`` or an ``int``: removed tokens are replaced by
      ``[MASK]``, ``[PAD]``, the unknown token or that id; positions, attention mask
      and segment ids are unchanged.

    Special tokens (``special_token_ids``, or the tokenizer's special ids except UNK
    and PAD) are never removed when ``keep_special_tokens`` is True. Padding (attention
    mask 0, or ``pad_token_id`` when no mask is given) is never a token: it is neither
    counted nor removed. Ties between scores are broken by position: the earlier token
    comes first, in both orders.

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
            Given without an attention mask, a mask is built from ``pad_token_id``
            (all ones when that is unknown).
        levels (float, int or sequence, optional): Removal levels, in the order given.
            Default: the paper's ``k/9`` for ``k = 1..9`` (:data:`PAPER_LEVELS`).
        level_unit (str): ``"fraction"`` (levels in [0, 1]) or ``"count"`` (levels are
            numbers of tokens, capped at the number of removable tokens).
            Default ``"fraction"``.
        length_convention (str): How a fraction becomes ``k`` (see the module
            docstring): ``"tokens"`` (round half up of ``f * n``, ``n`` the removable
            tokens) or ``"paper"`` (floor of ``f`` times the full non-padding length,
            specials counted, capped at ``n``). Default ``"tokens"``.
        removal (str or int): ``"delete"``, ``"mask"``, ``"pad"``, ``"unk"`` or a
            replacement token id. Default ``"delete"``.
        order (str): ``"morf"`` (most relevant first, the paper's) or ``"lerf"``
            (least relevant first). Default ``"morf"``.
        special_token_ids (Iterable[int], optional): Ids never removed.
        tokenizer (optional): A Hugging Face tokenizer to take the special, pad,
            mask and unknown token ids from (explicit arguments win).
        keep_special_tokens (bool): Never remove special tokens. Default True.
        pad_token_id (int, optional): Padding id (deletion's fill, ``"pad"`` mode,
            padding detection without an attention mask). Default 0 for the fill.
        mask_token_id (int, optional): Id for ``removal="mask"``.
        unk_token_id (int, optional): Id for ``removal="unk"``.
        compute_sufficiency (bool): Also evaluate "keep only the first k tokens"
            inputs, for :attr:`DegradationResult.sufficiency` (doubles the forward
            passes). Default True.
        max_examples_per_batch (int, optional): Most sequences per forward call.
            Default None: as many as ``max_tokens_per_batch`` allows.
        max_tokens_per_batch (int): When ``max_examples_per_batch`` is None, a
            forward call takes as many sequences (sorted by length) as keep
            sequences x padded width within this bound, which bounds memory and
            keeps padding low. Default 2048. Results do not depend on the
            batching (up to float rounding).
        group_by_length (bool, optional): See ``"delete"``. Default None: True when
            deleting without an attention mask or per-token additional argument.
        method (str, optional): Name of the attribution method, recorded.
        seed (int, optional): Recorded in ``settings`` (the test itself is
            deterministic).
        settings (Mapping, optional): The attribution method's settings (e.g. its
            target, steps or samples), recorded under ``settings["attribution"]``.
        show_progress (bool): Show a progress bar. Default False.

    Returns:
        DegradationResult: Per-instance probabilities and labels, the aggregates, and
        ``settings``.

    Raises:
        ValueError: On attributions whose shape does not match the tokens, NaN
            scores, levels outside [0, 1], an unknown removal mode or order, a target
            out of range, or a missing replacement id.
        TypeError: On non-integer token ids or targets.

    Examples::

        >>> result = degradation_test(model, input_ids, attributions, target=labels,
        ...                           attention_mask=attention_mask,
        ...                           tokenizer=tokenizer, method="IG")
        >>> result.first_level_drop, result.aopc
        >>> print(compare({"IG": result, "IBA": iba_result}).to_markdown())
    """
    ids, scores = check_inputs(inputs, attributions)
    check_model_inputs(forward_func, ids, attention_mask)
    options = DegradationOptions.resolve(
        levels=levels,
        level_unit=level_unit,
        length_convention=length_convention,
        removal=removal,
        order=order,
        special_token_ids=special_token_ids,
        tokenizer=tokenizer,
        keep_special_tokens=keep_special_tokens,
        pad_token_id=pad_token_id,
        mask_token_id=mask_token_id,
        unk_token_id=unk_token_id,
        compute_sufficiency=compute_sufficiency,
        max_examples_per_batch=max_examples_per_batch,
        max_tokens_per_batch=max_tokens_per_batch,
    )
    batch = token_batch(
        ids, attention_mask, token_type_ids, additional_forward_args, options
    )
    rank = removal_rank(
        check_scores(scores, batch.removable), batch.removable, options.order
    )
    warn_if_training(forward_func)
    runner = Runner(
        forward_func,
        batch,
        rank,
        options.removal_for(batch, group_by_length),
        model_device(forward_func, inputs.device),
        options.max_examples_per_batch,
        show_progress,
        options.max_tokens_per_batch,
    )
    k_table = options.level_counts(batch)
    with torch.no_grad():
        logits0 = runner.run_originals()  # phase 1: the original inputs (k = 0)
        tgt, target_name = resolve_target(target, logits0)
        original = target_stats(logits0, tgt)
        # phase 2: every level (and the keep-only inputs for sufficiency)
        degraded = runner.run_levels(k_table, tgt, options.compute_sufficiency)
    record = options.record(
        method=method,
        target=target_name,
        num_instances=ids.shape[0],
        num_classes=logits0.shape[1],
        group_by_length=runner.removal.group_by_length,
        seed=seed,
        settings=settings,
    )
    return _result(options, batch, k_table, tgt, original, degraded, record)


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
