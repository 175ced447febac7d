"""Which tokens of a prompt are the user's: the user turn of a chat template
found by construction (:func:`user_turn`) and the special ids never scored
(:func:`never_scored_ids`), for :mod:`captum_iba.attr.llm_batch`."""

from typing import Any, Tuple

__all__ = ["never_scored_ids", "user_turn"]


#: Stands for the user's text when the chat template is rendered to find the
#: user turn: private-use characters, which no template writes itself.
_SENTINEL = "\ue000user\ue001"


def user_turn(tokenizer: Any, prompt: str) -> Tuple[str, int, int, int]:
    """The prompt as a user turn of the chat template, and where the prompt's
    text lies in it, by construction: the template is rendered once with a
    sentinel as the user's text (what surrounds it is the template's), once
    with the prompt, which must then read prefix + prompt + suffix (a
    template that trims the text, as Gemma's does, gives the stripped
    prompt). Never found by searching the text for the prompt, which may
    also occur in the template (``"assistant"``, ``"im"``).

    Returns:
        (str, int, int, int): The text; the start and end of the prompt's
        characters in it; what to subtract from an offset in the text to
        get one in ``prompt``.

    Raises:
        ValueError: For a template that writes the user's text other than
            once, or changes it beyond stripping.
    """

    def render(content: str) -> str:
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": content}],
            tokenize=False,
            add_generation_prompt=True,
        )

    marked, text = render(_SENTINEL), render(prompt)
    count = marked.count(_SENTINEL)
    if count == 1:
        prefix, suffix = marked.split(_SENTINEL)
        for shown in (prompt, prompt.strip()):
            if text == prefix + shown + suffix:
                lead = prompt.index(shown)
                return text, len(prefix), len(prefix) + len(shown), len(prefix) - lead
    how = (
        f"writes the user's text {count} times"
        if count > 1
        else "changes the user's text (more than stripping spaces)"
    )
    raise ValueError(
        f"the chat template {how}, so its tokens cannot be told from the "
        "template's: explain the prompt without it (chat=False, --no-chat)"
    )


def never_scored_ids(tokenizer: Any) -> set:
    """The ids never scored: the tokenizer's special tokens, less its unknown
    token (it stands for a word of the prompt, which the model reads; as for
    classifiers, :func:`~captum_iba._utils.common.tokenizer_ids`) unless that
    id also opens or ends a text."""
    special = set(getattr(tokenizer, "all_special_ids", ()) or ())
    unk = getattr(tokenizer, "unk_token_id", None)
    roles = {getattr(tokenizer, f"{r}_token_id", None) for r in ("bos", "eos", "pad")}
    if unk not in roles:
        special.discard(unk)
    return special
