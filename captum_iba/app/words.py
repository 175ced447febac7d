"""A text as the methods see it and as a reader sees it: the word pieces the
tokenizer cuts (checked, cut to the model's positions), and the words they
form (:func:`grouping`), for :func:`captum_iba.explain`."""

import unicodedata
from typing import Any, List, Optional, Sequence, Tuple

from captum_iba.app.errors import CLIError

__all__ = [
    "FUNCTION_WORDS",
    "form_words",
    "form_words_note",
    "blank",
    "encode",
    "grouping",
    "prompt_words",
    "shown",
    "to_words",
    "token_labels",
]

#: Apostrophes that join a contraction or a possessive ("don't", "it's",
#: "film's"), which BERT's pre-tokenizer cuts into three words.
_APOSTROPHES = "'\u2019"

#: A word every vocabulary of a language model holds: when it too becomes the
#: unknown token, the tokenizer's vocabulary files are missing or damaged.
_COMMON_WORD = "the"


def grouping(
    enc: Any, tokenizer: Any, texts: Sequence[str]
) -> Tuple[List[bool], List[str], List[Optional[int]], List[int]]:
    """Special tokens, words, each piece's word and each word's segment.

    A fast tokenizer says which word and which text each piece comes from
    (words are written as in the text, from its character offsets); a slow
    one is grouped by its ``"##"`` continuation marker.
    """
    ids = enc["input_ids"][0].tolist()
    pieces = tokenizer.convert_ids_to_tokens(ids)
    if getattr(enc, "is_fast", False) and "offset_mapping" in enc:
        seq, word_ids = enc.sequence_ids(0), enc.word_ids(0)
        spans = enc["offset_mapping"][0].tolist()
        special = [s is None for s in seq]
        keys = [None if s is None else (s, w) for s, w in zip(seq, word_ids)]
        keys = _join_contractions(keys, spans, texts)
    else:
        unk = tokenizer.unk_token_id
        special_ids = set(tokenizer.all_special_ids) - {unk}
        special = [i in special_ids for i in ids]
        types = enc.get("token_type_ids")
        segs = [0] * len(ids) if types is None else types[0].tolist()
        keys, word = [], -1
        for p, s, g in zip(pieces, special, segs):
            if not s and not (p.startswith("##") and word >= 0):
                word += 1
            keys.append(None if s else (g, word))
        spans = None
    words: List[str] = []
    segment: List[int] = []
    of_piece: List[Optional[int]] = []
    last = None
    for i, key in enumerate(keys):
        if key is None:
            of_piece.append(None)
            continue
        if key != last:
            words.append("")
            segment.append(key[0])
            start = None if spans is None else spans[i][0]
        last = key
        of_piece.append(len(words) - 1)
        if spans is None:
            words[-1] += pieces[i][2:] if pieces[i].startswith("##") else pieces[i]
        else:
            words[-1] = texts[key[0]][start : spans[i][1]]
    return special, words, of_piece, segment


def _join_contractions(
    keys: List[Any], spans: List[List[int]], texts: Sequence[str]
) -> List[Any]:
    """Each piece's word key, an apostrophe written between two letters
    ("don't", "it's", "film's") and the letters after it made part of the word
    before them (the pre-tokenizer made them words of their own, so "t" and
    "s" were ranked as words)."""
    out = list(keys)
    for i in range(1, len(keys)):
        key, before = keys[i], out[i - 1]
        if key is None or before is None or key == keys[i - 1] or key[0] != before[0]:
            continue
        text, (start, end), prev_end = texts[key[0]], spans[i], spans[i - 1][1]
        if start != prev_end or start == 0 or end <= start:
            continue  # a space (or nothing) between the two words
        if text[start] in _APOSTROPHES:  # "don" + "'": is a letter after it?
            joins = text[start - 1].isalnum() and text[end : end + 1].isalpha()
        else:  # "don'" + "t"
            joins = (
                start >= 2
                and text[start - 1] in _APOSTROPHES
                and text[start - 2].isalnum()
                and text[start].isalpha()
            )
        if joins:
            for j in range(i, len(keys)):  # every piece of the joined word
                if keys[j] != key:
                    break
                out[j] = before
    return out


#: Words that carry a sentence's form rather than its content (English).
FUNCTION_WORDS = frozenset(
    "a an the is are was were be been am of to in on at by for from with and or "
    "but not no it its this that these those as if so do does did has have had "
    "i you he she we they me him her us them my your his our their what which "
    "who whom whose where when why how".split()
)


def form_words(words: Sequence[str]) -> List[str]:
    """The ``words`` that are punctuation or :data:`FUNCTION_WORDS` (their
    letters, case aside): what a reader looking for content words does not
    expect a ranking to put first (issue 90, item 17)."""
    out = []
    for word in words:
        core = word.strip().lstrip("\u2581\u0120#").strip()
        letters = core.strip(".,;:!?'\"()[]-").lower()
        punct = bool(core) and all(unicodedata.category(c)[0] == "P" for c in core)
        if punct or letters in FUNCTION_WORDS:
            out.append(word)
    return out


def form_words_note(result: Any, pieces: bool, why: str, top: int = 3) -> str:
    """Why a ranking puts punctuation or function words among its ``top``
    words, where it does ("" where none does): the note under the page and
    the listing (issue 90, item 17: "the" first for a whole answer, "," and
    "." third and fourth on a classifier, with no hint).

    Args:
        result (Explanation): The explanation.
        pieces (bool): Tokens instead of words.
        why (str): Why, for what was explained (its subject's
            ``form_words_why``).
        top (int): How many top words are looked at. Default 3.
    """
    found = []
    for name, m in result.methods.items():
        if m.no_ranking:
            continue
        small = form_words([w for w, _ in result.top(top, name, pieces)])
        if small:
            found.append(f"{name}: {', '.join(repr(w) for w in small)}")
    if not found:
        return ""
    return (
        f"Function words or punctuation among the top words ({'; '.join(found)}): {why}"
    )


def blank(text: str) -> bool:
    """Whether ``text`` holds nothing to read: only spaces, line breaks and
    invisible characters (zero-width spaces, joiners, byte-order marks:
    Unicode's format characters)."""
    return all(c.isspace() or unicodedata.category(c) == "Cf" for c in text)


def encode(tokenizer: Any, model: Any, text: str, pair: Optional[str]) -> Any:
    """The text encoded (cut to the model's positions), with checks.

    Raises:
        ~captum_iba.app.errors.CLIError: For a text with nothing to read, one
            whose every word the tokenizer maps to its unknown token (naming
            why: words it has no pieces for, or a damaged vocabulary), or one
            that gives no token at all.
    """
    if blank(text) or (pair is not None and blank(pair)):
        which = "--pair" if not blank(text) else "the text to explain"
        raise CLIError(
            f"{which} is empty (only spaces or invisible characters such as "
            "zero-width spaces)"
        )
    limit = min(512, getattr(model.config, "max_position_embeddings", 512) or 512)
    fast = bool(getattr(tokenizer, "is_fast", False))
    enc = tokenizer(
        text,
        pair,
        truncation=True,
        max_length=limit,
        return_tensors="pt",
        return_offsets_mapping=fast,
    )
    # verbose=False: this count is never fed to the model (no "indexing
    # errors" warning from transformers; the text is cut above).
    full = len(tokenizer(text, pair, verbose=False)["input_ids"])
    if full > limit:
        print(f"note: the text has {full} word pieces; only the first {limit} are used")
    _check_words(tokenizer, enc["input_ids"][0].tolist())
    return enc


def _check_words(tokenizer: Any, ids: List[int]) -> None:
    """Refuses a text the tokenizer cannot read: no token at all, or every
    one its unknown token (saying whether the vocabulary is damaged or the
    words are ones it has no pieces for)."""
    special = set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}
    words = [i for i in ids if i not in special]
    if not words:
        raise CLIError(
            "the tokenizer finds no word in the text to explain: nothing to explain"
        )
    unk = tokenizer.unk_token_id
    if unk is None or set(words) != {unk}:
        return
    common = [i for i in tokenizer(_COMMON_WORD)["input_ids"] if i not in special]
    if common and set(common) == {unk}:
        raise CLIError(
            "the tokenizer maps every word, even 'the', to its unknown token "
            f"({tokenizer.unk_token}): its vocabulary files are missing or damaged"
        )
    raise CLIError(
        "the tokenizer knows none of the text's words: each becomes its unknown "
        f"token ({tokenizer.unk_token}), so there is nothing to explain (characters "
        "outside its vocabulary, such as emoji, or words longer than it reads, "
        "e.g. over 100 characters for BERT's WordPiece); give text in the model's "
        "language"
    )


def prompt_words(
    prompt: str, spans: Sequence[Optional[Tuple[int, int]]], pieces: Sequence[str]
) -> Tuple[List[str], List[int]]:
    """A prompt's scored pieces grouped into words: a piece starts a word when
    it starts with a space or after a gap (a piece without a span, from a
    slow tokenizer, is a word of its own); a piece of only spaces or line
    breaks is no word of its own: it joins the word before it (the first
    word, when it comes before any); a byte piece that shares a character
    with the piece before it (its span starts before that one's end: an
    emoji or a CJK character written over several byte-level tokens) is part
    of that piece's word.

    Args:
        prompt (str): The prompt.
        spans (Sequence): Each piece's ``(start, end)`` in ``prompt``, or None.
        pieces (Sequence[str]): The pieces (shown for a piece without a span).

    Returns:
        (list of str, list of int): The words as written in the prompt, and
        each piece's word.
    """
    words: List[str] = []
    of_piece: List[int] = []
    last_end: Optional[int] = None
    first: Optional[int] = None
    for span, piece in zip(spans, pieces):
        space = span is not None and prompt[span[0] : span[1]].isspace()
        # a byte piece: part of a character the piece before began (an emoji,
        # a CJK character written over several byte-level tokens)
        inside = span is not None and last_end is not None and span[0] < last_end
        starts = (
            span is None
            or last_end is None
            or span[0] > last_end
            or prompt[span[0] : span[0] + 1].isspace()
            or prompt[max(span[0] - 1, 0) : span[0]].isspace()
        ) and not (words and (space or inside or blank(words[-1])))
        if starts:
            words.append("")
            first = None if span is None else span[0]
        if span is None:
            words[-1] = piece
        else:
            words[-1] = prompt[first : span[1]].strip() or prompt[first : span[1]]
        last_end = None if span is None else span[1]
        of_piece.append(len(words) - 1)
    return words, of_piece


def shown(word: str) -> str:
    """A word as a one-line listing shows it: line breaks, tabs and other
    control characters written as escapes (``\\n``)."""
    if word.isprintable():
        return word
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in word)


def token_labels(tokenizer: Any, ids: Sequence[int]) -> List[str]:
    """Each token of an answer as a reader can tell it: its text, and for a
    byte piece (part of a character written over several tokens, which
    alone decodes to U+FFFD) the character it helps write with its part,
    ``"é (byte 1/2)"``, or, when the answer ends inside the character, the
    token as the tokenizer names it (``<0xC3>``)."""
    ids = [int(i) for i in ids]
    labels = [tokenizer.decode([i]) for i in ids]
    k = 0
    while k < len(ids):
        if "\ufffd" not in labels[k]:
            k += 1
            continue
        whole = next(
            (
                (end, tokenizer.decode(ids[k:end]))
                for end in range(k + 2, min(k + 4, len(ids)) + 1)
                if "\ufffd" not in tokenizer.decode(ids[k:end])
            ),
            None,
        )
        if whole is None:
            labels[k] = f"{tokenizer.convert_ids_to_tokens(ids[k])} (a byte piece)"
            k += 1
            continue
        end, text = whole
        for j in range(k, end):
            labels[j] = f"{text.strip() or text} (byte {j - k + 1}/{end - k})"
        k = end
    return labels


def to_words(
    values: Sequence[float], of_piece: Sequence[Optional[int]], count: int, how: str
) -> List[float]:
    """Pieces' values as one value per word: their ``"sum"`` or ``"mean"``
    (the method's registry entry says which); pieces of no word are left
    out."""
    out = [0.0] * count
    seen = [0] * count
    for x, w in zip(values, of_piece):
        if w is not None:
            out[w] += x
            seen[w] += 1
    if how == "mean":
        out = [x / max(c, 1) for x, c in zip(out, seen)]
    return out
