"""Methods that score a context's sources as such: each source removed as a
whole, by the one ablation rule
(:func:`~captum_iba.evaluation.sources.ablated_prompt`, what the context
metrics remove too), on a causal LM's
:class:`~captum_iba.attr.batches.PromptBatch` with sources
(:func:`~captum_iba.evaluation.sources.with_sources`).

* ``loso`` (:class:`LeaveOneSourceOutScorer`) - leave one source out: a
  source's score is the fall of the response's log-probability when it alone
  is left out of the prompt;
* ``shapley-sources`` (:class:`ShapleySourcesScorer`) - Captum's
  ``ShapleyValueSampling`` over the sources, through Captum's
  ``LLMAttribution`` with a ``TextTemplateInput`` of one slot per source
  (its baseline ``""``);
* ``contextcite-<A>`` -
  :class:`~captum_iba.evaluation.context_cite.ContextCiteScorer`.

Each fills :attr:`AnswerScores.sources <captum_iba.attr.batches.AnswerScores>`
(``(B, S)``, NaN where a prompt has fewer sources) and gives every token of
a source its source's score in ``answer`` (so its ``source_pooling`` is
``"mean"``). Each scores the batch's explained tokens (the whole response,
or a part of it: :attr:`~captum_iba.attr.batches.PromptBatch.explained`),
their log-probability after the ablated prompt and the response's tokens
before them; a part costs what the whole response costs.
"""

from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch
from captum.attr import LLMAttribution, ShapleyValueSampling, TextTemplateInput
from torch import Tensor

from captum_iba._utils import common
from captum_iba.attr.llm import CausalLMLogLikelihood
from captum_iba.attr.llm_batch import PromptBatch
from captum_iba.attr.rows import Rows, RowScores
from captum_iba.evaluation.batches import rows_per_pass
from captum_iba.evaluation.scorers import TokenScorer
from captum_iba.evaluation.sources import row_ablation
from captum_iba.metrics.context import pair_log_probs

__all__ = [
    "AblationScorer",
    "LeaveOneSourceOutScorer",
    "ShapleySourcesScorer",
    "SourceScorer",
]


def spread(values: Tensor, sources: Tensor) -> Tensor:
    """Per-source values given to each token of their source.

    Args:
        values (Tensor): ``(B, S)`` or ``(B, T, S)`` per source.
        sources (Tensor): ``(B, W)`` each token's source (-1: none).

    Returns:
        Tensor: ``(B, W)`` or ``(B, T, W)`` float32, 0 outside the sources.
    """
    index = sources.clamp_min(0).to(values.device)
    outside = (sources < 0).to(values.device)
    if values.dim() == 3:
        index = index[:, None, :].expand(-1, values.shape[1], -1)
        outside = outside[:, None, :]
    return values.gather(-1, index).masked_fill(outside, 0.0).float()


class SourceScorer(TokenScorer):
    """Base class of a method that scores whole sources of a context (a
    causal LM's prompts with sources): a subclass implements
    :meth:`_source_scores`; the base checks the batch and spreads the scores
    to the sources' tokens.

    Args:
        model: A Hugging Face causal LM.
        **kwargs: See :class:`~captum_iba.evaluation.TokenScorer` (a
            ``tokenizer`` is needed: sources are removed as text).

    Raises:
        ValueError: Without a tokenizer.
    """

    #: Every token of a source holds the source's score.
    source_pooling = "mean"
    per_token_note = "it scores each source for the whole response only"
    prompt_meaning = (
        "the response's log-probability the token's source adds (+) or takes "
        "away (-), each token of a source holding the source's score"
    )
    #: What a score is (:attr:`~captum_iba.attr.batches.AnswerScores.unit`).
    unit = "nats"
    #: Whether it scores nothing but sources, so needs the tokenizer when
    #: built (else when it meets a context's sources).
    sources_only = True

    def __init__(self, model: Any, **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        if self.sources_only:
            self._check_tokenizer()
        self.settings.update(removal="source text (sources.ablated_prompt)")

    def _check_tokenizer(self) -> None:
        """Refuses a scorer without a tokenizer: sources are removed as text."""
        if self.tokenizer is None:
            raise ValueError(
                f"{self.name} removes a context's sources as text: give the "
                "tokenizer (tokenizer=...)"
            )

    def _scores(self, rows: Rows) -> RowScores:
        """The rows' scores from the sources' (:meth:`_source_scores`: the
        prompt batch in, one score per source out), every token of a source
        holding its source's score."""
        batch = rows.prompts
        if batch.sources is None or not batch.spans:
            raise ValueError(
                f"{self.name} scores a context's sources: the batch has no sources "
                "(captum_iba.evaluation.sources.with_sources adds them)"
            )
        scores, tokens = self._source_scores(batch, rows.per_token)
        answer = spread(torch.nan_to_num(scores), batch.sources)
        by_token = None
        if tokens is not None:
            by_token = spread(torch.nan_to_num(tokens), batch.sources)
        return RowScores(rows.spread(answer, by_token), self.unit, groups=scores)

    def _source_scores(
        self, batch: PromptBatch, per_token: bool
    ) -> Tuple[Tensor, Optional[Tensor]]:
        """``(B, S)`` float64 per-source scores of the whole response (NaN
        where a prompt has fewer sources) and, where the method gives them
        and ``per_token``, ``(B, T, S)`` per output token (else None)."""
        raise NotImplementedError

    def _empty(self, batch: PromptBatch, *shape: int) -> Tensor:
        return torch.full(
            (len(batch), *shape, batch.n_sources), float("nan"), dtype=torch.float64
        )


class AblationScorer(SourceScorer):
    """Base class of a method that scores sources from the response's
    log-probability under ablations of them: :meth:`_ablated` gives it for
    any sets of kept sources of every prompt of a batch at once, by the
    context metrics' own computation
    (:func:`~captum_iba.metrics.context.pair_log_probs`, positions counted
    over real tokens), all rows in as few forward passes as
    ``internal_batch_size`` allows.

    Args:
        model: A Hugging Face causal LM.
        internal_batch_size (int, optional): Rows a forward pass (default:
            as many as fit 2,048 tokens).
        **kwargs: See :class:`SourceScorer`.
    """

    def __init__(
        self, model: Any, internal_batch_size: Optional[int] = None, **kwargs: Any
    ) -> None:
        super().__init__(model, **kwargs)
        if internal_batch_size is not None and int(internal_batch_size) < 1:
            raise ValueError(
                f"internal_batch_size must be >= 1; got {internal_batch_size!r}"
            )
        self.internal_batch_size = internal_batch_size
        self.settings.update(internal_batch_size=internal_batch_size)

    def _log_likelihood(self) -> Callable[..., Tensor]:
        ll = CausalLMLogLikelihood(self.model)
        device = common.model_device(self.model)

        def on_device(ids: Tensor, mask: Tensor, labels: Tensor) -> Tensor:
            return ll(ids.to(device), mask.to(device), labels.to(device))

        return on_device

    def _ablated(self, batch: PromptBatch, keeps: Sequence[Tensor]) -> List[Tensor]:
        """Per row ``b`` of ``batch``, the log-probability of its explained
        tokens (the whole response, or a span of it:
        :meth:`~captum_iba.attr.batches.PromptBatch.explained_range`),
        ``(A_b,)`` float64, given each row of ``keeps[b]`` (``(A_b, S_b)``
        bool, True = kept) of its sources."""
        prompts: List[Sequence[int]] = []
        responses: List[Sequence[int]] = []
        spans: List[Tuple[int, int]] = []
        for b, keep in enumerate(keeps):
            ids_of = row_ablation(self.tokenizer, batch, b)
            prompts += [ids_of(k) for k in keep.tolist()]
            responses += [batch.answer_ids(b)] * len(keep)
            spans += [batch.explained_range(b)] * len(keep)
        width = max(len(p) + len(r) for p, r in zip(prompts, responses))
        found = pair_log_probs(
            self._log_likelihood(),
            prompts,
            responses,
            rows_per_pass(width, self.internal_batch_size),
            self.pad_token_id,
            spans,
        )
        return list(found.split([len(k) for k in keeps]))


class LeaveOneSourceOutScorer(AblationScorer):
    """Leave one source out: a source's score is :math:`\\log p(y \\mid C) -
    \\log p(y \\mid C \\setminus s)`, the fall of the response's
    log-probability when that source alone is left out of the prompt (the
    ablation rule, :func:`~captum_iba.evaluation.sources.ablated_prompt`).

    Every prompt's full and one-source-out prompts at once
    (:meth:`AblationScorer._ablated`). Captum's ``FeatureAblation`` through
    ``LLMAttribution`` with the template of :class:`ShapleySourcesScorer`
    gives the same numbers (tested), but one prompt and one removal a
    forward pass; this is the batched form.

    Args:
        model: A Hugging Face causal LM.
        **kwargs: See :class:`AblationScorer`.
    """

    def _source_scores(
        self, batch: PromptBatch, per_token: bool
    ) -> Tuple[Tensor, Optional[Tensor]]:
        keeps = []
        for b in range(len(batch)):
            n = len(batch.spans[b])
            keeps.append(torch.cat([torch.ones(1, n), 1 - torch.eye(n)]).bool())
        out = self._empty(batch)
        for b, found in enumerate(self._ablated(batch, keeps)):
            out[b, : len(found) - 1] = found[0] - found[1:]
        return out, None


class ShapleySourcesScorer(SourceScorer):
    """Captum's ``ShapleyValueSampling`` over the sources: Captum's
    ``LLMAttribution`` with a ``TextTemplateInput`` whose template has one
    slot per source (its baseline ``""``: left out), so Captum's own
    sampling, forward and result run unchanged; the template returns the
    ablated prompt's token ids
    (:func:`~captum_iba.evaluation.sources.ablated_prompt_ids`, chat
    template as the batch has it), which Captum's ``LLMAttribution`` takes
    as the model's input. A source's score is its Shapley value for the
    response's log-probability (and, ``per_token``, each output token's);
    over a permutation they add up to the full prompt's minus the prompt
    without any source. One prompt at a time (Captum's API takes one);
    each prompt's permutations are seeded from ``seed`` and its token ids.

    Args:
        model: A Hugging Face causal LM.
        n_samples (int): Permutations a prompt (about ``n_samples (S + 1)``
            forward passes for ``S`` sources). Default 25.
        seed (int, optional): Seed of the permutations (None: torch's
            generator as it is). Default 0.
        **kwargs: See :class:`SourceScorer`.
    """

    #: Captum's perturbation method run over the sources.
    prompt_method: Any = ShapleyValueSampling
    per_token_note = ""

    def __init__(
        self,
        model: Any,
        n_samples: Optional[int] = 25,
        seed: Optional[int] = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, **kwargs)
        if n_samples is not None and (isinstance(n_samples, bool) or n_samples < 1):
            raise ValueError(f"n_samples must be >= 1; got {n_samples!r}")
        self.n_samples, self.seed = n_samples, seed
        self.prompt_api = LLMAttribution(self.prompt_method(self.model), self.tokenizer)
        self.settings.update(
            captum=self.prompt_method.__name__, n_samples=n_samples, seed=seed
        )

    def _row(self, batch: PromptBatch, b: int) -> Any:
        """Captum's ``LLMAttributionResult`` of row ``b``: of its explained
        tokens, the answer's tokens before them read as given after the
        ablated prompt."""
        ids_of = row_ablation(self.tokenizer, batch, b)
        prompt = batch.prompts[b]
        texts = [prompt[start:end] for start, end in batch.spans[b]]
        lead = batch.answer_ids(b)[: batch.explained_range(b)[0]]

        def template(*values: str) -> Tensor:  # a slot at "" is left out
            return torch.tensor([ids_of([v != "" for v in values]) + lead])

        inp = TextTemplateInput(template, texts, baselines=[""] * len(texts))
        target = torch.tensor(batch.explained_ids(b))
        options = {} if self.n_samples is None else {"n_samples": self.n_samples}
        device = common.model_device(self.model)
        with common.kept_random_state(device):
            if self.seed is not None:
                ids = batch.input_ids[b][batch.prompt_mask[b]]
                torch.manual_seed(common.instance_seed(self.seed, ids))
            return self.prompt_api.attribute(
                inp, target=target, forward_in_tokens=False, **options
            )

    def _source_scores(
        self, batch: PromptBatch, per_token: bool
    ) -> Tuple[Tensor, Optional[Tensor]]:
        longest = int(batch.explained_mask.sum(1).max())
        out, tokens = self._empty(batch), self._empty(batch, longest)
        for b in range(len(batch)):
            res = self._row(batch, b)
            n = len(batch.spans[b])
            out[b, :n] = res.seq_attr.detach().double().cpu()
            if res.token_attr is not None:
                found = res.token_attr.detach().double().cpu()
                tokens[b, : found.shape[0], :n] = found
        return out, tokens if per_token else None
