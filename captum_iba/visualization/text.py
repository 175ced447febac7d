"""Token heatmaps as HTML, through Captum's text visualisation.

:func:`heatmap_records` builds Captum
:class:`~captum.attr.visualization.VisualizationDataRecord` objects (tokens
chosen by :func:`prepare_tokens`, scores scaled into [-1, 1], tokens and
labels HTML-escaped); :func:`text_heatmap_html` lays them out as Captum's
``visualize_text`` does, without IPython; :func:`save_html` writes a page and
:func:`visualize_text_records` shows one in a notebook. Which tokens are shown
and how their scores are scaled is one :class:`HeatmapStyle`.
"""

import html
import math
import numbers
import os
from typing import Any, List, Optional, Sequence, Union

import numpy as np
import torch
from captum.attr import visualization as captum_viz
from torch import Tensor

from captum_iba._utils.io import atomic_write_text
from captum_iba.visualization._inputs import (
    ArrayLike,
    PathLike,
    as_array,
    as_mask,
    check_tokens,
    prepare_tokens,
    resolve_scale,
    scale_scores,
)
from captum_iba.visualization.page import score_colors
from captum_iba.visualization.style import HeatmapStyle

__all__ = [
    "heatmap_records",
    "save_html",
    "text_heatmap_html",
    "visualize_text_records",
]

# heatmap_records' per-instance keyword arguments (the rest are style options).
_INSTANCE_DATA = (
    "token_mask",
    "label",
    "pred",
    "pred_prob",
    "true_label",
    "attr_score",
)


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
    style: Optional[HeatmapStyle] = None,
    **style_options: Any,
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
        style (HeatmapStyle, optional): Which tokens are shown and how their
            scores are scaled. Default: ``HeatmapStyle()``.
        **style_options: :class:`HeatmapStyle`'s options as keywords, over
            ``style``: ``skip_tokens`` (Iterable[str]): tokens never shown,
            default :data:`DEFAULT_SKIP_TOKENS`; ``merge_subwords`` (bool):
            merge ``"##"`` word pieces into words, summing their scores,
            default False; ``subword_prefix`` (str): the continuation marker,
            default ``"##"``; ``scale`` (str): how scores become colours, per
            instance over the tokens shown: ``"auto"`` (default: min-max for
            scores >= 0, diverging when some are negative), ``"minmax"`` or
            ``"max"`` (see :func:`scale_scores`); ``"auto"`` decides once for
            all instances, so one legend fits them.

    Returns:
        list[VisualizationDataRecord]: One per instance. ``word_attributions``
        is a float64 Tensor in [-1, 1]; ``pred_prob`` is NaN when not given.

    Raises:
        ValueError: On scores that are not (L,) or (B, L), or tokens, masks or
            labels that do not match them.
        TypeError: On a keyword that is not a style option.
    """
    style = HeatmapStyle.resolve(style, style_options, "heatmap_records")
    arr = as_array(scores, "scores")
    if arr.ndim == 1:
        token_rows = [check_tokens(tokens, arr.shape[0])]
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
            mask_arr = as_mask(token_mask, arr.shape)
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

    shown = [
        prepare_tokens(token_rows[i], arr[i], token_mask=mask_rows[i], style=style)
        for i in range(n)
    ]
    scale = resolve_scale(style.scale, [raw for _, raw in shown])
    records = []
    for i, (words, raw) in enumerate(shown):
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
    """The legend: which scale the colours follow, with three sample cells
    kept on one line (they never wrap apart from each other)."""
    if scale == "minmax" or (scale == "auto" and not signed):
        values, names = [0.0, 0.5, 1.0], ["min", "halfway", "max"]
        what = (
            "min-max scale: (score - min) / (max - min) over the tokens of each "
            "instance, as in the paper; the palest token is the instance's lowest"
        )
    elif signed:
        values, names = [-1.0, 0.0, 1.0], ["-max", "0", "+max"]
        what = (
            "diverging scale: score / largest |score| of each instance; red "
            "negative, green positive, white 0"
        )
    else:
        values, names = [0.0, 0.5, 1.0], ["0", "max / 2", "max"]
        what = "score / largest score of each instance"
    cells = _word_cells(names, values, signed)
    return (
        '<div class="captum-iba-legend" style="margin:.3em 0"><b>Legend:</b> '
        f'{what} <span style="white-space:nowrap">{cells}</span></div>'
    )


def _word_cells(words: Sequence[str], values: Any, signed: bool) -> str:
    """Words (already escaped) on backgrounds of their scaled scores
    (:func:`~captum_iba.visualization.page.score_colors`), each with its
    scaled score in a tooltip."""
    cells = []
    for word, value in zip(words, [float(v) for v in values]):
        back, fore = score_colors(value, signed)
        cells.append(
            f'<mark style="background-color:{back};color:{fore};padding:0 .2em;'
            f'line-height:1.75" title="{value:.3f}">{word}</mark>'
        )
    return " ".join(cells)


def _records_table(
    records: Sequence[captum_viz.VisualizationDataRecord],
    legend: bool,
    scale: str,
    total: bool = True,
) -> str:
    """Captum's table layout, without IPython; columns with no value are left
    out, and the "Attribution Score" column unless ``total``."""
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
    if total:
        head.append("<th>Attribution Score</th>")
    head.append("<th>Word Importance</th></tr>")
    rows = ["".join(head)]
    signed = any(bool((r.word_attributions < 0).any()) for r in records)
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
        if total:
            cells.append(captum_viz.format_classname(f"{r.attr_score:.2f}"))
        words = _word_cells(r.raw_input_ids, r.word_attributions, signed)
        cells.append(f"<td>{words}</td></tr>")
        rows.append("".join(cells))
    parts = ['<div class="captum-iba-heatmap">']
    if legend:
        parts.append(_legend_html(signed, scale))
    parts.append('<table style="width: 100%">' + "".join(rows) + "</table></div>")
    return "".join(parts)


def text_heatmap_html(
    tokens: Union[Sequence[str], Sequence[Sequence[str]]],
    scores: ArrayLike,
    *,
    legend: bool = True,
    full_page: bool = False,
    title: Optional[str] = None,
    style: Optional[HeatmapStyle] = None,
    **options: Any,
) -> str:
    """A token heatmap as an HTML string, in Captum's style, without IPython.

    Each instance is a table row laid out as Captum's ``visualize_text`` does
    (true label, predicted label (probability), attribution label, attribution
    score, then the tokens on a background whose strength is the token's
    scaled score: by default min-max within the instance for scores >= 0,
    as the paper's heatmaps, and score / largest magnitude, red for negative
    and green for positive, for signed scores; the legend says which); label
    columns that no instance has are left out. Tokens and labels are escaped,
    so a token ``<script>`` is shown as text. See :func:`heatmap_records` for
    the arguments and how tokens are chosen and scores scaled.

    Args:
        tokens: See :func:`heatmap_records`.
        scores: ``(L,)`` or ``(B, L)`` per-token scores.
        legend (bool, optional): Add a colour legend. Default: True.
        full_page (bool, optional): Return a complete HTML document (with
            ``<meta charset="utf-8">``) instead of a fragment. Default: False.
        title (str, optional): Page title and heading (escaped), for
            ``full_page``.
        style (HeatmapStyle, optional): Which tokens are shown and how their
            scores are scaled. Default: ``HeatmapStyle()``.
        **options: The keyword arguments of :func:`heatmap_records`:
            ``token_mask`` (``(L,)`` or ``(B, L)``, 0 at padding), ``label``
            (the class explained), ``pred`` (the predicted class),
            ``pred_prob`` (its probability), ``true_label`` (the gold label),
            ``attr_score`` (the "Attribution Score" column, shown only when
            given: a total of raw scores, e.g. of IBA's nats, means little
            to a reader); and :class:`HeatmapStyle`'s options, over
            ``style``: ``skip_tokens`` (tokens never shown, default: padding
            tokens), ``merge_subwords`` (merge ``"##"`` word pieces, scores
            summed; default False), ``subword_prefix`` (the continuation
            marker, default ``"##"``), ``scale`` (``"auto"``, the default:
            min-max for scores >= 0, diverging for signed ones; or
            ``"minmax"``, ``"max"``; see :func:`scale_scores`). The legend
            says which scale the colours follow.

    Returns:
        str: The HTML.

    Raises:
        TypeError: On a keyword that is neither an argument of
            :func:`heatmap_records` nor a style option.

    Examples::

        >>> from captum_iba import token_attributions
        >>> scores = token_attributions(attr, enc["attention_mask"])
        >>> toks = [tok.convert_ids_to_tokens(ids) for ids in enc["input_ids"]]
        >>> page = text_heatmap_html(toks, scores, token_mask=enc["attention_mask"],
        ...                          label=1, merge_subwords=True)
    """
    instance_data = {k: options.pop(k) for k in _INSTANCE_DATA if k in options}
    style = HeatmapStyle.resolve(style, options, "text_heatmap_html")
    records = heatmap_records(tokens, scores, style=style, **instance_data)
    total = instance_data.get("attr_score") is not None
    body = _records_table(records, legend, style.scale, total)
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
            (``full_page`` is always True), the style options included.

    Returns:
        str: The path written (atomically: a temporary file, then a rename).
    """
    kwargs["full_page"] = True
    page = text_heatmap_html(tokens, scores, **kwargs)
    path = os.fspath(path)
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    atomic_write_text(path, page)
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
        **kwargs: Any keyword argument of :func:`heatmap_records` (``style``
            or the style options of :class:`HeatmapStyle` included).

    Returns:
        IPython.display.HTML or str: Captum's HTML object when IPython is
        installed, else the HTML string.
    """
    if not getattr(captum_viz, "HAS_IPYTHON", False):
        return text_heatmap_html(tokens, scores, legend=legend, **kwargs)
    records = heatmap_records(tokens, scores, **kwargs)
    return captum_viz.visualize_text(records, legend=legend)
