"""Prompts and their answers as one padded batch, for a causal LM.

:func:`prompt_batch` tokenises prompts - wrapped as a user turn of the
tokenizer's chat template when asked (or when the tokenizer has one) -, takes
each prompt's answer as given or as the model's own greedy continuation
(:func:`greedy_answers`), and lays prompt + answer out in one batch padded on
the left. The :class:`PromptBatch` it returns also says which prompt tokens
are scored: the prompt's own tokens, never a special token nor, with a chat
template, the template around the user's text (the system turn, the role
names): those are neither removed nor scored by any method.

The batch is what :func:`~captum_iba.attr.llm.explain_answers` explains, and
what :class:`~captum_iba.attr.llm.CausalLMLogLikelihood` scores
(:meth:`PromptBatch.arguments`).
"""

from typing import Any, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from captum_iba._utils.common import max_positions, model_device
from captum_iba.attr._user_turn import never_scored_ids, user_turn
from captum_iba.attr.batches import IGNORE_INDEX, PromptBatch

__all__ = [
    "IGNORE_INDEX",
    "PromptBatch",
    "check_target",
    "encode_prompt",
    "greedy_answers",
    "position_ids",
    "prompt_batch",
    "unknown_words",
]


def position_ids(attention_mask: Tensor) -> Tensor:
    """``(B, W)`` positions counted over real tokens only, so that a sequence
    padded on the left (or right, or not at all) gets the same positions."""
    return (attention_mask.long().cumsum(-1) - 1).clamp_min(0)


def _pad_id(tokenizer: Any) -> int:
    pad = getattr(tokenizer, "pad_token_id", None)
    pad = getattr(tokenizer, "eos_token_id", None) if pad is None else pad
    if pad is None:
        raise ValueError("the tokenizer has neither a pad nor an EOS token")
    return int(pad)


def uses_chat(tokenizer: Any, chat: Optional[bool]) -> bool:
    """Whether prompts are wrapped as a user turn: ``chat``, or (None) when
    the tokenizer has a chat template.

    Raises:
        ValueError: For ``chat=True`` with a tokenizer without a template.
    """
    has = bool(getattr(tokenizer, "chat_template", None))
    if chat and not has:
        raise ValueError(
            "chat=True: the tokenizer has no chat template, so the prompt "
            "cannot be wrapped as a user turn (leave chat off)"
        )
    return has if chat is None else bool(chat)


def encode_prompt(
    tokenizer: Any, prompt: str, chat: bool = False
) -> Tuple[List[int], List[bool], List[Optional[Tuple[int, int]]]]:
    """A prompt's token ids, which of them are its own (scored), and where
    each of those lies in ``prompt``.

    Args:
        tokenizer: A Hugging Face tokenizer (a fast one gives the spans).
        prompt (str): The prompt.
        chat (bool): Wrap it as a user turn of the tokenizer's chat template
            (with the generation prompt); only the tokens of ``prompt``
            itself are then scored.

    Returns:
        (list of int, list of bool, list): The ids; per id whether it is
        scored (never a special token); per id its ``(start, end)``
        characters in ``prompt`` (None for the template's and special
        tokens, and for every token of a tokenizer without offsets).

    Raises:
        ValueError: For an empty prompt, or one without a token of its own.
    """
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError(f"the prompt is empty ({prompt!r}): give the text to explain")
    special = never_scored_ids(tokenizer)
    text, start, end, shift = prompt, 0, len(prompt), 0
    if chat:
        text, start, end, shift = user_turn(tokenizer, prompt)
    fast = bool(getattr(tokenizer, "is_fast", False))
    enc = tokenizer(text, add_special_tokens=not chat, return_offsets_mapping=fast)
    ids = list(enc["input_ids"])
    offsets = enc["offset_mapping"] if fast else [None] * len(ids)
    own: List[bool] = []
    spans: List[Optional[Tuple[int, int]]] = []
    for i, span in zip(ids, offsets):
        inside = span is None or (
            span[0] < end and span[1] > start and span[1] > span[0]
        )
        mine = i not in special and (inside or not chat)
        own.append(mine)
        # a token may straddle the user turn's edge ("user\n" + "\n\n" as
        # one token): its span is cut to the prompt
        cut = (
            (max(span[0] - shift, 0), min(span[1] - shift, len(prompt)))
            if span
            else None
        )
        spans.append(cut if mine else None)
    if not any(own):
        raise ValueError(
            f"the prompt {prompt!r} has no token to explain (only special tokens)"
        )
    unk = getattr(tokenizer, "unk_token_id", None)
    if all(i == unk for i, o in zip(ids, own) if o):
        raise ValueError(
            f"the tokenizer knows none of the prompt's words: each becomes its "
            f"unknown token ({tokenizer.unk_token}), so there is nothing to explain; "
            "give text in the model's vocabulary"
        )
    return ids, own, spans


def greedy_answers(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int = 25,
) -> List[List[int]]:
    """The model's greedy continuation of each prompt, up to its end-of-text
    token (not included) or ``max_new_tokens``.

    Args:
        model: A Hugging Face causal LM (``generate``).
        tokenizer: Its tokenizer (pad and end-of-text ids).
        prompts (Sequence of Sequence of int): Prompt token ids.
        max_new_tokens (int): The longest answer.

    Returns:
        list of list of int: One answer per prompt.

    Raises:
        ValueError: When the model answers a prompt with nothing.
    """
    pad = _pad_id(tokenizer)
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(list(p))
        mask[i, width - len(p) :] = 1
    device = model_device(model, ids.device)
    stops = _stop_ids(model, tokenizer)
    with torch.no_grad():
        out = model.generate(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            temperature=None,
            top_p=None,
            top_k=None,
            pad_token_id=pad,
        )
    answers = []
    for i, row in enumerate(out[:, width:].tolist()):
        cut = next((j for j, t in enumerate(row) if t in stops), len(row))
        if cut == 0:
            raise ValueError(
                f"the model answers prompt {i} with nothing (its first token ends "
                "the text): give the answer to explain as a target"
            )
        answers.append(row[:cut])
    return answers


def _stop_ids(model: Any, tokenizer: Any) -> set:
    """The ids that end an answer: the tokenizer's and the generation
    config's end-of-text ids."""
    stops = set()
    for value in (
        getattr(tokenizer, "eos_token_id", None),
        getattr(getattr(model, "generation_config", None), "eos_token_id", None),
    ):
        if isinstance(value, int):
            stops.add(value)
        elif isinstance(value, (list, tuple)):
            stops.update(int(v) for v in value)
    return stops


def prompt_batch(
    tokenizer: Any,
    prompts: Sequence[str],
    targets: Optional[Sequence[str]] = None,
    model: Any = None,
    chat: Optional[bool] = False,
    max_new_tokens: int = 25,
    each_token: bool = False,
) -> PromptBatch:
    """Prompts and their answers as one batch padded on the left.

    Args:
        tokenizer: A Hugging Face tokenizer (its pad token, else its
            end-of-text token, fills the padding).
        prompts (Sequence[str]): The prompts.
        targets (Sequence[str], optional): One answer per prompt (tokenised
            without special tokens, e.g. ``" positive"``). None: the model's
            own greedy answers (``model`` needed).
        model (optional): The causal LM, to generate the answers and to
            check the length against its positions.
        chat (bool, optional): Wrap each prompt as a user turn of the chat
            template; None: when the tokenizer has one. Default False.
        max_new_tokens (int): The longest generated answer.
        each_token (bool): Explain each answer token too (a method's
            per-token scores). Default False: the whole answer.

    Returns:
        PromptBatch: The batch.

    Raises:
        ValueError: For no prompt, an empty prompt or target, a number of
            targets that differs from the prompts, or a prompt with its
            answer longer than the model's positions.
        TypeError: For a string instead of a sequence of strings.
    """
    if isinstance(prompts, str) or isinstance(targets, str):
        raise TypeError("prompts and targets must be sequences of strings")
    if not prompts:
        raise ValueError("prompts is empty: give at least one prompt")
    if targets is not None and len(targets) != len(prompts):
        raise ValueError(
            f"prompts and targets must be of equal length; got {len(prompts)} "
            f"and {len(targets)}"
        )
    wrap = uses_chat(tokenizer, chat)
    encoded = [encode_prompt(tokenizer, p, wrap)[:2] for p in prompts]
    if targets is None:
        if model is None:
            raise ValueError("targets=None generates the answers: pass the model")
        answers = greedy_answers(
            model, tokenizer, [ids for ids, _ in encoded], max_new_tokens
        )
    else:
        answers = [_encode_target(tokenizer, t) for t in targets]
    rows = [ids + a for (ids, _), a in zip(encoded, answers)]
    _check_positions(model, rows, encoded, generated=targets is None)
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), _pad_id(tokenizer), dtype=torch.long)
    mask = torch.zeros_like(ids)
    labels = torch.full_like(ids, IGNORE_INDEX)
    scored = torch.zeros_like(ids, dtype=torch.bool)
    for i, ((p_ids, own), answer) in enumerate(zip(encoded, answers)):
        start = width - len(rows[i])
        ids[i, start:] = torch.tensor(rows[i])
        mask[i, start:] = 1
        labels[i, start + len(p_ids) :] = torch.tensor(answer)
        scored[i, start : start + len(p_ids)] = torch.tensor(own)
    return PromptBatch(
        ids, mask, labels, scored, tuple(prompts), each_token=bool(each_token)
    )


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
        ids = torch.tensor(_encode_target(tokenizer, target))
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


def _encode_target(tokenizer: Any, target: str) -> List[int]:
    ids = list(tokenizer.encode(target, add_special_tokens=False))
    if not ids:
        raise ValueError(
            f"target {target!r} has no token (the tokenizer gives none): give the "
            "answer to explain"
        )
    _refuse_unknown(tokenizer, target)
    return ids


def unknown_words(tokenizer: Any, text: str) -> List[str]:
    """The parts of ``text`` that the tokenizer turns into its unknown token
    (as written, with a fast tokenizer; else the unknown token): the one
    check of answer words, for a given target and a corpus task's answers.

    Args:
        tokenizer: A Hugging Face tokenizer.
        text (str): The text, tokenised without special tokens.

    Returns:
        list of str: The unknown parts, in order (empty when none).
    """
    unk = getattr(tokenizer, "unk_token_id", None)
    if unk is None:
        return []
    fast = bool(getattr(tokenizer, "is_fast", False))
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=fast)
    ids = list(enc["input_ids"])
    spans = enc["offset_mapping"] if fast else [None] * len(ids)
    return [
        text[span[0] : span[1]] if span else str(tokenizer.unk_token)
        for i, span in zip(ids, spans)
        if i == unk
    ]


def _refuse_unknown(tokenizer: Any, target: str) -> None:
    """A target the tokenizer cannot write is refused: its unknown token is
    no answer the model could give (it was explained as ``<unk>``)."""
    unknown = unknown_words(tokenizer, target)
    if unknown:
        raise ValueError(
            f"target {target!r}: the tokenizer does not know "
            f"{', '.join(map(repr, unknown))} (it becomes its unknown token "
            f"{tokenizer.unk_token}, not the word): give an answer in the model's "
            "vocabulary"
        )


def _check_positions(
    model: Any,
    rows: List[List[int]],
    encoded: List[Tuple[List[int], Any]],
    generated: bool = False,
) -> None:
    """Each prompt with its answer fits the model's positions (the answer's
    last token is never read: prompt + answer - 1 positions)."""
    positions = max_positions(model)
    if positions is None:
        return
    for i, (row, (prompt, _)) in enumerate(zip(rows, encoded)):
        if len(row) - 1 > positions:
            what = "the answer generated" if generated else "the target"
            raise ValueError(
                f"prompt {i}: the prompt ({len(prompt)} tokens) and {what} "
                f"({len(row) - len(prompt)} tokens) need {len(row) - 1} positions, "
                f"more than the model's {positions}: shorten them"
            )
