r"""IBA for generative (decoder-only) language models.

Two ways in, both with a Hugging Face ``...ForCausalLM`` (GPT-2, Llama, ...):

* :class:`LLMInformationBottleneckAttribution` - Captum's own LLM API
  (:class:`captum.attr.LLMGradientAttribution`) with IBA: a prompt as
  :class:`captum.attr.TextTokenInput`, a target string (or generation), and a
  standard :class:`captum.attr.LLMAttributionResult` back (``seq_attr``,
  ``token_attr`` per generated token, Captum's plots). One bottleneck is
  optimised per output token, keeping that token's log-probability high;
  ``seq_attr`` is their sum, as for Captum's gradient methods.
* :class:`CausalLMLogLikelihood` with :func:`prompt_target_batch` - a batch of
  prompts and target continuations, padded left or right, explained at once by
  :class:`~captum_iba.InformationBottleneckAttribution` (``target=None``; the
  objective keeps the continuation's total log-probability high).

In both the loss is a log-probability in **nats** (objective
``"log_probability"``: minimise :math:`-\log p(\text{target} \mid \text{prompt})`).
"""

from typing import Any, Dict, List, Optional, Sequence

import torch
from captum.attr import LLMAttributionResult, LLMGradientAttribution
from captum.log import log_usage
from torch import Tensor, nn

from captum_iba._utils.common import max_positions
from captum_iba.attr.iba import InformationBottleneckAttribution

__all__ = [
    "CausalLMLogLikelihood",
    "LLMInformationBottleneckAttribution",
    "prompt_target_batch",
]

#: Label of positions that are not scored (the Hugging Face convention).
IGNORE_INDEX = -100


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
            # (inp, target_tokens, cur_target_idx): the ids are constants.
            self.attr_method.unbatched_args = frozenset({1})

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
            inp (TextTokenInput): The prompt.
            target (str or Tensor, optional): The continuation to explain;
                None generates it with ``gen_args``.
            gen_args (dict, optional): Arguments of ``model.generate`` when
                ``target`` is None.
            **kwargs: Options of
                :meth:`InformationBottleneckAttribution.attribute` (``beta``,
                ``steps``, ``n_samples``, ``seed``, ...). ``objective``
                defaults to ``"log_probability"``.

        Returns:
            LLMAttributionResult: ``seq_attr`` (prompt tokens), ``token_attr``
            (output tokens x prompt tokens), in nats for IBA.
        """
        if target is not None:
            check_target(self.model, self.tokenizer, inp, target)
        if isinstance(self.attr_method, InformationBottleneckAttribution):
            kwargs.setdefault("objective", "log_probability")
            if "target" in kwargs or "token_mask" in kwargs:
                raise ValueError(
                    "target is the continuation (a string or token ids) and the "
                    "prompt has no padding: pass neither target nor token_mask "
                    "as an IBA option."
                )
        return super().attribute(inp, target=target, gen_args=gen_args, **kwargs)


def check_target(model: Any, tokenizer: Any, inp: Any, target: Any) -> None:
    """The continuation to explain holds at least one token, every id in the
    model's vocabulary, and fits with the prompt in the model's positions.

    Args:
        model: The causal LM (its ``config``).
        tokenizer: Its tokenizer.
        inp: The prompt (e.g. a :class:`captum.attr.TextTokenInput`).
        target (str or Tensor): The continuation, as text or 1-D token ids.

    Raises:
        ValueError: For no token, an id outside the vocabulary, or a prompt
            and continuation longer than the model's positions.
        TypeError: For token ids that are not a 1-D integer Tensor.
    """
    if isinstance(target, str):
        ids = torch.tensor(tokenizer.encode(target, add_special_tokens=False))
        if ids.numel() == 0:
            raise ValueError(
                f"target {target!r} has no token (the tokenizer gives none): give "
                "the continuation to explain"
            )
    elif isinstance(target, Tensor):
        ids = target
        if ids.dim() != 1 or ids.is_floating_point() or ids.is_complex():
            raise TypeError(
                "target token ids must be a 1-D integer Tensor, got shape "
                f"{tuple(ids.shape)} of {ids.dtype}"
            )
        if ids.numel() == 0:
            raise ValueError("target holds no token id: give the continuation")
    else:
        return  # Captum names other types
    config = getattr(model, "config", None)
    vocab = getattr(config, "vocab_size", None)
    if isinstance(vocab, int) and (int(ids.min()) < 0 or int(ids.max()) >= vocab):
        bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
        raise ValueError(
            f"target holds token id {bad}, outside the model's vocabulary "
            f"0..{vocab - 1}"
        )
    positions = max_positions(model)
    prompt = inp.to_model_input() if hasattr(inp, "to_model_input") else None
    if isinstance(prompt, str):
        prompt = torch.tensor([tokenizer.encode(prompt)])
    if positions is None or not isinstance(prompt, Tensor):
        return
    length = prompt.shape[-1] + ids.numel() - 1  # the longest input explained
    if length > positions:
        raise ValueError(
            f"the prompt ({prompt.shape[-1]} tokens) and the target ({ids.numel()} "
            f"tokens) need {length} positions, more than the model's {positions}: "
            "shorten them"
        )


def _position_ids(attention_mask: Tensor) -> Tensor:
    """Positions counted over real tokens only (left padding keeps them right)."""
    return (attention_mask.long().cumsum(-1) - 1).clamp_min(0)


class CausalLMLogLikelihood(nn.Module):
    r"""``forward(input_ids, attention_mask, labels) -> (B,)``: the total
    log-probability, in nats, of the labelled tokens of every sequence.

    ``labels`` follows the Hugging Face convention: the token id at positions
    to score, :data:`IGNORE_INDEX` (-100) elsewhere; position ``j`` is predicted
    from the positions before it. Position ids are counted over real tokens,
    so a sequence gives the same result padded left, right or not at all.
    Wrap the model with it and explain with ``target=None``: the objective
    keeps the continuation's log-probability high.

    Args:
        model (nn.Module): A Hugging Face ``...ForCausalLM``.
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

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
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=_position_ids(attention_mask),
            use_cache=False,
        )
        logp = torch.log_softmax(out.logits[:, :-1].float(), dim=-1)
        tgt = labels[:, 1:].to(logp.device)
        scored = tgt != IGNORE_INDEX
        picked = logp.gather(-1, tgt.clamp_min(0).unsqueeze(-1)).squeeze(-1)
        return (picked * scored).sum(dim=1)


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
    if isinstance(prompts, str) or isinstance(targets, str):
        raise TypeError("prompts and targets must be sequences of strings.")
    if len(prompts) != len(targets) or not prompts:
        raise ValueError(
            f"prompts and targets must be non-empty and of equal length; got "
            f"{len(prompts)} and {len(targets)}."
        )
    pad = tokenizer.pad_token_id
    pad = tokenizer.eos_token_id if pad is None else pad
    if pad is None:
        raise ValueError("The tokenizer has neither a pad nor an EOS token.")
    rows: List[List[int]] = []
    labels: List[List[int]] = []
    for prompt, target in zip(prompts, targets):
        p_ids = tokenizer.encode(prompt)
        t_ids = tokenizer.encode(target, add_special_tokens=False)
        if not p_ids or not t_ids:
            raise ValueError(f"Empty prompt or target: {prompt!r} -> {target!r}.")
        rows.append(p_ids + t_ids)
        labels.append([IGNORE_INDEX] * len(p_ids) + t_ids)
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), int(pad), dtype=torch.long)
    mask = torch.zeros_like(ids)
    lab = torch.full_like(ids, IGNORE_INDEX)
    for i, (row, row_labels) in enumerate(zip(rows, labels)):
        cols = (
            slice(width - len(row), width)
            if padding_side == "left"
            else slice(0, len(row))
        )
        ids[i, cols] = torch.tensor(row)
        mask[i, cols] = 1
        lab[i, cols] = torch.tensor(row_labels)
    return {"input_ids": ids, "attention_mask": mask, "labels": lab}
