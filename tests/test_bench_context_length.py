"""``benchmarks/bench_context_length.py`` (issue 77, item 5) in its quick
mode: a context of at most 300 tokens of many sources on a tiny random
Llama, each method measured in its own process; the ContextCite row skipped,
saying so, where its package is missing."""

import importlib.util
from pathlib import Path

import pytest

from tests.helpers import tiny_causal_lm, tiny_word_tokenizer


def _bench():
    path = (
        Path(__file__).resolve().parents[1] / "benchmarks" / "bench_context_length.py"
    )
    spec = importlib.util.spec_from_file_location("bench_context_length", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def tiny_folder(tmp_path):
    folder = tmp_path / "tiny-llama"
    tiny_causal_lm("llama", layers=2, positions=512).save_pretrained(folder)
    tiny_word_tokenizer().save_pretrained(folder)
    return str(folder)


def test_quick_mode_measures_the_default_and_says_why_contextcite_is_missing(
    tiny_folder, capsys
):
    rows = _bench().main(
        ["--tokens", "300", "--sources", "12", "--model", tiny_folder,
         "--corpus", "synthetic", "--target", "the cat",
         "--methods", "iba-surrogate,contextcite-32"]
    )  # fmt: skip
    out = capsys.readouterr().out
    default = rows[0]
    assert default["method"] == "iba-surrogate"
    assert 200 < default["tokens"] <= 300 and default["sources"] == 12
    assert 0 <= default["key"] < 12 and 0 <= default["top_source"] < 12
    assert default["cpu_s"] > 0 and default["wall_s"] > 0
    assert default["process_peak_bytes"] > 0
    assert "CPU capability" in out and "| iba-surrogate | " in out
    cc = rows[1]
    if importlib.util.find_spec("context_cite") is None:
        assert "installed" in cc["skipped"]
        assert "contextcite-32: skipped: ContextCite's package" in out
    else:
        assert cc["tokens"] == default["tokens"]
        assert "iba-surrogate / contextcite-32: CPU-s" in out


def test_the_context_stays_within_its_tokens():
    """The prompt keeps within --tokens, the articles dealt to at most
    --sources - 1 sources, the planted fact the key."""
    from captum_iba.app.context_tasks import FACTS, prompt_layout
    from captum_iba.evaluation.context_loop import prompt_ids_of

    bench = _bench()
    tok = tiny_word_tokenizer()
    for tokens, n in ((150, 4), (300, 40)):
        sources, query, key = bench.long_context(tok, False, tokens, n, "synthetic", 1)
        assert 2 <= len(sources) <= n and query.endswith("?")
        prompt, spans = prompt_layout(False)(sources, query)
        ids = prompt_ids_of(tok, prompt, spans, False)([True] * len(sources))
        assert tokens - 40 < len(ids) <= tokens
        fact = sources[key]
        assert any(name in fact for name in FACTS[0].values["name"])
        assert all(set(s.split()) <= {*bench.WORDS, "."} for s in sources if s != fact)
