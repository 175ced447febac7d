"""``--method(s) iba-amortized`` on a causal LM from the command line (issue
52): ``evaluate`` on a prompt task fits the explainer once on the task's
training prompts (the deletion objective) and caches it; a second run and
``explain`` load it; another tokenizer or layer is not served by it. A tiny
random Llama (``tiny_llm_dir``), 8 training prompts, one
epoch."""

import json
import shutil

import pytest

from captum_iba.app import amortized as app_amortized
from captum_iba.app.finetune.recipes import CACHE_ENV_VAR
from tests.app.test_amortized_cli import _code
from tests.app.test_cli_faults import _tiny_sst2
from tests.helpers import SST2_TASK_WORDS, tiny_word_tokenizer

PROMPT = "Classify the sentiment of the review as positive or negative . Review : "


@pytest.fixture
def small_fit(tmp_path, monkeypatch):
    """The cache in tmp_path; 8 training prompts and one epoch per fit."""
    from captum_iba.evaluation import amortized as eval_amortized

    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "cache"))
    monkeypatch.setattr(app_amortized, "LLM_TRAIN_PROMPTS", 8)
    one = dict(eval_amortized.AMORTIZED_SETTINGS, epochs=1)
    monkeypatch.setattr(eval_amortized, "AMORTIZED_SETTINGS", one)
    return tmp_path / "cache" / "explainers"


def _data(tmp_path, train=True):
    data = tmp_path / "data"
    if not data.exists():
        _tiny_sst2(data)
        if train:
            shutil.copy(data / "sst2" / "dev.tsv", data / "sst2" / "train.tsv")
    return data


def _evaluate(model, tmp_path, out, *more):
    return _code(
        ["evaluate", "--model", model, "--data-dir", str(_data(tmp_path))]
        + ["--methods", "iba-amortized,llm-random", "--n", "4"]
        + ["--batch-size", "4", "--out", str(tmp_path / out), *more]
    )


def _explain(model, *more):
    return _code(
        ["explain", PROMPT + "good film Sentiment :", "--model", model]
        + ["--method", "iba-amortized", "--max-new-tokens", "1", *more]
    )


def test_evaluate_fits_on_the_task_s_training_prompts_then_every_run_loads_it(
    tiny_llm_dir, small_fit, tmp_path, capsys
):
    assert _explain(tiny_llm_dir) == 2  # nothing fitted yet: the command named
    err = capsys.readouterr().err
    assert "no fitted explainer for this causal LM and layer" in err, err
    assert "captum-iba evaluate --dataset TASK --methods iba-amortized`" in err
    assert _evaluate(tiny_llm_dir, tmp_path, "r1") == 0
    out = capsys.readouterr().out
    assert "fitting the amortized explainer" in out, out
    assert "on 8 training prompts of the sst2 task" in out
    assert "objective 'deletion'" in out
    (folder,) = [f for f in small_fit.glob("sst2-lembeddings-len0-*") if f.is_dir()]
    # the folder names the answers fitted on: a fit on other answers is not taken
    digest = app_amortized.settings_digest("deletion", "causal-lm")
    assert f"-s{digest}-" in folder.name
    assert digest != app_amortized.settings_digest("deletion")
    record = json.loads((folder / "explainer.json").read_text())
    assert record["stats"]["instances"] == 8  # 8 prompts, one epoch
    assert record["key"]["layer"].endswith("embed_tokens")
    assert record["key"]["settings"]["options"]["removal"] == "attention"
    rows = [
        json.loads(line) for line in (tmp_path / "r1" / "attributions.jsonl").open()
    ]
    assert {r["method"] for r in rows} == {"iba-amortized", "llm-random"}
    stamp = (folder / "explainer.json").stat().st_mtime_ns
    assert _evaluate(tiny_llm_dir, tmp_path, "r2") == 0  # loaded, not fitted
    assert "fitting" not in capsys.readouterr().out
    assert (folder / "explainer.json").stat().st_mtime_ns == stamp
    assert _explain(tiny_llm_dir) == 0
    out = capsys.readouterr().out
    assert "fitted on the sst2 task's training prompts" in out
    assert "fitting" not in out
    assert _explain(tiny_llm_dir, "--layer", "0") == 2  # none at layer 0
    assert "no fitted explainer" in capsys.readouterr().err
    assert _explain(tiny_llm_dir, "--explainer-objective", "distil") == 2
    assert "--explainer-objective distil" in capsys.readouterr().err


def test_another_tokenizer_is_refused(tiny_llm_dir, small_fit, tmp_path, capsys):
    assert _evaluate(tiny_llm_dir, tmp_path, "r1") == 0
    capsys.readouterr()
    other = tmp_path / "other-tokenizer"  # the same weights, another vocabulary
    shutil.copytree(tiny_llm_dir, other)
    words = [w if w != "film" else "movie" for w in SST2_TASK_WORDS]
    tiny_word_tokenizer(words).save_pretrained(other)
    assert _evaluate(str(other), tmp_path, "r2") == 2
    err = capsys.readouterr().err
    assert "tokenizer" in err and "Remove the folder to fit it again" in err, err


def test_no_training_split_is_refused_before_the_weights(
    tiny_llm_dir, small_fit, tmp_path, capsys, monkeypatch
):
    from captum_iba.app import causal_lm

    def refuse(*args, **kwargs):
        raise AssertionError("the weights were loaded")

    monkeypatch.setattr(causal_lm, "load_causal_lm", refuse)
    _data(tmp_path, train=False)  # dev.tsv only
    assert _evaluate(tiny_llm_dir, tmp_path, "r1") == 2
    err = capsys.readouterr().err
    assert "fitted on the corpus's training split" in err and "'sst2'" in err, err


def test_explain_fit_on_chooses_among_several_tasks_explainers(
    tiny_llm_dir, small_fit, tmp_path, capsys
):
    """``explain --fit-on TASK`` takes the explainer fitted on that task's
    training prompts when several tasks' are cached (explain refused, asking
    to remove the others' folders); without it the refusal names the cached
    tasks and --fit-on. The imdb explainer is the sst2 one copied under
    imdb's name (the key holds no task; a fit on imdb needs reviews of
    256-512 tokens, which the tiny corpus lacks)."""
    assert _evaluate(tiny_llm_dir, tmp_path, "r1") == 0
    (sst2,) = [f for f in small_fit.glob("sst2-lembeddings-len0-*") if f.is_dir()]
    imdb = sst2.with_name("imdb-" + sst2.name.split("-", 1)[1])
    shutil.copytree(sst2, imdb)
    capsys.readouterr()
    assert _explain(tiny_llm_dir) == 2
    err = capsys.readouterr().err
    assert "several tasks (sst2, imdb)" in err, err
    assert "give --fit-on TASK to choose one (TASK one of sst2, imdb)" in err
    assert "remove" not in err
    assert _explain(tiny_llm_dir, "--fit-on", "imdb") == 0
    assert "fitted on the imdb task's training prompts" in capsys.readouterr().out
    assert _explain(tiny_llm_dir, "--fit-on", "SST2") == 0  # as --dataset: any case
    assert "fitted on the sst2 task's training prompts" in capsys.readouterr().out
    assert _explain(tiny_llm_dir, "--fit-on", "ag_news") == 2  # none fitted on it
    err = capsys.readouterr().err
    assert "no explainer fitted on the ag_news task's training prompts" in err, err
    assert "`captum-iba evaluate --dataset ag_news --methods iba-amortized`" in err
    shutil.rmtree(sst2)
    assert _explain(tiny_llm_dir) == 0  # one cached: taken without --fit-on
    assert "fitted on the imdb task's training prompts" in capsys.readouterr().out
    assert _explain(tiny_llm_dir, "--fit-on", "imdb") == 0  # imdb's own folder
    assert _explain(tiny_llm_dir, "--fit-on", "sst2") == 2
    assert "no explainer fitted on the sst2 task's" in capsys.readouterr().err


def test_explain_fit_on_is_checked_before_the_weights(
    tiny_llm_dir, small_fit, capsys, monkeypatch
):
    """--fit-on goes with iba-amortized and names a prompt task: anything
    else is refused before the weights load."""
    from captum_iba.app import causal_lm

    def refuse(*args, **kwargs):
        raise AssertionError("the weights were loaded")

    monkeypatch.setattr(causal_lm, "load_causal_lm", refuse)
    prompt = ["explain", PROMPT + "good film Sentiment :", "--model", tiny_llm_dir]
    for method in (["--method", "iba"], []):  # another method; the default
        assert _code(prompt + method + ["--fit-on", "sst2"]) == 2
        err = capsys.readouterr().err
        assert "--fit-on sst2 chooses iba-amortized's cached explainer" in err, err
        assert "give --method iba-amortized" in err
    assert _explain(tiny_llm_dir, "--fit-on", "mnli") == 2  # a corpus, no task
    err = capsys.readouterr().err
    assert "--fit-on mnli: not a prompt or context task" in err, err
    assert "choose from sst2, imdb, ag_news, rte, context-facts" in err


def test_the_fit_explains_the_answer_word_the_model_chooses(
    tiny_llm_dir, small_fit, tmp_path, capsys, monkeypatch
):
    """Each training prompt's answer is the task's answer word the model
    chooses (label_choice), never its greedy first token (a random model's
    is rarely an answer word, and can end the text)."""
    from captum_iba.app import amortized as app_amortized
    from captum_iba.app.llm_tasks import TASKS

    seen = []
    fit = app_amortized.fit_amortized

    def spy(model, layer, batches, tokenizer, *args, **kwargs):
        seen.extend(
            tokenizer.decode(b.answer_ids(i)).strip()
            for b in batches
            for i in range(len(b))
        )
        return fit(model, layer, batches, tokenizer, *args, **kwargs)

    monkeypatch.setattr(app_amortized, "fit_amortized", spy)
    assert _evaluate(tiny_llm_dir, tmp_path, "r1") == 0
    assert "with the model's choice among its answer words" in capsys.readouterr().out
    words = {a.strip() for a in TASKS["sst2"].answers}
    assert len(seen) == 8 and set(seen) <= words, seen


def test_prompt_batches_takes_given_answers(tiny_llm_dir):
    """answers= gives each prompt its answer (no generation); a count other
    than the prompts' is refused."""
    from captum_iba.app.causal_lm import load_causal_lm
    from captum_iba.evaluation.amortized import prompt_batches

    model, tok = load_causal_lm(tiny_llm_dir)
    prompts = [PROMPT + "good film Sentiment :", PROMPT + "bad Sentiment :"]
    (batch,) = prompt_batches(model, tok, prompts, answers=[" positive", " negative"])
    answers = [tok.decode(batch.answer_ids(i)).strip() for i in range(2)]
    assert answers == ["positive", "negative"]
    with pytest.raises(ValueError, match="one answer per prompt: 1 for 2"):
        prompt_batches(model, tok, prompts, answers=[" positive"])


def test_training_prompts_are_count_of_the_training_split(tmp_path):
    """``count`` training prompts (the study's ``--fit-prompts`` past the
    command line's number), a seeded subset of the split; by default at most
    ``LLM_TRAIN_PROMPTS``, here all 8."""
    tok = tiny_word_tokenizer(SST2_TASK_WORDS)
    data = str(_data(tmp_path))
    every = app_amortized.training_prompts("sst2", tok, data, 512, cut=False)
    assert len(every) == 8 == len(set(every))
    some = app_amortized.training_prompts("sst2", tok, data, 512, False, count=3)
    assert len(some) == 3 and set(some) < set(every)
    again = app_amortized.training_prompts("sst2", tok, data, 512, False, count=3)
    assert again == some  # seeded
