"""The explanation page: one row per method, each on its own scale with its
own legend, words escaped, ranks and scores readable for every word."""

import re

import pytest

from captum_iba.visualization.page import ScoreRow, explanation_html, score_colors

WORDS = ["a", "<b>good</b>", "film", "&", "plot"]


def _lightness(color):
    return float(re.search(r"(\d+)%\)$", color).group(1))


def test_rows_have_their_own_scales_and_legends():
    rows = [
        ScoreRow(
            "iba-faithful",
            WORDS,
            [200, 250, 210, 205, 201],
            signed=False,
            meaning="information kept, no direction",
        ),  # fmt: skip
        ScoreRow(
            "IG",
            WORDS,
            [0.1, 0.8, -0.4, 0.0, -0.1],
            signed=True,
            meaning="+ for the class, - against it",
        ),  # fmt: skip
    ]
    page = explanation_html(rows, text="a good film", facts=[("Model", "m")])
    assert page.startswith("<!DOCTYPE html>") and '<meta charset="utf-8">' in page
    assert page.count('class="row"') == 2
    assert "min-max within this row" in page and "no direction" in page
    assert "score / largest |score| in this row, white = 0" in page
    assert "Score: information kept, no direction." in page
    assert "&lt;b&gt;good&lt;/b&gt;" in page and "<b>good" not in page
    assert page.count("<sup>1</sup>") == 2  # the top word of each row
    assert 'title="rank 1 of 5, score 250"' in page
    assert 'title="rank 5 of 5, score -0.4"' in page
    # the legend's scale never wraps apart
    assert page.count('class="scale"') == 2 and "white-space:nowrap" in page


def test_unsigned_rows_use_min_max_so_the_lowest_word_is_pale():
    row = ScoreRow("IBA", ["a", "b", "c"], [1900.0, 2100.0, 2000.0], signed=False)
    page = explanation_html([row], full_page=False)
    backs = re.findall(r'class="w" style="background:(hsl\([^)]*\))', page)
    light = [_lightness(b) for b in backs]
    assert light[0] == 97 and light[1] == 35 and light[2] == 66  # 0, 1, 0.5
    assert not page.startswith("<!DOCTYPE")


def test_colours_step_evenly_so_middle_words_can_be_ranked():
    steps = [_lightness(score_colors(v / 10, False)[0]) for v in range(11)]
    diffs = [a - b for a, b in zip(steps, steps[1:])]
    assert all(5 <= d <= 7 for d in diffs)  # equal steps, no flat stretch
    assert score_colors(1.0, False)[1] == "#ffffff"  # white text on dark
    assert score_colors(0.2, False)[1] == "#111111"
    green, red = score_colors(0.5, True)[0], score_colors(-0.5, True)[0]
    assert green.startswith("hsl(130") and red.startswith("hsl(0")
    assert score_colors(2.0, True) == score_colors(1.0, True)  # clipped


def test_pair_separator_and_bad_rows():
    row = ScoreRow("random", ["a", "b", "c"], [0.1, 0.2, 0.3], signed=False,
                   breaks=[2])  # fmt: skip
    assert explanation_html([row]).count('class="sep"') == 1
    with pytest.raises(ValueError, match="3 words but scores of shape"):
        explanation_html([ScoreRow("m", ["a", "b", "c"], [1.0, 2.0], signed=True)])
    with pytest.raises(ValueError, match="finite"):
        explanation_html([ScoreRow("m", ["a"], [float("nan")], signed=True)])
    with pytest.raises(ValueError, match="at least one row"):
        explanation_html([])


def test_tied_scores_share_a_rank():
    """Issue 79 item 15: a source's words (one score) were ranked 1, 2, 3."""
    row = ScoreRow("loso", WORDS, [0.5, 0.5, 0.5, 0.1, 0.7], signed=True, meaning="m")
    page = explanation_html([row], text="a good film")
    assert page.count('title="rank 2 of 5, score 0.5"') == 3
    assert 'title="rank 1 of 5, score 0.7"' in page
    assert 'title="rank 5 of 5, score 0.1"' in page
    assert "rank 3 of 5" not in page and "rank 4 of 5" not in page
