"""Citations for each part of an answer (issue 77, item 3):
``captum_iba.explain(query, model=M, context=..., answer_span=...)`` and
``captum-iba explain --context ... --answer-sentences`` / ``--answer-span``
on tiny random Llamas (a word tokenizer with ``.``, whose decoded answer has
sentences): the parts as whole tokens, each part's source scores, the
citations, the listing's and the page's cited paragraph, ContextCite's
parts through its own API (a stand-in package), and every refusal - before
the weights where the answer is given. What a part's attribution finds is
tested on a trained model: tests/evaluation/test_context_copy.py."""

import math
import sys
import warnings

import pytest
import torch

import captum_iba
from captum_iba.app.answer_spans import (
    AnswerSpan,
    answer_spans,
    check_answer_span,
    cited_paragraph,
    parse_answer_span,
)
from captum_iba.app.cli import main
from tests.copy_model import TWO_WORDS, two_fact_tokenizer
from tests.helpers import no_hooks

SOURCES = ["the key alpha is red", "a door omega is blue", "the cat sat on mat"]
QUERY = "what is the key and door ?"
ANSWER = "key alpha . door omega ."  # two sentences, six tokens


def _tiny_lm(positions=64):
    import transformers as tf

    torch.manual_seed(0)
    config = tf.LlamaConfig(
        vocab_size=len(TWO_WORDS), hidden_size=16, intermediate_size=32,
        num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
        max_position_embeddings=positions, pad_token_id=0, eos_token_id=1,
        bos_token_id=1,
    )  # fmt: skip
    return tf.LlamaForCausalLM(config).eval()


@pytest.fixture(scope="module")
def lm():
    return _tiny_lm(), two_fact_tokenizer()


@pytest.fixture(scope="module")
def lm_dir(tmp_path_factory, lm):
    folder = tmp_path_factory.mktemp("tiny-two-fact-llama")
    model, tok = lm
    model.config.architectures = [type(model).__name__]
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


def _explain(lm, method="loso", **options):
    model, tok = lm
    return captum_iba.explain(
        QUERY, model=model, tokenizer=tok, context=SOURCES, method=method, **options
    )


def test_each_sentence_is_explained_and_cited(lm):
    model, tok = lm
    before = [p.detach().clone() for p in model.parameters()]
    result = _explain(lm, ["loso", "iba-deletion"], target=ANSWER,
                      answer_span="sentences", steps=2)  # fmt: skip
    assert result.answer == ANSWER
    assert result.spans() == [
        AnswerSpan(0, 11, "key alpha .", (0, 3)),
        AnswerSpan(12, 24, "door omega .", (3, 6)),
    ]
    for name in ("loso", "iba-deletion"):
        whole = result.source_scores(name)
        parts = [result.source_scores(name, span=k) for k in (0, 1)]
        assert len(whole) == 3 and all(len(p) == 3 for p in parts)
        assert all(math.isfinite(x) for p in parts for x in p)
        assert result.methods[name].span_seconds > 0
    # leave one source out: log-probabilities add up over the answer's tokens
    loso = [result.source_scores("loso", span=k) for k in (0, 1)]
    whole = result.source_scores("loso")
    assert [a + b for a, b in zip(*loso)] == pytest.approx(whole, abs=1e-4)
    # citations: each part's sources above 0 and a quarter of its best, best first
    for cited, part in zip(result.citations(3, "loso"), loso):
        top = max(part)
        expected = sorted(
            (i for i in range(3) if part[i] > 0 and part[i] >= top / 4),
            key=lambda i: -part[i],
        )
        assert [i for i, _, _ in cited.sources] == expected
        assert [t for _, t, _ in cited.sources] == [SOURCES[i] for i in expected]
    # the model as it was found
    assert no_hooks(model) and not model.training
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_a_part_that_is_the_whole_answer_takes_its_scores(lm):
    result = _explain(lm, target="key alpha", answer_span="sentences")
    (span,) = result.spans()
    assert span.tokens == (0, 2) and span.text == "key alpha"
    assert result.source_scores("loso", span=0) == result.source_scores("loso")


def test_offsets_that_cut_a_token_are_rounded_outward_with_one_warning(lm):
    with pytest.warns(UserWarning, match=r"\(6, 14\) cuts the answer's token") as got:
        result = _explain(lm, target=ANSWER, answer_span=(6, 14))
    assert [w.filename for w in got] == [__file__]  # the caller's line, not ours
    (span,) = result.spans()  # "pha . do" -> "alpha . door"
    assert span == AnswerSpan(4, 16, "alpha . door", (1, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # words' edges and spaces: no warning
        result = _explain(lm, target=ANSWER, answer_span=(3, 12))
    assert result.spans() == [AnswerSpan(4, 11, "alpha .", (1, 3))]


@pytest.mark.parametrize(
    "value, message",
    [
        ("words", r"answer_span='words': give 'sentences'"),
        ((3,), r"answer_span=\(3,\): give \(start, end\), two integers"),
        ((True, 3), "two integers"),
        ((2.0, 3), "two integers"),
        ((5, 2), r"answer_span=\(5, 2\) is empty or starts before the answer"),
        ((-1, 2), "starts before the answer"),
    ],
)
def test_bad_answer_spans_are_refused_before_the_weights(
    lm_dir, no_lm_weights, value, message
):
    with pytest.raises(ValueError, match=message):
        captum_iba.explain(QUERY, model=lm_dir, context=SOURCES, answer_span=value)


def test_a_span_outside_a_given_answer_is_refused_before_the_weights(
    lm_dir, no_lm_weights
):
    with pytest.raises(
        ValueError, match=r"answer_span=\(20, 40\) lies outside the answer's 24"
    ):
        captum_iba.explain(QUERY, model=lm_dir, context=SOURCES, target=ANSWER,
                           answer_span=(20, 40))  # fmt: skip
    with pytest.raises(ValueError, match=r"\(11, 12\) holds no word of the answer"):
        captum_iba.explain(QUERY, model=lm_dir, context=SOURCES, target=ANSWER,
                           answer_span=(11, 12))  # fmt: skip


def test_a_span_outside_the_greedy_answer_is_refused_after_generation(lm):
    with pytest.raises(ValueError, match="lies outside the answer's"):
        _explain(lm, answer_span=(0, 500), max_new_tokens=2)


def test_refused_without_a_context_for_a_classifier_and_for_whole_answer_methods(
    lm_dir, tiny_model_dir, no_lm_weights
):
    with pytest.raises(ValueError, match="answer_span= attributes parts of the answer"):
        captum_iba.explain(QUERY, model=lm_dir, answer_span="sentences")
    with pytest.raises(ValueError, match="answer_span= is for a causal LM"):
        captum_iba.explain(QUERY, model=tiny_model_dir, answer_span="sentences")
    with pytest.raises(ValueError, match="iba-amortized explains classifiers"):
        captum_iba.explain(QUERY, model=lm_dir, context=SOURCES,
                           method="iba-amortized", answer_span=(0, 3))  # fmt: skip


def test_a_bad_span_index_or_k_is_named(lm):
    result = _explain(lm, target=ANSWER, answer_span="sentences")
    with pytest.raises(ValueError, match=r"span=2: the parts are 0..1"):
        result.source_scores(span=2)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        result.citations(0)
    for share in (2, "0.5", None, float("nan")):  # issue 90, item 12
        with pytest.raises(ValueError, match=r"share must be a number in \[0, 1\]"):
            result.citations(share=share)
    plain = _explain(lm, target=ANSWER)
    assert plain.spans() == []
    with pytest.raises(ValueError, match="no part of the answer was explained"):
        plain.citations()
    with pytest.raises(ValueError, match="span=0: no part of the answer"):
        plain.source_scores(span=0)


def test_the_cited_paragraph():
    parts = [AnswerSpan(0, 11, "key alpha .", (0, 3)), AnswerSpan(12, 24, "", (3, 6))]
    from captum_iba.app.answer_spans import Citation

    cited = [Citation(parts[0], [(1, "b", 2.0), (0, "a", 1.0)]), Citation(parts[1], [])]
    assert cited_paragraph(ANSWER, cited) == "key alpha . [2][1] door omega . [-]"
    assert check_answer_span(" Sentences ") == "sentences"
    assert parse_answer_span("3:9") == (3, 9)
    for bad in ("3-9", "a:b", "9:3", "1:2:3"):
        with pytest.raises(ValueError, match="--answer-span"):
            parse_answer_span(bad)


def test_a_token_written_in_byte_pieces_is_kept_whole():
    """A character over several byte pieces: its pieces decode to it only
    together, so a part holds all or none of them."""
    from tests.helpers import byte_level_tokenizer

    tok = byte_level_tokenizer("the cat sat.")  # no é: two byte pieces
    ids = tok.encode("sat. é", add_special_tokens=False)
    assert len(ids) == 5 and tok.decode(ids[-1:]) == "\ufffd"
    first, part = answer_spans("sentences", tok, ids)
    assert first == AnswerSpan(0, 4, "sat.", (0, 2))
    assert part == AnswerSpan(5, 6, "é", (3, 5))  # both pieces


def test_the_listing_and_the_page_show_the_cited_answer(lm):
    result = _explain(lm, ["loso", "iba-surrogate"], target=ANSWER,
                      answer_span="sentences")  # fmt: skip
    listing = result.to_text()
    assert listing.count("cited answer (2 parts") == 2
    paragraph = cited_paragraph(ANSWER, result.citations(3, "loso"))
    assert f"    {paragraph}" in listing
    assert "    part 1 'key alpha .': " in listing
    page = result.to_html()
    assert page.count('<div class="cited">') == 2
    assert "loso: cited answer" in page and "iba-surrogate: cited answer" in page
    assert '<span class="part" title="part 1: ' in page
    for cited in result.citations(3, "loso"):
        for i, text, score in cited.sources:
            assert (
                f'<sup class="mark" title="score {score:.4g}: {text}">[{i + 1}]' in page
            )
            assert f'<li value="{i + 1}">{text}<span class="sc">' in page
    assert page.index('class="cited"') < page.index("loso: sources")  # first
    assert '<div class="cited">' not in _explain(lm, target=ANSWER).to_html()


def _refused(argv, capsys):
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    return err


def test_cli_answer_sentences_lists_and_pages_a_cited_paragraph(
    lm_dir, tmp_path, capsys
):
    html = tmp_path / "spans.html"
    argv = ["explain", "--context", " ".join(s + "." for s in SOURCES)]
    argv += ["--query", QUERY, "--model", lm_dir, "--method", "loso"]
    argv += ["--target", ANSWER, "--answer-sentences", "--html", str(html)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "cited answer (2 parts" in out
    assert "part 1 'key alpha .'" in out and "part 2 'door omega .'" in out
    assert "loso: cited answer" in html.read_text()
    argv = argv[:-3] + ["--answer-span", "4:9"]  # "alpha"
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "cited answer (1 part" in out and "part 1 'alpha'" in out


@pytest.mark.parametrize(
    "extra, message",
    [
        (["the cat", "--answer-sentences"], "--answer-sentences attributes parts of"),
        (["the cat", "--answer-span", "0:3"], "--answer-span attributes parts of"),
        (["--answer-span", "3-9"], "--answer-span 3-9: give START:END"),
        (["--answer-sentences", "--answer-span", "0:3"], "not allowed with"),
        (["--answer-span", "0:30", "--target", ANSWER], "--answer-span 0:30 lies"),
        (
            ["--answer-sentences", "--method", "iba-amortized"],
            "iba-amortized explains classifiers",
        ),
    ],
)
def test_cli_refusals_before_the_weights(lm_dir, no_lm_weights, extra, message, capsys):
    argv = ["explain", "--model", lm_dir] + extra
    if extra[0] != "the cat":
        argv += ["--context", "a b. c d.", "--query", QUERY]
    assert message in _refused(argv, capsys)


def test_cli_answer_sentences_for_a_classifier(tiny_model_dir, capsys):
    argv = ["explain", "the cat", "--model", tiny_model_dir, "--answer-sentences"]
    assert "--answer-sentences attributes parts of" in _refused(argv, capsys)


# ContextCite's parts, through its own get_attributions(start_idx=, end_idx=)
# on its response's characters: a stand-in for the package that reads them
# back as tokens the way the package does (a character belongs to the last
# token starting at or before it) and scores source 0 with the part's first
# token and source 1 with its end.
_FAKE = {
    "__init__.py": "",
    "utils.py": "",
    "context_partitioner.py": (
        "class BaseContextPartitioner:\n"
        "    def __init__(self, context):\n"
        "        self.context = context\n"
    ),
    "context_citer.py": """
import numpy as np

class ContextCiter:
    calls = []

    def __init__(self, model, tokenizer, context, query, partitioner=None, **kw):
        self.tokenizer, self.partitioner, self._cache = tokenizer, partitioner, {}
        ContextCiter.calls.append("made")

    @property
    def _output_tokens(self):
        return self.tokenizer(self._cache["output"], add_special_tokens=False)

    @property
    def _response_start(self):
        return len(self._get_prompt_ids())

    @property
    def _response_ids(self):
        return self._output_tokens["input_ids"][self._response_start:]

    @property
    def response(self):
        start = self._output_tokens.token_to_chars(self._response_start).start
        return self._cache["output"][start:]

    def _token_at(self, char):
        tokens, k = self._output_tokens, self._response_start
        last = len(tokens["input_ids"]) - 1
        while k < last and tokens.token_to_chars(k + 1).start <= char:
            k += 1
        return k - self._response_start

    def _indices_to_token_indices(self, start, end):
        offset = self._output_tokens.token_to_chars(self._response_start).start
        return self._token_at(start + offset), self._token_at(end + offset - 1) + 1

    def get_attributions(self, start_idx=None, end_idx=None, verbose=True):
        if start_idx is None:
            first, end = 0, len(self._response_ids)
        else:
            first, end = self._indices_to_token_indices(start_idx, end_idx)
        ContextCiter.calls.append((first, end))
        n = self.partitioner.num_sources
        return np.array([float(first), float(end)] + [0.0] * (n - 2))
""",
}


@pytest.fixture
def fake_context_cite(tmp_path, monkeypatch):
    folder = tmp_path / "fake" / "context_cite"
    folder.mkdir(parents=True)
    for name, text in _FAKE.items():
        (folder / name).write_text(text)
    monkeypatch.syspath_prepend(str(folder.parent))
    for name in [n for n in sys.modules if n.split(".")[0] == "context_cite"]:
        monkeypatch.delitem(sys.modules, name)  # the real one, if imported
    yield
    for name in [n for n in sys.modules if n.split(".")[0] == "context_cite"]:
        del sys.modules[name]


def test_contextcite_attributes_each_part_through_its_own_api(lm, fake_context_cite):
    from context_cite.context_citer import ContextCiter

    result = _explain(lm, "contextcite-32", target=ANSWER, answer_span="sentences")
    assert result.source_scores("contextcite-32", span=0) == [0.0, 3.0, 0.0]
    assert result.source_scores("contextcite-32", span=1) == [3.0, 6.0, 0.0]
    assert result.source_scores("contextcite-32") == [0.0, 6.0, 0.0]
    # one citer for the whole answer, one shared by its two parts
    assert ContextCiter.calls == ["made", (0, 6), "made", (0, 3), (3, 6)]
