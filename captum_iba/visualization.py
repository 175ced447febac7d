r"""Figures for IBA: token heatmaps, layer x token maps and degradation curves.

Three kinds of pictures, all built on plain inputs (lists of tokens, arrays of
scores, dicts of curves) so that any attribution method can be drawn the same
way:

* **Token heatmaps** (:func:`text_heatmap_html`, :func:`save_html`,
  :func:`visualize_text_records`) reuse Captum's text visualisation
  (:class:`captum.attr.visualization.VisualizationDataRecord` and its HTML
  formatters). Scores are divided by their largest magnitude over the tokens
  shown, so that they fall in Captum's colour range [-1, 1]: IBA capacities
  (always >= 0) become [0, 1], with the most informative token fully green.
  Every token and label is HTML-escaped (Captum's formatter inserts text as
  markup), padding is left out, and word pieces can be merged into words.
  Works without IPython; only :func:`visualize_text_records` uses it.
* **Layer x token maps** (:func:`layer_token_heatmap`), the paper's Figure 3,
  from a ``(n_layers, L)`` array such as ``layer_token_map(attrs)[i]``.
* **Degradation curves** (:func:`plot_degradation_curves`, and the layer and
  beta sweeps :func:`plot_layer_sweep` and :func:`plot_beta_sweep`), the paper's
  Figures 1 and 2, from ``{name: (levels, values)}`` or from result objects of
  :mod:`captum_iba.metrics` (see :func:`degradation_curves` for what such an
  object must provide).

Figures are :class:`matplotlib.figure.Figure` objects created without
``pyplot``, so they need no display and never change the global matplotlib
backend: save them with ``save_path=`` (or ``fig.savefig``), or let a notebook
show the returned figure. To draw a curve plot into an existing
``pyplot`` axes, pass ``ax=``.
"""

import html
import math
import numbers
import os
from typing import (
    Any,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

import numpy as np
import torch
from captum.attr import visualization as captum_viz
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from torch import Tensor

__all__ = [
    "DEFAULT_SKIP_TOKENS",
    "degradation_curves",
    "heatmap_records",
    "layer_token_heatmap",
    "merge_word_pieces",
    "normalized_drop",
    "plot_beta_sweep",
    "plot_degradation_curves",
    "plot_layer_sweep",
    "prepare_tokens",
    "save_html",
    "scale_scores",
    "text_heatmap_html",
    "visualize_text_records",
]

ArrayLike = Union[Tensor, np.ndarray, Sequence[float]]
PathLike = Union[str, "os.PathLike[str]"]
Curve = Tuple[np.ndarray, np.ndarray]

#: Padding tokens of the common Hugging Face tokenizers; never shown by default.
DEFAULT_SKIP_TOKENS: Tuple[str, ...] = ("[PAD]", "<pad>")


# --------------------------------------------------------------------------------------
# Input handling
# --------------------------------------------------------------------------------------


def _as_array(x: Any, name: str) -> np.ndarray:
    """``x`` as a float64 numpy array, with a clear error when it is not numeric."""
    if isinstance(x, Tensor):
        return x.detach().to("cpu", torch.float64).numpy()
    try:
        return np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be numeric (a Tensor or array): {err}") from err


def _as_mask(mask: Any, shape: Tuple[int, ...], name: str = "token_mask") -> np.ndarray:
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


def _check_tokens(tokens: Any, length: int, what: str = "scores") -> List[str]:
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
    arr = _as_array(scores, "scores")
    if arr.ndim not in (1, 2):
        raise ValueError(f"scores must be (L,) or (n_rows, L), got shape {arr.shape}")
    tokens = _check_tokens(tokens, arr.shape[-1])
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
    skip_tokens: Iterable[str] = DEFAULT_SKIP_TOKENS,
    merge_subwords: bool = False,
    subword_prefix: str = "##",
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
        skip_tokens (Iterable[str], optional): Tokens never shown. Default:
            :data:`DEFAULT_SKIP_TOKENS` (``"[PAD]"``, ``"<pad>"``). Add
            ``"[CLS]"``, ``"[SEP]"`` to hide the special tokens too.
        merge_subwords (bool, optional): Merge word pieces. Default: False.
        subword_prefix (str, optional): The continuation marker. Default ``"##"``.

    Returns:
        (tokens, scores): The kept tokens (not escaped) and their scores as a
        float64 array, positions on the last axis.

    Raises:
        ValueError: On scores that are not 1-D or 2-D, a length mismatch between
            tokens, scores and mask, or NaN scores at kept tokens.
    """
    arr = _as_array(scores, "scores")
    if arr.ndim not in (1, 2):
        raise ValueError(
            f"scores must be (L,) for one instance (or (n_rows, L)), got shape "
            f"{arr.shape}; for a batch, pass one row, e.g. scores[i]"
        )
    L = arr.shape[-1]
    tokens = _check_tokens(tokens, L)
    keep = _as_mask(token_mask, (L,))
    skip = set(skip_tokens)
    keep &= np.array([t not in skip for t in tokens], dtype=bool)
    idx = np.flatnonzero(keep)
    kept_tokens = [tokens[i] for i in idx]
    kept = arr[..., idx]
    if np.isnan(kept).any():
        raise ValueError("scores contain NaN at tokens to be shown")
    if merge_subwords:
        kept_tokens, kept = merge_word_pieces(kept_tokens, kept, subword_prefix)
    return kept_tokens, kept


def scale_scores(scores: ArrayLike, method: str = "max") -> np.ndarray:
    """Scale scores into Captum's colour range [-1, 1].

    * ``"max"`` (default): divide by the largest absolute score, so that the
      sign is kept, 0 stays 0 (no colour) and the largest score becomes 1 (or
      -1). IBA capacities are >= 0 and end up in [0, 1].
    * ``"minmax"``: map the smallest score to 0 and the largest to 1, as the
      paper's released code scales its heatmaps; more contrast when every
      token carries a lot of information, but the smallest score always looks
      like zero.

    Constant (or empty) input becomes zeros.

    Args:
        scores (Tensor or array): Scores of the tokens shown (padding already
            removed: it must not set the scale).
        method (str, optional): ``"max"`` or ``"minmax"``. Default ``"max"``.

    Returns:
        numpy.ndarray: float64 scores in [-1, 1] (``"minmax"``: [0, 1]), same
        shape.

    Raises:
        ValueError: On NaN or infinite scores, or an unknown method.
    """
    if method not in ("max", "minmax"):
        raise ValueError(f"method must be 'max' or 'minmax', got {method!r}")
    arr = _as_array(scores, "scores")
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


# --------------------------------------------------------------------------------------
# Token heatmaps (HTML, through Captum's text visualisation)
# --------------------------------------------------------------------------------------


def _per_row(value: Any, n: int, name: str) -> List[Any]:
    """Broadcast one label to ``n`` rows, or check a sequence of ``n`` labels."""
    if isinstance(value, Tensor):
        value = value.tolist()
    elif isinstance(value, np.ndarray):
        value = value.tolist()
    if value is None or isinstance(value, (str, numbers.Number)):
        return [value] * n
    values = list(value)
    if len(values) != n:
        raise ValueError(f"{name} has {len(values)} entries for {n} instances")
    return values


def _text(value: Any) -> str:
    """A label as escaped HTML text ('' for None)."""
    if value is None:
        return ""
    if isinstance(value, float):
        value = f"{value:.4g}"
    return html.escape(str(value), quote=True)


def heatmap_records(
    tokens: Union[Sequence[str], Sequence[Sequence[str]]],
    scores: ArrayLike,
    *,
    token_mask: Optional[ArrayLike] = None,
    label: Any = None,
    pred: Any = None,
    pred_prob: Any = None,
    true_label: Any = None,
    attr_score: Any = None,
    skip_tokens: Iterable[str] = DEFAULT_SKIP_TOKENS,
    merge_subwords: bool = False,
    subword_prefix: str = "##",
    scale: str = "max",
) -> List[captum_viz.VisualizationDataRecord]:
    """Captum ``VisualizationDataRecord`` objects, escaped and scaled.

    One record per instance, ready for Captum's
    :func:`captum.attr.visualization.visualize_text`: padding and
    ``skip_tokens`` are dropped, word pieces optionally merged
    (:func:`prepare_tokens`), the scores divided by their largest magnitude
    over the tokens shown (:func:`scale_scores`), and the tokens and labels
    HTML-escaped (so ``raw_input_ids`` holds HTML text, e.g. ``&lt;s&gt;``).

    Args:
        tokens (Sequence[str] or Sequence[Sequence[str]]): ``L`` tokens, or one
            token list per instance when ``scores`` is 2-D.
        scores (Tensor or array): ``(L,)`` for one instance or ``(B, L)`` for a
            batch (e.g. ``token_attributions(attr)``).
        token_mask (Tensor or array, optional): ``(L,)`` or ``(B, L)``, 0 at
            padding.
        label (optional): The class explained (Captum's "attribution label"):
            one for all instances or one per instance.
        pred (optional): The predicted class, one or one per instance.
        pred_prob (float or sequence, optional): Its probability.
        true_label (optional): The gold label, one or one per instance.
        attr_score (float or sequence, optional): Captum's "attribution score"
            column. Default: the total of the raw scores shown (for IBA: the
            capacity of the instance, in the scores' unit).
        skip_tokens (Iterable[str], optional): Tokens never shown.
            Default: :data:`DEFAULT_SKIP_TOKENS`.
        merge_subwords (bool, optional): Merge ``"##"`` word pieces into words,
            summing their scores. Default: False.
        subword_prefix (str, optional): The continuation marker. Default ``"##"``.
        scale (str, optional): How scores become colours, per instance over
            the tokens shown: ``"max"`` (divide by the largest magnitude) or
            ``"minmax"`` (see :func:`scale_scores`). Default ``"max"``.

    Returns:
        list[VisualizationDataRecord]: One per instance. ``word_attributions``
        is a float64 Tensor in [-1, 1]; ``pred_prob`` is NaN when not given.

    Raises:
        ValueError: On scores that are not (L,) or (B, L), or tokens, masks or
            labels that do not match them.
    """
    arr = _as_array(scores, "scores")
    if arr.ndim == 1:
        token_rows = [_check_tokens(tokens, arr.shape[0])]
        arr = arr[None]
        mask_rows = [None if token_mask is None else token_mask]
    elif arr.ndim == 2:
        if isinstance(tokens, str) or (
            len(tokens) > 0 and isinstance(list(tokens)[0], str)
        ):
            raise ValueError(
                f"scores are 2-D {arr.shape} (a batch), so tokens must hold one "
                "token list per instance"
            )
        token_rows = list(tokens)  # type: ignore[arg-type]
        if len(token_rows) != arr.shape[0]:
            raise ValueError(
                f"got {len(token_rows)} token lists for {arr.shape[0]} score rows"
            )
        if token_mask is None:
            mask_rows = [None] * arr.shape[0]
        else:
            mask_arr = _as_mask(token_mask, arr.shape)
            mask_rows = list(mask_arr)
    else:
        raise ValueError(
            f"scores must be (L,) or (B, L), got shape {arr.shape}; reduce "
            "(B, L, H) attributions with captum_iba.token_attributions first"
        )
    n = arr.shape[0]
    labels = _per_row(label, n, "label")
    preds = _per_row(pred, n, "pred")
    probs = _per_row(pred_prob, n, "pred_prob")
    trues = _per_row(true_label, n, "true_label")
    totals = _per_row(attr_score, n, "attr_score")

    records = []
    for i in range(n):
        words, raw = prepare_tokens(
            token_rows[i],
            arr[i],
            token_mask=mask_rows[i],
            skip_tokens=skip_tokens,
            merge_subwords=merge_subwords,
            subword_prefix=subword_prefix,
        )
        total = float(raw.sum()) if totals[i] is None else float(totals[i])
        prob = float("nan") if probs[i] is None else float(probs[i])
        records.append(
            captum_viz.VisualizationDataRecord(
                torch.from_numpy(scale_scores(raw, scale)),
                prob,
                _text(preds[i]),  # type: ignore[arg-type]
                _text(trues[i]),  # type: ignore[arg-type]
                _text(labels[i]),  # type: ignore[arg-type]
                total,
                [html.escape(w, quote=True) for w in words],
                None,  # type: ignore[arg-type]
            )
        )
    return records


def _legend_html(signed: bool, scale: str) -> str:
    if scale == "minmax":
        values, names = [0.0, 0.5, 1.0], ["min", "halfway", "max"]
        what = "score between the smallest and largest of the instance"
    elif signed:
        values, names = [-1.0, 0.0, 1.0], ["-max", "0", "+max"]
        what = "score / largest magnitude of the instance"
    else:
        values, names = [0.0, 0.5, 1.0], ["0", "max / 2", "max"]
        what = "score / largest score of the instance"
    cells = captum_viz.format_word_importances(names, values)
    return (
        '<table class="captum-iba-legend"><tr><td><b>Legend:</b> '
        f"{what}</td>" + cells + "</tr></table>"
    )


def _records_table(
    records: Sequence[captum_viz.VisualizationDataRecord], legend: bool, scale: str
) -> str:
    """Captum's table layout, without IPython; columns with no value are left out."""
    has_true = any(r.true_class for r in records)
    has_pred = any(r.pred_class for r in records)
    has_label = any(r.attr_class for r in records)
    head = ["<tr>"]
    if has_true:
        head.append("<th>True Label</th>")
    if has_pred:
        head.append("<th>Predicted Label</th>")
    if has_label:
        head.append("<th>Attribution Label</th>")
    head.append("<th>Attribution Score</th><th>Word Importance</th></tr>")
    rows = ["".join(head)]
    for r in records:
        cells = ["<tr>"]
        if has_true:
            cells.append(captum_viz.format_classname(r.true_class))
        if has_pred:
            pred = r.pred_class
            if not math.isnan(r.pred_prob):
                pred = f"{pred} ({r.pred_prob:.2f})"
            cells.append(captum_viz.format_classname(pred))
        if has_label:
            cells.append(captum_viz.format_classname(r.attr_class))
        cells.append(captum_viz.format_classname(f"{r.attr_score:.2f}"))
        cells.append(
            captum_viz.format_word_importances(r.raw_input_ids, r.word_attributions)
        )
        cells.append("</tr>")
        rows.append("".join(cells))
    signed = any(bool((r.word_attributions < 0).any()) for r in records)
    parts = ['<div class="captum-iba-heatmap">']
    if legend:
        parts.append(_legend_html(signed, scale))
    parts.append('<table style="width: 100%">' + "".join(rows) + "</table></div>")
    return "".join(parts)


def text_heatmap_html(
    tokens: Union[Sequence[str], Sequence[Sequence[str]]],
    scores: ArrayLike,
    *,
    token_mask: Optional[ArrayLike] = None,
    label: Any = None,
    pred: Any = None,
    pred_prob: Any = None,
    true_label: Any = None,
    attr_score: Any = None,
    skip_tokens: Iterable[str] = DEFAULT_SKIP_TOKENS,
    merge_subwords: bool = False,
    subword_prefix: str = "##",
    scale: str = "max",
    legend: bool = True,
    full_page: bool = False,
    title: Optional[str] = None,
) -> str:
    """A token heatmap as an HTML string, in Captum's style, without IPython.

    Each instance is a table row laid out as Captum's ``visualize_text`` does
    (true label, predicted label (probability), attribution label, attribution
    score, then the tokens on a green background whose strength is the
    token's score divided by the instance's largest score magnitude); label
    columns that no instance has are left out. Tokens and labels are escaped,
    so a token ``<script>`` is shown as text. See :func:`heatmap_records` for
    the arguments and how tokens are chosen and scores scaled.

    Args:
        tokens: See :func:`heatmap_records`.
        scores: ``(L,)`` or ``(B, L)`` per-token scores.
        token_mask: ``(L,)`` or ``(B, L)``, 0 at padding.
        label: The class explained.
        pred: The predicted class.
        pred_prob: Its probability.
        true_label: The gold label.
        attr_score: The "attribution score" column (default: total raw score).
        skip_tokens: Tokens never shown (default: padding tokens).
        merge_subwords: Merge ``"##"`` word pieces (scores summed).
        subword_prefix: The continuation marker.
        scale: ``"max"`` (default) or ``"minmax"``, see :func:`scale_scores`.
        legend (bool, optional): Add a colour legend. Default: True.
        full_page (bool, optional): Return a complete HTML document (with
            ``<meta charset="utf-8">``) instead of a fragment. Default: False.
        title (str, optional): Page title and heading (escaped), for
            ``full_page``.

    Returns:
        str: The HTML.

    Examples::

        >>> from captum_iba import token_attributions
        >>> scores = token_attributions(attr, enc["attention_mask"])
        >>> toks = [tok.convert_ids_to_tokens(ids) for ids in enc["input_ids"]]
        >>> page = text_heatmap_html(toks, scores, token_mask=enc["attention_mask"],
        ...                          label=1, merge_subwords=True)
    """
    records = heatmap_records(
        tokens,
        scores,
        token_mask=token_mask,
        label=label,
        pred=pred,
        pred_prob=pred_prob,
        true_label=true_label,
        attr_score=attr_score,
        skip_tokens=skip_tokens,
        merge_subwords=merge_subwords,
        subword_prefix=subword_prefix,
        scale=scale,
    )
    body = _records_table(records, legend, scale)
    if not full_page:
        return body
    head_title = _text(title) if title else "captum-iba token attributions"
    heading = f"<h2>{_text(title)}</h2>" if title else ""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{head_title}</title>\n</head>\n<body>\n{heading}{body}\n"
        "</body>\n</html>\n"
    )


def save_html(
    path: PathLike,
    tokens: Union[Sequence[str], Sequence[Sequence[str]]],
    scores: ArrayLike,
    **kwargs: Any,
) -> str:
    """Write a token heatmap to a standalone HTML file (UTF-8).

    Args:
        path (str or PathLike): The file to write (parent folders are created).
        tokens: See :func:`text_heatmap_html`.
        scores: See :func:`text_heatmap_html`.
        **kwargs: Any keyword argument of :func:`text_heatmap_html`
            (``full_page`` is always True).

    Returns:
        str: The path written.
    """
    kwargs["full_page"] = True
    page = text_heatmap_html(tokens, scores, **kwargs)
    path = os.fspath(path)
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(page)
    return path


def visualize_text_records(
    tokens: Union[Sequence[str], Sequence[Sequence[str]]],
    scores: ArrayLike,
    *,
    legend: bool = True,
    **kwargs: Any,
) -> Any:
    """Show a token heatmap in a notebook with Captum's ``visualize_text``.

    Builds the records with :func:`heatmap_records` (escaped, scaled, padding
    dropped) and passes them to
    :func:`captum.attr.visualization.visualize_text`, which displays them and
    returns an ``IPython.display.HTML`` object. Without IPython, nothing is
    displayed and the HTML string of :func:`text_heatmap_html` is returned.

    Args:
        tokens: See :func:`heatmap_records`.
        scores: See :func:`heatmap_records`.
        legend (bool, optional): Captum's legend. Default: True.
        **kwargs: Any keyword argument of :func:`heatmap_records`.

    Returns:
        IPython.display.HTML or str: Captum's HTML object when IPython is
        installed, else the HTML string.
    """
    if not getattr(captum_viz, "HAS_IPYTHON", False):
        return text_heatmap_html(tokens, scores, legend=legend, **kwargs)
    records = heatmap_records(tokens, scores, **kwargs)
    return captum_viz.visualize_text(records, legend=legend)


# --------------------------------------------------------------------------------------
# Layer x token map (Figure 3)
# --------------------------------------------------------------------------------------


def _short(token: str, limit: int = 14) -> str:
    return token if len(token) <= limit else token[: limit - 1] + "\u2026"


def layer_token_heatmap(
    layer_map: ArrayLike,
    tokens: Sequence[str],
    *,
    token_mask: Optional[ArrayLike] = None,
    skip_tokens: Iterable[str] = DEFAULT_SKIP_TOKENS,
    merge_subwords: bool = False,
    subword_prefix: str = "##",
    normalize: Optional[str] = None,
    layer_labels: Optional[Sequence[Any]] = None,
    tokens_per_row: Optional[int] = None,
    max_width: float = 16.0,
    cmap: str = "viridis",
    unit: str = "nats",
    ylabel: str = "layer",
    title: Optional[str] = None,
    save_path: Optional[PathLike] = None,
    dpi: int = 150,
) -> Figure:
    """Plot a layers x tokens attribution map (the paper's Figure 3).

    Row ``i`` is the bottleneck inserted after layer ``layer_labels[i]``
    (default ``i + 1``, the paper's numbering: ``encoder_layers(model)[8]``
    is "layer 9"); the first layer is at the top. Long inputs are wrapped into
    several panels of at most ``tokens_per_row`` tokens that share one colour
    scale; the figure grows with the number of tokens up to ``max_width``
    inches, and token labels are rotated, shortened (14 characters) and, when
    still too dense, thinned.

    Args:
        layer_map (Tensor or array): ``(n_layers, L)`` scores, e.g.
            ``layer_token_map(attributions)[i]`` for instance ``i``.
        tokens (Sequence[str]): The ``L`` tokens.
        token_mask (Tensor or array, optional): ``(L,)``, 0 at padding.
        skip_tokens (Iterable[str], optional): Tokens left out. Default:
            :data:`DEFAULT_SKIP_TOKENS`.
        merge_subwords (bool, optional): Merge ``"##"`` pieces (scores summed
            per layer). Default: False.
        subword_prefix (str, optional): The continuation marker.
        normalize (str, optional): ``None`` (raw scores, one colour scale
            from the smallest to the largest value shown), ``"layer"`` (each
            row min-max scaled to [0, 1] on its own, as the paper's released
            code scales a heatmap: where *within* a layer the information is)
            or ``"global"`` (all rows min-max scaled together). Default: None.
        layer_labels (Sequence, optional): ``n_layers`` labels for the y axis.
        tokens_per_row (int, optional): Most tokens per panel. Default: as
            many 0.2-inch columns as ``max_width`` holds (71 at 16 inches); the
            panels are balanced (500 tokens: 8 panels of 63).
        max_width (float, optional): Largest figure width in inches. Default 16.
        cmap (str, optional): Matplotlib colour map. Default ``"viridis"``.
        unit (str, optional): The scores' unit, for the colour bar. Default
            ``"nats"``.
        ylabel (str, optional): The y-axis label. Default ``"layer"``; e.g.
            ``"beta"`` when the rows are one layer at several betas (the
            paper's Appendix E) with ``layer_labels`` the beta values.
        title (str, optional): Figure title.
        save_path (str or PathLike, optional): Also save the figure there (PNG
            unless the suffix says otherwise).
        dpi (int, optional): Resolution for ``save_path``. Default 150.

    Returns:
        matplotlib.figure.Figure: The figure (one axes per panel plus the
        colour bar).

    Raises:
        ValueError: If ``layer_map`` is not 2-D, the tokens, mask or layer
            labels do not match it, or ``normalize`` is unknown.
    """
    arr = _as_array(layer_map, "layer_map")
    if arr.ndim != 2:
        raise ValueError(
            f"layer_map must be (n_layers, L), got shape {arr.shape}; for a batch "
            "from layer_token_map(...), pass one instance: layer_token_map(...)[i]"
        )
    if normalize not in (None, "layer", "global"):
        raise ValueError(
            f"normalize must be None, 'layer' or 'global', got {normalize!r}"
        )
    n_layers = arr.shape[0]
    if layer_labels is None:
        layer_labels = list(range(1, n_layers + 1))
    elif len(layer_labels) != n_layers:
        raise ValueError(
            f"got {len(layer_labels)} layer labels for {n_layers} layers (rows)"
        )
    words, values = prepare_tokens(
        tokens,
        arr,
        token_mask=token_mask,
        skip_tokens=skip_tokens,
        merge_subwords=merge_subwords,
        subword_prefix=subword_prefix,
    )
    n = len(words)
    if n == 0:
        raise ValueError("no token left to show (all padding or skipped)")
    if normalize == "layer":
        lo = values.min(axis=1, keepdims=True)
        span = values.max(axis=1, keepdims=True) - lo
        values = np.divide(values - lo, span, out=np.zeros_like(values), where=span > 0)
        bar_label = f"min-max scaled per {ylabel}"
    elif normalize == "global":
        lo, span = float(values.min()), float(values.max() - values.min())
        values = (values - lo) / span if span > 0 else np.zeros_like(values)
        bar_label = "min-max scaled"
    else:
        bar_label = f"capacity ({unit})" if unit else "score"

    if tokens_per_row is None:
        # as many 0.2-inch token columns as max_width holds
        tokens_per_row = max(10, int((max_width - 1.8) / 0.2))
    if tokens_per_row < 1:
        raise ValueError(f"tokens_per_row must be >= 1, got {tokens_per_row}")
    n_panels = math.ceil(n / tokens_per_row)
    per_panel = math.ceil(n / n_panels)  # balanced panels

    # Sizes, in inches: about 0.2 per token column, labels rotated when dense.
    label_len = max(len(_short(w)) for w in words)
    cell_w = min(0.45, (max_width - 1.8) / per_panel)
    width = max(5.0, min(max_width, 1.8 + cell_w * per_panel))
    fontsize = float(np.clip(cell_w * 72 * 0.75, 5.0, 10.0))
    # show every `step`-th label when even 5 pt labels do not fit
    step = max(1, math.ceil(5.0 / (cell_w * 72 * 0.9)))
    rotation = 90 if cell_w < 0.3 or label_len > 6 else 45
    label_h = (label_len * 0.6 * fontsize / 72) * (1.0 if rotation == 90 else 0.75)
    row_h = min(0.3, max(0.12, 2.4 / n_layers))
    panel_h = n_layers * row_h + label_h + 0.25
    height = panel_h * n_panels + (0.4 if title else 0.1) + (0.6 if n_panels > 1 else 0)

    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(n_panels, 1, squeeze=False)[:, 0]
    vmin, vmax = float(values.min()), float(values.max())
    if vmax <= vmin:
        vmax = vmin + 1.0
    y_step = max(1, math.ceil(n_layers / 24))
    image = None
    for p, ax in enumerate(axes):
        lo, hi = p * per_panel, min(n, (p + 1) * per_panel)
        block = np.full((n_layers, per_panel), np.nan)
        block[:, : hi - lo] = values[:, lo:hi]
        image = ax.imshow(
            np.ma.masked_invalid(block),
            aspect="auto",
            interpolation="nearest",
            cmap=cmap,
            vmin=vmin,
            vmax=vmax,
        )
        ax.set_facecolor("white")
        cols = list(range(0, hi - lo, step))
        ax.set_xticks(cols)
        ax.set_xticklabels(
            [_short(words[lo + c]) for c in cols],
            rotation=rotation,
            ha="center" if rotation == 90 else "right",
            rotation_mode="anchor" if rotation != 90 else "default",
            fontsize=fontsize,
        )
        rows = list(range(0, n_layers, y_step))
        ax.set_yticks(rows)
        ax.set_yticklabels(
            [str(layer_labels[r]) for r in rows], fontsize=min(9.0, fontsize + 1)
        )
        ax.set_ylabel(ylabel, fontsize=9)
        ax.tick_params(length=2, pad=1)
        for spine in ax.spines.values():
            spine.set_visible(False)
    if title:
        fig.suptitle(title, fontsize=11)
    if n_panels == 1:
        bar = fig.colorbar(image, ax=list(axes), pad=0.01, fraction=0.04)
    else:  # a short bar above the panels rather than one as tall as the figure
        bar = fig.colorbar(
            image, ax=list(axes), location="top", shrink=0.35, aspect=40, pad=0.01
        )
    bar.set_label(bar_label, fontsize=9)
    bar.ax.tick_params(labelsize=8)
    if save_path is not None:
        fig.savefig(os.fspath(save_path), dpi=dpi)
    return fig


# --------------------------------------------------------------------------------------
# Degradation curves (Figures 1 and 2)
# --------------------------------------------------------------------------------------


def _curve_pair(name: Any, value: Any) -> Curve:
    levels, values = value
    lv = _as_array(levels, f"levels of {name!r}").reshape(-1)
    vals = _as_array(values, f"values of {name!r}").reshape(-1)
    if lv.shape != vals.shape:
        raise ValueError(
            f"curve {name!r}: {lv.size} levels but {vals.size} values; they must "
            "match one to one"
        )
    if lv.size == 0:
        raise ValueError(f"curve {name!r} is empty")
    return lv, vals


def _is_pair(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and len(value) == 2


def _result_curve(name: Any, result: Any) -> Curve:
    """The mean-probability curve of a result-like object, level 0 first if known."""
    if not hasattr(result, "levels"):
        raise TypeError(
            f"{name!r}: expected (levels, values) or an object with 'levels' and a "
            f"mean curve ('full_curve', 'curve' or 'mean_curve'); got "
            f"{type(result).__name__}"
        )
    levels = _as_array(list(result.levels), f"levels of {name!r}").reshape(-1)
    full = getattr(result, "full_curve", None)
    if full is not None:
        values = _as_array(full, f"full_curve of {name!r}").reshape(-1)
        if values.size == levels.size + 1:
            return np.concatenate([[0.0], levels]), values
    for attr in ("curve", "mean_curve"):
        curve = getattr(result, attr, None)
        if curve is None:
            continue
        if callable(curve):
            curve = curve()
        values = _as_array(curve, f"{attr} of {name!r}").reshape(-1)
        o = getattr(result, "original_probability", None)
        if o is not None and values.size == levels.size:
            return np.concatenate([[0.0], levels]), np.concatenate([[float(o)], values])
        return _curve_pair(name, (levels, values))
    raise TypeError(
        f"{name!r}: {type(result).__name__} has 'levels' but no mean curve "
        "('full_curve', 'curve' or 'mean_curve')"
    )


def normalized_drop(
    curves: Mapping[Any, Tuple[ArrayLike, ArrayLike]], m: Optional[float] = None
) -> Dict[Any, Curve]:
    r"""The paper's normalised probability drop of mean-probability curves.

    :math:`\bar d = (\bar p - m) / (o - m)` (Section 4), where :math:`o` is a
    curve's value at level 0 (the original inputs) and :math:`m` the lowest
    last-level (fully degraded) value across the curves. Every curve therefore
    starts at 1, and the best method reaches 0.

    Args:
        curves (Mapping): ``name -> (levels, mean probabilities)``, each with
            level 0 first.
        m (float, optional): Override the floor :math:`m`.

    Returns:
        dict: ``name -> (levels, d)``.

    Raises:
        ValueError: If a curve does not start at level 0.
    """
    pairs = {k: _curve_pair(k, v) for k, v in curves.items()}
    if not pairs:
        raise ValueError("no curve given")
    for k, (lv, _) in pairs.items():
        if lv[0] != 0:
            raise ValueError(
                f"curve {k!r} does not start at level 0: the normalised drop needs "
                "the original probability o as the first point (or pass values that "
                "are already normalised, with normalized=False)"
            )
    if m is None:
        m = min(float(v[-1]) for _, v in pairs.values())
    out: Dict[Any, Curve] = {}
    for k, (lv, v) in pairs.items():
        denom = float(v[0]) - m
        d = (v - m) / denom if abs(denom) > 1e-12 else np.full_like(v, np.nan)
        out[k] = (lv, d)
    return out


def degradation_curves(
    results: Any, *, normalized: bool = False, m: Optional[float] = None
) -> Dict[Any, Curve]:
    """Plain ``name -> (levels, values)`` curves from any supported input.

    This is the adapter between :mod:`captum_iba.metrics` (or any other
    source) and the plotting functions. ``results`` may be:

    * a mapping ``name -> (levels, values)``: plain arrays, plotted as given
      (``values`` are mean target probabilities, or already normalised drops);
    * a mapping ``name -> result`` where a *result* (duck typing; e.g.
      :class:`captum_iba.metrics.DegradationResult`) has ``levels`` (K
      removal levels) and one of ``full_curve`` (K + 1 mean probabilities,
      level 0 first), ``curve`` or ``mean_curve`` (K values, or a method
      returning them; with ``original_probability`` it is prefixed by level
      0). Pairs and results may be mixed;
    * a comparison object (e.g. :class:`captum_iba.metrics.Comparison`) with
      ``levels`` and ``normalized_curves`` (``name -> K + 1`` normalised drops,
      level 0 first): only with ``normalized=True``, and its own ``m`` is kept.

    Args:
        results: See above.
        normalized (bool, optional): Return the normalised drop
            :math:`\\bar d` (:func:`normalized_drop`) instead of the mean
            probabilities. Default: False.
        m (float, optional): The floor of the normalised drop; default: the
            lowest last-level value across the curves (as
            :func:`captum_iba.metrics.compare` does).

    Returns:
        dict: ``name -> (levels, values)`` as float64 arrays; levels are
        fractions of the removable tokens (or counts, if so run).

    Raises:
        TypeError: On an object that has no levels or curve.
        ValueError: On mismatched levels and values.
    """
    if hasattr(results, "normalized_curves") and hasattr(results, "levels"):
        if not normalized:
            raise ValueError(
                "a comparison object holds only normalised curves: pass "
                "normalized=True, or the results themselves for probabilities"
            )
        levels = _as_array(list(results.levels), "levels").reshape(-1)
        out: Dict[Any, Curve] = {}
        for name, curve in results.normalized_curves.items():
            vals = _as_array(curve, f"normalized_curves[{name!r}]").reshape(-1)
            lv = (
                np.concatenate([[0.0], levels])
                if vals.size == levels.size + 1
                else levels
            )
            out[name] = _curve_pair(name, (lv, vals))
        return out
    if not isinstance(results, Mapping):
        raise TypeError(
            "results must be a mapping name -> (levels, values) or name -> result "
            f"object, or a comparison object; got {type(results).__name__}"
        )
    curves = {
        k: _curve_pair(k, v) if _is_pair(v) else _result_curve(k, v)
        for k, v in results.items()
    }
    if not curves:
        raise ValueError("no curve given")
    return normalized_drop(curves, m) if normalized else curves


def _new_axes(ax: Optional[Axes], figsize: Tuple[float, float]) -> Tuple[Figure, Axes]:
    if ax is not None:
        return ax.get_figure(), ax  # type: ignore[return-value]
    fig = Figure(figsize=figsize, layout="constrained")
    return fig, fig.add_subplot(1, 1, 1)


def _plot_curves(
    curves: Mapping[Any, Curve],
    labels: Mapping[Any, str],
    colors: Mapping[Any, Any],
    styles: Mapping[Any, str],
    *,
    normalized: bool,
    title: Optional[str],
    xlabel: Optional[str],
    ylabel: Optional[str],
    legend_title: Optional[str],
    ax: Optional[Axes],
    save_path: Optional[PathLike],
    dpi: int,
) -> Figure:
    fig, ax = _new_axes(ax, (5.2, 3.6))
    all_levels = np.unique(np.concatenate([lv for lv, _ in curves.values()]))
    as_percent = bool(all_levels.max() <= 1.0)
    scale = 100.0 if as_percent else 1.0
    for key, (lv, vals) in curves.items():
        ax.plot(
            lv * scale,
            vals,
            styles.get(key, "-"),
            marker="o",
            markersize=3.5,
            linewidth=1.6,
            color=colors.get(key),
            label=labels[key],
        )
    if all_levels.size <= 12:
        ax.set_xticks(all_levels * scale)
        fmt = "{:.0f}%" if as_percent else "{:g}"
        ax.set_xticklabels([fmt.format(x * scale) for x in all_levels], fontsize=8)
    if xlabel is None:
        what = "share of tokens" if as_percent else "tokens"
        xlabel = f"{what} removed (most relevant first)"
    if ylabel is None:
        ylabel = (
            "normalised probability drop $\\bar{d}$"
            if normalized
            else "mean probability of the target"
        )
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    legend_kw: Dict[str, Any] = dict(
        title=legend_title, fontsize=8, title_fontsize=8, frameon=False
    )
    if len(curves) > 5:  # many lines: keep the legend off the curves
        legend_kw.update(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.legend(**legend_kw)
    if title:
        ax.set_title(title)
    if save_path is not None:
        fig.savefig(os.fspath(save_path), dpi=dpi)
    return fig


def plot_degradation_curves(
    results: Any,
    *,
    normalized: bool = False,
    m: Optional[float] = None,
    colors: Optional[Mapping[Any, Any]] = None,
    title: Optional[str] = None,
    xlabel: Optional[str] = None,
    ylabel: Optional[str] = None,
    ax: Optional[Axes] = None,
    save_path: Optional[PathLike] = None,
    dpi: int = 150,
) -> Figure:
    r"""Degradation curves, one line per attribution method (Figure 1).

    The x axis is the share of tokens removed (most relevant first), in per
    cent when the levels are fractions; the y axis the mean probability of
    the target class, or with ``normalized=True`` the normalised drop
    :math:`\bar d = (\bar p - m)/(o - m)`. A steeper fall is a better method.

    Args:
        results: ``{name: (levels, values)}``, ``{name: result}`` or a
            comparison object; see :func:`degradation_curves`.
        normalized (bool, optional): Plot :math:`\bar d`. Default: False.
        m (float, optional): Floor of :math:`\bar d` (default: the lowest
            fully degraded mean probability across the methods).
        colors (Mapping, optional): ``name -> colour``.
        title (str, optional): Axes title.
        xlabel (str, optional): Override the x label.
        ylabel (str, optional): Override the y label.
        ax (matplotlib.axes.Axes, optional): Draw into these axes (e.g. a panel
            of a ``pyplot`` figure, one per data set); default: a new figure.
        save_path (str or PathLike, optional): Also save the figure there.
        dpi (int, optional): Resolution for ``save_path``. Default 150.

    Returns:
        matplotlib.figure.Figure: The figure (of ``ax`` when given).

    Examples::

        >>> from captum_iba.metrics import degradation_test
        >>> res = {"IBA": degradation_test(...), "IG": degradation_test(...)}
        >>> plot_degradation_curves(res, normalized=True, save_path="fig1.png")
    """
    curves = degradation_curves(results, normalized=normalized, m=m)
    labels = {k: str(k) for k in curves}
    return _plot_curves(
        curves,
        labels,
        dict(colors or {}),
        {},
        normalized=normalized,
        title=title,
        xlabel=xlabel,
        ylabel=ylabel,
        legend_title=None,
        ax=ax,
        save_path=save_path,
        dpi=dpi,
    )


def _is_number(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _sweep_styles(
    keys: Sequence[Any], cmap: str, log: bool
) -> Tuple[List[Any], Dict[Any, Any], Dict[Any, str]]:
    """Order keys (numbers sorted first), colour numbers along ``cmap``."""
    from matplotlib import colormaps

    nums = sorted((k for k in keys if _is_number(k)), key=float)
    others = [k for k in keys if not _is_number(k)]
    colours: Dict[Any, Any] = {}
    styles: Dict[Any, str] = {}
    cm = colormaps[cmap]
    if nums:
        pos = np.array(
            [math.log10(float(k)) if log and float(k) > 0 else float(k) for k in nums]
        )
        span = pos.max() - pos.min()
        frac = (pos - pos.min()) / span if span > 0 else np.zeros_like(pos)
        for k, f in zip(nums, frac):
            colours[k] = cm(0.05 + 0.85 * f)
    greys = ["0.15", "0.45", "0.65"]
    for i, k in enumerate(others):
        colours[k] = greys[i % len(greys)]
        styles[k] = "--"
    return nums + others, colours, styles


def _beta_label(beta: Any) -> str:
    if not _is_number(beta):
        return str(beta)
    b = float(beta)
    if b > 0:
        e = math.log10(b)
        if abs(e - round(e)) < 1e-9:
            return f"$\\beta = 10^{{{int(round(e))}}}$"
    return f"$\\beta = {b:g}$"


def plot_layer_sweep(
    results: Mapping[Any, Any],
    *,
    normalized: bool = True,
    m: Optional[float] = None,
    cmap: str = "viridis",
    title: Optional[str] = None,
    ax: Optional[Axes] = None,
    save_path: Optional[PathLike] = None,
    dpi: int = 150,
) -> Figure:
    r"""Degradation curves of IBA inserted after different layers (Figure 2a).

    Args:
        results (Mapping): ``layer -> (levels, values)`` or ``layer -> result``
            (see :func:`degradation_curves`). Integer keys are layer numbers as
            you want them shown (the paper counts from 1); they are sorted and
            coloured along ``cmap`` from the lowest to the highest layer. Other
            keys (e.g. ``"IG"`` for a reference method) are drawn dashed in grey.
        normalized (bool, optional): Plot the normalised drop :math:`\bar d`
            (as the paper does). Default: True.
        m (float, optional): Floor of :math:`\bar d`.
        cmap (str, optional): Colour map for the layers. Default ``"viridis"``.
        title (str, optional): Axes title.
        ax (matplotlib.axes.Axes, optional): Draw into these axes.
        save_path (str or PathLike, optional): Also save the figure there.
        dpi (int, optional): Resolution for ``save_path``. Default 150.

    Returns:
        matplotlib.figure.Figure: The figure.
    """
    curves = degradation_curves(results, normalized=normalized, m=m)
    order, colours, styles = _sweep_styles(list(curves), cmap, log=False)
    labels = {k: f"layer {k}" if _is_number(k) else str(k) for k in order}
    return _plot_curves(
        {k: curves[k] for k in order},
        labels,
        colours,
        styles,
        normalized=normalized,
        title=title,
        xlabel=None,
        ylabel=None,
        legend_title="IB after",
        ax=ax,
        save_path=save_path,
        dpi=dpi,
    )


def plot_beta_sweep(
    results: Mapping[Any, Any],
    *,
    normalized: bool = True,
    m: Optional[float] = None,
    cmap: str = "plasma",
    title: Optional[str] = None,
    ax: Optional[Axes] = None,
    save_path: Optional[PathLike] = None,
    dpi: int = 150,
) -> Figure:
    r"""Degradation curves of IBA with different :math:`\beta` (Figure 2b).

    Args:
        results (Mapping): ``beta -> (levels, values)`` or ``beta -> result``
            (see :func:`degradation_curves`). Numeric keys are sorted and
            coloured along ``cmap`` on a log scale, labelled
            :math:`\beta = 10^{k}` for powers of ten. Other keys (e.g.
            ``"X only"`` for the layer output itself as the attribution) are
            drawn dashed in grey.
        normalized (bool, optional): Plot the normalised drop :math:`\bar d`.
            Default: True.
        m (float, optional): Floor of :math:`\bar d`.
        cmap (str, optional): Colour map for the betas. Default ``"plasma"``.
        title (str, optional): Axes title.
        ax (matplotlib.axes.Axes, optional): Draw into these axes.
        save_path (str or PathLike, optional): Also save the figure there.
        dpi (int, optional): Resolution for ``save_path``. Default 150.

    Returns:
        matplotlib.figure.Figure: The figure.
    """
    curves = degradation_curves(results, normalized=normalized, m=m)
    order, colours, styles = _sweep_styles(list(curves), cmap, log=True)
    labels = {k: _beta_label(k) for k in order}
    return _plot_curves(
        {k: curves[k] for k in order},
        labels,
        colours,
        styles,
        normalized=normalized,
        title=title,
        xlabel=None,
        ylabel=None,
        legend_title=None,
        ax=ax,
        save_path=save_path,
        dpi=dpi,
    )
