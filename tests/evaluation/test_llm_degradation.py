"""The degradation test of causal-LM methods on a synthetic prompt task whose
relevant token is known: a tiny Llama trained to answer "is" when the prompt
holds "cat" (anywhere among five filler words, after a fixed instruction
word) and "was" otherwise. IBA and feature ablation find "cat" and their first
removal takes the answer away; random scores do not."""

import random

import pytest
import torch

from captum_iba.attr.llm import CausalLMLogLikelihood
from captum_iba.attr.llm_batch import prompt_batch
from captum_iba.evaluation import Resources, build_scorers
from captum_iba.evaluation.llm_degradation import content_mask, degrade_answers
from captum_iba.metrics import DegradationOptions
from tests.helpers import no_hooks, tiny_causal_lm, tiny_word_tokenizer

FILLER = "the sat on mat a dog ran in park big small red blue".split()
#: The instruction: a fixed first word, never removed.
KEY, YES, NO, INSTRUCTION = "cat", " is", " was", "very "


def _prompt(rng: random.Random, with_key: bool) -> str:
    words = rng.sample(FILLER, 5)
    if with_key:
        words.insert(rng.randrange(6), KEY)
    return INSTRUCTION + " ".join(words)


def _train(model, tok, steps: int = 200, size: int = 512) -> None:
    """The answer token after the prompt (cross-entropy on it only), on
    ``size`` prompts tokenised once, in batches of 32."""
    rng = random.Random(0)
    keys = [rng.random() < 0.5 for _ in range(size)]
    data = prompt_batch(
        tok, [_prompt(rng, k) for k in keys], [YES if k else NO for k in keys]
    ).arguments()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss_of = CausalLMLogLikelihood(model)
    model.train()
    for step in range(steps):
        rows = torch.arange(32) + (step * 32) % size
        logp = loss_of(
            *(data[k][rows] for k in ("input_ids", "attention_mask", "labels"))
        )
        opt.zero_grad()
        (-logp.mean()).backward()
        opt.step()
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)


@pytest.fixture(scope="module")
def trained():
    model, tok = tiny_causal_lm("llama", layers=2, seed=0), tiny_word_tokenizer()
    model.config._attn_implementation = "sdpa"
    _train(model, tok)
    rng = random.Random(1)
    prompts = [_prompt(rng, True) for _ in range(12)]
    batch = prompt_batch(tok, prompts, [YES] * len(prompts))
    with torch.no_grad():
        p = CausalLMLogLikelihood(model)(**batch.arguments()).exp()
    assert p.min() > 0.8, f"the tiny model did not learn the task: {p}"
    return model, tok, batch


def _result(trained, method, choices=None):
    model, tok, batch = trained
    options = {}
    scorer = build_scorers(
        [method], Resources(model, tok), method_options={method: options}
    )[method]
    spans = [(len(INSTRUCTION), len(p)) for p in batch.prompts]
    content = content_mask(tok, batch, spans)
    assert content.sum(1).tolist() == [6] * len(spans)  # the six words
    options = DegradationOptions(
        levels=[0, 1, 6], level_unit="count", pad_token_id=tok.pad_token_id,
        special_token_ids=tuple(tok.all_special_ids),
    )  # fmt: skip
    result = degrade_answers(scorer, batch, content, options, choices=choices)
    assert no_hooks(model)
    return result


#: The least mean first-level drop of p(answer) each method must give (random:
#: about 1/6, when it happens to remove "cat" first). Measured here: "cat"
#: ranked first in 12 / 12 prompts by llm-iba and llm-ablation, 10 / 12 by
#: llm-iba-faithful and only 7 / 12 by llm-iba-deletion, the default: on this
#: saturated toy model (p(answer) = 0.999) the relaxed deletion's gradient is
#: weak (a negative result, docs/llm.rst).
FINDS = {
    "llm-iba": 0.6,
    "llm-iba-faithful": 0.6,
    "llm-ablation": 0.6,
    "llm-iba-deletion": 0.35,
}


@pytest.mark.parametrize("method", sorted(FINDS))
def test_the_key_is_found_and_its_removal_takes_the_answer(trained, method):
    result, floor = _result(trained, method), _result(trained, "llm-random")
    drop = (result.original_probs - result.probs[:, 1]).mean()
    random_drop = (floor.original_probs - floor.probs[:, 1]).mean()
    assert drop > FINDS[method], f"{method}: the first removal drops {drop:.2f}"
    assert drop > random_drop + 0.15, (float(drop), float(random_drop))
    assert result.aopc > floor.aopc
    assert result.settings["target"] == "answer"
    assert result.settings["method"] == method


def test_random_keeps_the_answer_at_the_first_removal_mostly(trained):
    """Random removes "cat" first in about 1 of 6 prompts: p(answer) stays
    high on the others. With all the content gone (the instruction kept) the
    answer is improbable, whatever the order."""
    floor = _result(trained, "llm-random")
    assert (floor.probs[:, 1] > 0.5).float().mean() > 0.5
    assert bool((floor.probs[:, 2] < 0.5).all())


def test_a_row_with_nothing_kept_before_its_answer_is_refused(trained):
    """Removing every prompt token would leave the answer's first token
    with no token to be predicted from (its probability unmeasured)."""
    model, tok, batch = trained
    with pytest.raises(ValueError, match="keep no token before its answer"):
        degrade_answers(
            build_scorers(["llm-random"], Resources(model, tok))["llm-random"],
            batch, batch.scored,
        )  # fmt: skip


@pytest.mark.parametrize("method", ["llm-iba", "llm-ablation"])
def test_the_choice_between_the_answer_words_goes_with_the_key(trained, method):
    """The answer's probability among " is" / " was": near 1 on the intact
    prompts, and it falls when the key goes first (the method's order), not
    when random scores remove a filler word."""
    model, tok, _ = trained
    choices = tok.convert_tokens_to_ids(["is", "was"])
    result = _result(trained, method, choices)
    floor = _result(trained, "llm-random", choices)
    assert result.settings["target"] == "choice"
    assert result.target.tolist() == [0] * 12  # the model's own choice: " is"
    assert float(result.original_probs.min()) > 0.9
    drop = (result.original_probs - result.probs[:, 1]).mean()
    random_drop = (floor.original_probs - floor.probs[:, 1]).mean()
    assert drop > 0.6 and drop > random_drop + 0.3, (float(drop), float(random_drop))


def test_an_answer_that_is_not_a_choice_is_named(trained):
    model, tok, batch = trained
    scorer = build_scorers(["llm-random"], Resources(model, tok))["llm-random"]
    spans = [(len(INSTRUCTION), len(p)) for p in batch.prompts]
    content = content_mask(tok, batch, spans)
    wrong = tok.convert_tokens_to_ids(["was", "in"])
    with pytest.raises(ValueError, match=r"are not among the choices"):
        degrade_answers(scorer, batch, content, choices=wrong)
    two = prompt_batch(tok, batch.prompts[:2], [" is big"] * 2)
    with pytest.raises(ValueError, match="one answer word, one token"):
        degrade_answers(scorer, two, content[:2], choices=wrong)


class _Corpus:
    """The cat prompts as a corpus (the harness's CorpusLike)."""

    def __init__(self, prompts, labels):
        self.texts, self.labels, self.text_pairs = list(prompts), list(labels), None

    def __len__(self):
        return len(self.texts)

    def subset(self, indices):
        return _Corpus(
            [self.texts[i] for i in indices], [self.labels[i] for i in indices]
        )


@pytest.mark.parametrize("target", ["predicted", "label"])
def test_a_prompt_job_runs_in_the_harness_loop(trained, target):
    """PromptJob in run_units (the loop the corpus engine deals out): the
    answer explained is the model's choice (" is" everywhere) or the gold
    word; feature ablation finds the key, random does not."""
    from captum_iba.evaluation.llm_loop import PromptJob
    from captum_iba.evaluation.loop import run_units

    model, tok, batch = trained
    prompts = list(batch.prompts)
    labels = [0] * 6 + [1] * 6  # the second half's gold word: " was"
    job = PromptJob(
        model=model, tokenizer=tok, data=_Corpus(prompts, labels),
        scorers=build_scorers(["llm-ablation", "llm-random"], Resources(model, tok)),
        batch_size=5, target=target, prompts=prompts,
        spans=[(len(INSTRUCTION), len(p)) for p in prompts],
        answers=(YES, NO), choices=tok.convert_tokens_to_ids(["is", "was"]),
    )  # fmt: skip
    results = run_units(job)
    expected = [0] * 12 if target == "predicted" else labels
    for result in results.values():
        assert result.settings["target"] == "choice"
        assert sorted(result.target.tolist()) == sorted(expected)
    ablation, floor = results["llm-ablation"], results["llm-random"]
    if target == "predicted":
        assert float(ablation.original_probs.min()) > 0.9
        assert ablation.aopc > floor.aopc + 0.1, (ablation.aopc, floor.aopc)
    unit = job.unit_tensors([0, 11])
    row = job.instance_row(
        unit, 1, torch.zeros_like(unit.batch.input_ids, dtype=torch.float)
    )
    assert row["answer"] == (YES if target == "predicted" else NO)
    assert row["prompt"] == prompts[11] and row["predicted"] == 0


def test_a_source_method_scores_the_content_s_words(trained):
    """A method that scores a context's sources (``loso``) explains a prompt
    task with the content's words as its sources (scorer_batch, the hook of
    PromptJob and the study): every token of a word holds the word's score,
    the instruction none; leaving "cat" out takes the answer away, so it
    ranks first and its removal drops the answer, as feature ablation's
    does; random's does not. A content of no word is refused, named."""
    from captum_iba.evaluation.llm_loop import PromptJob, scorer_batch
    from captum_iba.evaluation.loop import run_units

    model, tok, batch = trained
    prompts = list(batch.prompts)
    spans = [(len(INSTRUCTION), len(p)) for p in prompts]
    scorers = build_scorers(["loso", "llm-random"], Resources(model, tok))
    loso = scorers["loso"]
    words = scorer_batch(loso, tok, batch, spans)
    assert words.n_sources == 6 and scorer_batch(scorers["llm-random"], tok, batch,
                                                 spans) is batch  # fmt: skip
    sources = build_scorers(["iba-sources"], Resources(model, tok))["iba-sources"]
    assert scorer_batch(sources, tok, batch, spans).n_sources == 6  # one mask a word
    found = loso.attribute(words)
    for row, prompt in enumerate(prompts):
        ranked = [prompt[a:b] for a, b in words.spans[row]]
        best = ranked[int(found.sources[row].argmax())]
        assert best == KEY, (prompt, found.sources[row])
        key = words.sources[row] == ranked.index(KEY)
        assert torch.allclose(found.answer[row][key], found.sources[row].max().float())
        assert float(found.answer[row][words.sources[row] < 0].abs().sum()) == 0.0
    job = PromptJob(
        model=model, tokenizer=tok, data=_Corpus(prompts, [0] * 12), scorers=scorers,
        batch_size=6, prompts=prompts, spans=spans, answers=(YES, NO),
        choices=tok.convert_tokens_to_ids(["is", "was"]),
    )  # fmt: skip
    results = run_units(job)
    source, floor = results["loso"], results["llm-random"]
    assert source.aopc > floor.aopc + 0.1, (source.aopc, floor.aopc)
    empty = prompt_batch(tok, [INSTRUCTION + "cat"], [YES])
    with pytest.raises(ValueError, match="prompt 0's content has none"):
        scorer_batch(loso, tok, empty, [(len(INSTRUCTION), len(INSTRUCTION))])


@pytest.mark.parametrize("method", ["loso", "shapley-sources"])
def test_a_content_of_one_word_is_one_source(trained, method):
    """A prompt task's content of one word (SST-2 has such phrases) is one
    source, scored beside a prompt of six words: leaving it out is the only
    ablation, so leave-one-source-out's and Shapley's score is exactly the
    fall of the answer's log-probability without it, and the surrogate's has
    its sign; every token of the word holds it. A context of one source is
    still refused (with_sources' default)."""
    from captum_iba.evaluation.llm_loop import scorer_batch
    from captum_iba.evaluation.sources import ablated_prompt, with_sources

    model, tok, batch = trained
    prompts = [INSTRUCTION + KEY, batch.prompts[0]]
    spans = [(len(INSTRUCTION), len(p)) for p in prompts]
    both = prompt_batch(tok, prompts, [YES, YES])
    scorer = build_scorers([method], Resources(model, tok))[method]
    given = scorer_batch(scorer, tok, both, spans)
    assert given.n_sources == 6 and given.spans[0] == (spans[0],)
    found = scorer.attribute(given)
    left_out = ablated_prompt(prompts[0], given.spans[0], [False])
    ll = CausalLMLogLikelihood(model)
    with torch.no_grad():
        full, without = (
            float(ll(**prompt_batch(tok, [p], [YES]).arguments()))
            for p in (prompts[0], left_out)
        )
    assert full - without > 1.0  # the key: leaving it out takes the answer
    score = float(found.sources[0, 0])
    assert torch.isnan(found.sources[0, 1:]).all()
    assert score == pytest.approx(full - without, abs=1e-4)
    key = given.sources[0] == 0
    assert torch.allclose(found.answer[0][key], torch.tensor(score).float())
    with pytest.raises(ValueError, match="at least two sources"):
        with_sources(tok, both, [given.spans[0], given.spans[1]])
