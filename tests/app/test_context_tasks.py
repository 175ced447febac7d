"""The context-attribution tasks (captum_iba.app.context_tasks): the layout,
the planted facts and the topics, seeded and with their key where it is."""

import pytest

from captum_iba.app.context_tasks import (
    FACTS,
    TOPICS,
    clean_passage,
    context_examples,
    context_prompt,
    fact_examples,
    topic_examples,
)

PASSAGES = [f"Passage number {i} says nothing of note." for i in range(30)]


def test_the_layout_is_contextcites_and_the_spans_are_the_sources():
    prompt, spans = context_prompt(["First one.", "Second one."], "Which?")
    assert prompt == "Context: First one.\n\nSecond one.\n\nQuery: Which?"
    assert [prompt[a:b] for a, b in spans] == ["First one.", "Second one."]
    with pytest.raises(ValueError, match="at least two sources"):
        context_prompt(["Only one."], "Which?")
    with pytest.raises(ValueError, match="must hold text"):
        context_prompt(["One.", " "], "Which?")


def test_a_planted_fact_is_the_key_and_answers_the_query():
    examples = fact_examples(PASSAGES, 40, seed=1, sources=(3, 8))
    assert examples == fact_examples(PASSAGES, 40, seed=1, sources=(3, 8))
    assert examples != fact_examples(PASSAGES, 40, seed=2, sources=(3, 8))
    keys, sizes = set(), set()
    for ex in examples:
        assert 3 <= len(ex.sources) <= 8
        key = ex.sources[ex.key]
        assert key not in PASSAGES and ex.answer in key  # the fact, planted
        assert all(s in PASSAGES for i, s in enumerate(ex.sources) if i != ex.key)
        assert ex.answer not in ex.query  # the query asks, not tells
        keys.add(ex.key)
        sizes.add(len(ex.sources))
        prompt, spans = ex.prompt()
        assert [prompt[a:b] for a, b in spans] == list(ex.sources)
    assert len(keys) > 3 and len(sizes) > 3  # position and size vary
    used = {
        i
        for ex in examples
        for i, t in enumerate(FACTS)
        if ex.answer in t.values[t.answer]
    }
    assert used == set(range(len(FACTS)))  # every template planted
    with pytest.raises(ValueError, match="2 <= low <= high <= 30"):
        fact_examples(PASSAGES, 1, sources=(3, 40))


@pytest.mark.parametrize("words", [1, 3])
def test_clipped_distractors_are_their_first_words_and_the_draws_the_same(words):
    whole = fact_examples(PASSAGES, 12, seed=3, sources=(4, 9))
    clipped = fact_examples(PASSAGES, 12, seed=3, sources=(4, 9), words=words)
    for a, b in zip(whole, clipped):
        assert (a.key, a.query, a.answer) == (b.key, b.query, b.answer)
        assert b.sources[b.key] == a.sources[a.key]  # the fact stays whole
        for i, (full, cut) in enumerate(zip(a.sources, b.sources)):
            if i != a.key:
                assert cut == " ".join(full.split()[:words])
    with pytest.raises(ValueError, match="words must be None or >= 1; got 0"):
        fact_examples(PASSAGES, 1, words=0)


def test_a_topic_query_names_the_key_articles_topic():
    labels = [i % 4 for i in range(len(PASSAGES))]
    examples = topic_examples(PASSAGES, labels, 20, seed=0)
    for ex in examples:
        assert len(ex.sources) == 4
        label = labels[PASSAGES.index(ex.sources[ex.key])]
        assert TOPICS[label] in ex.query
        assert sorted(labels[PASSAGES.index(s)] for s in ex.sources) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="no article on sports"):
        topic_examples(PASSAGES[:3], [0, 2, 3], 1)


def test_ag_news_escapes_are_written_out():
    raw = "Agent:  #39;It #39;s going, #39; said the  #36;10 boss &amp; co"
    assert clean_passage(raw) == "Agent: 'It's going,' said the $10 boss &amp; co"


def test_the_splits_read_ag_news_apart():
    from captum_iba.app.data import default_data_dir

    try:
        default_data_dir()
    except FileNotFoundError as err:
        pytest.skip(f"reads the shared corpora: {err}")
    search = context_examples("context-facts", "search", 5, seed=0)
    report = context_examples("context-facts", "report", 5, seed=0)

    def passages(examples):  # the corpus's, not the planted facts
        return {s for ex in examples for i, s in enumerate(ex.sources) if i != ex.key}

    assert not passages(search) & passages(report)
    assert not any("#39;" in s for ex in search for s in ex.sources)
    topics = context_examples("context-topics", "report", 3)
    assert all(len(ex.sources) == 4 for ex in topics)
    with pytest.raises(ValueError, match="unknown task"):
        context_examples("context-x", "search", 1)
    with pytest.raises(ValueError, match="'search' or 'report'"):
        context_examples("context-facts", "test", 1)


def test_a_base_model_s_layout_ends_in_the_answer_cue():
    from captum_iba.app.context_tasks import BASE_SUFFIX, layout_prompt, prompt_layout

    sources, query = ["First one.", "Second one."], "Which?"
    assert prompt_layout(True)(sources, query) == layout_prompt(sources, query)
    text, spans = prompt_layout(False)(sources, query)
    assert text == layout_prompt(sources, query)[0] + BASE_SUFFIX
    assert spans == layout_prompt(sources, query)[1]
    assert prompt_layout(False)([], query)[0].endswith("Query: Which?\nAnswer:")
