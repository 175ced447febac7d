r"""IBA for generative (decoder-only) language models.

Two ways in, both with a Hugging Face ``...ForCausalLM`` (Llama - SmolLM2 -,
GPT-2, ...) and every IBA configuration (``"paper"``, ``"faithful"``,
``"deletion"`` through the causal attention from the token embeddings):

* :class:`LLMInformationBottleneckAttribution` - Captum's own LLM API
  (:class:`captum.attr.LLMGradientAttribution`) with IBA: a prompt as
  :class:`captum.attr.TextTokenInput`, a target string (or generation), and a
  standard :class:`captum.attr.LLMAttributionResult` back (``seq_attr``,
  ``token_attr`` per generated token, Captum's plots). One bottleneck is
  optimised per output token, keeping that token's log-probability high;
  ``seq_attr`` is their sum, as for Captum's gradient methods.
* the batch route: :func:`~captum_iba.attr.llm_batch.prompt_batch` lays
  many prompts and their answers (given, or the model's greedy answers; chat
  templates applied) out in one batch padded on the left, and
  :func:`explain_answers` explains it - per output token and for the whole
  answer - with :class:`~captum_iba.InformationBottleneckAttribution` on
  :class:`CausalLMLogLikelihood` (``target=None``; the objective keeps the
  answer's log-probability high).

Both explain the prompt's own tokens: the answer so far is given as it is
(never bottlenecked, as Captum's ``LLMAttribution`` perturbs only the
prompt), and special tokens (and a chat template's) are neither removed nor
scored. The loss is a log-probability in **nats** (objective
``"log_probability"``: minimise :math:`-\log p(\text{target} \mid
\text{prompt})`).
"""

import inspect
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from captum.attr import LLMAttributionResult, LLMGradientAttribution
from captum.log import log_usage
from torch import Tensor, nn

from captum_iba.attr._ranking import TIE, no_ranking, say_if_flat
from captum_iba.attr._user_turn import never_scored_ids
from captum_iba.attr.batches import IGNORE_INDEX, AnswerScores, PromptBatch
from captum_iba.attr.iba import InformationBottleneckAttribution
from captum_iba.attr.llm_batch import (
    check_target,
    position_ids,
    prompt_batch,
)
from captum_iba.attr.text import token_attributions

__all__ = [
    "TIE",
    "AnswerScores",
    "CausalLMLogLikelihood",
    "LLMInformationBottleneckAttribution",
    "LLM_MASKS",
    "LLM_OVERRIDES",
    "explain_answers",
    "llm_options",
    "no_ranking",
    "prompt_target_batch",
]


class LLMInformationBottleneckAttribution(LLMGradientAttribution):
    r"""Captum's ``LLMGradientAttribution`` with IBA as the attribution method.

    Captum runs the wrapped method once per output token, with a forward that
    returns the log-probability of that token (shape ``(B,)``) given the
    prompt and the output tokens before it, and passes the target token ids as
    an additional forward argument. IBA keeps that log-probability high
    (objective ``"log_probability"``, loss in nats) and returns the capacity of
    the layer's output at every position; Captum keeps the prompt's positions
    and sums over features, giving ``token_attr`` (output tokens x prompt
    tokens, nats) and ``seq_attr`` (their sum). The target token ids are
    never repeated with the noise copies.

    Args:
        attr_method (InformationBottleneckAttribution or another method that
            ``LLMGradientAttribution`` supports): Built with the causal LM
            itself and one of its layers (e.g. ``model.transformer.h[2]`` of
            GPT-2, ``model.model.layers[2]`` of Llama).
        tokenizer: The model's tokenizer.

    Examples::

        >>> iba = InformationBottleneckAttribution(model, model.transformer.h[2])
        >>> llm_attr = LLMInformationBottleneckAttribution(iba, tokenizer)
        >>> inp = TextTokenInput("The capital of France is", tokenizer)
        >>> result = llm_attr.attribute(inp, target=" Paris", steps=10, seed=0)
        >>> result.token_attr.shape   # (output tokens, prompt tokens)
        >>> result.plot_token_attr()
    """

    SUPPORTED_METHODS = (
        *LLMGradientAttribution.SUPPORTED_METHODS,
        InformationBottleneckAttribution,
    )

    def __init__(self, attr_method: Any, tokenizer: Any) -> None:
        if not isinstance(attr_method, self.SUPPORTED_METHODS):
            raise TypeError(
                "attr_method must be an InformationBottleneckAttribution (or a "
                "method LLMGradientAttribution supports); got "
                f"{type(attr_method).__name__}."
            )
        if not isinstance(attr_method.forward_func, nn.Module):
            raise TypeError(
                "attr_method must be built with the causal LM itself (a Module with "
                "generate), as Captum's LLM attribution calls it directly."
            )
        super().__init__(attr_method, tokenizer)
        if isinstance(self.attr_method, InformationBottleneckAttribution):
            # the answer's log-probability, its logits only where needed
            self.attr_method.forward_func = CausalLMLogLikelihood(self.model)

    @log_usage()
    def attribute(  # type: ignore[override]
        self,
        inp: Any,
        target: Any = None,
        gen_args: Optional[Dict[str, Any]] = None,
        **kwargs: Any,
    ) -> LLMAttributionResult:
        """Attribute ``target`` (a string, token ids, or None to generate) to
        the prompt ``inp`` (a :class:`captum.attr.TextTokenInput`).

        Args:
            inp (TextTokenInput): The prompt. Its ``skip_tokens`` and its
                special tokens are neither removed nor scored (0).
            target (str or Tensor, optional): The continuation to explain;
                None generates it with ``gen_args``.
            gen_args (dict, optional): Arguments of ``model.generate`` when
                ``target`` is None.
            **kwargs: Options of
                :meth:`InformationBottleneckAttribution.attribute` (``config``,
                ``beta``, ``steps``, ``n_samples``, ``seed``, ...).
                ``objective`` is ``"log_probability"``.

        Returns:
            LLMAttributionResult: ``seq_attr`` (prompt tokens), ``token_attr``
            (output tokens x prompt tokens), in nats for IBA's capacity.
        """
        if target is not None:
            check_target(self.model, self.tokenizer, inp, target)
        if not isinstance(self.attr_method, InformationBottleneckAttribution):
            return super().attribute(inp, target=target, gen_args=gen_args, **kwargs)
        for name in ("target", "token_mask", "objective"):
            if name in kwargs:
                raise ValueError(
                    "target is the continuation (a string or token ids), the prompt "
                    "has no padding and the objective is the log-probability: pass "
                    f"none of target, token_mask, objective as an IBA option (got "
                    f"{name})."
                )
        target_ids = self._get_target_tokens(inp, target, gen_args=gen_args)
        prompt = self._format_model_input(inp.to_model_input())["input_ids"]
        batch = _single_batch(prompt.cpu(), target_ids.cpu(), self.tokenizer, inp)
        found = explain_answers(
            self.attr_method, batch, per_token=True, whole=False, **kwargs
        )
        assert found.tokens is not None
        width = prompt.shape[1]
        token_attr = found.tokens[0, :, :width]
        if getattr(inp, "itp_mask", None) is not None:
            token_attr = token_attr[:, inp.itp_mask[0].to(token_attr.device)]
        from captum_iba._utils.captum_compat import _convert_ids_to_pretty_tokens

        return LLMAttributionResult(
            seq_attr=token_attr.sum(0),
            token_attr=token_attr,
            input_tokens=inp.values,
            output_tokens=_convert_ids_to_pretty_tokens(target_ids, self.tokenizer),
        )


def _single_batch(
    prompt: Tensor, target: Tensor, tokenizer: Any, inp: Any
) -> PromptBatch:
    """One prompt ``(1, L)`` and its continuation as a :class:`PromptBatch`:
    the scored tokens are the prompt's features (its ``itp_mask``) that are
    not special."""
    ids = torch.cat([prompt, target.reshape(1, -1).to(prompt.dtype)], dim=1)
    labels = torch.full_like(ids, IGNORE_INDEX)
    labels[:, prompt.shape[1] :] = target
    special = torch.tensor(sorted(never_scored_ids(tokenizer)), dtype=torch.long)
    scored = torch.zeros_like(ids, dtype=torch.bool)
    features = getattr(inp, "itp_mask", None)
    own = ~torch.isin(prompt, special.to(prompt.dtype))
    if features is not None:
        own = own & features.to(own.device).bool()
    if not own.any():
        raise ValueError(
            "the prompt has no token to explain: every token is special or skipped"
        )
    scored[:, : prompt.shape[1]] = own
    return PromptBatch(ids, torch.ones_like(ids), labels, scored)


class CausalLMLogLikelihood(nn.Module):
    r"""``forward(input_ids, attention_mask, labels) -> (B,)``: the total
    log-probability, in nats, of the labelled tokens of every sequence.

    ``labels`` follows the Hugging Face convention: the token id at positions
    to score, :data:`IGNORE_INDEX` (-100) elsewhere; position ``j`` is predicted
    from the positions before it. ``labels`` may be one column longer than
    ``input_ids``: its last column is then predicted by the last input
    position (an answer's last token need not be read,
    :meth:`~captum_iba.attr.batches.PromptBatch.arguments`). Position ids are
    counted over real tokens, so a sequence gives the same result padded
    left, right or not at all. The logits are computed only from the first
    labelled position on (``logits_to_keep`` of Hugging Face causal LMs), so
    a long prompt costs no ``(L, vocabulary)`` copy. Wrap the model with it
    and explain with ``target=None``: the objective keeps the continuation's
    log-probability high.

    Args:
        model (nn.Module): A Hugging Face ``...ForCausalLM``.
    """

    #: The position a fitted explainer reads as the input's summary
    #: (:func:`~captum_iba.attr.amortized_fit.summary_of`): the last, which
    #: has read every token before it.
    summary_position = "last"

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        params = inspect.signature(model.forward).parameters
        self._keeps = "logits_to_keep" in params

    @property
    def config(self) -> Any:
        """The wrapped model's config (its pad token id)."""
        return getattr(self.model, "config", None)

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Optional[Tensor] = None,
        labels: Optional[Tensor] = None,
    ) -> Tensor:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if labels is None:
            raise ValueError(
                "labels is needed: the token ids to score, -100 elsewhere "
                "(prompt_target_batch builds it)."
            )
        width = input_ids.shape[1]
        if labels.shape[-1] not in (width, width + 1):
            raise ValueError(
                f"labels has {labels.shape[-1]} columns for {width} input tokens: "
                "give as many, or one more (the last token, never read)."
            )
        target = labels[:, 1:].to(input_ids.device)
        columns = (target != IGNORE_INDEX).any(0).nonzero().flatten()
        first = int(columns[0]) if columns.numel() else target.shape[1] - 1
        keep = {"logits_to_keep": width - first} if self._keeps else {}
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids(attention_mask),
            use_cache=False,
            **keep,
        )
        logits = out.logits[:, -(width - first) :]
        target = target[:, first:]
        logp = torch.log_softmax(logits[:, : target.shape[1]].float(), dim=-1)
        scored = target != IGNORE_INDEX
        picked = logp.gather(-1, target.clamp_min(0).unsqueeze(-1)).squeeze(-1)
        return (picked * scored).sum(dim=1)


def explain_answers(
    iba: InformationBottleneckAttribution,
    batch: PromptBatch,
    per_token: bool = False,
    whole: bool = True,
    **options: Any,
) -> AnswerScores:
    """Explain every answer of ``batch`` with IBA: which prompt tokens its
    log-probability needs, for the whole answer and (``per_token``) for each
    output token, all instances in one IBA call.

    Args:
        iba (InformationBottleneckAttribution): Built on
            :class:`CausalLMLogLikelihood` of the model and one of its layers
            (or its embeddings, for ``config="deletion"``).
        batch (PromptBatch): The prompts and answers
            (:func:`~captum_iba.attr.llm_batch.prompt_batch`).
        per_token (bool): Also explain each output token (one instance per
            token: an answer of T tokens costs T more instances).
        whole (bool): Explain the whole answer. Default True.
        **options: Options of :meth:`InformationBottleneckAttribution.attribute`
            (``config``, ``steps``, ``seed``, ...).

    Returns:
        AnswerScores: One score per token, as for classifiers
        (:attr:`~captum_iba.attr.options.IBAOptions.token_reduction`): the
        capacity summed over the layer's features (nats), a mask's mean over
        them (in [0, 1]).

    Raises:
        TypeError: When ``iba`` is not built on a CausalLMLogLikelihood.
        ValueError: When neither ``whole`` nor ``per_token`` is asked for.
    """
    if not isinstance(iba.forward_func, CausalLMLogLikelihood):
        raise TypeError(
            "explain_answers needs IBA built on CausalLMLogLikelihood(model) "
            f"(got a forward of type {type(iba.forward_func).__name__})."
        )
    if not (whole or per_token):
        raise ValueError("ask for the whole answer, per output token, or both")
    parts: List[PromptBatch] = [batch] if whole else []
    which = None
    if per_token:
        rows, which = batch.per_token()
        parts.append(rows)
    combined = concat_batches(parts)
    scores, flat, used = answer_rows(iba, combined, options)
    answer = scores[: len(batch)] if whole else None
    tokens = None
    if which is not None:
        per = scores[len(batch) if whole else 0 :]
        longest = int(which[:, 1].max()) + 1
        tokens = scores.new_zeros(len(batch), longest, scores.shape[1])
        tokens[which[:, 0], which[:, 1]] = per
    if whole:
        flat = flat[: len(batch)]
    else:  # per output token only: an instance is flat when all its tokens are
        assert which is not None
        flat = torch.stack([flat[which[:, 0] == b].all() for b in range(len(batch))])
    say_if_flat(flat, iba, used)
    return AnswerScores(answer, tokens, answer_unit(used), flat)


def answer_unit(options: Any) -> str:
    """What a score of IBA on a causal LM is under ``options``: ``"signal"``
    for a mask readout, else ``"nats"``."""
    return "signal" if options.readout == "mask_mean" else "nats"


def answer_rows(
    iba: InformationBottleneckAttribution, rows: PromptBatch, options: Dict[str, Any]
) -> Tuple[Tensor, Tensor, Any]:
    """IBA's scores of every row of ``rows`` (each explaining its labelled
    tokens) in one call: ``(R, W)`` scores (zero in the last column, which
    predicts nothing), ``(R,)`` whether a row's scores give no ranking, and
    the options used (:class:`~captum_iba.attr.options.IBAOptions`)."""
    options = llm_options(options)
    args = rows.arguments()
    used = options_of(iba, options)
    by_source = used.mask == "source"
    if by_source and rows.sources is None:
        raise ValueError(
            "mask='source' gives one score per source: the batch has no sources "
            "(captum_iba.evaluation.sources.with_sources adds them)"
        )
    attr = iba.attribute(
        args["input_ids"],
        additional_forward_args=(args["attention_mask"], args["labels"]),
        token_mask=rows.scored[:, :-1].long(),
        objective="log_probability",
        feature_mask=rows.sources[:, :-1] if by_source else None,
        **options,
    )
    # one readout for classifiers and causal LMs: a mask's mean over the
    # features (in [0, 1]), the capacity's sum (nats)
    scores = token_attributions(attr, reduction=used.token_reduction).detach()
    scores = torch.cat([scores, scores.new_zeros(scores.shape[0], 1)], dim=1)
    judged = rows.scored
    if by_source:  # a source's tokens share its weight: judge one per source
        assert rows.sources is not None
        before = nn.functional.pad(rows.sources[:, :-1], (1, 0), value=-1)
        judged = (rows.sources >= 0) & (rows.sources != before)
    return scores, no_ranking(scores, judged), used


#: What a named configuration changes on a causal LM where the call does not
#: set it: ``"faithful"``'s per-feature mask gives a decoder no ranking (every
#: token's score stays where the mask starts, docs/llm.rst), one weight per
#: token ranks; ``"deletion"`` keeps its complement term at every step (the
#: classifiers' last steps without it were measured on SST-2 only, issue 54).
#: Read by :func:`llm_options`, the one place both routes (Captum's LLM API
#: and :func:`explain_answers`' callers, ``llm-iba-faithful``) resolve it.
LLM_OVERRIDES = {"faithful": {"mask": "token"}, "deletion": {"complement_skip": 0}}
#: The mask of :data:`LLM_OVERRIDES` per configuration.
LLM_MASKS = {name: o["mask"] for name, o in LLM_OVERRIDES.items() if "mask" in o}


def llm_options(options: Dict[str, Any]) -> Dict[str, Any]:
    """IBA's options of a call on a causal LM: ``options`` with the fields of
    :data:`LLM_OVERRIDES` added when ``config`` names such a configuration
    (any case) and does not set them. Given fields, or options passed as an
    :class:`~captum_iba.attr.options.IBAOptions`, are used as they are.

    Args:
        options (dict): Keyword options of
            :meth:`InformationBottleneckAttribution.attribute`.

    Returns:
        dict: The options to use (a new dict when one is added).
    """
    config = options.get("config", "paper")
    if not isinstance(config, str):
        return options
    fields = LLM_OVERRIDES.get(config.lower(), {})
    extra = {k: v for k, v in fields.items() if k not in options}
    return {**options, **extra} if extra else options


def options_of(iba: InformationBottleneckAttribution, options: Dict[str, Any]) -> Any:
    """The :class:`~captum_iba.attr.options.IBAOptions` of a call's options."""
    from captum_iba.attr.options import IBAOptions

    rest = {k: v for k, v in options.items() if k in IBAOptions.names()}
    return IBAOptions.from_config(options.get("config", "paper"), **rest)


def concat_batches(parts: Sequence[PromptBatch]) -> PromptBatch:
    """The rows of ``parts`` in one :class:`PromptBatch`, in order."""
    if len(parts) == 1:
        return parts[0]
    sources = [p.sources for p in parts]
    spans = any(p.explained is not None for p in parts)  # a part of an answer
    return PromptBatch(
        *(torch.cat([getattr(p, f) for p in parts]) for f in _TENSORS),
        tuple(x for p in parts for x in p.prompts),
        None if any(s is None for s in sources) else torch.cat(sources),
        tuple(x for p in parts for x in p.spans),
        torch.cat([p.explained_mask for p in parts]) if spans else None,
    )


_TENSORS = ("input_ids", "attention_mask", "labels", "scored")


def prompt_target_batch(
    tokenizer: Any,
    prompts: Sequence[str],
    targets: Sequence[str],
    padding_side: str = "left",
) -> Dict[str, Tensor]:
    """Tokenise prompts and their target continuations into one padded batch.

    Args:
        tokenizer: A Hugging Face tokenizer (its pad token, else its EOS token,
            fills the padding).
        prompts (Sequence[str]): The prompts.
        targets (Sequence[str]): One continuation per prompt (tokenised without
            special tokens).
        padding_side (str, optional): ``"left"`` or ``"right"``. Default: left.

    Returns:
        dict: ``input_ids``, ``attention_mask`` and ``labels`` (the target ids,
        -100 at the prompt and at padding), each ``(B, L)``: the arguments of
        :class:`CausalLMLogLikelihood`. The prompt's positions are those with
        ``attention_mask == 1`` and ``labels == -100``.
    """
    if padding_side not in ("left", "right"):
        raise ValueError(
            f"padding_side must be 'left' or 'right', got {padding_side!r}"
        )
    batch = prompt_batch(tokenizer, prompts, targets)
    out = {
        "input_ids": batch.input_ids,
        "attention_mask": batch.attention_mask,
        "labels": batch.labels,
    }
    if padding_side == "right":  # each row's tokens moved to its start
        pads = (batch.attention_mask == 0).sum(1).tolist()
        for name, value in out.items():
            out[name] = torch.stack(
                [torch.roll(row, -p) for row, p in zip(value, pads)]
            )
    return out
