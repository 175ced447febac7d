"""The lab's ``iba-amortized-lm`` from the command line (issue 52's
``evaluate --task ... --methods iba-amortized`` on a causal LM, the lab's
since issue 88): its explainer fitted by the lab's command on a context
task's search contexts (the training part of AG News's file) with the
model's greedy responses, distilled from one deletion step, and cached; then
``evaluate`` and ``explain --context`` find it through the entry point's
method (4 contexts, one epoch)."""

import json

from captum_iba.app.cli import main
from tests.app.test_cli_faults import _fails
from tests.app.test_context_evaluate import _argv, _tiny_ag_news


def test_iba_amortized_lm_is_fitted_by_the_lab_then_found(
    tiny_llm, tmp_path, capsys, monkeypatch
):
    from captum_iba_lab import amortized_lm, context_fit

    from captum_iba.app.finetune.recipes import CACHE_ENV_VAR

    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "cache"))
    monkeypatch.setitem(context_fit.CONTEXT_FIT, "contexts", 4)
    monkeypatch.setitem(context_fit.CONTEXT_FIT, "epochs", 1)
    more = ("--passages", "3-4", "--methods", "iba-amortized-lm,random")
    context = "the cat sat on the mat . a dog ran in the park ."
    explain = ["explain", "--query", "where did the cat move ?", "--context", context,
               "--model", tiny_llm, "--method", "iba-amortized-lm",
               "--max-new-tokens", "2"]  # fmt: skip
    err = _fails(explain, capsys)  # none fitted yet: the command that fits one
    assert "python -m captum_iba_lab.amortized_lm --model MODEL --task TASK" in err
    _tiny_ag_news(tmp_path / "data")
    fit = ["--model", tiny_llm, "--task", "context-facts"]
    assert amortized_lm.main(fit + ["--data-dir", str(tmp_path / "data")]) == 0
    said = capsys.readouterr().out
    assert "fitting the amortized explainer" in said, said
    assert "on 4 search contexts of the context-facts task" in said
    assert "objective 'distil', taught by iba-deletion with 1 step(s)" in said
    found = (tmp_path / "cache" / "explainers").glob("context-facts-lembeddings-len0-*")
    (folder,) = [f for f in found if f.is_dir()]
    record = json.loads((folder / "explainer.json").read_text())
    assert record["stats"]["instances"] == 4  # 4 contexts, one epoch
    assert record["key"]["settings"]["teacher"]["steps"] == 1
    assert main(_argv(tiny_llm, tmp_path, tmp_path / "r1", *more)) == 0
    said = capsys.readouterr().out
    assert "fitting the amortized explainer" not in said
    assert "| iba-amortized-lm (logit-max) | 3 |" in said, said
    rows = [
        json.loads(line) for line in (tmp_path / "r1" / "attributions.jsonl").open()
    ]
    assert {r["method"] for r in rows} == {"iba-amortized-lm", "random"}
    assert main(explain) == 0
    assert "the explainer fitted on the context-facts task" in capsys.readouterr().out
    err = _fails(explain[:-3] + ["iba-amortized", "--max-new-tokens", "2"], capsys)
    assert "iba-amortized explains classifiers" in err
