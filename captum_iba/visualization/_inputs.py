"""Checks and conversions shared by the heatmaps and figures.

Scores become float64 numpy arrays (:func:`as_array`), masks boolean arrays
(:func:`as_mask`), tokens a checked list of strings (:func:`check_tokens`);
:func:`prepare_tokens` chooses the tokens shown (padding dropped, word pieces
merged by :func:`merge_word_pieces`) and :func:`scale_scores` maps scores into
Captum's colour range.
"""

import os
from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch import Tensor

from captum_iba._utils.io import atomic_write
from captum_iba.visualization.style import TOKEN_OPTIONS, HeatmapStyle

__all__ = ["merge_word_pieces", "prepare_tokens", "resolve_scale", "scale_scores"]

ArrayLike = Union[Tensor, np.ndarray, Sequence[float]]
PathLike = Union[str, "os.PathLike[str]"]


def as_array(x: Any, name: str) -> np.ndarray:
    """``x`` as a float64 numpy array, with a clear error when it is not numeric."""
    if isinstance(x, Tensor):
        return x.detach().to("cpu", torch.float64).numpy()
    try:
        return np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be numeric (a Tensor or array): {err}") from err


def as_mask(mask: Any, shape: Tuple[int, ...], name: str = "token_mask") -> np.ndarray:
    if mask is None:
        return np.ones(shape, dtype=bool)
    if isinstance(mask, Tensor):
        arr = mask.detach().cpu().numpy()
    else:
        arr = np.asarray(mask)
    if arr.shape != shape:
        raise ValueError(
            f"{name} has shape {arr.shape}, but the scores have shape {shape}"
        )
    return arr.astype(bool)


def check_tokens(tokens: Any, length: int, what: str = "scores") -> List[str]:
    if isinstance(tokens, str):
        raise TypeError(
            "tokens must be a sequence of token strings, not one string; e.g. "
            "tokenizer.convert_ids_to_tokens(input_ids[i])"
        )
    tokens = list(tokens)
    for t in tokens:
        if not isinstance(t, str):
            raise TypeError(f"tokens must be strings, got {type(t).__name__}: {t!r}")
    if len(tokens) != length:
        raise ValueError(
            f"got {len(tokens)} tokens but {length} {what}: tokens and scores must "
            "be aligned one to one"
        )
    return tokens


def merge_word_pieces(
    tokens: Sequence[str], scores: ArrayLike, prefix: str = "##"
) -> Tuple[List[str], np.ndarray]:
    """Merge WordPiece continuations (``"##ing"``) into whole words.

    A token that starts with ``prefix`` is appended (without the prefix) to the
    token before it, and its score is **added** to that token's score, so that
    a word's score is the total over its pieces (for IBA: the information that
    passes the bottleneck at the word). A continuation with nothing before it
    is kept as it is. Scores may be ``(L,)`` or ``(n_rows, L)`` (one row per
    layer); the merge acts on the last axis.

    Args:
        tokens (Sequence[str]): ``L`` tokens.
        scores (Tensor or array): ``(L,)`` or ``(n_rows, L)`` scores.
        prefix (str, optional): The continuation marker. Default: ``"##"``
            (BERT-style WordPiece). Tokenizers that mark word *starts*
            (SentencePiece ``"▁"``, byte-level BPE ``"Ġ"``) are not merged.

    Returns:
        (words, scores): The merged tokens and a float64 array with the last
        axis of length ``len(words)``.

    Examples::

        >>> merge_word_pieces(["[CLS]", "play", "##ing", "[SEP]"], [0.1, 1, 2, 0])
        (['[CLS]', 'playing', '[SEP]'], array([0.1, 3. , 0. ]))
    """
    if not prefix:
        raise ValueError("prefix must be a non-empty string")
    arr = as_array(scores, "scores")
    if arr.ndim not in (1, 2):
        raise ValueError(f"scores must be (L,) or (n_rows, L), got shape {arr.shape}")
    tokens = check_tokens(tokens, arr.shape[-1])
    words: List[str] = []
    groups: List[List[int]] = []
    for i, tok in enumerate(tokens):
        if tok.startswith(prefix) and words and len(tok) > len(prefix):
            words[-1] += tok[len(prefix) :]
            groups[-1].append(i)
        else:
            words.append(tok)
            groups.append([i])
    merged = np.stack([arr[..., g].sum(axis=-1) for g in groups], axis=-1)
    return words, merged


def prepare_tokens(
    tokens: Sequence[str],
    scores: ArrayLike,
    *,
    token_mask: Optional[ArrayLike] = None,
    style: Optional[HeatmapStyle] = None,
    **style_options: Any,
) -> Tuple[List[str], np.ndarray]:
    """The tokens to show and their raw scores: padding dropped, pieces merged.

    A position is dropped when ``token_mask`` is 0 there or its token is one
    of ``skip_tokens``; then, with ``merge_subwords``, word pieces are merged
    by :func:`merge_word_pieces` (scores summed).

    Args:
        tokens (Sequence[str]): ``L`` tokens, e.g.
            ``tokenizer.convert_ids_to_tokens(input_ids[i])``.
        scores (Tensor or array): ``(L,)`` per-token scores (e.g. a row of
            :func:`captum_iba.token_attributions`), or ``(n_rows, L)`` (e.g. a
            layer x token map); positions are on the last axis.
        token_mask (Tensor or array, optional): ``(L,)``, 0 at padding (the
            attention mask).
        style (HeatmapStyle, optional): Its ``skip_tokens``,
            ``merge_subwords`` and ``subword_prefix`` are used. Default:
            ``HeatmapStyle()``.
        **style_options: Those three options as keywords, over ``style``:
            ``skip_tokens`` (Iterable[str]): tokens never shown, default
            :data:`DEFAULT_SKIP_TOKENS` (``"[PAD]"``, ``"<pad>"``; add
            ``"[CLS]"``, ``"[SEP]"`` to hide the special tokens too);
            ``merge_subwords`` (bool): merge word pieces, default False;
            ``subword_prefix`` (str): the continuation marker, default ``"##"``.

    Returns:
        (tokens, scores): The kept tokens (not escaped) and their scores as a
        float64 array, positions on the last axis.

    Raises:
        ValueError: On scores that are not 1-D or 2-D, a length mismatch between
            tokens, scores and mask, or NaN scores at kept tokens.
        TypeError: On a keyword that is not a style option.
    """
    style = HeatmapStyle.resolve(style, style_options, "prepare_tokens", TOKEN_OPTIONS)
    arr = as_array(scores, "scores")
    if arr.ndim not in (1, 2):
        raise ValueError(
            f"scores must be (L,) for one instance (or (n_rows, L)), got shape "
            f"{arr.shape}; for a batch, pass one row, e.g. scores[i]"
        )
    L = arr.shape[-1]
    tokens = check_tokens(tokens, L)
    keep = as_mask(token_mask, (L,))
    skip = set(style.skip_tokens)
    keep &= np.array([t not in skip for t in tokens], dtype=bool)
    idx = np.flatnonzero(keep)
    kept_tokens = [tokens[i] for i in idx]
    kept = arr[..., idx]
    if np.isnan(kept).any():
        raise ValueError("scores contain NaN at tokens to be shown")
    if style.merge_subwords:
        kept_tokens, kept = merge_word_pieces(kept_tokens, kept, style.subword_prefix)
    return kept_tokens, kept


def resolve_scale(method: str, scores: Sequence[np.ndarray]) -> str:
    """The concrete scale of ``"auto"``: ``"minmax"`` unless a score is < 0.

    Args:
        method (str): ``"auto"``, ``"minmax"`` or ``"max"``.
        scores (Sequence[numpy.ndarray]): Every instance's scores (one
            decision for all, so one legend fits them).

    Returns:
        str: ``"minmax"`` or ``"max"``.
    """
    if method not in ("auto", "minmax", "max"):
        raise ValueError(f"method must be 'auto', 'minmax' or 'max', got {method!r}")
    if method != "auto":
        return method
    signed = any(bool((np.asarray(a) < 0).any()) for a in scores)
    return "max" if signed else "minmax"


def scale_scores(scores: ArrayLike, method: str = "auto") -> np.ndarray:
    """Scale scores into Captum's colour range [-1, 1].

    * ``"minmax"``: map the smallest score to 0 and the largest to 1, per
      instance, as the paper's heatmaps are scaled. Unsigned scores such as
      IBA's capacities are large and close together (e.g. 1,900-2,100 nats per
      token), and only this scale shows their differences; the smallest score
      always looks like zero.
    * ``"max"``: divide by the largest absolute score, so that the sign is
      kept, 0 stays 0 (no colour) and the largest score becomes 1 (or -1): a
      diverging scale for signed scores such as integrated gradients'.
    * ``"auto"`` (default): ``"minmax"`` when every score is >= 0, else
      ``"max"`` (see :func:`resolve_scale`).

    Constant (or empty) input becomes zeros.

    Args:
        scores (Tensor or array): Scores of the tokens shown (padding already
            removed: it must not set the scale).
        method (str, optional): ``"auto"``, ``"minmax"`` or ``"max"``.

    Returns:
        numpy.ndarray: float64 scores in [-1, 1] (``"minmax"``: [0, 1]), same
        shape.

    Raises:
        ValueError: On NaN or infinite scores, or an unknown method.
    """
    arr = as_array(scores, "scores")
    method = resolve_scale(method, [arr])
    if arr.size == 0:
        return arr.copy()
    if not np.isfinite(arr).all():
        raise ValueError("scores must be finite (no NaN or inf)")
    if method == "minmax":
        lo, span = float(arr.min()), float(arr.max() - arr.min())
        return (arr - lo) / span if span > 0 else np.zeros_like(arr)
    top = float(np.abs(arr).max())
    if top == 0.0:
        return np.zeros_like(arr)
    return np.clip(arr / top, -1.0, 1.0)


def save_figure(fig: Any, path: PathLike, dpi: int) -> None:
    """Saves a figure atomically, in the format its file name ends with.

    Args:
        fig (matplotlib.figure.Figure): The figure.
        path (str or PathLike): The file (``.png``, ``.pdf``, ``.svg``, ...);
            its folder is created when missing.
        dpi (int): Resolution of raster formats.
    """
    path = os.fspath(path)
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    fmt = os.path.splitext(path)[1].lstrip(".").lower() or "png"
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format=fmt, dpi=dpi)
