"""AT2 as an anchor of context attribution (issue 51) on a tiny Llama: its own
trainer runs on a few ablations and saves the weights, the loader refuses a
missing file and another model's weights, and the scores are one per source
for the given response. Skipped without the ``at2`` package, except the
install message."""

import copy
import math
import sys
from types import SimpleNamespace

import pytest
import torch

from captum_iba._utils.io import CACHE_ENV_VAR
from captum_iba.attr.llm_batch import prompt_batch
from captum_iba.evaluation import Resources, build_scorers
from captum_iba.evaluation.sources import pool_sources, with_sources
from tests.helpers import no_hooks, study_module, tiny_causal_lm, tiny_word_tokenizer

#: A chat template of known words (the reply's opener ends with a space).
TEMPLATE = (
    "{% for m in messages %}very {{ m['content'] }} <eos> {% endfor %}"
    "{% if add_generation_prompt %}was {% endif %}"
)
SOURCES = ("the cat sat on the mat", "a dog ran in the park", "the big red cat")
EXAMPLES = [
    (SOURCES, "the cat is"),
    (("a small dog", "the cat ran", "the mat is blue"), "the dog is"),
    (("the park is big", "a cat sat", "the red dog"), "the park is"),
    (("the dog was very small", "a mat is red"), "the mat is"),
]


@pytest.fixture(scope="module")
def lm():
    tok = tiny_word_tokenizer()
    tok.chat_template = TEMPLATE
    return tiny_causal_lm("llama", layers=2, positions=128), tok


@pytest.fixture(scope="module")
def trained(lm, tmp_path_factory):
    """AT2's weights trained on the tiny Llama: 4 examples x 4 ablations,
    saved in ``<a cache>/at2`` (where the method ``at2`` looks)."""
    pytest.importorskip("at2")
    training = study_module("at2_training")
    at2_trainer, train_at2 = training.at2_trainer, training.train_at2

    model, tok = lm
    folder = tmp_path_factory.mktemp("cache") / "at2"
    trainer, seconds = at2_trainer(
        model, tok, EXAMPLES, folder / "work", ablations=4, max_new_tokens=3
    )
    path = folder / "tiny.pt"
    estimator = train_at2(trainer, 4, path, {"task": "toy"}, iterations=5)
    return estimator, path, seconds, trainer


def test_without_the_package_the_install_is_named(monkeypatch, lm):
    from captum_iba_lab.at2 import at2_scores

    model, tok = lm
    monkeypatch.setitem(sys.modules, "at2", None)
    with pytest.raises(ImportError, match="pip install at2"):
        at2_scores(model, tok, SOURCES, "the cat is", [4, 5], estimator=None)


def test_training_runs_and_saves_the_weights(lm, trained, tmp_path):
    from captum_iba_lab.at2 import load_at2

    model, _ = lm
    estimator, path, seconds, trainer = trained
    assert no_hooks(model)  # transformers' hooks for the hidden states, removed
    assert path.is_file() and len(seconds) == len(EXAMPLES)
    assert all(s >= 0 for s in seconds)
    # one weight per attention head (2 layers x 2 heads), L1-normalised by AT2
    weight = estimator.linear.weight.detach()
    assert weight.shape == (1, 4) and torch.isfinite(weight).all()
    assert torch.isclose(weight.abs().sum(), torch.tensor(1.0))
    loaded = load_at2(path, model)
    assert torch.equal(loaded.linear.weight, estimator.linear.weight)
    # trained: no longer the starting point (every head 1/4)
    assert not torch.allclose(weight, torch.full_like(weight, 0.25))
    assert loaded.kwargs["extras"]["n"] == 4
    assert loaded.kwargs["extras"]["task"] == "toy"
    # budget 0: the package's starting point, every head the same weight
    train_at2 = study_module("at2_training").train_at2

    untrained = train_at2(trainer, 0, tmp_path / "zero.pt")
    assert torch.allclose(untrained.linear.weight, torch.full((1, 4), 0.25))
    assert load_at2(tmp_path / "zero.pt", model).kwargs["extras"]["n"] == 0
    with pytest.raises(ValueError, match="n must be 0..4"):
        train_at2(trainer, 5, tmp_path / "five.pt")


def test_the_loader_refuses_another_model_and_a_missing_file(lm, trained, tmp_path):
    from captum_iba_lab.at2 import load_at2

    path = trained[1]
    for other in (tiny_causal_lm("llama", layers=3), tiny_causal_lm("llama", seed=1)):
        with pytest.raises(ValueError, match="trained for another model") as err:
            load_at2(path, other)
        assert str(path) in str(err.value) and "train_at2.py" in str(err.value)
    missing = tmp_path / "none.pt"
    with pytest.raises(FileNotFoundError, match="train_at2.py") as err:
        load_at2(missing, lm[0])
    assert str(missing) in str(err.value)


def test_scores_are_one_per_source_for_the_given_response(lm, trained):
    from captum_iba_lab.at2 import at2_scores

    model, tok = lm
    estimator = trained[0]
    response = tok.encode("the mat", add_special_tokens=False)
    scores = at2_scores(model, tok, SOURCES, "the cat is", response, estimator)
    assert scores.shape == (3,) and scores.dtype == torch.float64
    assert torch.isfinite(scores).all()
    again = at2_scores(model, tok, SOURCES, "the cat is", response, estimator)
    assert torch.equal(scores, again)
    two = at2_scores(model, tok, SOURCES[:2], "the cat is", response, estimator)
    assert two.shape == (2,)
    with pytest.raises(ValueError, match="at least two"):
        at2_scores(model, tok, SOURCES[:1], "the cat is", response, estimator)
    with pytest.raises(ValueError, match="empty"):
        at2_scores(model, tok, SOURCES, "the cat is", [], estimator)
    base = tiny_word_tokenizer()  # no chat template: AT2 cannot read it
    with pytest.raises(ValueError, match="chat template; this tokenizer has none"):
        at2_scores(model, base, SOURCES, "the cat is", response, estimator)


def test_a_response_read_as_other_tokens_is_refused(lm, trained):
    from captum_iba_lab.at2 import at2_scores

    model, tok = lm
    tok = copy.deepcopy(tok)
    # the reply's opener "was" runs into the response's text ("wasthe mat")
    tok.chat_template = TEMPLATE.replace("was {%", "was{%")
    response = tok.encode("the mat", add_special_tokens=False)
    with pytest.raises(ValueError, match="reads the response as other tokens"):
        at2_scores(model, tok, SOURCES, "the cat is", response, trained[0])


def test_an_unknown_model_family_is_refused_before_any_work(lm, tmp_path):
    pytest.importorskip("at2")
    at2_trainer = study_module("at2_training").at2_trainer

    tok = lm[1]
    with pytest.raises(ValueError, match="gpt2"):
        at2_trainer(tiny_causal_lm("gpt2"), tok, EXAMPLES, tmp_path)


def _sourced_batch(tok):
    from captum_iba_lab.at2 import layout

    laid = [layout(SOURCES, "the cat is"), layout(EXAMPLES[3][0], "the mat is")]
    batch = prompt_batch(tok, [p for p, _ in laid], ["the mat", "red"], chat=True)
    return with_sources(tok, batch, [s for _, s in laid], chat=True)


def test_the_method_fills_the_source_scores(lm, trained, monkeypatch):
    """The registered method finds the weights trained for the model in the
    cache, gives AT2's source scores per prompt (NaN past a prompt's
    sources), token scores that sum to them, and leaves the model as it was."""
    from captum_iba_lab.at2 import at2_scores

    model, tok = lm
    estimator, path = trained[:2]
    monkeypatch.setenv(CACHE_ENV_VAR, str(path.parent.parent))
    scorer = build_scorers(["at2"], Resources(model, tok), kind="causal-lm")["at2"]
    assert scorer.settings["weights"] == str(path)
    batch = _sourced_batch(tok)
    found = scorer.attribute(batch, per_token=True)
    assert found.sources.shape == (2, 3) and math.isnan(found.sources[1, 2])
    for b, (sources, query, answer) in enumerate(
        [(SOURCES, "the cat is", "the mat"), (EXAMPLES[3][0], "the mat is", "red")]
    ):
        ids = tok.encode(answer, add_special_tokens=False)
        expected = at2_scores(model, tok, sources, query, ids, estimator)
        assert torch.allclose(found.sources[b, : len(sources)], expected)
    pooled = pool_sources(found.answer, batch.sources, batch.n_sources, "sum")
    assert torch.allclose(pooled[0], found.sources[0], atol=1e-5)
    assert (found.answer[~batch.scored] == 0).all()
    assert found.tokens.shape == (2, 2, batch.input_ids.shape[1])
    assert no_hooks(model) and not model.training


def test_the_method_scores_a_prompt_task_s_content_of_one_word(
    lm, trained, monkeypatch
):
    """On a prompt task a content of one word is one source (scorer_batch):
    AT2 scores it, its tokens' scores summing to it."""
    from captum_iba.evaluation.llm_loop import scorer_batch

    model, tok = lm
    monkeypatch.setenv(CACHE_ENV_VAR, str(trained[1].parent.parent))
    scorer = build_scorers(["at2"], Resources(model, tok), kind="causal-lm")["at2"]
    prompt = "the big cat is"
    batch = prompt_batch(tok, [prompt], ["the mat"], chat=True)
    given = scorer_batch(scorer, tok, batch, [(8, 11)], chat=True)
    found = scorer.attribute(given)
    assert found.sources.shape == (1, 1) and torch.isfinite(found.sources).all()
    pooled = pool_sources(found.answer, given.sources, 1, "sum")
    assert torch.allclose(pooled[0], found.sources[0], atol=1e-5)


def test_the_method_refuses_a_batch_without_sources_or_weights(
    lm, trained, monkeypatch, tmp_path
):
    model, tok = lm
    monkeypatch.setenv(CACHE_ENV_VAR, str(trained[1].parent.parent))
    scorer = build_scorers(["at2"], Resources(model, tok), kind="causal-lm")["at2"]
    plain = prompt_batch(tok, ["the cat sat"], ["the mat"], chat=True)
    with pytest.raises(ValueError, match="with_sources"):
        scorer.attribute(plain)
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path))
    with pytest.raises(FileNotFoundError, match="train_at2.py"):
        build_scorers(["at2"], Resources(model, tok), kind="causal-lm")


def test_the_context_study_runs_at2_from_its_weights(lm, trained, tmp_path):
    """``at2-<n>`` in experiments/context_study.py: a missing file is refused
    before the model loads, naming the training command; with the weights,
    one example's row has AT2's own source scores and metrics."""
    import argparse

    from tests.evaluation.test_context_study import EXAMPLE
    from tests.helpers import experiment

    study = experiment("context_study")
    args = argparse.Namespace(model="tiny", at2_task="toy", at2_dir=str(tmp_path))
    with pytest.raises(SystemExit, match="train_at2.py --model tiny --task toy --n 4"):
        study.at2_scorers(args, ["random", "at2-4"])
    with pytest.raises(SystemExit, match="at2-<n>"):
        study.at2_scorers(args, ["at2-x"])
    model, tok = lm
    (tmp_path / "tiny-toy-n4-a32.pt").write_bytes(trained[1].read_bytes())
    makers = study.at2_scorers(args, ["random", "at2-4"])
    assert set(makers) == {"at2-4"}
    scorer = makers["at2-4"](model, tok)
    rows = study.study_example(
        model, tok, EXAMPLE, {"at2-4": scorer}, number=7, max_new_tokens=3
    )
    row = rows["at2-4"]
    assert set(row["pooled"]) == {"-"} and len(row["pooled"]["-"]["scores"]) == 3
    assert math.isfinite(row["pooled"]["-"]["lds"])


def test_training_on_laid_out_prompts_takes_their_spans(lm, tmp_path):
    """``laid=True``: the examples are prompts laid out already with their
    sources' characters (a prompt task's content words), trained on as
    given; one-token responses."""
    pytest.importorskip("at2")
    from captum_iba_lab.at2 import layout

    training = study_module("at2_training")
    at2_trainer, train_at2 = training.at2_trainer, training.train_at2

    model, tok = lm
    laid = [layout(sources, query) for sources, query in EXAMPLES]
    laid[3] = ("the dog was small", [(4, 7)])  # one source
    trainer, seconds = at2_trainer(
        model, tok, laid, tmp_path / "work", ablations=4, max_new_tokens=1, laid=True
    )
    assert len(seconds) == 4
    for i, (prompt, spans) in enumerate(laid):
        data = trainer.dataset[i]
        assert data["prompt"] == prompt and data["spans"] == [list(s) for s in spans]
    estimator = train_at2(trainer, 4, tmp_path / "laid.pt", iterations=5)
    assert torch.isfinite(estimator.linear.weight).all()


def test_the_training_script_lays_out_a_prompt_task(monkeypatch):
    """``--task sst2``: the task's training prompts (``--seed``'s sample of
    ``--pool``) with their content's words as sources, laid out already,
    as the degradation test gives them (no chat for SmolLM2's completion
    tasks), answered in one token; its store is named without passages."""
    from captum_iba.app.llm_tasks import TaskExamples
    from tests.helpers import experiment

    script = experiment("train_at2")
    args = script.parse(["--task", "sst2", "--n", "2", "--pool", "2", "--work", "w"])
    assert script.work_folder(args).name == "SmolLM2-135M-Instruct-sst2-s1000-a32-p2"
    asked = {}

    def examples(task, split, tok, n, seed=0):
        asked.update(corpus=task.corpus, split=split, n=n, seed=seed)
        prompts = ["Review: a fine film\nSentiment:", "Review: dull\nSentiment:"]
        return TaskExamples(prompts, [(8, 19), (8, 12)], ["a", "b"], [1, 0], [0, 1])

    monkeypatch.setattr(script, "task_examples", examples)
    tok = tiny_word_tokenizer()
    tok.chat_template = TEMPLATE
    read = script.laid_examples(args, tok)
    assert asked == dict(corpus="sst2", split="train", n=2, seed=1000)
    assert read["laid"] and read["max_new_tokens"] == 1 and read["chat"] is False
    assert read["examples"][0][1] == [(8, 9), (10, 14), (15, 19)]
    assert read["examples"][1][1] == [(8, 12)]


def test_the_training_script_checks_its_budgets_before_loading(capsys):
    from tests.helpers import experiment

    script = experiment("train_at2")
    args = script.parse(["--n", "16,4,8", "--pool", "16"])
    assert args.budgets == [4, 8, 16] and args.source_range == (3, 6)
    for bad in (["--n", "8,x"], ["--n", "32", "--pool", "16"], ["--ablations", "1"]):
        with pytest.raises(SystemExit):
            script.parse(bad)
    assert "--n must be 0..--pool" in capsys.readouterr().err


def test_the_training_script_refuses_a_store_of_another_batch_before_loading(
    tmp_path, monkeypatch
):
    """A store begun with one ``--generate-batch`` resumed with another is
    refused, naming the store, before AT2 is imported or a model loads;
    ``--device cuda`` without CUDA and a batch below 1 are refused by the
    parser."""
    from tests.helpers import experiment

    script = experiment("train_at2")
    argv = ["--pool", "4", "--n", "4", "--work", str(tmp_path), "--generate-batch", "2"]
    store = script.work_folder(script.parse(argv)) / "generations"
    store.mkdir(parents=True)
    (store / "0_of_4.json").write_text("{}")  # begun one response a job
    monkeypatch.setattr(script, "import_at2", lambda: pytest.fail("imported AT2"))
    with pytest.raises(SystemExit, match="another generate_batch") as err:
        script.main(argv)
    assert str(store.parent) in str(err.value)
    for bad in (["--generate-batch", "0"], ["--ablation-batch", "0"]):
        with pytest.raises(SystemExit):
            script.parse(bad)
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit):
            script.parse(["--device", "cuda"])


def test_the_training_script_takes_passages_as_every_context_command(capsys, tmp_path):
    """``--passages LOW-HIGH`` as ``evaluate --task`` and the study take it
    (``parse_passages``); ``--sources LOW,HIGH`` still works with a warning
    naming ``--passages``; the store and the weights keep their names."""
    from captum_iba_lab.at2 import at2_weights_path

    from tests.helpers import experiment

    script = experiment("train_at2")
    assert script.parse(["--passages", "4-8"]).source_range == (4, 8)
    default = script.parse(["--work", str(tmp_path)])
    assert script.work_folder(default) == tmp_path / (
        "SmolLM2-135M-Instruct-context-facts-s1000-a32-p16-x3-6"
    )
    assert at2_weights_path(default.model, default.task, 16, 32, tmp_path) == (
        tmp_path / "SmolLM2-135M-Instruct-context-facts-n16-a32.pt"
    )
    with pytest.warns(FutureWarning, match="write --passages 4-8"):
        assert script.parse(["--sources", "4,8"]).source_range == (4, 8)
    for bad, says in (
        (["--passages", "6-3"], "--passages 6-3: give MIN-MAX"),
        (["--passages", "3,6"], "--passages 3,6: give MIN-MAX"),
        (["--passages", "3-6", "--sources", "3,6"], "give --passages only"),
    ):
        with pytest.raises(SystemExit):
            script.parse(bad)
        assert says in capsys.readouterr().err


def test_the_cpu_seconds_of_two_workers_merge(tmp_path):
    """Each worker keeps its own record; a cached call (about 0 s) never
    hides the call that did the work."""
    import json

    _Seconds = study_module("at2_training")._Seconds

    first, second = _Seconds(tmp_path, 3), _Seconds(tmp_path, 3, first=2)
    first.add(0, "response", 4.0)
    first.add(0, "ablations", 60.0)
    first.add(2, "response", 3.0)
    second.add(2, "response", 0.001)  # cached by the first worker
    second.add(2, "ablations", 50.0)
    first.add(1, "response", 0.25)  # a fast example (a GPU's): each part kept
    first.add(1, "ablations", 0.125)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "cpu_seconds.json",
        "cpu_seconds_2.json",
    ]
    assert _Seconds(tmp_path, 3).totals() == [64.0, 0.375, 53.0]
    assert json.loads((tmp_path / "cpu_seconds_2.json").read_text())["2"] == {
        "response": 0.001,
        "ablations": 50.0,
    }


def test_batched_responses_equal_one_at_a_time_and_a_store_keeps_its_batch(
    lm, trained, tmp_path
):
    """``generate_batch`` generates several responses a pass, left-padded
    (the package's batched generation reads each prompt as ending where the
    batch's does): the same responses as one at a time; the tokenizer's
    padding side is restored; a store begun with another batch is refused;
    ``stop_after=0`` ablates nothing; the wall-seconds are recorded."""
    training = study_module("at2_training")
    AblationPlan, at2_trainer = training.AblationPlan, training.at2_trainer
    wall_seconds = training.wall_seconds

    model, tok = lm
    one = trained[3]
    side = tok.padding_side
    tok.padding_side = "right"  # the side that would misread a batch
    try:
        work = tmp_path / "work"
        batched, _ = at2_trainer(
            model, tok, EXAMPLES, work, ablations=4, max_new_tokens=3,
            plan=AblationPlan(generate_batch=3, stop_after=0.0),
        )  # fmt: skip
        assert tok.padding_side == "right"
    finally:
        tok.padding_side = side
    assert batched.generations == one.generations
    assert not any(batched.is_features_and_outputs_completed(i) for i in range(4))
    walls = wall_seconds(work, len(EXAMPLES))
    assert len(walls) == 4 and all(w > 0 for w in walls)  # the responses' share
    with pytest.raises(ValueError, match="another generate_batch") as err:
        at2_trainer(model, tok, EXAMPLES, work, ablations=4, max_new_tokens=3)
    assert str(work) in str(err.value)


def test_the_training_script_writes_each_budgets_costs_beside_its_weights(
    tmp_path, monkeypatch, capsys
):
    """Each budget's CPU-seconds are its first ``n`` ablated examples'
    plus its fit's, printed and written beside its weights (``at2_fit_path``)
    with the CPU's kind; a budget past the examples ablated is refused."""
    import json

    from captum_iba_lab.at2 import at2_weights_path

    from tests.helpers import experiment

    at2_fit_path = study_module("at2_training").at2_fit_path
    script = experiment("train_at2")
    argv = ["--task", "sst2", "--n", "1,2", "--pool", "3", "--out", str(tmp_path)]
    args = script.parse(argv + ["--work", str(tmp_path / "w")])
    trainer = SimpleNamespace(is_features_and_outputs_completed=lambda i: i < 2)
    monkeypatch.setattr(script, "wall_seconds", lambda work, pool: {0: 1.0, 1: 2.0})
    trained = []
    monkeypatch.setattr(
        script, "train_at2", lambda tr, n, path, extras, **kw: trained.append(n)
    )
    script.train_budgets(args, trainer, {0: 10.0, 1: 20.0}, tmp_path / "w")
    assert trained == [1, 2]
    for n, data in ((1, 10.0), (2, 30.0)):
        path = at2_fit_path(at2_weights_path(args.model, "sst2", n, 32, tmp_path))
        stats = json.loads(path.read_text())
        assert stats["ablation_cpu_seconds"] == data and stats["n"] == n
        assert data <= stats["cpu_seconds"] < data + 5  # the fit: a fake, no work
        assert stats["cpu"] == torch.backends.cpu.get_cpu_capability()
    assert '"n": 2' in capsys.readouterr().out
    args.budgets = [3]
    with pytest.raises(SystemExit, match="budget 3: only 2 examples"):
        script.train_budgets(args, trainer, {0: 10.0, 1: 20.0}, tmp_path / "w")


def stub_at2(monkeypatch):
    """A stand-in for AT2's package where only its loader is needed: its
    ``AT2ScoreEstimator.load`` reads a file's extras as the package keeps
    them (``estimator.kwargs["extras"]``)."""
    import types

    class AT2ScoreEstimator:
        def __init__(self, extras):
            self.kwargs = {"extras": extras}

        @classmethod
        def load(cls, path, device="cpu"):
            return cls(
                torch.load(path, map_location=device, weights_only=True)["extras"]
            )

    at2 = types.ModuleType("at2")
    at2.tasks = types.ModuleType("at2.tasks")
    at2.AT2ScoreEstimator = AT2ScoreEstimator
    monkeypatch.setitem(sys.modules, "at2", at2)
    monkeypatch.setitem(sys.modules, "at2.tasks", at2.tasks)
    return at2


class SavedHeads:
    """AT2's estimator as far as saving goes: its format, a dict of tensors,
    numbers and strings with the extras beside the weights."""

    def save(self, path, extras):
        torch.save({"weight": torch.full((1, 4), 0.25), "extras": extras}, path)


def _fine_tune(model):
    """A fine-tune of ``model`` that kept (froze) its embeddings: one layer's
    weights moved."""
    tuned = copy.deepcopy(model)
    with torch.no_grad():
        tuned.model.layers[1].mlp.up_proj.weight.add_(0.01)
    return tuned


def test_the_fingerprint_covers_every_weight(lm):
    """Issue 79 item 1: the fingerprint hashed the shape and the first 4 x 16
    embedding values, so a fine-tune that kept its embeddings matched its
    parent; now every weight counts (computed once while the model is
    unchanged)."""
    from captum_iba_lab.at2 import FINGERPRINT_MARK, model_fingerprint

    model = lm[0]
    tuned = _fine_tune(model)
    other = tiny_causal_lm("llama", layers=2, positions=128, seed=1)
    with torch.no_grad():  # another model with the same embeddings
        other.model.embed_tokens.weight.copy_(model.model.embed_tokens.weight)
    mine = model_fingerprint(model)
    assert mine.startswith(FINGERPRINT_MARK)
    assert model_fingerprint(copy.deepcopy(model)) == mine  # the same weights
    assert len({mine, model_fingerprint(tuned), model_fingerprint(other)}) == 3
    before = model_fingerprint(tuned)
    with torch.no_grad():  # trained further in place: recomputed
        tuned.model.layers[0].self_attn.q_proj.weight.mul_(1.5)
    assert model_fingerprint(tuned) not in (before, mine)


def test_weights_of_a_model_are_refused_for_its_fine_tune(lm, tmp_path, monkeypatch):
    """Issue 79 item 1: weights saved for a model were found and loaded for a
    fine-tune that kept its embeddings (its parent's head weights, without a
    word); both the search and the loader refuse them now."""
    from captum_iba_lab.at2 import find_at2_weights, load_at2
    from captum_iba_lab.at2_taught import save_at2_weights

    stub_at2(monkeypatch)
    model = lm[0]
    tuned = _fine_tune(model)
    path = tmp_path / "parent.pt"
    save_at2_weights(SavedHeads(), model, path, {"n": 4, "ablations": 8})
    assert find_at2_weights(model, tmp_path) == path
    assert load_at2(path, model).kwargs["extras"]["n"] == 4
    with pytest.raises(FileNotFoundError, match="no AT2 weights for this model"):
        find_at2_weights(tuned, tmp_path)
    with pytest.raises(ValueError, match="trained for another model") as err:
        load_at2(path, tuned)
    said = str(err.value)
    assert "train_at2.py --model MODEL --task TASK --n 4 --ablations 8" in said


def test_weights_saved_with_the_older_fingerprint_are_refused(
    lm, tmp_path, monkeypatch
):
    """Issue 79 item 1: a file of the older fingerprint (shape and first
    embedding values, which a fine-tune shares with its parent) never
    matches: refused, saying why and how to train (or teach) it again."""
    from captum_iba_lab.at2 import (
        _older_fingerprint,
        find_at2_weights,
        load_at2,
    )

    stub_at2(monkeypatch)
    model = lm[0]
    older = _older_fingerprint(model)
    assert older == _older_fingerprint(_fine_tune(model))  # why it was replaced
    own, taught = tmp_path / "own.pt", tmp_path / "taught.pt"
    SavedHeads().save(own, {"model": older, "n": 16, "ablations": 32})
    SavedHeads().save(taught, {"model": older, "n": 2, "teacher": "iba-x"})
    with pytest.raises(ValueError, match="saved by an older version") as err:
        load_at2(own, model)
    said = str(err.value)
    assert str(own) in said and "could not tell a fine-tune from its parent" in said
    assert "train them again with python experiments/train_at2.py" in said
    assert "--n 16 --ablations 32" in said
    with pytest.raises(
        ValueError, match="teach them again with python experiments/teach_at2.py"
    ):
        load_at2(taught, model)
    with pytest.raises(FileNotFoundError, match="saved by an older version") as err:
        find_at2_weights(model, tmp_path)
    assert str(own) in str(err.value) and str(taught) not in str(err.value)
    assert "train them (again) with" in str(err.value)
    with pytest.raises(FileNotFoundError, match=f"{taught}: saved by an older"):
        find_at2_weights(model, tmp_path, teacher="iba-x")
    SavedHeads().save(tmp_path / "bare.pt", {"n": 1})  # no fingerprint at all
    with pytest.raises(ValueError, match="record no model's fingerprint"):
        load_at2(tmp_path / "bare.pt", model)


def test_a_damaged_weights_file_is_warned_of_and_named(lm, tmp_path, monkeypatch):
    """Issue 79 item 3: a damaged file was skipped without a word (another
    budget's weights used), and when it was the only one the message said
    "no AT2 weights for this model" without naming it. Each damaged file is
    warned of in one line; a file torch reads that is not AT2's is skipped
    without a word; the loader names a damaged file."""
    from captum_iba_lab.at2 import find_at2_weights, load_at2
    from captum_iba_lab.at2_taught import save_at2_weights

    stub_at2(monkeypatch)
    model = lm[0]
    small, large = tmp_path / "n4.pt", tmp_path / "n16.pt"
    save_at2_weights(SavedHeads(), model, small, {"n": 4, "ablations": 32})
    save_at2_weights(SavedHeads(), model, large, {"n": 16, "ablations": 32})
    large.write_bytes(large.read_bytes()[:100])  # cut short
    torch.save({"weight": torch.ones(2)}, tmp_path / "other.pt")  # not AT2's
    with pytest.warns(UserWarning) as caught:
        assert find_at2_weights(model, tmp_path) == small
    (said,) = [str(w.message) for w in caught]
    assert said.startswith(f"the AT2 weights file {large} cannot be read (")
    assert said.endswith("); skipped") and "\n" not in said
    small.unlink()
    with pytest.warns(UserWarning, match="cannot be read"):
        with pytest.raises(FileNotFoundError) as err:
            find_at2_weights(model, tmp_path)
    said = str(err.value)
    assert said.startswith("no AT2 weights for this model")
    assert f"; {large}: cannot be read: train them (again) with" in said
    assert "other.pt" not in said
    with pytest.raises(ValueError, match=f"the AT2 weights file {large} cannot be"):
        load_at2(large, model)
    with pytest.raises(ValueError, match="is not a file of AT2's weights"):
        load_at2(tmp_path / "other.pt", model)
