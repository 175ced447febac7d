"""A part of a causal LM's answer explained (issue 77, item 3): a batch's
explained tokens (``PromptBatch.explained``, set by ``explaining``) are the
one objective every method reads - the labels its log-likelihood sums, the
target it is given, the ablated outcomes it fits -, so a span that covers
the whole answer gives exactly the whole answer's scores, leave one source
out of a span is the span's log-probability drop by hand, and the parts of
an answer add up to it. On a tiny random Llama with a word tokenizer."""

import pytest
import torch

from captum_iba.attr.batches import IGNORE_INDEX
from captum_iba.attr.llm import CausalLMLogLikelihood
from captum_iba.attr.llm_batch import prompt_batch
from captum_iba.evaluation import Resources, build_scorers
from captum_iba.evaluation.sources import ablated_prompt_ids, with_sources
from captum_iba.metrics.context import pair_log_probs
from captum_iba.registry import METHODS
from captum_iba.request import check_request
from tests.helpers import light_options, no_hooks, tiny_causal_lm, tiny_word_tokenizer

PROMPT = "the cat sat on the mat a dog ran in the park the big red dog is was"
SOURCES = [(0, 22), (23, 44), (45, 60)]
ANSWER = " the cat a dog in park"  # six tokens
#: Every method that explains a part of an answer (the registry's ``spans``
#: fact), but ContextCite's (its package: tests/app/test_answer_spans.py
#: gives it a stand-in) and AttnLRP's (lxt, transformers 4.x).
SPAN_METHODS = [
    m
    for m in METHODS.names()
    if "causal-lm" in METHODS.entry(m).facts["models"]
    and METHODS.entry(m).facts.get("spans")
    and not m.startswith("contextcite")
    and m != "AttnLRP"
]


@pytest.fixture(scope="module")
def lm():
    return tiny_causal_lm("llama", positions=48), tiny_word_tokenizer()


def _batch(tok, rows=1):
    batch = prompt_batch(tok, [PROMPT] * rows, [ANSWER] * rows)
    return with_sources(tok, batch, [SOURCES] * rows)


def _scorer(model, tok, method):
    request = check_request([method], light_options(method), None, "fair", "causal-lm")
    return build_scorers(request, Resources(model, tok))[method]


def test_the_methods_that_explain_a_part():
    """All the product's methods for causal LMs (the explainer fitted for
    the whole answer and AT2's two are the lab's)."""
    whole_only = {
        m
        for m in METHODS.names()
        if "causal-lm" in METHODS.entry(m).facts["models"]
        and not METHODS.entry(m).facts.get("spans")
    }
    assert whole_only == set()  # iba-amortized-lm, at2, iba-heads: the lab's
    assert {"iba-deletion", "iba-surrogate", "loso", "IG", "LOO"} <= set(SPAN_METHODS)


def test_a_batch_s_explained_tokens(lm):
    _, tok = lm
    batch = _batch(tok)
    assert batch.explained is None and batch.explained_range(0) == (0, 6)
    assert (batch.lead_mask == batch.prompt_mask).all()
    part = batch.explaining([(2, 4)])
    assert part.explained_range(0) == (2, 4)
    assert part.answer_ids(0) == batch.answer_ids(0)  # still read whole
    assert tok.decode(part.explained_ids(0)) == "a dog"
    labels = part.arguments()["labels"][0]
    assert tok.decode(labels[labels != IGNORE_INDEX]) == "a dog"
    lead = part.input_ids[0][part.lead_mask[0]]
    assert tok.decode(lead[-2:]) == "the cat"  # the answer before the part
    assert int(part.lead_mask.sum()) == int(batch.prompt_mask.sum()) + 2
    rows = part.rows([0, 0, 0])
    assert len(rows) == 3 and rows.explained_range(2) == (2, 4)
    for bad in ([(0, 0)], [(3, 7)], [(-1, 2)], [(0, 2), (2, 4)]):
        with pytest.raises(ValueError, match="outside its 6 answer tokens|ranges"):
            batch.explaining(bad)


@pytest.mark.parametrize("method", SPAN_METHODS)
def test_a_span_that_covers_the_whole_answer_is_the_whole_answer(lm, method):
    """The span path (the explained tokens set) gives the whole answer's
    scores when the span is the whole answer: the one objective, read the
    same way; the model is left as it was found."""
    model, tok = lm
    batch = _batch(tok)
    before = [p.detach().clone() for p in model.parameters()]
    whole = _scorer(model, tok, method).attribute(batch)
    span = _scorer(model, tok, method).attribute(batch.explaining([(0, 6)]))
    torch.testing.assert_close(span.answer, whole.answer, rtol=1e-5, atol=1e-6)
    if whole.sources is not None:
        torch.testing.assert_close(span.sources, whole.sources, rtol=1e-5, atol=1e-6)
    assert no_hooks(model) and not model.training
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_loso_of_a_span_by_hand_and_the_parts_add_up(lm):
    """A source's score for a part is the part's log-probability drop when
    the source is left out (the answer before the part given after the
    ablated prompt); log-probabilities add up over the answer's tokens, so
    the parts' scores add up to the whole answer's."""
    model, tok = lm
    batch = _batch(tok, rows=3).explaining([(0, 2), (2, 6), (0, 6)])
    found = _scorer(model, tok, "loso").attribute(batch).sources
    ll = CausalLMLogLikelihood(model)
    answer = batch.answer_ids(0)
    for s in range(3):
        keep = [True] * 3
        full = ablated_prompt_ids(tok, PROMPT, SOURCES, keep)
        keep[s] = False
        out = ablated_prompt_ids(tok, PROMPT, SOURCES, keep)
        for row, part in enumerate([(0, 2), (2, 6)]):
            logp = pair_log_probs(ll, [full, out], [answer] * 2, spans=[part] * 2)
            assert float(found[row, s]) == pytest.approx(
                float(logp[0] - logp[1]), rel=1e-4, abs=1e-5
            )
    torch.testing.assert_close(found[0] + found[1], found[2], rtol=1e-4, atol=1e-5)


def test_a_method_for_the_whole_answer_refuses_a_part(lm):
    """A user's class that does not say it explains parts of an answer
    (``explains_spans``) is refused one, as are per-token scores of a
    part."""
    from captum_iba.evaluation import RandomScorer

    class WholeOnly(RandomScorer):
        """A user's scorer that says nothing of parts."""

        models = ("causal-lm",)

    model, tok = lm
    part = _batch(tok).explaining([(0, 2)])
    with pytest.raises(ValueError, match="explains the whole answer only"):
        WholeOnly(model).attribute(part)
    with pytest.raises(ValueError, match="without per_token"):
        _scorer(model, tok, "loso").attribute(part, per_token=True)
