"""``captum-iba evaluate`` / ``attribute`` on a causal LM: every instance a
zero-shot prompt of its corpus's task, the model's choice among the answer
words explained and tested on the corpus engine (a tiny random Llama saved
as a folder, with a word tokenizer that knows the SST-2 task's words:
``tiny_llm_dir`` of tests/app/conftest.py)."""

import json

import pytest
import transformers as tf
from tokenizers import Tokenizer, models, pre_tokenizers

from captum_iba.app.cli import main
from captum_iba.app.corpus_task import corpus_methods
from captum_iba.app.model_kind import decide_kind
from captum_iba.registry import DEFAULT_LLM_COMPARISON
from tests.app.test_cli_faults import _fails, _tiny_sst2
from tests.helpers import tiny_causal_lm


def _argv(model, tmp_path, out, *more):
    data = tmp_path / "data"
    if not data.exists():
        _tiny_sst2(data)
    return ["evaluate", "--model", model, "--data-dir", str(data),
            "--num-instances", "8", "--batch-size", "4", "--out", str(out),
            *more]  # fmt: skip


def test_evaluate_explains_the_model_s_choice_and_resumes(
    tiny_llm_dir, tmp_path, capsys
):
    out = tmp_path / "out"
    argv = _argv(tiny_llm_dir, tmp_path, out, "--methods", "llm-random,llm-ablation")
    assert main(argv) == 0
    said = capsys.readouterr().out
    assert "llm-ablation" in said and "done: 8 instances x 2 method(s)" in said
    rows = [json.loads(line) for line in (out / "attributions.jsonl").open()]
    assert len(rows) == 16 and {r["method"] for r in rows} == {
        "llm-random",
        "llm-ablation",
    }
    for row in rows:
        assert row["target"] == row["predicted"]  # the model's own choice
        assert row["answer"] == [" negative", " positive"][row["target"]]
        assert row["prompt"].startswith("Classify the sentiment")
        assert row["text"] in row["prompt"]
        assert len(row["scores"]) == len(row["tokens"]) == len(row["input_ids"])
        assert row["tokens"][-1] == row["answer"].strip()  # the answer token
        assert row["scores"][-1] == 0.0  # never scored
        assert len(row["degradation"]["probs"]) == 9
    settings = json.loads((out / "settings.json").read_text())
    assert "model's choice" in settings["fields"]["target"]
    assert "prompt" in settings["fields"] and "answer" in settings["fields"]
    result = json.loads((out / "sst2_fair_llm_ablation.json").read_text())
    assert result["settings"]["target"] == "choice"
    assert main(argv) == 0  # resumed: nothing scored again
    assert "8 were recorded before" in capsys.readouterr().out


def test_the_names_of_a_classifier_s_methods_run_on_a_causal_lm(
    tiny_llm_dir, tmp_path, capsys
):
    """``evaluate --model <causal LM> --methods iba-deletion,ig,ablation``
    runs (one name per method); the deprecated llm- names give the same scores, with
    a note naming the new name."""
    new, old = tmp_path / "new", tmp_path / "old"
    fast = ["--steps", "2", "--ig-steps", "3"]
    methods = "iba-deletion,ig,ablation"
    assert main(_argv(tiny_llm_dir, tmp_path, new, "--methods", methods, *fast)) == 0
    assert "done: 8 instances x 3 method(s)" in capsys.readouterr().out
    olds = "llm-iba-deletion,llm-ig,llm-ablation"
    assert main(_argv(tiny_llm_dir, tmp_path, old, "--methods", olds, *fast)) == 0
    err = capsys.readouterr().err.splitlines()
    notes = [n for n in err if n.startswith("captum-iba: note: ")]
    assert len(notes) == 3 and "'llm-ig' is deprecated" in notes[1]
    assert "write 'ig'" in notes[1]

    def scores(out):
        rows = [json.loads(line) for line in (out / "attributions.jsonl").open()]
        return {(r["method"], r["index"]): r["scores"] for r in rows}

    got, before = scores(new), scores(old)
    assert {m for m, _ in got} == {"iba-deletion", "IG", "LOO"}
    renamed = {
        "llm-iba-deletion": "iba-deletion",
        "llm-ig": "IG",
        "llm-ablation": "LOO",
    }
    assert {(renamed[m], i): s for (m, i), s in before.items()} == got


def test_a_causal_lm_gets_the_llm_comparison_by_default(tiny_llm_dir):
    llm = [m.lower() for m in DEFAULT_LLM_COMPARISON]
    kind = decide_kind(tiny_llm_dir)
    assert corpus_methods("evaluate", kind) == llm
    assert corpus_methods("attribute", kind) == ["iba-deletion"]
    assert "ablation" in llm and not [m for m in llm if m.startswith("llm-")]
    assert corpus_methods("evaluate", decide_kind(None))[0] == "iba-deletion"


def test_methods_of_the_other_kind_and_corpora_without_a_task_are_refused(
    tiny_llm_dir, tiny_model_dir, tmp_path, capsys
):
    err = _fails(
        _argv(tiny_llm_dir, tmp_path, tmp_path / "a", "--methods", "ig,lime-text"),
        capsys,
    )
    assert "lime-text explains classifiers, but the model is a causal LM" in err
    assert "iba-deletion" in err and "llm-" not in err  # the methods that fit
    err = _fails(  # a deprecated name: the error alone (the note comes after a run)
        _argv(tiny_model_dir, tmp_path, tmp_path / "b", "--methods", "llm-random"),
        capsys,
    )
    assert "llm-random explains causal LMs, but the model is a classifier" in err
    err = _fails(
        _argv(tiny_llm_dir, tmp_path, tmp_path / "c", "--dataset", "bbc",
              "--methods", "random"), capsys,
    )  # fmt: skip
    assert "--dataset bbc: no prompt task for a causal LM" in err
    assert not (tmp_path / "a").exists() and not (tmp_path / "c").exists()


def _char_tokenizer(unknown=False):
    """Word pieces of one character: every word is several tokens (or, with
    ``unknown``, the unknown token)."""
    letters = list("abcdefghijklmnopqrstuvwxyz")
    pieces = [] if unknown else letters + ["##" + c for c in letters]
    vocab = {w: i for i, w in enumerate(["<pad>", "<eos>", "<unk>", *pieces])}
    tk = Tokenizer(models.WordPiece(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    return tf.PreTrainedTokenizerFast(
        tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )


@pytest.mark.parametrize(
    "unknown, says",
    [(False, "' negative' -> 8 tokens"), (True, "the unknown token")],
)
def test_answer_words_that_are_not_one_known_token_are_named(
    tmp_path, capsys, unknown, says
):
    folder = tmp_path / "chars"
    tiny_causal_lm("llama", layers=1, seed=0).save_pretrained(folder)
    _char_tokenizer(unknown).save_pretrained(folder)
    err = _fails(
        _argv(str(folder), tmp_path, tmp_path / "out", "--methods", "llm-random"),
        capsys,
    )
    assert says in err, err
    assert not (tmp_path / "out").exists()


def test_two_processes_equal_one_exactly(tiny_llm_dir, tmp_path):
    """The prompt job on the corpus engine's ranks: the same rows and
    results, byte for byte but the timings."""
    from tests.app.test_engine import _torchrun

    def argv(out):
        return _argv(tiny_llm_dir, tmp_path, out, "--methods",
                     "llm-random,llm-iba-deletion", "--batch-size", "2")  # fmt: skip

    assert main(argv(tmp_path / "one")) == 0
    proc = _torchrun(argv(tmp_path / "two"), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2 processes)" in proc.stdout
    one, two = tmp_path / "one", tmp_path / "two"
    rows = (one / "attributions.jsonl").read_bytes()
    assert rows == (two / "attributions.jsonl").read_bytes()
    for name in ("sst2_fair_llm_random.json", "sst2_fair_llm_iba_deletion.json"):
        a, b = (json.loads((d / name).read_text()) for d in (one, two))
        for data in (a, b):
            data["settings"]["attribution"].pop("seconds_per_instance")
            data["settings"]["attribution"].pop("cpu_seconds", None)
        assert a == b


def test_attribute_explains_the_gold_word_by_default(tiny_llm_dir, tmp_path):
    """attribute's --target label (its default): the gold word is the answer
    explained, whatever the model chose; no test unless asked."""
    out = tmp_path / "out"
    argv = _argv(tiny_llm_dir, tmp_path, out)
    argv[0] = "attribute"
    assert main(argv) == 0  # its default method for a causal LM
    rows = [json.loads(line) for line in (out / "attributions.jsonl").open()]
    assert {r["method"] for r in rows} == {"iba-deletion"} and len(rows) == 8
    for row in rows:
        assert row["target"] == row["label"]
        assert row["answer"] == [" negative", " positive"][row["label"]]
        assert "degradation" not in row
    fields = json.loads((out / "settings.json").read_text())["fields"]
    assert "the gold label" in fields["target"]
