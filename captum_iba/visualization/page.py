"""The explanation page: one text, one row of word colours per method.

:func:`explanation_html` lays out what ``captum-iba explain`` and
:func:`captum_iba.explain` show: a heading with the facts a reader needs (the
model, its prediction, the class explained, the layer), then one row per
method over the same words, each row on its own colour scale with a legend
that says which scale and what a score means for that method. Scores without
a direction (IBA's information) are coloured on a one-hue min-max scale;
signed scores on a diverging scale, green for the class and red against it,
white at 0. Every word carries its score and rank in a tooltip, and the top
words of each row their rank as a small number, so that middle words can be
ranked too. Plain inputs (:class:`ScoreRow`), no IPython, no Captum record.
"""

import html
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from captum_iba.visualization._inputs import as_array, scale_scores

__all__ = ["CitedAnswer", "ScoreRow", "explanation_html", "score_colors"]

#: Hue of scores without a direction (a purple that is neither "for" nor
#: "against"), and of the signed scale's two ends.
_UNSIGNED_HUE, _FOR_HUE, _AGAINST_HUE = 265, 130, 0


def score_colors(value: float, signed: bool) -> Tuple[str, str]:
    """The background and text colours of one scaled score.

    The lightness runs from 97 % (no colour) to 35 % (full), linearly in the
    scaled score, so that equal steps in score look like equal steps in
    colour; the text turns white on the darker half.

    Args:
        value (float): The scaled score: in [0, 1] for unsigned scores, in
            [-1, 1] for signed ones (clipped).
        signed (bool): A diverging scale (green above 0, red below) instead
            of the one-hue scale.

    Returns:
        (str, str): CSS colours ``(background, text)``.
    """
    v = float(np.clip(value, -1.0 if signed else 0.0, 1.0))
    if signed:
        hue, sat = (_FOR_HUE, 55) if v >= 0 else (_AGAINST_HUE, 70)
    else:
        hue, sat = _UNSIGNED_HUE, 60
    light = 97 - 62 * abs(v)
    text = "#ffffff" if light < 58 else "#111111"
    return f"hsl({hue}, {sat}%, {light:.0f}%)", text


@dataclass(frozen=True)
class ScoreRow:
    """One method's scores over the words shown.

    Attributes:
        method (str): The method's name, as the row's heading.
        words (Sequence[str]): The words (or word pieces) shown, unescaped.
        scores (Sequence[float]): Their raw scores, aligned with ``words``.
        signed (bool): Whether a score has a direction (+ for the class,
            - against it): a diverging scale; else a min-max scale.
        meaning (str): What one score means, for the legend.
        details (str): A line under the method's name (configuration, layer,
            time).
        breaks (Sequence[int]): Word positions before which a separator is
            drawn (the start of a pair's second text).
        unit (str): The raw scores' unit, for the tooltips (e.g. ``"nats"``).
        no_ranking (str): Why the scores rank no word ("" when they do): said
            in the legend instead of the scale; no word is coloured or shows
            a rank.
        matrix (Sequence[Sequence[float]], optional): One row of scores over
            ``words`` per output token of a generated answer (a causal LM's
            per-token attributions), drawn under the words on one scale.
        matrix_labels (Sequence[str]): The output tokens, one per row of
            ``matrix``.
        numbered (bool): The words are numbered sources (``"[2] text"``):
            their rank is in the tooltip only, so that one numbering - the
            sources' - shows beside them (issue 90, item 3).
    """

    method: str
    words: Sequence[str]
    scores: Sequence[float]
    signed: bool
    meaning: str = ""
    details: str = ""
    breaks: Sequence[int] = ()
    unit: str = ""
    no_ranking: str = ""
    matrix: Optional[Sequence[Sequence[float]]] = None
    matrix_labels: Sequence[str] = ()
    numbered: bool = False


@dataclass(frozen=True)
class CitedAnswer:
    """One method's citations of a causal LM's answer, part by part: the
    answer as a cited paragraph (each part followed by its citation marks)
    and the sources it cites, listed below with their text.

    Attributes:
        method (str): The method's name, as the block's heading.
        text (str): The answer, unescaped.
        parts (Sequence of (int, int, Sequence of (int, float))): Each part
            of the answer explained: its ``start`` and ``end`` characters in
            ``text`` and its cited sources as ``(number, score)`` (numbered
            from 1, best first; none: the part cites no source).
        sources (Sequence of (int, str)): Each source cited, ``(number,
            text)``.
        details (str): A line under the method's name.
        meaning (str): What a score is and which sources a part cites, for
            the legend.
    """

    method: str
    text: str
    parts: Sequence[Tuple[int, int, Sequence[Tuple[int, float]]]]
    sources: Sequence[Tuple[int, str]]
    details: str = ""
    meaning: str = ""


_STYLE = """
.ciba{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#111;
max-width:1100px;line-height:1.4}
.ciba h2{font-size:1.25em;margin:.2em 0 .4em}
.ciba .text{font-size:1.05em;margin:0 0 .6em;padding:.4em .6em;background:#f6f6f6;
border-left:3px solid #999}
.ciba table.facts{border-collapse:collapse;margin:0 0 .8em}
.ciba table.facts td{padding:.1em .8em .1em 0;vertical-align:top;text-align:left}
.ciba table.facts td:first-child{color:#555;white-space:nowrap}
.ciba .row{display:grid;grid-template-columns:190px 1fr;
grid-template-rows:auto 1fr;gap:.2em 1em;padding:.6em 0;border-top:1px solid #ddd}
.ciba .method{font-weight:600;grid-row:span 2}
.ciba .method small{display:block;font-weight:400;color:#555}
.ciba .words{display:flex;flex-wrap:wrap;gap:.3em .25em;align-items:baseline}
.ciba .w{padding:.05em .3em;border-radius:3px;font-size:1.05em;
border:1px solid rgba(0,0,0,.12)}
.ciba .w sup{font-size:.65em;margin-left:.15em;opacity:.85}
.ciba .sep{color:#777;padding:0 .4em;font-weight:600}
.ciba .legend{grid-column:2;display:flex;flex-wrap:wrap;gap:.2em 1em;
align-items:center;align-content:flex-start;font-size:.85em;color:#444}
.ciba .scale{display:inline-flex;align-items:center;gap:.35em;white-space:nowrap}
.ciba .ramp{display:inline-block;width:120px;height:.8em;border:1px solid #bbb;
border-radius:2px}
.ciba .notes{font-size:.85em;color:#555;border-top:1px solid #ddd;padding-top:.5em}
.ciba .norank{color:#8a1c1c;flex-basis:100%}
.ciba .matrix{grid-column:2;overflow-x:auto}
.ciba table.m{border-collapse:collapse;font-size:.85em}
.ciba table.m th{font-weight:400;color:#444;padding:.1em .3em;white-space:nowrap}
.ciba table.m thead th{writing-mode:vertical-rl;transform:rotate(180deg);
text-align:left;max-height:9em}
.ciba table.m tbody th{text-align:right}
.ciba table.m td{min-width:1.2em;height:1.2em;border:1px solid #fff}
.ciba .cited{display:grid;grid-template-columns:190px 1fr;gap:.2em 1em;
padding:.6em 0;border-top:1px solid #ddd}
.ciba .cited .method{grid-row:span 3}
.ciba .para{font-size:1.1em;margin:0;padding:.3em .6em;background:#fbfaf4;
border-left:3px solid #b59b3b}
.ciba .part{border-bottom:1px dotted #888}
.ciba .mark{font-size:.75em;color:#5b3fa8;margin-left:.1em;font-weight:600}
.ciba ol.refs{margin:.2em 0 0;padding-left:2.2em;font-size:.9em}
.ciba ol.refs .sc{color:#555;margin-left:.6em;font-size:.9em}
"""


def _ramp(signed: bool) -> str:
    """A CSS gradient through the scale's colours."""
    stops = np.linspace(-1 if signed else 0, 1, 9)
    colors = ", ".join(score_colors(v, signed)[0] for v in stops)
    return f"linear-gradient(to right, {colors})"


def _legend(row: ScoreRow) -> str:
    low, high = ("against", "for") if row.signed else ("lowest", "highest")
    scale = (
        "score / largest |score| in this row, white = 0"
        if row.signed
        else "min-max within this row; no direction (for or against)"
    )
    ramp = f'<span class="ramp" style="background:{_ramp(row.signed)}"></span>'
    parts = [
        f'<span class="scale">{low} {ramp} {high}</span>',
        f"<span>{html.escape(scale)}.</span>",
    ]
    if row.no_ranking:  # no scale: the words are left uncoloured
        parts = [
            '<span class="norank"><b>No ranking:</b> '
            f"{html.escape(row.no_ranking)}; the words are left uncoloured.</span>"
        ]
    if row.meaning:
        parts.append(f"<span>Score: {html.escape(row.meaning)}.</span>")
    return '<div class="legend">' + "".join(parts) + "</div>"


def _check(row: ScoreRow) -> np.ndarray:
    scores = as_array(row.scores, f"scores of {row.method}")
    if scores.ndim != 1 or scores.shape[0] != len(row.words):
        raise ValueError(
            f"{row.method}: {len(row.words)} words but scores of shape "
            f"{scores.shape}; give one score per word"
        )
    if not np.isfinite(scores).all():
        raise ValueError(f"{row.method}: scores must be finite")
    return scores


def _words(row: ScoreRow, top: int) -> str:
    scores = _check(row)
    scaled = scale_scores(scores, "max" if row.signed else "minmax")
    if row.no_ranking:  # colours would rank what is no ranking
        scaled = np.zeros_like(scaled)
    # tied scores share a rank (1, 1, 3: a source's words hold its one score)
    ascending = np.sort(scores)
    rank = len(scores) - np.searchsorted(ascending, scores, side="right") + 1
    unit = f" {row.unit}" if row.unit else ""
    cells: List[str] = []
    for i, (word, raw, v) in enumerate(zip(row.words, scores, scaled)):
        if i in row.breaks:
            cells.append('<span class="sep">|</span>')
        back, fore = score_colors(v, row.signed)
        tip = f"rank {rank[i]} of {len(scores)}, score {raw:.4g}{unit}"
        mark = f"<sup>{rank[i]}</sup>" if rank[i] <= top and not row.numbered else ""
        if row.no_ranking:
            tip, mark = f"score {raw:.4g}{unit} (no ranking)", ""
        cells.append(
            f'<span class="w" style="background:{back};color:{fore}" '
            f'title="{html.escape(tip)}">{html.escape(word)}{mark}</span>'
        )
    return '<div class="words">' + "".join(cells) + "</div>"


def _matrix(row: ScoreRow) -> str:
    """The output-token x word table of a row, on one scale for the table."""
    if row.matrix is None:
        return ""
    values = as_array(row.matrix, f"matrix of {row.method}")
    if values.ndim != 2 or values.shape != (len(row.matrix_labels), len(row.words)):
        raise ValueError(
            f"{row.method}: the matrix must be (output tokens, words) = "
            f"({len(row.matrix_labels)}, {len(row.words)}); got {values.shape}"
        )
    if not np.isfinite(values).all():
        raise ValueError(f"{row.method}: the matrix must be finite")
    scaled = scale_scores(values, "max" if row.signed else "minmax")
    unit = f" {row.unit}" if row.unit else ""
    head = "".join(f"<th>{html.escape(w)}</th>" for w in row.words)
    body = []
    for label, raw, line in zip(row.matrix_labels, values, scaled):
        cells = []
        for word, x, v in zip(row.words, raw, line):
            back, _ = score_colors(v, row.signed)
            tip = html.escape(f"{label!r} <- {word!r}: {x:.4g}{unit}")
            cells.append(f'<td style="background:{back}" title="{tip}"></td>')
        body.append(f"<tr><th>{html.escape(label)}</th>{''.join(cells)}</tr>")
    return (
        '<div class="matrix"><table class="m"><thead><tr><th></th>'
        f"{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        "<small>Each output token (rows) x each word (columns), on one scale "
        "for the table.</small></div>"
    )


def _cited(block: CitedAnswer) -> str:
    """A method's cited paragraph: the answer, each part followed by its
    citation marks (a mark's tooltip: the source's score and text), and the
    cited sources listed below (each with its score for every part that
    cites it)."""
    texts = dict(block.sources)
    scored: dict = {}
    cells, at = [], 0
    for k, (start, end, cites) in enumerate(sorted(block.parts, key=lambda p: p[1])):
        start, end = max(start, at), max(end, at)
        cells.append(html.escape(block.text[at:start]))
        said = ", ".join(f"[{n}] {v:.4g}" for n, v in cites) or "no source"
        cells.append(
            f'<span class="part" title="{html.escape(f"part {k + 1}: {said}")}">'
            f"{html.escape(block.text[start:end])}</span>"
        )
        for n, v in cites:
            scored.setdefault(n, []).append(f"part {k + 1}: {v:.4g}")
            tip = html.escape(f"score {v:.4g}: {texts.get(n, '')}")
            cells.append(f'<sup class="mark" title="{tip}">[{n}]</sup>')
        if not cites:
            cells.append('<sup class="mark" title="no source cited">[-]</sup>')
        at = end
    cells.append(html.escape(block.text[at:]))
    refs = "".join(
        f'<li value="{n}">{html.escape(text)}'
        f'<span class="sc">({html.escape("; ".join(scored.get(n, [])))})</span></li>'
        for n, text in sorted(block.sources)
    )
    details = f"<small>{html.escape(block.details)}</small>" if block.details else ""
    legend = (
        f'<div class="legend"><span>{html.escape(block.meaning)}</span></div>'
        if block.meaning
        else ""
    )
    return (
        f'<div class="cited"><div class="method">{html.escape(block.method)}'
        f'{details}</div><p class="para">{"".join(cells)}</p>'
        f'<ol class="refs">{refs}</ol>{legend}</div>'
    )


def _row(row: ScoreRow, top: int) -> str:
    details = f"<small>{html.escape(row.details)}</small>" if row.details else ""
    return (
        f'<div class="row"><div class="method">{html.escape(row.method)}{details}'
        f"</div>{_words(row, top)}{_legend(row)}{_matrix(row)}</div>"
    )


def explanation_html(
    rows: Sequence[ScoreRow],
    *,
    title: str = "Which words did the prediction rely on?",
    text: Optional[str] = None,
    facts: Sequence[Tuple[str, str]] = (),
    notes: Sequence[str] = (),
    top: int = 3,
    full_page: bool = True,
    cited: Sequence[CitedAnswer] = (),
) -> str:
    """The explanation page: facts, then one row of word colours per method.

    Args:
        rows (Sequence[ScoreRow]): One per method, over the same words (each
            on its own scale).
        title (str): The heading.
        text (str, optional): The text explained, shown under the heading.
        facts (Sequence[(str, str)]): ``(label, value)`` lines of the heading
            (model, prediction, class explained, ...).
        notes (Sequence[str]): Lines at the end (how words were formed, ...).
        top (int): The top ``top`` words of each row show their rank.
            Default 3.
        full_page (bool): A complete HTML document (with ``<meta
            charset="utf-8">``); False gives a fragment for a notebook.
            Default True.
        cited (Sequence[CitedAnswer]): A causal LM's answer as a cited
            paragraph, one block per method, shown after the facts (parts of
            the answer attributed to a context's sources).

    Returns:
        str: The HTML; every word, label and note is escaped.

    Raises:
        ValueError: For no rows, or a row whose scores do not match its words
            or are not finite.
    """
    if not rows:
        raise ValueError("explanation_html needs at least one row")
    parts = [f"<style>{_STYLE}</style>", '<div class="ciba">']
    parts.append(f"<h2>{html.escape(title)}</h2>")
    if text:
        parts.append(f'<div class="text">{html.escape(text)}</div>')
    if facts:
        cells = "".join(
            f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>"
            for k, v in facts
        )
        parts.append(f'<table class="facts">{cells}</table>')
    parts.extend(_cited(c) for c in cited)
    parts.extend(_row(r, top) for r in rows)
    if notes:
        parts.append(
            '<div class="notes">'
            + "<br>".join(html.escape(n) for n in notes)
            + "</div>"
        )
    parts.append("</div>")
    body = "\n".join(parts)
    if not full_page:
        return body
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n</head>\n<body>\n{body}\n"
        "</body>\n</html>\n"
    )
