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
    source_scores,
    split_sources,
    with_sources,
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
    assert _parts(" a  gripping,\tfilm.\n", "word") == ["a", "gripping,", "film."]
    assert split_sources("ab cd", "word", offset=3) == [(3, 5), (6, 8)]
    with pytest.raises(ValueError, match="by must be one of"):
        split_sources(text, "words")


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


def test_logit_max_is_the_log_odds_of_a_masks_largest_score():
    # a mask in [0, 1]: 1/2 (a deletion step's start) reads 0, above it > 0;
    # the pad column (index -1) may hold anything, it is no source's
    scores = torch.tensor([[0.5, 0.9, 0.2, 0.1, 7.0], [0.5, 0.5, 1.0, 0.0, 0.0]])
    index = torch.tensor([[0, 0, 1, 1, -1], [0, 0, 1, 1, -1]])
    pooled = pool_sources(scores, index, 2, "logit-max")
    assert pooled[0].tolist() == pytest.approx([math.log(9.0), math.log(0.25)])
    assert pooled[1, 0] == 0.0
    # a saturated mask (float32's sigmoid reaches 1.0) is clipped, not inf
    assert pooled[1, 1] == pytest.approx(math.log((1 - 1e-6) / 1e-6))
    # the order is the max's: the same ranking of sources as "max"
    assert pooled[0].argsort().tolist() == (
        pool_sources(scores, index, 2, "max")[0].argsort().tolist()
    )
    with pytest.raises(ValueError, match=r"'logit-max' reads a mask's scores in"):
        pool_sources(scores - 0.6, index, 2, "logit-max")


def test_tied_groups_share_their_sum_or_mean():
    from captum_iba.attr._tokens import tie_groups

    values = torch.arange(12.0).reshape(2, 3, 2)
    groups = torch.tensor([[0, 0, -1], [1, 0, 1]])
    summed = tie_groups(values, groups)
    assert summed[0].tolist() == [[2.0, 4.0], [2.0, 4.0], [4.0, 5.0]]
    assert summed[1].tolist() == [[16.0, 18.0], [8.0, 9.0], [16.0, 18.0]]
    assert tie_groups(values, groups, mean=True)[1, 0].tolist() == [8.0, 9.0]


def _context_batch(model, tok):
    prompts = ["the cat sat on the mat a dog ran", "a red dog ran in the park"]
    batch = prompt_batch(tok, prompts, [" is big", " is small"])
    spans = [[(0, 7), (8, 22), (23, 32)], [(0, 13), (14, 25)]]
    return with_sources(tok, batch, spans), spans


def test_a_batch_with_sources_scores_only_them():
    tok = tiny_word_tokenizer()
    batch, _ = _context_batch(None, tok)
    assert (batch.sources[batch.scored] >= 0).all()
    assert batch.n_sources == 3
    plain = prompt_batch(tok, ["the cat sat"], [" is big"])
    with pytest.raises(ValueError, match="prompt 0's sources: the spans"):
        with_sources(tok, plain, [[(0, 7), (4, 11)]])


def test_iba_sources_gives_one_weight_per_source():
    """iba-sources: every token of a source holds its source's one weight,
    and the scores are each source's (NaN where a prompt has none)."""
    from captum_iba.evaluation import Resources, build_scorers
    from tests.helpers import tiny_causal_lm

    tok = tiny_word_tokenizer()
    model = tiny_causal_lm("llama")
    batch, _ = _context_batch(model, tok)
    scorer = build_scorers(
        ["iba-sources"],
        Resources(model, tok),
        kind="causal-lm",
        method_options={"iba-sources": {"steps": 3}},
    )["iba-sources"]
    result = scorer.attribute(batch)
    per_source = source_scores(result, batch)
    assert per_source.shape == (2, 3) and math.isnan(per_source[1, 2])
    for row in range(2):
        for s in range(batch.n_sources):
            inside = result.answer[row][batch.sources[row] == s]
            if len(inside):
                assert torch.allclose(inside, inside[0].expand_as(inside))
                assert per_source[row, s] == pytest.approx(float(inside[0]), 1e-6)
    assert not torch.allclose(result.answer[0][batch.sources[0] == 0][0],
                              result.answer[0][batch.sources[0] == 1][0])  # fmt: skip
    with pytest.raises(ValueError, match="the batch has no sources"):
        scorer.attribute(prompt_batch(tok, ["the cat sat"], [" is big"]))
