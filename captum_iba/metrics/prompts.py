r"""The degradation test for prompts: how fast a causal LM's answer loses its
probability as the prompt's relevant tokens go.

A generative model has no classes: what the test tracks is the probability
:math:`p = \exp \log p(\text{answer} \mid \text{prompt})` of one answer - the
model's own greedy answer or a gold label word - under the degraded prompt.
:func:`prompt_degradation_test` runs :func:`~captum_iba.metrics.degradation_test`
on it unchanged (the same levels, orders, removal strategies, aggregates and
:class:`~captum_iba.metrics.result.DegradationResult`) by reading the answer
as a two-class problem, ``logits = [log p, log(1 - p)]``, whose softmax is
``[p, 1 - p]``: the target class 0's probability is :math:`p` exactly. Only
the positions ``removable`` marks are ranked and removed (the content - the
review, the article -, never the instruction, the chat template's tokens or
the answer), and the answer's mask follows the tokens when deletion compacts
a prompt (its labels are made from it at every level).
"""

from typing import Any, Callable, Mapping, Optional, Tuple

import torch
from captum.log import log_usage
from torch import Tensor, nn

from captum_iba.metrics._inputs import TargetLike
from captum_iba.metrics.degradation import degradation_test
from captum_iba.metrics.options import DegradationOptions, KnownInputs, with_progress
from captum_iba.metrics.result import DegradationResult

__all__ = [
    "IGNORE_INDEX",
    "AnswerOdds",
    "choice_degradation_test",
    "prompt_degradation_test",
]


#: The label of a position not scored (Hugging Face's convention).
IGNORE_INDEX = -100


class AnswerOdds(nn.Module):
    r"""``forward(input_ids, attention_mask, answer_mask, *rest) -> (N, 2)``:
    the logits :math:`[\log p, \log(1 - p)]` of each row's answer, from a
    log-likelihood ``(input_ids, attention_mask, labels, *rest) -> (N,)`` (e.g.
    :class:`~captum_iba.attr.llm.CausalLMLogLikelihood`); their softmax is
    :math:`[p, 1 - p]`. ``labels`` is made from ``answer_mask``: the token id
    at the answer's positions, -100 elsewhere, so it stays right when the
    degradation test moves the tokens (a removed token's freed place is
    padding, answer mask 0).

    Args:
        log_likelihood (Callable): ``(input_ids, attention_mask, labels,
            *rest) -> (N,)`` log-probabilities, in nats (<= 0).
    """

    def __init__(self, log_likelihood: Callable[..., Tensor]) -> None:
        super().__init__()
        self.log_likelihood = log_likelihood
        # its own mode flag, not the model's (set without recursing): the
        # test reads the modules with parameters (the wrapped model's)
        self.training = False

    @property
    def config(self) -> Any:
        """The wrapped forward's config (its positions and pad token id)."""
        return getattr(self.log_likelihood, "config", None)

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor, answer_mask: Tensor, *rest: Any
    ) -> Tensor:
        labels = input_ids.masked_fill(~answer_mask.bool(), IGNORE_INDEX)
        logp = self.log_likelihood(input_ids, attention_mask, labels, *rest)
        if not isinstance(logp, Tensor) or logp.dim() != 1:
            shape = tuple(logp.shape) if isinstance(logp, Tensor) else type(logp)
            raise ValueError(
                "the forward must return each row's answer log-probability, shape "
                f"(N,); got {shape}"
            )
        logp = logp.double().clamp(max=0.0)
        return torch.stack([logp, torch.log(-torch.expm1(logp))], dim=1)


@log_usage()
def prompt_degradation_test(
    forward_func: Callable[..., Tensor],
    inputs: Tensor,
    attributions: Tensor,
    answer_mask: Tensor,
    attention_mask: Optional[Tensor] = None,
    removable: Optional[Tensor] = None,
    additional_forward_args: Optional[Any] = None,
    options: Optional[DegradationOptions] = None,
    metadata: Optional[Mapping[str, Any]] = None,
    show_progress: bool = False,
) -> DegradationResult:
    r"""Degradation test of prompt-token attributions for a causal LM's answer.

    The prompt's tokens in ``removable`` are ranked by ``attributions`` and
    removed level by level (:class:`~captum_iba.metrics.options.DegradationOptions`:
    deletion, the paper's levels, by default); at every level the test records
    the answer's probability given the degraded prompt, and the result holds
    the drop at the first level, AOPC, comprehensiveness and sufficiency as
    for a classifier (the "class" is the answer; see the module docstring).

    The model is called as ``forward_func(input_ids, attention_mask, labels,
    *additional_forward_args)`` and must return the log-probability ``(N,)``
    of each row's answer, whose tokens are part of ``input_ids``; ``labels``
    holds the token ids where ``answer_mask`` is set, -100 elsewhere (Hugging
    Face's convention), made again from the degraded ids at every level.
    Per-token arguments ``(B, L, ...)`` follow the tokens. With
    :class:`~captum_iba.attr.llm.CausalLMLogLikelihood` and a
    :class:`~captum_iba.attr.batches.PromptBatch` ``b``::

        prompt_degradation_test(
            CausalLMLogLikelihood(model), b.input_ids, scores, b.answer_mask,
            attention_mask=b.attention_mask, removable=content,
            options=DegradationOptions.for_tokenizer(tokenizer),
        )

    with ``content`` the positions of the review (or article) within
    ``b.scored``, the prompt's own tokens.

    Args:
        forward_func (Callable): The answers' log-likelihood (see above).
        inputs (Tensor): ``(B, L)`` token ids: prompt and answer.
        attributions (Tensor): ``(B, L)`` scores (``(B, L, H)`` is summed over
            ``H``); only their order at ``removable`` positions matters.
        answer_mask (Tensor): ``(B, L)`` bool: the answer's tokens (at least
            one per row), whose log-probability is tracked.
        attention_mask (Tensor, optional): ``(B, L)``, 1 at tokens. Default:
            all ones.
        removable (Tensor, optional): ``(B, L)`` bool: the positions that may go
            (the content). Default None: every real, non-special token outside
            the answer.
        additional_forward_args (Any, optional): After ``labels``; tensors
            ``(B, L, ...)`` follow the tokens.
        options (DegradationOptions, optional): How the test runs (levels,
            order, :class:`~captum_iba.metrics.strategies.Deletion` or
            :class:`~captum_iba.metrics.strategies.Replacement` by a neutral
            token, the pad token id).
        metadata (Mapping, optional): As :func:`degradation_test`'s.
        show_progress (bool): Show a progress bar. Default False.

    Returns:
        DegradationResult: The answer's probabilities per level, the aggregates
        and ``settings`` (``target``: ``"answer"``).

    Raises:
        ValueError: As :func:`degradation_test`, and when ``answer_mask`` or
            ``removable`` is not ``(B, L)``, a row has no answer token or
            nothing to remove, or the forward does not return ``(N,)``.
    """
    extra = additional_forward_args
    extra = () if extra is None else extra if isinstance(extra, tuple) else (extra,)
    return _answer_test(
        AnswerOdds(forward_func),
        inputs,
        attributions,
        answer_mask,
        0,
        extra,
        kind="answer",
        attention_mask=attention_mask,
        removable=removable,
        options=options,
        metadata=metadata,
        show_progress=show_progress,
    )


@log_usage()
def choice_degradation_test(
    forward_func: Callable[..., Tensor],
    inputs: Tensor,
    attributions: Tensor,
    answer_mask: Tensor,
    target: TargetLike = None,
    attention_mask: Optional[Tensor] = None,
    removable: Optional[Tensor] = None,
    options: Optional[DegradationOptions] = None,
    metadata: Optional[Mapping[str, Any]] = None,
    show_progress: bool = False,
) -> DegradationResult:
    r"""Degradation test of prompt-token attributions for a causal LM's choice
    among a task's answer words.

    As :func:`prompt_degradation_test`, but the probability tracked is the
    answer's *among the task's answers*: the softmax over the ``C`` answer
    words of their next-token log-probabilities where the answer starts, a
    ``C``-class classifier whose target is the answer's word. A small chat
    model gives its label words a tiny absolute probability as its first
    answer token (it starts its answers otherwise: median .0008 for
    SmolLM2-135M-Instruct on SST-2 prompts), so that probability barely
    moves as tokens go; the choice among the words is what the prompt
    decides. The model is called as ``forward_func(input_ids,
    attention_mask, answer_mask)`` and returns ``(N, C)`` logits, e.g.
    :class:`~captum_iba.attr.llm_choice.CausalLMChoice`; ``answer_mask``
    follows the tokens when deletion compacts a prompt.

    Args:
        forward_func (Callable): The choice's ``(N, C)`` logits (see above).
        inputs (Tensor): ``(B, L)`` token ids: prompt and answer token.
        attributions (Tensor): ``(B, L)`` scores (``(B, L, H)`` is summed).
        answer_mask (Tensor): ``(B, L)`` bool: each row's answer.
        target (int, list or Tensor, optional): Each row's answer as the index
            of its word among the choices. Default None: the model's own
            choice on the intact prompt.
        attention_mask (Tensor, optional): ``(B, L)``. Default: all ones.
        removable (Tensor, optional): ``(B, L)`` bool, the content. Default:
            every real, non-special token outside the answer.
        options (DegradationOptions, optional): As :func:`degradation_test`'s.
        metadata (Mapping, optional): As :func:`degradation_test`'s.
        show_progress (bool): Show a progress bar. Default False.

    Returns:
        DegradationResult: The answer's probability among the choices per
        level, the aggregates, and ``settings`` (``target``: ``"choice"``).

    Raises:
        ValueError: As :func:`prompt_degradation_test`.
    """
    return _answer_test(
        forward_func,
        inputs,
        attributions,
        answer_mask,
        target,
        (),
        kind="choice",
        attention_mask=attention_mask,
        removable=removable,
        options=options,
        metadata=metadata,
        show_progress=show_progress,
    )


def _answer_test(
    forward_func: Callable[..., Tensor],
    inputs: Tensor,
    attributions: Tensor,
    answer_mask: Tensor,
    target: TargetLike,
    extra: Tuple[Any, ...],
    *,
    kind: str,
    attention_mask: Optional[Tensor],
    removable: Optional[Tensor],
    **test: Any,
) -> DegradationResult:
    """:func:`degradation_test` of a prompt's answer: the masks checked
    (:func:`_prompt_masks`), the answer mask the forward's first extra
    argument, ``kind`` the target recorded; ``test`` holds the test's
    ``options``, ``metadata`` and ``show_progress`` (a bar: the options')."""
    attention_mask, removable = _prompt_masks(
        inputs, answer_mask, attention_mask, removable
    )
    result = degradation_test(
        forward_func,
        inputs,
        attributions,
        target=target,
        additional_forward_args=(answer_mask.bool(), *extra),
        attention_mask=attention_mask,
        options=with_progress(test["options"], test["show_progress"]),
        metadata=test["metadata"],
        known=KnownInputs(removable=removable),
    )
    result.settings["target"] = kind
    return result


def _prompt_masks(
    inputs: Tensor,
    answer_mask: Tensor,
    attention_mask: Optional[Tensor],
    removable: Optional[Tensor],
) -> Tuple[Tensor, Tensor]:
    """The attention mask and the removable positions (their defaults
    filled), checked: an answer in every row, a token kept before it.

    Raises:
        ValueError: For a misshapen ``answer_mask``, a row with no answer
            token, or one with nothing kept before its answer.
    """
    if not isinstance(answer_mask, Tensor) or answer_mask.shape != inputs.shape:
        is_tensor = isinstance(answer_mask, Tensor)
        got = tuple(answer_mask.shape) if is_tensor else answer_mask
        raise ValueError(
            f"answer_mask must be a (B, L) tensor like inputs {tuple(inputs.shape)}, "
            f"marking each row's answer; got {got}"
        )
    if not bool(answer_mask.bool().any(1).all()):
        raise ValueError("answer_mask marks no answer token in some row")
    if attention_mask is None:
        attention_mask = torch.ones_like(inputs)
    if removable is None:
        removable = attention_mask.bool() & ~answer_mask.bool()
    if removable.shape == inputs.shape == attention_mask.shape:  # (else the test says)
        _check_kept_before_answer(attention_mask, answer_mask, removable)
    return attention_mask, removable


def _check_kept_before_answer(
    attention_mask: Tensor, answer_mask: Tensor, removable: Tensor
) -> None:
    """Every row keeps a token before its answer (an instruction, a template
    or BOS token): with none, the answer's first token would be predicted
    from nothing and its probability left out.

    Raises:
        ValueError: Naming the rows.
    """
    answer = answer_mask.bool()
    first = torch.where(answer.any(1), answer.float().argmax(1), answer.shape[1])
    before = torch.arange(answer.shape[1])[None].to(first.device) < first[:, None]
    kept = attention_mask.bool() & ~removable.bool().to(answer.device) & before
    rows = (~kept.any(1)).nonzero().flatten().tolist()
    if rows:
        raise ValueError(
            f"row(s) {rows} keep no token before its answer once the removable "
            "tokens are gone: mark an instruction, template or BOS token as not "
            "removable (the answer's first token needs one to be predicted from)"
        )
