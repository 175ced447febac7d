"""A tiny Llama trained to copy a fact from one passage (issue 51): on held-out
contexts the methods that measure what the answer needs rank that passage
first, random does not.

The model (one layer, tied embeddings, a word tokenizer and a chat template
of known words; :mod:`tests.copy_model`, shared with the amortized
explainer's test) is trained here, seeded, on the CPU (about 10 CPU-s): each
context holds 3-5 passages of five words, one of them ``key X`` among
fillers (``X`` one of eight values, the only value in the context), the
query ``what is the key ?``, the answer ``X``. Every passage has five words,
so a source's sum of random token scores does not favour the key.

Each method is run as ``captum-iba evaluate --task`` runs it
(:class:`~captum_iba.evaluation.context_loop.ContextJob`: the greedy
response, the sources, 32 held-out ablations shared by the methods).
ContextCite (its own package, skipped without it) is given the same
response. Measured on training seeds 0-3 (12 held-out contexts, chance
about 3 of 12; the test's seed is 0, seeds 1-3 run with ``-m slow``):

* the paper's ``IBA`` (noise at the embeddings), max or mean pooling: the
  key first on 12 of 12 every seed, mean LDS .55-.70 (random's .27-.37);
* ContextCite with 32 ablations: 12, 12, 11, 12 of 12;
* ``random``: 3-4 of 12;
* ``iba-deletion`` (max: 8, 3, 9, 10; mean: 3, 3, 6, 8) and ``iba-sources``
  (7, 3, 7, 10) are not asserted: their deletion is relaxed through the
  attention, which this model focuses on the value so sharply that the
  attention's renormalisation hides the key (in a probe of one such model,
  weighting the key passage down to 0.01 in the attention cost its answer
  0.05-1.5 nats; from 0.5 up to 1 it lowered the answer's log-probability
  a little), while leaving the passage out of the prompt changes the answer.
"""

import pytest
import torch

from captum_iba.app.context_tasks import layout_prompt
from captum_iba.attr.llm_batch import prompt_batch
from captum_iba.evaluation import Resources, build_scorers
from captum_iba.evaluation.context_loop import ContextData, ContextJob
from tests.copy_model import N_HELDOUT, copy_examples, train_copy_model


def _hits(model, tok, methods):
    """Per method and pooling, on how many held-out contexts it ranks the
    key passage first, and its LDS's mean; the responses."""
    data = ContextData(tuple(copy_examples(N_HELDOUT, 999)), layout_prompt)
    scorers = build_scorers(methods, Resources(model, tok), kind="causal-lm")
    job = ContextJob(model=model, tokenizer=tok, data=data, scorers=scorers)
    hits, lds, responses = {}, {}, []
    for i in range(len(data)):
        unit = job.unit_tensors([i])
        responses.append(tok.decode(unit.batch.answer_ids(0)).strip())
        for done in job.score_unit(unit, methods):
            for pooling, found in done.result[0]["pooled"].items():
                name = f"{done.method} ({pooling})"
                hits[name] = hits.get(name, 0) + found["top1"]
                lds.setdefault(name, []).append(found["lds"] or 0.0)
    return hits, {m: sum(v) / len(v) for m, v in lds.items()}, responses, data


def _check_iba_finds_it_random_does_not(model, tok):
    hits, lds, responses, data = _hits(model, tok, ["IBA", "random"])
    answers = [ex.answer for ex in data.examples]
    assert sum(r == a for r, a in zip(responses, answers)) >= N_HELDOUT - 3
    chance = sum(1 / len(ex.sources) for ex in data.examples)  # about 3 of 12
    for pooling in ("max", "mean"):
        assert hits[f"IBA ({pooling})"] >= N_HELDOUT - 2, hits
        assert hits[f"random ({pooling})"] <= chance + 3, hits
        assert lds[f"IBA ({pooling})"] > lds[f"random ({pooling})"], lds


def test_iba_finds_the_copied_passage_and_random_does_not(copy_model):
    _check_iba_finds_it_random_does_not(*copy_model)


def test_context_cite_finds_the_copied_passage(copy_model):
    pytest.importorskip("context_cite")
    from captum_iba.evaluation.context_cite import context_cite_scores

    model, tok = copy_model
    found = 0
    for ex in copy_examples(N_HELDOUT, 999):
        prompt, spans = layout_prompt(ex.sources, ex.query)
        batch = prompt_batch(tok, [prompt], model=model, chat=True, max_new_tokens=3)
        scores = context_cite_scores(
            model, tok, prompt, spans, batch.answer_ids(0), num_ablations=32
        )
        found += int(scores.argmax()) == ex.key
    assert found >= N_HELDOUT - 1


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_iba_finds_it_whatever_the_training_seed(seed):
    _check_iba_finds_it_random_does_not(*train_copy_model(seed))


def test_iba_surrogate_finds_it_where_its_prior_misses_it(copy_model):
    """iba-surrogate's ablations leave passages out of the prompt, so its
    surrogate finds the key on this model, whose sharp attention hides it
    from its prior (one iba-deletion step; see the module docstring)."""
    hits, lds, _, data = _hits(*copy_model, ["iba-surrogate", "iba-deletion", "random"])
    assert hits["iba-surrogate (-)"] >= N_HELDOUT - 1, hits
    assert lds["iba-surrogate (-)"] > lds["random (max)"] + 0.2, lds
    # measured on seed 0: 12 of 12, LDS .75; its prior 8 of 12, .56; random .34
    assert lds["iba-surrogate (-)"] > lds["iba-deletion (logit-max)"], lds


def test_each_sentence_of_the_answer_cites_its_own_passage(two_fact_model):
    """Issue 77, item 3: a model trained to copy two facts from two passages
    into two sentences (:func:`tests.copy_model.train_two_fact_model`:
    ``key X . door Y .``; about 12 CPU-s), explained with
    ``answer_span="sentences"``: each sentence's top source is its own
    passage - the key's for the first, the door's for the second -, which
    no ranking of the whole answer can say (its one top source is one of
    them), and each sentence's LDS, measured on the sentence
    (``context_test(..., span=)``: its log-probability under 32 ablations),
    is far above random's.

    Measured on training seeds 0-3 (12 held-out contexts of 3-5 passages,
    chance about 3 of 12): the answers 12 of 12; ``loso`` and
    ``iba-surrogate`` 12 of 12 for both sentences on every seed (seed 0:
    mean LDS of the sentences .83 and .88, random's .51); ``IG`` 8-12;
    the paper's ``IBA`` 7-12; ``iba-deletion`` 10-12 for the first sentence
    and 6-9 for the second (not asserted: its deletion acts through the
    attention, which this one-layer model focuses so sharply that weighting
    a passage down hides little - the module docstring).
    """
    import captum_iba
    from captum_iba.attr.llm import CausalLMLogLikelihood
    from captum_iba.evaluation.sources import row_ablation, with_sources
    from captum_iba.metrics.context import ablate_sources, context_test
    from tests.copy_model import two_fact_examples

    model, tok = two_fact_model
    methods = ["loso", "iba-surrogate", "random"]
    hits = {m: [0, 0] for m in methods}
    lds = {m: [] for m in methods}
    right = whole_both = 0
    for ex, door in two_fact_examples(N_HELDOUT, 999):
        result = captum_iba.explain(
            ex.query, model=model, tokenizer=tok, context=list(ex.sources),
            method=methods, answer_span="sentences", max_new_tokens=8,
        )  # fmt: skip
        right += result.answer == ex.answer
        parts = result.spans()
        cut = ex.answer.index(" door")
        assert [p.text for p in parts] == [ex.answer[:cut], ex.answer[cut + 1 :]]
        for m in methods:
            for k, passage in enumerate((ex.key, door)):
                cited = result.citations(1, m)[k].sources
                hits[m][k] += bool(cited) and cited[0][0] == passage
        whole = result.source_scores("loso")
        best = max(range(len(whole)), key=whole.__getitem__)
        whole_both += best == ex.key and best == door  # never: two passages
        # each sentence's LDS, on the sentence's own log-probability
        prompt, spans = layout_prompt(ex.sources, ex.query)
        batch = prompt_batch(tok, [prompt], [result.answer], chat=True)
        batch = with_sources(tok, batch, [spans], True)
        ll, ids_of = CausalLMLogLikelihood(model), row_ablation(tok, batch, 0)
        for k, part in enumerate(parts):
            ablations = ablate_sources(
                ll, ids_of, batch.answer_ids(0), len(spans), 32, seed=k,
                span=part.tokens,
            )  # fmt: skip
            scores = {m: torch.tensor(result.source_scores(m, span=k)) for m in methods}
            found = context_test(
                ll, ids_of, batch.answer_ids(0), scores, ks=(1,),
                ablations=ablations, span=part.tokens,
            )  # fmt: skip
            for m in methods:
                lds[m].append(found[m].lds)
    assert right == N_HELDOUT and whole_both == 0
    for m in ("loso", "iba-surrogate"):
        assert min(hits[m]) >= N_HELDOUT - 1, hits
        mean = sum(lds[m]) / len(lds[m])
        assert mean > sum(lds["random"]) / len(lds["random"]) + 0.2, lds
    assert max(hits["random"]) <= N_HELDOUT // 2 + 2, hits
