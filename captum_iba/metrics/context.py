r"""Context attribution's metrics: which sources of a prompt did the answer use.

A prompt's context is split into sources (sentences, passages, chat turns); a
method gives each source a score. The two metrics of ContextCite
(Cohen-Wang et al., "ContextCite: Attributing Model Generation to Context",
NeurIPS 2024, Section 2.2) measure those scores against the model itself,
always on the model's response :math:`y` to the full context, a source being
ablated by leaving its text out of the prompt (``prompt_ids(keep)`` builds the
prompt of the kept sources; for a batch row,
:func:`~captum_iba.evaluation.sources.row_ablation` builds it by the one
ablation rule the methods over sources use too):

* the **top-k log-probability drop** - :math:`\log p(y \mid C) - \log p(y
  \mid C \setminus \text{top-}k)`, the fall of the response's
  log-probability when the k sources scored highest are left out (higher is
  better; :func:`top_k_drop`);
* the **linear datamodeling score (LDS)** - over random ablations
  :math:`v \in \{0, 1\}^S` (each source kept with probability ``keep_prob``,
  ContextCite's 0.5), Spearman's :math:`\rho` between a method's predicted
  effect :math:`\sum_i w_i v_i` (the kept sources' scores, summed) and the
  actual logit-probability of the response, :math:`\log \frac{p(y \mid
  C_v)}{1 - p(y \mid C_v)}` (ContextCite's ``"logit_prob"`` output;
  :func:`linear_datamodeling_score`). The ablations are drawn once per
  example and shared by every method (:func:`ablate_sources`); they must not
  be those a surrogate method (ContextCite itself) was fitted on.

Both are computed from a log-likelihood callable ``(input_ids,
attention_mask, labels) -> (N,)`` - the total log-probability of each row's
labelled tokens, such as :class:`~captum_iba.attr.llm.CausalLMLogLikelihood`
- so that this module, like the rest of the metrics, needs no model class.
Rows are padded on the left; a row's labels are the response's ids at its
positions and :data:`IGNORE_INDEX` elsewhere. :func:`context_test` runs both
metrics for several methods on one example.

A part of the response - a sentence, whose attribution
``explain(..., answer_span=...)`` gives - is measured the same way: with
``span=(start, end)`` (its tokens among the response's) every function's
outcome is that part's log-probability under each ablation, the response's
tokens before it read as given (labelled only at the span's positions).
"""

from dataclasses import dataclass, field
from typing import Callable, Dict, Mapping, Optional, Sequence, Tuple

import torch
from captum.log import log_usage
from torch import Tensor

from captum_iba.metrics.randomization_result import rank_correlation

__all__ = [
    "IGNORE_INDEX",
    "TOP_K",
    "ContextResult",
    "SourceAblations",
    "ablate_sources",
    "ablation_masks",
    "context_test",
    "linear_datamodeling_score",
    "pair_log_probs",
    "response_log_probs",
    "source_ranking",
    "top_k_drop",
]

#: The label of a position not scored (Hugging Face's convention).
IGNORE_INDEX = -100
#: The k of the top-k log-probability drop that ContextCite reports.
TOP_K = (1, 3, 5)

PromptIds = Callable[[Sequence[bool]], Sequence[int]]
Span = Tuple[int, int]
LogLikelihood = Callable[[Tensor, Tensor, Tensor], Tensor]


def ablation_masks(
    n_sources: int, n_ablations: int = 32, keep_prob: float = 0.5, seed: int = 0
) -> Tensor:
    """Random ablations of ``n_sources`` sources: each kept with probability
    ``keep_prob``, independently (ContextCite's ablation distribution).

    Args:
        n_sources (int): Sources in the context, >= 2.
        n_ablations (int): Ablations drawn. Default 32.
        keep_prob (float): Probability of keeping a source, in (0, 1).
            Default 0.5.
        seed (int): Seed of their own generator (the global one is left
            alone). Default 0.

    Returns:
        Tensor: ``(n_ablations, n_sources)`` bool, True = kept.

    Raises:
        ValueError: For fewer than two sources or ablations, or a
            probability outside (0, 1).
    """
    if n_sources < 2:
        raise ValueError(f"n_sources must be at least 2; got {n_sources}")
    if n_ablations < 2:
        raise ValueError(f"n_ablations must be at least 2; got {n_ablations}")
    if not 0.0 < keep_prob < 1.0:
        raise ValueError(f"keep_prob must be in (0, 1); got {keep_prob}")
    gen = torch.Generator().manual_seed(int(seed))
    return torch.rand(n_ablations, n_sources, generator=gen) < keep_prob


def _rows(
    prompts: Sequence[Sequence[int]],
    responses: Sequence[Sequence[int]],
    pad_id: int,
    spans: Sequence[Optional[Span]],
) -> Dict[str, Tensor]:
    """Prompts each followed by its response, padded on the left, with the
    labels of each response's span (the whole response where None): the one
    place the outcome's tokens are chosen."""
    width = max(len(p) + len(r) for p, r in zip(prompts, responses))
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    labels = torch.full_like(ids, IGNORE_INDEX)
    for i, (prompt, response, span) in enumerate(zip(prompts, responses, spans)):
        row = list(prompt) + list(response)
        ids[i, width - len(row) :] = torch.tensor(row, dtype=torch.long)
        mask[i, width - len(row) :] = 1
        start, end = (0, len(response)) if span is None else span
        at = width - len(response)
        labels[i, at + start : at + end] = torch.tensor(list(response[start:end]))
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def _check_span(span: Optional[Span], response: Sequence[int], name: str) -> None:
    """Refuses a span that is not ``(start, end)`` tokens of ``response``
    with ``0 <= start < end <= len(response)``."""
    if span is None:
        return
    ok = isinstance(span, (tuple, list)) and len(span) == 2
    ok = ok and all(isinstance(x, int) and not isinstance(x, bool) for x in span)
    if not ok or not 0 <= span[0] < span[1] <= len(response):
        raise ValueError(
            f"{name} must be (start, end) tokens of the response with 0 <= start "
            f"< end <= {len(response)}; got {span!r}"
        )


@torch.no_grad()
def pair_log_probs(
    log_likelihood: LogLikelihood,
    prompts: Sequence[Sequence[int]],
    responses: Sequence[Sequence[int]],
    batch_size: int = 8,
    pad_token_id: int = 0,
    spans: Optional[Sequence[Optional[Span]]] = None,
) -> Tensor:
    """Each response's log-probability after its prompt (rows padded on the
    left, ``batch_size`` a call, the rows taken in order of length so that a
    call pads little; the results in the pairs' order): what
    :func:`response_log_probs` computes for one response, for pairs of any
    prompts and responses.

    Args:
        log_likelihood (Callable): As :func:`response_log_probs`'s.
        prompts (Sequence of Sequence of int): Prompt token ids.
        responses (Sequence of Sequence of int): One response per prompt.
        batch_size (int): Rows per call. Default 8.
        pad_token_id (int): The padding id (masked out). Default 0.
        spans (Sequence, optional): Per pair, the ``(start, end)`` tokens of
            its response whose log-probability is taken (the response's
            tokens before them are read as given; None: the whole
            response). Default None: every response whole.

    Returns:
        Tensor: ``(N,)`` float64 log-probabilities (nats, <= 0).

    Raises:
        ValueError: For counts that differ, an empty response, a span that
            is empty or outside its response, or a non-finite
            log-probability.
    """
    if len(prompts) != len(responses):
        raise ValueError(f"{len(prompts)} prompts for {len(responses)} responses")
    if any(len(r) == 0 for r in responses):
        raise ValueError("a response is empty: there is no response to score")
    spans = [None] * len(prompts) if spans is None else list(spans)
    if len(spans) != len(prompts):
        raise ValueError(f"{len(spans)} spans for {len(prompts)} responses")
    for span, response in zip(spans, responses):
        _check_span(span, response, "a span")
    # by length, so that the rows of a call are padded little
    order = sorted(
        range(len(prompts)), key=lambda i: len(prompts[i]) + len(responses[i])
    )
    scores = torch.empty(len(prompts), dtype=torch.float64)
    for start in range(0, len(prompts), batch_size):
        rows = order[start : start + batch_size]
        call = _rows(
            [prompts[i] for i in rows],
            [responses[i] for i in rows],
            pad_token_id,
            [spans[i] for i in rows],
        )
        found = log_likelihood(
            call["input_ids"], call["attention_mask"], call["labels"]
        )
        scores[rows] = found.detach().double().cpu().reshape(-1)
    if not torch.isfinite(scores).all():
        raise ValueError("the log-likelihood gave a non-finite value")
    return scores


@torch.no_grad()
def response_log_probs(
    log_likelihood: LogLikelihood,
    prompt_ids: PromptIds,
    response_ids: Sequence[int],
    keep: Tensor,
    batch_size: int = 8,
    pad_token_id: int = 0,
    span: Optional[Span] = None,
) -> Tensor:
    """The response's log-probability given each subset of the sources.

    Args:
        log_likelihood (Callable): ``(input_ids, attention_mask, labels) ->
            (N,)`` total log-probabilities of the labelled tokens.
        prompt_ids (Callable): ``keep -> token ids`` of the prompt made of
            the kept sources (one bool per source).
        response_ids (Sequence[int]): The response's token ids.
        keep (Tensor): ``(A, S)`` bool, the sources kept in each row.
        batch_size (int): Rows per call. Default 8.
        pad_token_id (int): The padding id (masked out). Default 0.
        span (tuple of int, optional): A part of the response: its tokens
            ``[start, end)``, whose log-probability is then the outcome (a
            sentence of the response; its tokens before the span are read
            as given, those after it read by nothing). Default None: the
            whole response.

    Returns:
        Tensor: ``(A,)`` float64 log-probabilities (nats, <= 0).

    Raises:
        ValueError: For an empty response, ``keep`` not ``(A, S)`` bool, or
            a ``span`` that is empty or outside the response.
    """
    if len(response_ids) == 0:
        raise ValueError("response_ids is empty: there is no response to score")
    if keep.dim() != 2 or keep.dtype != torch.bool:
        raise ValueError(f"keep must be (A, S) bool; got {tuple(keep.shape)}")
    _check_span(span, response_ids, "span")
    prompts = [prompt_ids(k.tolist()) for k in keep]
    return pair_log_probs(
        log_likelihood,
        prompts,
        [response_ids] * len(prompts),
        batch_size,
        pad_token_id,
        [span] * len(prompts),
    )


def _span(span: Optional[Span]) -> Optional[Span]:
    """A span as a tuple of ints (None stays None)."""
    return None if span is None else (int(span[0]), int(span[1]))


def log_odds(log_probs: Tensor) -> Tensor:
    r""":math:`\log \frac{p}{1 - p}` of log-probabilities (ContextCite's
    logit-probability), computed without forming :math:`p`; :math:`+\infty`
    where :math:`p = 1`."""
    return log_probs - torch.log(-torch.expm1(log_probs))


@dataclass(frozen=True)
class SourceAblations:
    """Random ablations of one example's sources and the response's
    log-probability under each (:func:`ablate_sources`).

    Attributes:
        keep (Tensor): ``(A, S)`` bool, True = kept.
        log_probs (Tensor): ``(A,)`` float64 the response's log-probability.
        keep_prob (float): The probability of keeping a source.
        seed (int): The seed the ablations were drawn with.
        span (tuple of int, optional): The response's tokens ``[start,
            end)`` whose log-probability the outcomes are (None: the whole
            response).
    """

    keep: Tensor
    log_probs: Tensor
    keep_prob: float = 0.5
    seed: int = 0
    span: Optional[Span] = None

    @property
    def log_odds(self) -> Tensor:
        """Tensor: ``(A,)`` the response's logit-probability per ablation."""
        return log_odds(self.log_probs)


@log_usage()
def ablate_sources(
    log_likelihood: LogLikelihood,
    prompt_ids: PromptIds,
    response_ids: Sequence[int],
    n_sources: int,
    n_ablations: int = 32,
    keep_prob: float = 0.5,
    seed: int = 0,
    batch_size: int = 8,
    pad_token_id: int = 0,
    span: Optional[Span] = None,
) -> SourceAblations:
    """The LDS's held-out ablations of one example: random subsets of the
    sources (:func:`ablation_masks`) and the response's log-probability given
    each (:func:`response_log_probs`; see those for the arguments) - of a
    part of the response with ``span`` (its tokens ``[start, end)``: the
    LDS of a sentence's attribution).

    Returns:
        SourceAblations: The ablations and their outcomes.
    """
    keep = ablation_masks(n_sources, n_ablations, keep_prob, seed)
    found = response_log_probs(
        log_likelihood, prompt_ids, response_ids, keep, batch_size, pad_token_id,
        span,
    )  # fmt: skip
    return SourceAblations(keep, found, keep_prob, seed, _span(span))


def _scores_2d(source_scores: Tensor, n_sources: Optional[int] = None) -> Tensor:
    scores = torch.as_tensor(source_scores).detach().double().cpu()
    scores = scores.unsqueeze(0) if scores.dim() == 1 else scores
    n_sources = scores.shape[-1] if n_sources is None else n_sources
    if scores.dim() != 2 or scores.shape[1] != n_sources:
        raise ValueError(
            f"source_scores must be (S,) or (M, S) with S = {n_sources} sources; "
            f"got {tuple(scores.shape)}"
        )
    if not torch.isfinite(scores).all():
        raise ValueError("source_scores has a non-finite value")
    return scores


def linear_datamodeling_score(
    source_scores: Tensor, ablations: SourceAblations
) -> Tensor:
    r"""ContextCite's LDS: Spearman's :math:`\rho`, over the ablations,
    between the scores' predicted effect :math:`\sum_i w_i v_i` and the
    response's actual logit-probability.

    Args:
        source_scores (Tensor): ``(S,)`` or ``(M, S)`` one score per source
            (``M`` methods).
        ablations (SourceAblations): From :func:`ablate_sources`.

    Returns:
        Tensor: ``(M,)`` float64 in [-1, 1]; NaN where the predicted effects
        or the outcomes are constant (e.g. all scores equal).
    """
    keep = ablations.keep.double()
    scores = _scores_2d(source_scores, keep.shape[1])
    predicted = scores @ keep.T  # (M, A)
    actual = ablations.log_odds.unsqueeze(0).expand_as(predicted)
    return rank_correlation(predicted, actual, torch.ones_like(predicted).bool())


def source_ranking(source_scores: Tensor) -> Tensor:
    """The sources from the highest score down (ties: the earlier source
    first), the order the top-k drop removes them in.

    Args:
        source_scores (Tensor): ``(S,)`` or ``(M, S)`` one score per source.

    Returns:
        Tensor: The source indices, of the same shape.
    """
    scores = torch.as_tensor(source_scores)
    return torch.sort(-scores, dim=-1, stable=True).indices


def _top_k_keep(scores: Tensor, k: int) -> Tensor:
    """``(M, S)`` bool: every source but each row's ``k`` highest
    (:func:`source_ranking`)."""
    order = source_ranking(scores)[:, :k]
    keep = torch.ones_like(scores, dtype=torch.bool)
    return keep.scatter(1, order, False)


@log_usage()
def top_k_drop(
    log_likelihood: LogLikelihood,
    prompt_ids: PromptIds,
    response_ids: Sequence[int],
    source_scores: Tensor,
    ks: Sequence[int] = TOP_K,
    batch_size: int = 8,
    pad_token_id: int = 0,
    span: Optional[Span] = None,
) -> Tensor:
    """ContextCite's top-k log-probability drop: how much the response's
    log-probability (or, with ``span``, a part's) falls when each method's
    ``k`` highest-scored sources are left out.

    Args:
        log_likelihood, prompt_ids, response_ids, batch_size, pad_token_id:
            As :func:`response_log_probs`.
        span (tuple of int, optional): As :func:`response_log_probs`'s: a
            part of the response, measured as the whole is.
        source_scores (Tensor): ``(S,)`` or ``(M, S)`` one score per source.
        ks (Sequence[int]): The k's. Default (1, 3, 5).

    Returns:
        Tensor: ``(M, len(ks))`` float64 drops in nats (higher = the sources
        ranked first mattered more); NaN for a k of at least the number of
        sources (every method would remove them all).
    """
    if not ks or any(int(k) < 1 for k in ks):
        raise ValueError(f"ks must be positive integers; got {list(ks)}")
    scores = _scores_2d(source_scores)
    m, s = scores.shape
    full = torch.ones(1, s, dtype=torch.bool)
    cut = [(i, _top_k_keep(scores, int(k))) for i, k in enumerate(ks) if k < s]
    keep = torch.cat([full] + [c for _, c in cut])
    found = response_log_probs(
        log_likelihood, prompt_ids, response_ids, keep, batch_size, pad_token_id,
        span,
    )  # fmt: skip
    out = torch.full((m, len(ks)), float("nan"), dtype=torch.float64)
    for j, (i, _) in enumerate(cut):
        out[:, i] = found[0] - found[1 + j * m : 1 + (j + 1) * m]
    return out


@dataclass
class ContextResult:
    """One method's context metrics on one example (:func:`context_test`).

    Attributes:
        method (str): The method.
        lds (float): Its LDS (NaN where undefined).
        top_k_drop (dict[int, float]): k -> the log-probability drop (nats).
        n_ablations (int): The LDS's ablations.
        keep_prob (float): Their probability of keeping a source.
    """

    method: str
    lds: float
    top_k_drop: Dict[int, float] = field(default_factory=dict)
    n_ablations: int = 0
    keep_prob: float = 0.5


@log_usage()
def context_test(
    log_likelihood: LogLikelihood,
    prompt_ids: PromptIds,
    response_ids: Sequence[int],
    source_scores: Mapping[str, Tensor],
    ks: Sequence[int] = TOP_K,
    ablations: Optional[SourceAblations] = None,
    batch_size: int = 8,
    pad_token_id: int = 0,
    span: Optional[Span] = None,
) -> Dict[str, ContextResult]:
    """Both metrics for every method's source scores on one example, the
    LDS's ablations shared (drawn with :func:`ablate_sources`'s defaults -
    32 ablations, keep probability 0.5, seed 0 - unless given). With
    ``span``, of a part of the response (a sentence's attribution, measured
    as the whole response's is: its log-probability under each ablation).

    Args:
        log_likelihood, prompt_ids, response_ids, batch_size, pad_token_id:
            As :func:`response_log_probs`.
        span (tuple of int, optional): As :func:`response_log_probs`'s: a
            part of the response, measured as the whole is.
        source_scores (Mapping[str, Tensor]): Method -> ``(S,)`` scores.
        ks (Sequence[int]): The top-k drop's k's. Default (1, 3, 5).
        ablations (SourceAblations, optional): The LDS's ablations, drawn
            once for the example (of the same ``span``).

    Returns:
        dict[str, ContextResult]: Method -> its metrics.

    Raises:
        ValueError: For no method, or ``ablations`` of another span.
    """
    if not source_scores:
        raise ValueError("source_scores names no method")
    if ablations is not None and ablations.span != _span(span):
        raise ValueError(
            f"the ablations' outcomes are of the response's tokens "
            f"{ablations.span or 'all'}, not of span {span!r}: draw them with "
            "the same span (ablate_sources(..., span=))"
        )
    names = list(source_scores)
    scores = torch.stack([torch.as_tensor(source_scores[m]) for m in names])
    if ablations is None:
        ablations = ablate_sources(
            log_likelihood,
            prompt_ids,
            response_ids,
            scores.shape[1],
            batch_size=batch_size,
            pad_token_id=pad_token_id,
            span=span,
        )
    lds = linear_datamodeling_score(scores, ablations)
    drops = top_k_drop(
        log_likelihood, prompt_ids, response_ids, scores, ks, batch_size,
        pad_token_id, span,
    )  # fmt: skip
    return {
        m: ContextResult(
            m,
            float(lds[i]),
            {int(k): float(drops[i, j]) for j, k in enumerate(ks)},
            int(ablations.keep.shape[0]),
            ablations.keep_prob,
        )
        for i, m in enumerate(names)
    }
