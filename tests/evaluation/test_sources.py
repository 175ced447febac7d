"""A prompt's sources (captum_iba.evaluation.sources): splitting, checks,
which token lies in which source, and pooling, by hand."""

import math

import pytest
import torch

from captum_iba.attr.llm_batch import prompt_batch
from captum_iba.evaluation.sources import (
    check_sources,
    pool_sources,
    source_index,
    split_sources,
)
from tests.helpers import tiny_word_tokenizer


def _parts(text, by):
    return [text[a:b] for a, b in split_sources(text, by)]


def test_sentences_lines_and_paragraphs():
    text = 'The cat sat. "Was it big?" It was!  A dog ran\nin the park.\n\nThe end'
    assert _parts(text, "sentence") == [
        "The cat sat.",
        '"Was it big?"',
        "It was!",
        "A dog ran",
        "in the park.",
        "The end",
    ]
    assert _parts(text, "line") == [
        'The cat sat. "Was it big?" It was!  A dog ran',
        "in the park.",
        "The end",
    ]
    assert _parts(text, "paragraph") == [
        'The cat sat. "Was it big?" It was!  A dog ran\nin the park.',
        "The end",
    ]
    assert split_sources("a b. c d.", offset=10) == [(10, 14), (15, 19)]
    with pytest.raises(ValueError, match="by must be one of"):
        split_sources(text, "word")


@pytest.mark.parametrize(
    "sources, match",
    [
        ([(0, 4)], "at least two sources"),
        ([(0, 4), (4, 4)], r"\(4, 4\) is empty"),
        ([(0, 4), (5, 40)], "outside the prompt's 20 characters"),
        ([(0, 6), (5, 9)], r"\(0, 6\) and \(5, 9\) overlap"),
    ],
)
def test_bad_sources_are_refused(sources, match):
    with pytest.raises(ValueError, match=match):
        check_sources(sources, 20)
    check_sources([(0, 4), (4, 9)], 20)  # touching is fine


def test_each_token_lies_in_its_source():
    tok = tiny_word_tokenizer()
    prompts = ["the cat sat on the mat", "a dog ran"]
    batch = prompt_batch(tok, prompts, [" is big", " in park"])
    sources = [[(0, 7), (8, 22)], [(0, 5), (6, 9)]]
    index = source_index(tok, batch, sources)
    for row, prompt in enumerate(prompts):
        real = batch.scored[row]
        got = index[row][real].tolist()
        words = prompt.split()
        want = [0 if prompt.index(w) < sources[row][0][1] else 1 for w in words]
        if row == 0:
            want = [0, 0, 1, 1, 1, 1]  # "the cat" | "sat on the mat"
        assert got == want
    assert (index[~batch.scored] == -1).all()  # padding, the answer
    with pytest.raises(ValueError, match="no token of its own lies in characters"):
        source_index(tok, batch, [[(0, 3), (3, 4)], [(0, 5), (6, 9)]])
    with pytest.raises(ValueError, match="1 lists of sources for 2 prompts"):
        source_index(tok, batch, [[(0, 3), (4, 7)]])


def test_pooling_by_hand():
    scores = torch.tensor([[1.0, 2.0, 3.0, 4.0, 9.0], [5.0, 6.0, 7.0, 0.0, 0.0]])
    index = torch.tensor([[0, 0, 1, 1, -1], [1, 1, 1, -1, -1]])
    assert pool_sources(scores, index, 2, "sum").tolist()[0] == [3.0, 7.0]
    assert pool_sources(scores, index, 2, "mean").tolist()[0] == [1.5, 3.5]
    assert pool_sources(scores, index, 2, "max").tolist()[0] == [2.0, 4.0]
    second = pool_sources(scores, index, 2, "sum")[1]
    assert math.isnan(second[0]) and second[1] == 18.0  # no source 0 there
    with pytest.raises(ValueError, match="pooling must be one of"):
        pool_sources(scores, index, 2, "median")
