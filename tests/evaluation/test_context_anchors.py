"""The anchors of context attribution as registered methods (issue 51): the
one ablation rule of a source (captum_iba.evaluation.sources.ablated_prompt,
what the metrics remove too), ``loso``, ``shapley-sources`` and
``contextcite-<A>`` on a tiny random Llama, checked against the log-probability
computed by hand; and every method for causal LMs gives one score per source
of a batch with sources."""

import itertools
import math
import random
import sys

import pytest
import torch
from captum.attr import FeatureAblation

from captum_iba.app.context_tasks import (
    JOIN,
    LAYOUT,
    fact_examples,
    topic_examples,
)
from captum_iba.attr.llm import CausalLMLogLikelihood
from captum_iba.attr.llm_batch import IGNORE_INDEX, encode_prompt, prompt_batch
from captum_iba.evaluation import Resources, build_scorers
from captum_iba.evaluation.attnlrp import attnlrp_available
from captum_iba.evaluation.source_methods import ShapleySourcesScorer
from captum_iba.evaluation.sources import (
    ablated_prompt,
    ablated_prompt_ids,
    row_ablation,
    row_chat,
    source_scores,
    with_sources,
)
from captum_iba.registry import METHODS
from tests.helpers import (
    install_fake_lxt,
    light_options,
    tiny_causal_lm,
    tiny_word_tokenizer,
)

#: A chat template of known words, its reply opener followed by a space (the
#: word tokenizer's decoding drops the space before a response's first word).
TEMPLATE = (
    "{% for m in messages %}very {{ m['content'] }} <eos> {% endfor %}"
    "{% if add_generation_prompt %}was {% endif %}"
)
#: Two prompts, three and two sources, the query outside them.
PROMPTS = (
    "the cat sat on the mat a dog ran in the park the big red cat was small "
    "the cat is ",
    "a dog ran in the park the blue cat sat on the mat a dog is ",
)
SPANS = (((0, 22), (23, 44), (45, 70)), ((0, 21), (22, 49)))
ANSWERS = ("red", "in park")


def _batch(tok, chat=False):
    batch = prompt_batch(tok, list(PROMPTS), [" " + a for a in ANSWERS], chat=chat)
    return with_sources(tok, batch, SPANS, chat=chat)


@pytest.fixture(scope="module")
def lm():
    return tiny_causal_lm("llama", layers=2, positions=64), tiny_word_tokenizer()


def _build(name, model, tok, **options):
    return build_scorers(
        [name],
        Resources(model, tok),
        kind="causal-lm",
        method_options={name: {**light_options(name), **options}},
    )[METHODS.entry(name).name]


def _log_prob(model, prompt_ids, response):
    """The response's log-probability after the prompt, one unpadded row."""
    ids = torch.tensor([list(prompt_ids) + list(response)])
    labels = torch.full_like(ids, IGNORE_INDEX)
    labels[0, len(prompt_ids) :] = torch.tensor(response)
    with torch.no_grad():
        return float(CausalLMLogLikelihood(model)(ids, torch.ones_like(ids), labels))


# the ablation rule


def test_a_dropped_source_goes_with_the_whitespace_after_it():
    prompt = "Context: One. Two.\n\nThree.\n\nQuery: which?"
    spans = [(9, 13), (14, 18), (20, 26)]
    assert [prompt[a:b] for a, b in spans] == ["One.", "Two.", "Three."]
    cases = {
        (1, 1, 1): prompt,
        (0, 1, 1): "Context: Two.\n\nThree.\n\nQuery: which?",
        (1, 0, 1): "Context: One. Three.\n\nQuery: which?",
        (1, 1, 0): "Context: One. Two.\n\nQuery: which?",
        (1, 0, 0): "Context: One.\n\nQuery: which?",
        (0, 0, 0): "Context: \n\nQuery: which?",
    }
    for keep, expected in cases.items():
        assert ablated_prompt(prompt, spans, [bool(k) for k in keep]) == expected
    # text between two sources other than whitespace (a turn's role) stays
    turns = "User: hi there\nBot: hello\nUser: bye"
    spans = [(6, 14), (20, 25), (32, 35)]
    assert ablated_prompt(turns, spans, [True, False, True]) == (
        "User: hi there\nBot: \nUser: bye"
    )
    with pytest.raises(ValueError, match="keep has 2 values for 3 sources"):
        ablated_prompt(turns, spans, [True, False])


def test_in_contextcites_layout_ablating_is_rejoining_the_kept_sources():
    """On context_tasks' examples (planted facts, topics; every subset of
    up to 5 sources, random subsets of more) the rule gives exactly
    ContextCite's re-joined context."""
    passages = [f"Passage {i} says {'little ' * (i % 3)}of note." for i in range(30)]
    examples = fact_examples(passages, 12, seed=3, sources=(2, 9))
    examples += topic_examples(passages, [i % 4 for i in range(30)], 4, seed=1)
    rng = random.Random(0)
    checked = 0
    for ex in examples:
        prompt, spans = ex.prompt()
        n = len(ex.sources)
        masks = (
            itertools.product([False, True], repeat=n)
            if n <= 5
            else [[rng.random() < 0.5 for _ in range(n)] for _ in range(40)]
        )
        for keep in masks:
            kept = [s for s, k in zip(ex.sources, keep) if k]
            expected = LAYOUT.format(context=JOIN.join(kept), query=ex.query)
            assert ablated_prompt(prompt, spans, list(keep)) == expected
            checked += 1
    assert checked > 300


def test_the_ablated_ids_are_the_batch_s_with_every_source_kept(lm):
    _, tok = lm
    chatty = tiny_word_tokenizer()
    chatty.chat_template = TEMPLATE
    for tokenizer, chat in ((tok, False), (chatty, True), (chatty, False)):
        batch = _batch(tokenizer, chat)
        for row in range(2):
            assert row_chat(tokenizer, batch, row) is chat
            ids = batch.input_ids[row][batch.prompt_mask[row]].tolist()
            every = [True] * len(SPANS[row])
            assert row_ablation(tokenizer, batch, row)(every) == ids
            assert ids == encode_prompt(tokenizer, PROMPTS[row], chat)[0]
    shorter = ablated_prompt_ids(tok, PROMPTS[0], SPANS[0], [True, False, True])
    assert tok.decode(shorter).count("dog") == 0
    # every source of a prompt of sources only, no template, no BOS: nothing left
    with pytest.raises(ValueError, match="leaves no token before the response"):
        ablated_prompt_ids(tok, "the cat a dog", [(0, 7), (8, 13)], [False, False])
    with pytest.raises(ValueError, match="the batch has no sources"):
        row_ablation(tok, prompt_batch(tok, ["the cat"], [" sat"]), 0)


# loso and shapley-sources, by hand


def test_loso_is_the_log_prob_drop_of_leaving_one_source_out(lm):
    """loso's score of a source is log p(y | prompt) - log p(y | prompt
    without it), each computed by hand on one unpadded row; each token of the
    source holds it; a prompt's missing source is NaN."""
    model, tok = lm
    batch = _batch(tok)
    scorer = _build("loso", model, tok, internal_batch_size=3)  # several passes
    found = scorer.attribute(batch)
    assert found.sources.shape == (2, 3) and math.isnan(found.sources[1, 2])
    for row in range(2):
        response = batch.answer_ids(row)
        n = len(SPANS[row])
        full = _log_prob(model, encode_prompt(tok, PROMPTS[row])[0], response)
        for s in range(n):
            keep = [t != s for t in range(n)]
            ids = ablated_prompt_ids(tok, PROMPTS[row], SPANS[row], keep)
            drop = full - _log_prob(model, ids, response)
            assert float(found.sources[row, s]) == pytest.approx(drop, abs=1e-5)
            inside = found.answer[row][batch.sources[row] == s]
            assert torch.allclose(inside, torch.full_like(inside, drop), atol=1e-5)
    assert (found.answer[~batch.scored] == 0).all()
    pooled = source_scores(found, batch, scorer.source_pooling)
    assert torch.allclose(pooled, found.sources, equal_nan=True)
    assert found.tokens is None and scorer.per_token_note


class _CaptumAblation(ShapleySourcesScorer):
    prompt_method = FeatureAblation


def test_captum_feature_ablation_over_the_template_is_loso(lm):
    """Captum's FeatureAblation through LLMAttribution, one template slot per
    source (the route of shapley-sources), gives loso's numbers."""
    model, tok = lm
    batch = _batch(tok)
    loso = _build("loso", model, tok).attribute(batch).sources
    captum = _CaptumAblation(model, tokenizer=tok, n_samples=None).attribute(batch)
    assert torch.allclose(captum.sources, loso, atol=1e-5, equal_nan=True)


def test_shapley_over_two_sources_adds_up_to_full_minus_none(lm):
    """Efficiency: on each sampled permutation the Shapley values add up to
    log p(y | full) - log p(y | no source), so their mean does; a source's
    value is a mean of its two marginal contributions (first or second in
    the permutation), so it lies between them."""
    model, tok = lm
    prompt, spans = PROMPTS[1], SPANS[1]
    batch = with_sources(tok, prompt_batch(tok, [prompt], [" in park"]), [spans])
    scorer = _build("shapley-sources", model, tok, shap_samples=6)
    found = scorer.attribute(batch, per_token=True)
    response = batch.answer_ids(0)
    value = {
        keep: _log_prob(
            model, ablated_prompt_ids(tok, prompt, spans, list(keep)), response
        )
        for keep in itertools.product([False, True], repeat=2)
    }
    full, none = value[(True, True)], value[(False, False)]
    assert float(found.sources[0].sum()) == pytest.approx(full - none, abs=1e-5)
    alone, last = value[(True, False)] - none, full - value[(False, True)]
    low, high = min(alone, last) - 1e-5, max(alone, last) + 1e-5
    assert low <= float(found.sources[0, 0]) <= high
    assert alone != pytest.approx(last, abs=1e-4)  # the bound says something
    # per output token: each token's values, spread over the sources' tokens
    assert found.tokens.shape == (1, 2, batch.input_ids.shape[1])
    again = scorer.attribute(batch)
    assert torch.equal(again.sources, found.sources)  # seeded per prompt


# ContextCite


def test_contextcite_without_its_package_names_the_install(monkeypatch, lm):
    model, tok = lm
    monkeypatch.setitem(sys.modules, "context_cite", None)
    with pytest.raises(ImportError, match="pip install context-cite"):
        _build("contextcite-32", model, tok)


@pytest.mark.parametrize("chat", [False, True])
def test_contextcite_scores_each_prompt_s_sources(chat, lm):
    """contextcite-32 runs the package on each row with our sources and the
    batch's response: its scores are those of context_cite_scores, and with
    the chat template its prompts are the package's own (its prompt builder
    on the partitioner's ablated context)."""
    pytest.importorskip("context_cite")
    from context_cite.context_citer import ContextCiter

    from captum_iba.evaluation.context_cite import context_cite_scores, make_citer

    model, tok = lm
    tok = tiny_word_tokenizer()
    tok.chat_template = TEMPLATE
    batch = _batch(tok, chat)
    found = _build("contextcite-32", model, tok).attribute(batch)
    assert found.sources.shape == (2, 3) and math.isnan(found.sources[1, 2])
    assert torch.isfinite(found.sources[0]).all()
    for row in range(2):
        own = context_cite_scores(
            model, tok, PROMPTS[row], SPANS[row], batch.answer_ids(row), chat=chat
        )
        assert torch.equal(found.sources[row, : len(own)], own)
        inside = found.answer[row][batch.sources[row] == 0]
        assert torch.allclose(inside, inside.new_full(inside.shape, float(own[0])))
    citer = make_citer(model, tok, PROMPTS[0], SPANS[0], batch.answer_ids(0), chat=chat)
    for keep in itertools.product([False, True], repeat=3):
        ours = citer._get_prompt_ids(mask=list(keep))
        assert ours == ablated_prompt_ids(tok, PROMPTS[0], SPANS[0], keep, chat)
        if chat:
            assert ours == ContextCiter._get_prompt_ids(citer, mask=list(keep))


# every method for causal LMs, pooled to the sources

METHODS_OVER_SOURCES = [
    "ig", "attnlrp", "ablation", "random", "iba-deletion", "iba-sources", "loso",
    "shapley-sources", "contextcite-32", "iba-surrogate",
]  # fmt: skip


@pytest.mark.parametrize("name", METHODS_OVER_SOURCES)
def test_every_method_gives_one_score_per_source(name, lm, monkeypatch):
    if name == "attnlrp" and not attnlrp_available()[0]:
        # lxt 2.1 does not import under transformers 5: a fake lxt whose
        # patches change nothing (AttnLRP is then gradient x input)
        install_fake_lxt(monkeypatch, lambda module: None)
    if name.startswith("contextcite"):
        pytest.importorskip("context_cite")
    model, tok = lm
    batch = _batch(tok)
    scorer = _build(name, model, tok)
    per_source = source_scores(scorer.attribute(batch), batch, scorer.source_pooling)
    assert per_source.shape == (2, 3) and per_source.dtype == torch.float64
    assert (
        torch.isfinite(per_source[0]).all() and torch.isfinite(per_source[1, :2]).all()
    )
    assert math.isnan(per_source[1, 2])  # the second prompt has two sources


def test_contextcite_scores_a_prompt_task_s_content_of_one_word(lm):
    """On a prompt task a content of one word is one source (scorer_batch):
    the package fits its surrogate over it, the score the same as
    context_cite_scores on that one span (which, called alone, refuses one
    source unless told least=1), every token of the word holding it."""
    pytest.importorskip("context_cite")
    from captum_iba.evaluation.context_cite import context_cite_scores
    from captum_iba.evaluation.llm_loop import scorer_batch

    model, tok = lm
    prompt, span = "the big cat is ", (8, 11)
    batch = prompt_batch(tok, [prompt], [" red"])
    scorer = _build("contextcite-32", model, tok)
    given = scorer_batch(scorer, tok, batch, [span])
    assert given.spans == ((span,),)
    found = scorer.attribute(given)
    own = context_cite_scores(
        model, tok, prompt, [span], batch.answer_ids(0), chat=False, least=1
    )
    assert found.sources.shape == (1, 1) and torch.isfinite(found.sources).all()
    assert torch.equal(found.sources[0], own)
    inside = found.answer[0][given.sources[0] == 0]
    assert len(inside) and torch.allclose(
        inside, inside.new_full(inside.shape, float(own[0]))
    )
    with pytest.raises(ValueError, match="at least two sources"):
        context_cite_scores(model, tok, prompt, [span], batch.answer_ids(0))
