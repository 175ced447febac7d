"""``captum-iba evaluate --task context-facts|context-topics`` (issue 51): a
context task on the corpus engine - every method's per-source scores, LDS,
top-k drops, top-1 hit and CPU-s per example, resumable - on a tiny random
Llama saved as a folder and a tiny AG News; bad combinations refused before
any model loads; examples past the model's positions skipped and counted."""

import json
import math

import pytest
import transformers as tf
from tokenizers import Tokenizer, models, pre_tokenizers

from captum_iba.app.cli import main
from captum_iba.evaluation.context_loop import HELDOUT_SEED
from tests.app.test_cli_faults import _fails
from tests.helpers import hide_lxt, tiny_causal_lm

WORDS = (
    "<pad> <eos> <unk> Context : Query ? What is the cat sat on mat a dog ran in "
    "park big red blue . where did move to last spring"
).split()


def _tiny_ag_news(folder):
    data = folder / "ag_news"
    data.mkdir(parents=True)
    (data / "classes.txt").write_text("World\nSports\nBusiness\nSci/Tech\n")
    rows = "".join(
        f'"{1 + i % 4}","the cat {i}","a dog ran in the park {i}"\n' for i in range(80)
    )
    (data / "test.csv").write_text(rows)
    return folder


def _llama_dir(tmp_path, positions):
    vocab = {w: i for i, w in enumerate(WORDS)}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = tf.PreTrainedTokenizerFast(
        tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    model = tiny_causal_lm("llama", layers=2, seed=0, positions=positions)
    model.resize_token_embeddings(len(WORDS), mean_resizing=False)
    folder = tmp_path / f"llama-{positions}"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


@pytest.fixture
def tiny_llm(tmp_path):
    return _llama_dir(tmp_path, 160)


def _argv(model, tmp_path, out, *more):
    data = tmp_path / "data"
    if not data.exists():
        _tiny_ag_news(data)
    return ["evaluate", "--model", model, "--data-dir", str(data), "--task",
            "context-facts", "--num-instances", "3", "--out", str(out),
            *more]  # fmt: skip


def test_a_context_task_records_every_method_s_metrics_and_resumes(
    tiny_llm, tmp_path, capsys
):
    out = tmp_path / "out"
    argv = _argv(tiny_llm, tmp_path, out, "--passages", "3-5", "--methods",
                 "iba-sources,iba-deletion,ig,random", "--steps", "2",
                 "--ig-steps", "3")  # fmt: skip
    assert main(argv) == 0
    said = capsys.readouterr().out
    assert "context-facts report (n=3)" in said
    assert "| iba-sources | 3 |" in said and "| iba-deletion (max) | 3 |" in said
    assert "| IG (sum) | 3 |" in said  # a signed method's own pooling
    assert "done: 3 instances x 4 method(s)" in said
    rows = [json.loads(line) for line in (out / "attributions.jsonl").open()]
    assert len(rows) == 12
    for row in rows:
        n = row["n_sources"]
        assert 3 <= n <= 5 and 0 <= row["key"] < n and len(row["sources"]) == n
        assert row["response"] and row["query"].endswith("?")
        assert len(row["scores"]) == len(row["tokens"]) == len(row["input_ids"])
        test = row["context"]
        assert test["cpu_seconds"] >= 0
        poolings = {"-"} if row["method"] == "iba-sources" else {"sum", "mean", "max"}
        if row["method"] == "iba-deletion":  # a mask's scores: their log-odds too
            poolings.add("logit-max")
        assert set(test["pooled"]) == poolings
        for found in test["pooled"].values():
            assert len(found["scores"]) == n
            assert all(math.isfinite(v) for v in found["scores"])
            assert found["lds"] is None or -1 <= found["lds"] <= 1
            assert isinstance(found["top1"], bool)
            assert set(found["drops"]) == {"1", "3", "5"}
            assert (found["drops"]["5"] is None) == (n <= 5)  # k >= S: undefined
    settings = json.loads((out / "settings.json").read_text())
    assert (
        "LDS" in settings["fields"]["context"] and settings["task"] == "context-facts"
    )
    summary = json.loads((out / "context_facts_report_random.json").read_text())
    assert summary["heldout_seed"] == HELDOUT_SEED and summary["n_ablations"] == 32
    assert len(summary["records"]) == 3
    assert (out / "context_facts_report.md").read_text().startswith("| method |")
    assert main(argv) == 0  # resumed: nothing scored again
    assert "3 were recorded before" in capsys.readouterr().out


def test_an_example_a_method_refuses_is_left_out_and_the_rest_scored(
    tiny_llm, tmp_path, capsys, monkeypatch
):
    """The first example random sees is refused (a ValueError, as a scorer
    refuses an input it cannot explain): the run finishes on the other two
    for every method, says so, and its re-run does not stop at it."""
    from captum_iba.evaluation.random_scorer import RandomScorer

    original, first = RandomScorer._scores, []

    def refusing(self, rows):
        prompts = rows.prompts.prompts
        first[:] = first or [prompts[0]]
        if first[0] in prompts:
            raise ValueError("reads the response as other tokens")
        return original(self, rows)

    monkeypatch.setattr(RandomScorer, "_scores", refusing)
    out = tmp_path / "out"
    argv = _argv(tiny_llm, tmp_path, out, "--passages", "3-4", "--methods",
                 "iba-sources,random", "--steps", "1")  # fmt: skip
    assert main(argv) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "(n=2)" in said and "| random (max) | 2 |" in said
    assert "3 instances x 2 method(s): 3 scored now" in said and "1 left out" in said
    assert "left out of every method's results: random refused it" in said
    rows = [json.loads(line) for line in (out / "attributions.jsonl").open()]
    assert len(rows) == 4 and len({r["index"] for r in rows}) == 2
    assert "random refused it" in (out / "context_facts_report.md").read_text()
    assert main(argv) == 0
    assert "3 were recorded before" in capsys.readouterr().out


def test_methods_share_the_held_out_ablations_of_each_example(tiny_llm, tmp_path):
    """The LDS's ablations are drawn once per example (seeded by its number),
    apart from the methods: a method's LDS is the same whichever other
    methods run beside it."""
    both, alone = tmp_path / "both", tmp_path / "alone"
    argv = _argv(tiny_llm, tmp_path, both, "--methods", "random,iba-deletion",
                 "--passages", "3-4", "--steps", "2")  # fmt: skip
    assert main(argv) == 0
    argv = _argv(tiny_llm, tmp_path, alone, "--methods", "random", "--passages", "3-4")
    assert main(argv) == 0

    def lds(out, method):
        rows = [json.loads(line) for line in (out / "attributions.jsonl").open()]
        return [r["context"]["pooled"] for r in rows if r["method"] == method]

    assert lds(both, "random") == lds(alone, "random")


def test_bad_combinations_are_refused_before_any_model_loads(
    tiny_llm, tiny_model_dir, tmp_path, capsys
):
    cases = [
        (["--model", tiny_model_dir], "--task context-facts: a context task explains "
         "a causal LM's answer, but --model"),
        (["--dataset", "sst2"], "--task context-facts and --dataset sst2"),
        (["--max-length", "64"], "--max-length 64: a context task's prompts"),
        (["--passages", "5-3"], "--passages 5-3: give MIN-MAX"),
        (["--passages", "x"], "--passages x: give MIN-MAX"),
        (["--passages", "3-"], "--passages 3-: give MIN-MAX"),
        (["--passages", "-5"], "--passages -5: give MIN-MAX"),
        (["--task", "context-topics", "--passages", "3-5"],
         "--passages 3-5: context-topics has one passage per topic"),
    ]  # fmt: skip
    for i, (more, says) in enumerate(cases):
        out = tmp_path / f"out{i}"
        err = _fails(_argv(tiny_llm, tmp_path, out, *more), capsys)
        assert says in err, err
        assert not out.exists()
    plain = ["evaluate", "--model", tiny_llm, "--split", "search", "--out",
             str(tmp_path / "p")]  # fmt: skip
    assert "--split search: it applies to a context task only" in _fails(plain, capsys)
    default = ["evaluate", "--task", "context-topics", "--out", str(tmp_path / "d")]
    err = _fails(default, capsys)
    assert "but the default model is a classifier" in err


def test_examples_past_the_model_s_positions_are_skipped_and_counted(tmp_path, capsys):
    short = _llama_dir(tmp_path, 100)
    out = tmp_path / "out"
    argv = _argv(short, tmp_path, out, "--passages", "3-12", "--num-instances", "6",
                 "--methods", "random", "--batch-size", "2")  # fmt: skip
    assert main(argv) == 0
    said = capsys.readouterr().out
    assert "skipped" in said and "of 6 examples" in said and "100 positions" in said
    rows = [json.loads(line) for line in (out / "attributions.jsonl").open()]
    kept = {r["example"] for r in rows}
    assert 0 < len(kept) < 6 and len(rows) == len(kept)
    for row in rows:  # two examples a unit: each its own sources
        for found in row["context"]["pooled"].values():
            assert len(found["scores"]) == row["n_sources"]
    assert "skipped" in (out / "context_facts_report.md").read_text()
    err = _fails(
        _argv(short, tmp_path, tmp_path / "none", "--passages", "15-20"), capsys
    )
    assert "none is left" in err and "100 positions" in err


def test_attnlrp_without_lxt_is_refused_before_any_model_loads(
    tiny_llm, tmp_path, capsys, monkeypatch
):
    """Issue 51's anchor AttnLRP pooled to sources: where lxt is missing (or
    does not import: lxt 2.1 under transformers 5) the context task says why
    in one line before the model loads."""
    import transformers

    def refuse(*args, **kwargs):
        raise AssertionError("the weights were loaded")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", refuse)
    hide_lxt(monkeypatch)
    out = tmp_path / "out"
    err = _fails(_argv(tiny_llm, tmp_path, out, "--methods", "ig,attnlrp"), capsys)
    assert "AttnLRP needs the optional package lxt, which is not installed" in err
    assert "pip install 'captum-iba[attnlrp]'" in err and "transformers" in err
    assert not out.exists()
