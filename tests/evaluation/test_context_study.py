"""The context study (``experiments/context_study.py``, issue 51) on a tiny
Llama: its ablated prompts score the response as the PromptBatch does, one
example runs end to end, and the ContextCite wrapper (skipped without its
package) explains the given response."""

import argparse
import copy
import json
import math
import sys

import pytest
import torch

from captum_iba.app.context_tasks import ContextExample
from captum_iba.attr.llm import CausalLMLogLikelihood
from captum_iba.attr.llm_batch import prompt_batch
from captum_iba.evaluation import Resources, build_scorers
from captum_iba.evaluation.context_loop import prompt_ids_of, top1_hit
from captum_iba.metrics.context import response_log_probs
from tests.helpers import experiment, light_options, tiny_causal_lm, tiny_word_tokenizer

#: A chat template of known words: the user's text, then the reply's opener.
TEMPLATE = (
    "{% for m in messages %}very {{ m['content'] }} <eos> {% endfor %}"
    "{% if add_generation_prompt %}was{% endif %}"
)
EXAMPLE = ContextExample(
    ("the cat sat on the mat", "a dog ran in the park", "the big red cat was small"),
    "the cat is",
    0,
    "mat",
    "toy",
)


POOLS = {"sum", "mean", "max"}


@pytest.fixture(scope="module")
def study():
    return experiment("context_study")


@pytest.fixture(scope="module")
def tables():
    return experiment("context_tables")


@pytest.fixture(scope="module")
def lm():
    tok = tiny_word_tokenizer()
    tok.chat_template = TEMPLATE
    return tiny_causal_lm("llama", layers=2, positions=128), tok


def test_ablated_prompts_score_the_response_as_the_batch(study, lm):
    """The full context's row of response_log_probs is the PromptBatch's
    answer log-likelihood (same prompt ids, same response), and leaving a
    source out changes it; the prompt with every source is the batch's."""
    model, tok = lm
    prompt, _ = EXAMPLE.prompt()
    batch = prompt_batch(tok, [prompt], ["the mat"], chat=True)
    ll = CausalLMLogLikelihood(model)
    spans = EXAMPLE.prompt()[1]
    prompt_ids = prompt_ids_of(tok, prompt, spans, True)
    ids = batch.input_ids[0][batch.prompt_mask[0]].tolist()
    assert prompt_ids([True] * 3) == ids
    keep = torch.tensor([[True, True, True], [True, False, True]])
    found = response_log_probs(ll, prompt_ids, batch.answer_ids(0), keep)
    with torch.no_grad():
        expected = ll(**batch.arguments())[0].double()
    assert torch.allclose(found[0], expected, atol=1e-5)
    assert not torch.allclose(found[1], expected, atol=1e-5)
    # the ablated prompt holds the kept sources' text only
    shorter = prompt_ids([True, False, True])
    assert len(shorter) < len(ids)
    assert tok.decode(shorter).count("dog") == 0


def test_one_example_end_to_end(study, tables, lm, tmp_path, capsys):
    model, tok = lm
    names = ["random", "ablation", "loso"]
    scorers = build_scorers(
        names,
        Resources(model, tok),
        method_options={m: light_options(m) for m in names},
        kind="causal-lm",
    )
    rows = study.study_example(model, tok, EXAMPLE, scorers, number=7, max_new_tokens=3)
    assert set(rows) == {"random", "LOO", "loso"}  # ablation is LOO's other name
    # loso scores the sources as such: its own scores, no pooling
    assert set(rows["loso"]["pooled"]) == {"-"}
    for row in rows.values():
        assert row["n_sources"] == 3 and row["key"] == 0
        assert row["cpu_seconds"] >= 0 and row["response"]
        assert set(row["pooled"]) == ({"-"} if row is rows["loso"] else POOLS)
        for pooled in row["pooled"].values():
            assert len(pooled["scores"]) == 3
            assert math.isfinite(pooled["lds"]) and -1 <= pooled["lds"] <= 1
            assert math.isfinite(pooled["drops"]["1"])
            # k = 3 or 5 removes every source: undefined, as top_k_drop says
            assert pooled["drops"]["3"] is None and pooled["drops"]["5"] is None
            assert isinstance(pooled["top1"], bool)
    # the metrics and loso ablate alike: the top-1 drop is loso's top score
    loso = rows["loso"]["pooled"]["-"]
    assert loso["drops"]["1"] == pytest.approx(max(loso["scores"]), abs=1e-5)
    # the table reads the rows
    table = tables._rows({m: [dict(r, index=0)] for m, r in rows.items()})
    assert "LOO (sum)" in table and len(table["random (max)"]["lds"]) == 1
    assert "LOO (sum)" in tables.means_table(table)
    # tables --first N: every method on its first N contexts only
    folder = tmp_path / "context-facts" / "report"
    folder.mkdir(parents=True)
    for m, n in (("random", 2), ("loso", 1)):
        rows_m = [dict(rows[m], index=i) for i in range(n)]
        (folder / f"{m}.json").write_text(json.dumps(rows_m))
    for first, n_random in ((None, 2), (1, 1)):
        args = argparse.Namespace(
            out=str(tmp_path), task="context-facts", split="report", first=first,
            docs=None, tag="", anchor=["random (max)"],
        )  # fmt: skip
        study.tables(args)  # context_study's tables command
        said = capsys.readouterr().out.splitlines()
        line = next(x for x in said if x.startswith("| random (max) |"))
        assert line.split("|")[2].strip() == str(n_random)
        # --anchor pairs every other row against it, on the examples both hold
        paired = next(x for x in said if x.startswith("| loso | random (max) |"))
        assert paired.split("|")[3].strip() == "1"
    args.anchor = ["nothing (max)"]
    with pytest.raises(SystemExit, match="--anchor 'nothing \\(max\\)': no such row"):
        study.tables(args)


def test_top1_hit_breaks_ties_as_the_top_k_drop():
    assert top1_hit(torch.tensor([0.1, 0.5, 0.5]), 1)
    assert not top1_hit(torch.tensor([0.1, 0.5, 0.5]), 2)


def test_context_cite_without_its_package_names_the_install(monkeypatch, lm):
    from captum_iba.evaluation.context_cite import context_cite_scores

    model, tok = lm
    monkeypatch.setitem(sys.modules, "context_cite", None)
    with pytest.raises(ImportError, match="pip install context-cite"):
        context_cite_scores(model, tok, *EXAMPLE.prompt(), [4, 5])


def test_context_cite_explains_the_given_response(lm):
    pytest.importorskip("context_cite")
    from captum_iba.evaluation.context_cite import (
        ResponseMismatch,
        citer_scores,
        context_cite_scores,
        make_citer,
    )

    model, tok = lm
    response = tok.encode("the mat", add_special_tokens=False)
    prompt, spans = EXAMPLE.prompt()
    # the template's reply opener "was" runs into the response's text ("wasthe
    # mat"): the package reads other tokens, yet scores the response as given
    citer = make_citer(model, tok, prompt, spans, response, num_ablations=8)
    assert citer.misread is not None and citer._response_ids == response
    logit_probs = citer._logit_probs  # its ablated passes: given tokens, each
    assert logit_probs.shape == (8, len(response))
    keep = torch.as_tensor(citer._masks[0].astype(bool))
    ll = CausalLMLogLikelihood(model)
    ids = prompt_ids_of(tok, prompt, spans, True)
    (total,) = response_log_probs(ll, ids, response, keep[None])
    found = torch.nn.functional.logsigmoid(torch.as_tensor(logit_probs[0])).sum()
    assert float(found) == pytest.approx(float(total), abs=1e-4)  # its log p
    assert torch.isfinite(citer_scores(citer)).all()
    with pytest.raises(ResponseMismatch, match="a part of it cannot be given"):
        citer_scores(citer, (0, 1))
    tok = copy.deepcopy(tok)
    tok.chat_template = TEMPLATE.replace("was{%", "was {%")
    scores = context_cite_scores(model, tok, prompt, spans, response, num_ablations=8)
    assert scores.shape == (3,) and torch.isfinite(scores).all()
    again = context_cite_scores(model, tok, prompt, spans, response, num_ablations=8)
    assert torch.equal(scores, again)  # its ablations are seeded
    with pytest.raises(ValueError, match="at least two"):
        context_cite_scores(model, tok, prompt, spans[:1], response)


def test_amortized_transfer_names_a_prompt_task(study, tmp_path, monkeypatch):
    """``iba-amortized-from-<task>``: an unknown task is refused before the
    model loads; a known one with no cached explainer names the command that
    fits it when the scorer is made."""
    from captum_iba.app.errors import CLIError
    from captum_iba.app.finetune.recipes import CACHE_ENV_VAR
    from tests.copy_model import copy_tokenizer
    from tests.helpers import tiny_causal_lm

    with pytest.raises(SystemExit, match="'nope' is not a prompt task"):
        study.amortized_scorers(["iba-amortized-from-nope"])
    makers = study.amortized_scorers(["iba-amortized-from-sst2", "random"])
    assert list(makers) == ["iba-amortized-from-sst2"]
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path))
    model = tiny_causal_lm("llama", layers=1, positions=64)
    with pytest.raises(
        CLIError,
        match="python -m captum_iba_lab.amortized_lm --model MODEL --task sst2",
    ):
        makers["iba-amortized-from-sst2"](model, copy_tokenizer())


def test_iba_steps_names_the_record_and_sets_the_steps(study, lm):
    """--iba-steps K: iba-deletion and iba-sources run with K steps under
    ``<method>-steps<K>``; any other method, or no K, keeps its own."""
    model, tok = lm
    assert study._stepped("iba-sources", 1) == "iba-sources-steps1"
    assert study._stepped("iba-deletion", None) == "iba-deletion"
    assert study._stepped("random", 1) == "random"
    made = study.stepped_scorers(["iba-sources", "random"], 1)
    assert set(made) == {"iba-sources-steps1"}
    scorer = made["iba-sources-steps1"](model, tok)
    assert scorer.options.steps == 1 and scorer.options.mask == "source"
    assert study.stepped_scorers(["iba-sources"], None) == {}


def test_iba_surrogate_k_names_its_ablations(study, lm):
    model, tok = lm
    made = study.surrogate_scorers(
        ["iba-surrogate-5", "iba-surrogate-6-log-odds", "random"]
    )
    assert set(made) == {"iba-surrogate-5", "iba-surrogate-6-log-odds"}
    five, six = (made[m](model, tok).settings for m in sorted(made))
    assert (five["n_ablations"], five["outcome"]) == (5, "ranks")
    assert (six["n_ablations"], six["outcome"]) == (6, "log-odds")
    for bad in ("iba-surrogate-1", "iba-surrogate-x", "iba-surrogate-5-ranks"):
        with pytest.raises(SystemExit, match="k >= 2 ablations"):
            study.surrogate_scorers([bad])


def test_the_plot_draws_each_method_at_its_best_pooling(tables):
    """One point per method: its pooling with the highest mean LDS (None
    and non-finite values left out); a method scoring sources as such, its
    own row."""
    table = {
        "iba-deletion (sum)": {"lds": [0.1, 0.2]},
        "iba-deletion (max)": {"lds": [0.7, None, 0.5]},
        "iba-deletion (mean)": {"lds": [0.5, 0.6]},
        "loso": {"lds": [0.3]},
    }
    assert tables.best_pooling(table) == ["iba-deletion (max)", "loso"]


def test_the_plot_draws_at2_at_its_best_budget_saying_of_how_many(tables):
    """AT2's budgets cost the same per example: the plot keeps the one of
    highest mean LDS, its label naming how many there were; other methods
    (ContextCite's ablation counts differ in cost) each keep their point."""
    table = {
        "at2-5": {"lds": [0.6]},
        "at2-2048": {"lds": [0.7]},
        "at2-64": {"lds": [0.4]},
        "contextcite-4": {"lds": [0.5]},
        "contextcite-32": {"lds": [0.9]},
        "iba-amortized-ctx-32 (max)": {"lds": [0.5]},
        "iba-amortized-ctx-128 (logit-max)": {"lds": [0.6]},
        "iba-amortized-ctx-context-topics-128 (mean)": {"lds": [0.3]},
    }
    assert tables.one_budget(list(table), table) == {
        "at2-2048": "at2-2048 (best of 3 budgets)",
        "contextcite-4": "contextcite-4",
        "contextcite-32": "contextcite-32",
        # an explainer's budgets likewise; one fitted on another task apart
        "iba-amortized-ctx-128 (logit-max)": "iba-amortized-ctx-128 (logit-max) "
        "(best of 2 budgets)",
        "iba-amortized-ctx-context-topics-128 (mean)": (
            "iba-amortized-ctx-context-topics-128 (mean)"
        ),
    }
    assert tables.one_budget(["at2-5"], table) == {"at2-5": "at2-5"}


def test_a_context_explainer_fits_and_scores_the_sources(study, lm, tmp_path):
    """``experiments/fit_context_explainer.py`` fits an explainer on context
    examples with their responses, saved where ``iba-amortized-ctx-<n>``
    finds it; the study scores the sources with it (every pooling); a
    missing one names the fitting command before any model loads."""
    fit = experiment("fit_context_explainer")
    model, tok = lm
    folder = fit.explainer_path("org/tiny", "context-facts", 2, folder=tmp_path)
    assert folder == tmp_path / "tiny-context-facts-n2-distil-t1"
    other = ContextExample(EXAMPLE.sources[::-1], "a dog is", 1, "park", "toy")
    explainer, seconds = fit.fit_context_explainer(
        model, tok, [EXAMPLE, other], folder, epochs=1, batch_size=2,
        max_new_tokens=3,
    )  # fmt: skip
    assert (folder / "explainer.json").is_file() and seconds["fit_cpu_seconds"] > 0
    assert explainer.stats["instances"] == 2
    args = argparse.Namespace(
        model="org/tiny", explainer_task="context-facts", explainer_objective="distil",
        teacher_steps=1, explainer_dir=str(tmp_path),
    )  # fmt: skip
    makers = study.context_explainer_scorers(args, ["iba-amortized-ctx-2", "random"])
    assert list(makers) == ["iba-amortized-ctx-2"]
    scorers = {"iba-amortized-ctx-2": makers["iba-amortized-ctx-2"](model, tok)}
    rows = study.study_example(model, tok, EXAMPLE, scorers, max_new_tokens=3)
    pooled = rows["iba-amortized-ctx-2"]["pooled"]
    assert {"max", "logit-max"} <= set(pooled)
    assert all(len(p["scores"]) == 3 for p in pooled.values())
    with pytest.raises(SystemExit, match=r"fit_context_explainer.py .*--n 3 "):
        study.context_explainer_scorers(args, ["iba-amortized-ctx-3"])
    with pytest.raises(SystemExit, match="n its contexts"):
        study.context_explainer_scorers(args, ["iba-amortized-ctx-x"])
    with pytest.raises(SystemExit, match="task one of context-facts"):
        study.context_explainer_scorers(args, ["iba-amortized-ctx-nope-2"])
    # another task's explainer, named in the method
    with pytest.raises(SystemExit, match="--task context-topics --n 2 "):
        study.context_explainer_scorers(args, ["iba-amortized-ctx-context-topics-2"])
    explicit = study.context_explainer_scorers(
        args, ["iba-amortized-ctx-context-facts-2"]
    )
    assert list(explicit) == ["iba-amortized-ctx-context-facts-2"]


def test_the_paired_table_takes_each_anchor_once(tables):
    """ContextCite is an anchor by default; naming it with --anchor too
    gives its rows once, each difference the method's mean minus the
    anchor's on the examples both hold."""
    table = {
        "contextcite-32": {"lds": [0.8, 0.9], "top1": [1, 1], "drop1": [2.0, 3.0]},
        "iba-surrogate-16": {"lds": [0.9, 0.9], "top1": [1, 0], "drop1": [2.0, 1.0]},
    }
    lines = tables.paired_table(table, ["contextcite-32"]).splitlines()
    assert len(lines) == 3, lines
    assert lines[2].startswith("| iba-surrogate-16 | contextcite-32 | 2 | +0.050")


def test_pooled_runs_pair_context_by_context(tables):
    """Several runs pooled: only the methods every run holds, and in each
    run only the contexts all of them hold, sorted by index, run after run -
    so a method's i-th row and another's are the same context."""

    def rows(*indices):
        return [{"index": i, "lds": i / 10} for i in indices]

    one = {
        "contextcite-32": rows(1, 0, 2),
        "iba-surrogate-16": rows(0, 1),
        "x": rows(0),
    }
    two = {"contextcite-32": rows(0, 1), "iba-surrogate-16": rows(1, 0)}
    found = tables.pooled([one, two])
    assert sorted(found) == ["contextcite-32", "iba-surrogate-16"]
    for method in found:
        assert [r["index"] for r in found[method]] == [0, 1, 0, 1]
    with pytest.raises(SystemExit, match="no method is in every"):
        tables.pooled([one, {"y": rows(0)}])


def test_runs_resume_by_index_and_start_where_asked(study, tmp_path):
    """run_examples scores each example's methods its records lack (by
    index: a method added later runs on every example, none twice), and
    --start leaves the earlier examples to another process."""
    calls = []

    def score(i, example, todo):
        calls.append((i, tuple(todo)))
        row = dict(pooled={"-": dict(lds=0.5 + i / 10, top1=True, drops={})},
                   cpu_seconds=1.0, n_sources=3, response="r")  # fmt: skip
        return {m: row for m in todo}

    out = tmp_path / "context-facts" / "report"
    out.mkdir(parents=True)
    examples = [EXAMPLE] * 3
    study.run_examples(out, ["a", "b"], examples[:2], score)
    assert calls == [(0, ("a", "b")), (1, ("a", "b"))]
    calls.clear()
    study.run_examples(out, ["a", "b", "c"], examples, score)
    assert calls == [(0, ("c",)), (1, ("c",)), (2, ("a", "b", "c"))]
    for m in "abc":
        rows = json.loads((out / f"{m}.json").read_text())
        assert [r["index"] for r in rows] == [0, 1, 2]
    calls.clear()
    study.run_examples(out, ["d"], examples, score, start=2)
    assert calls == [(2, ("d",))]
