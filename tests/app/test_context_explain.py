"""Explaining a context (issue 51, item 6): ``captum_iba.explain(query,
model=M, context=...)`` and ``captum-iba explain --context ... --query ...``
on a tiny random Llama: the sources (a list, a text cut by sentence,
documents, turns), one score per source - IBA's own (``iba-sources``) or a
token method's pooled -, the listing and the page; every refusal before the
weights load."""

import math
import re
import warnings

import pytest

import captum_iba
from captum_iba.app.cli import main
from captum_iba.app.context_explain import context_prompt_of, read_context
from captum_iba.app.context_tasks import LAYOUT
from tests.helpers import hide_lxt, saved_lm, tiny_causal_lm, tiny_word_tokenizer

FAST = {"max_new_tokens": 2}
SOURCES = ["the cat sat on the mat", "a dog ran in the park", "the big red dog"]
QUERY = "where is the cat"


@pytest.fixture(scope="module")
def lm():
    return tiny_causal_lm("llama", positions=48), tiny_word_tokenizer()


@pytest.fixture(scope="module")
def lm_dir(tmp_path_factory, lm):
    return saved_lm(tmp_path_factory.mktemp("tiny-llama-48"), *lm)


def _explain(lm, context, method, **options):
    model, tok = lm
    kw = dict(FAST, **options)
    return captum_iba.explain(
        QUERY, model=model, tokenizer=tok, context=context, method=method, **kw
    )


def test_a_list_one_source_each_iba_sources_scores_each_source(lm):
    result = _explain(lm, SOURCES, "iba-sources", steps=2)
    assert result.sources() == SOURCES
    scores = result.source_scores()
    assert len(scores) == 3 and all(0 <= s <= 1 for s in scores)
    # one mask weight per source: every word of a source has its score
    words = result.scores()
    assert len(words) == sum(len(s.split()) for s in SOURCES)  # sources' only
    at = 0
    for source, score in zip(SOURCES, scores):
        n = len(source.split())
        assert words[at : at + n] == pytest.approx([score] * n, abs=1e-6)
        at += n
    assert result.subject.query == QUERY
    assert result.subject.prompt == LAYOUT.format(context="\n\n".join(SOURCES),
                                                  query=QUERY)  # fmt: skip


def test_a_text_is_cut_by_sentence_and_token_scores_pool(lm):
    text = "the cat sat on the mat. a dog ran in the park! the big dog"
    result = _explain(lm, text, "ig", ig_steps=4)
    assert result.sources() == [
        "the cat sat on the mat.",
        "a dog ran in the park!",
        "the big dog",
    ]
    assert result.methods["IG"].source_pooling == "the sum of its tokens' scores"
    # IG's token scores summed per source (each word one token, the marks
    # one unknown token each)
    tokens = result.scores(pieces=True)
    sizes = [7, 7, 3]
    expected = [sum(tokens[sum(sizes[:i]) : sum(sizes[: i + 1])]) for i in range(3)]
    assert result.source_scores("ig") == pytest.approx(expected, rel=1e-6)


def test_iba_deletion_pools_a_source_by_its_masks_log_odds(lm):
    """iba-deletion's token scores are a mask in [0, 1] that starts at 1/2: a
    source's score is the log-odds of its largest (docs/studies/context_logodds.rst,
    "The mask's log-odds"); the paper's IBA (its capacity) keeps the max."""
    text = "the cat sat on the mat. a dog ran in the park! the big dog"
    result = _explain(lm, text, "iba-deletion", steps=2)
    found = result.methods["iba-deletion"]
    assert found.source_pooling.startswith("the log-odds of its tokens' largest")
    tokens = result.scores(pieces=True)  # each word a token, a mark one more
    sizes = [7, 7, 3]
    largest = [max(tokens[sum(sizes[:i]) : sum(sizes[: i + 1])]) for i in range(3)]
    expected = [math.log(m / (1 - m)) for m in largest]
    assert result.source_scores() == pytest.approx(expected, rel=1e-5, abs=1e-5)
    paper = _explain(lm, text, "IBA", steps=2)
    assert paper.methods["IBA"].source_pooling == "the max of its tokens' scores"


def test_sources_given_as_spans_and_several_methods(lm):
    text = "the cat sat on the mat a dog ran in the park"
    result = _explain(
        lm, text, ["iba-sources", "ig"], sources=[(0, 22), (23, 44)], steps=2
    )
    assert result.sources() == ["the cat sat on the mat", "a dog ran in the park"]
    for name in ("iba-sources", "ig"):
        assert len(result.source_scores(name)) == 2
        assert all(math.isfinite(s) for s in result.source_scores(name))


def test_an_explanation_without_a_context_has_no_sources(lm):
    model, tok = lm
    result = captum_iba.explain(
        "the cat sat", model=model, tokenizer=tok, steps=2, **FAST
    )
    with pytest.raises(ValueError, match="no sources.*context="):
        result.sources()
    with pytest.raises(ValueError, match="no sources"):
        result.source_scores()


@pytest.mark.parametrize(
    "query, context, options, message",
    [
        (
            QUERY,
            ["the cat sat"],
            {},
            "at least two sources to attribute an answer to; got 1",
        ),
        (QUERY, "the cat sat on the mat", {}, "1 source by sources= sentence"),
        ("  ", SOURCES, {}, "the query is empty"),
        (QUERY, ["the cat", " "], {}, r"source 1 \(' '\) is not \(only spaces"),
        (QUERY, ["the cat", "\u200b"], {}, r"source 1 \('\\u200b'\) is not"),
        (
            QUERY,
            "the cat sat on the mat  a dog ran",
            {"sources": [(0, 22), (22, 23), (24, 33)]},
            r"sources= \(spans of the context\): the span \(22, 23\) holds no words",
        ),
        (
            QUERY,
            "the cat sat\n\u200b\na dog ran",
            {"sources": "lines"},
            "source 2 by sources= lines holds no words",
        ),
        (QUERY, "the cat sat on the mat", {"sources": [(0, 7), (4, 12)]}, "overlap"),
        (QUERY, "the cat sat", {"sources": [(0, 3), (4, 99)]}, "outside"),
        (QUERY, "a b. c d.", {"sources": "words"}, "'words': one of sentence"),
        (QUERY, SOURCES, {"sources": [(0, 3)]}, "spans are for a context given as"),
        (QUERY, SOURCES, {"sources": "words"}, "for a list of sources, how its"),
    ],
)
def test_bad_contexts_are_refused_before_the_model(query, context, options, message):
    # the model is a folder that does not exist: the refusal comes first
    with pytest.raises(ValueError, match=message):
        captum_iba.explain(query, model="/no/such/model", context=context, **options)
    with pytest.raises(ValueError, match=message):
        context_prompt_of(query, context, options.get("sources", "sentence"))


def test_iba_sources_without_a_context_before_the_weights(lm_dir, no_lm_weights):
    with pytest.raises(ValueError, match="iba-sources scores the sources of a"):
        captum_iba.explain(QUERY, model=lm_dir, method="iba-sources")


def test_a_context_past_the_positions_before_the_weights(lm_dir, no_lm_weights):
    long = [" ".join(["the cat sat"] * 8)] * 2  # 48 words and the layout
    with pytest.raises(ValueError, match=r"has \d+ tokens, more than the model's 48"):
        captum_iba.explain(QUERY, model=lm_dir, context=long)


def test_a_context_for_a_classifier_is_refused(tiny_model_dir):
    with pytest.raises(ValueError, match="context= is for a causal LM"):
        captum_iba.explain(QUERY, model=tiny_model_dir, context=SOURCES)
    with pytest.raises(ValueError, match="sources= says how to cut a context="):
        captum_iba.explain(QUERY, model=tiny_model_dir, sources="lines")


def test_cli_context_file_by_documents_lists_and_pages(lm_dir, tmp_path, capsys):
    docs = tmp_path / "docs.txt"
    docs.write_text("the cat sat\non the mat\n\na dog ran\n\nthe big red dog\n")
    html = tmp_path / "context.html"
    argv = ["explain", "--context", str(docs), "--query", QUERY, "--model", lm_dir]
    argv += ["--sources", "documents", "--compare", "iba-sources,ig"]
    code = main(argv + ["--steps", "2", "--max-new-tokens", "2", "--html", str(html)])
    out = capsys.readouterr().out
    assert code == 0
    assert "context: 3 sources (documents)" in out and "answer (greedy" in out
    assert out.count("sources, best first") == 2
    for source in ("the cat sat on the mat", "a dog ran", "the big red dog"):
        assert re.search(f"  {source}$", out, re.M)  # a line break as a space
    page = html.read_text()
    assert "Which source of the context did the answer use?" in page
    assert "iba-sources: sources" in page and "IG: sources" in page
    for k, source in enumerate(
        ("the cat sat\non the mat", "a dog ran", "the big red dog"), 1
    ):
        assert f">[{k}] {source}</span>" in page  # numbered, no rank (issue 90)


def test_a_context_without_a_method_gets_the_context_default(lm, lm_dir, capsys):
    """A context's default is the study's best at the lowest cost
    (iba-surrogate), from Python and the command line alike; a plain prompt
    keeps iba-deletion; both explain the whole answer unless asked."""
    from captum_iba.attr.kinds import CAUSAL_LM, CLASSIFIER

    assert CAUSAL_LM.default_for(True) == "iba-surrogate"
    assert CAUSAL_LM.default_for(False) == CLASSIFIER.default_for(True)
    assert CLASSIFIER.default_for(False) == "iba-deletion"
    model, tok = lm
    result = captum_iba.explain(QUERY, model=model, tokenizer=tok, context=SOURCES)
    assert list(result.methods) == ["iba-surrogate"]
    assert len(result.source_scores()) == 3
    assert not result.subject.per_token and result.matrix() is None
    argv = ["explain", "--context", "; ".join(SOURCES), "--query", QUERY]
    argv += ["--model", lm_dir, "--sources", "lines", "--max-new-tokens", "2"]
    capsys.readouterr()
    with pytest.raises(SystemExit):  # one line: one source, refused
        main(argv)
    argv[2] = "\n".join(SOURCES)
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "\niba-surrogate: " in out and "\niba-deletion: " not in out
    assert "per output token" not in out
    plain = captum_iba.explain(QUERY, model=model, tokenizer=tok, target=" the mat")
    assert list(plain.methods) == ["iba-deletion"] and plain.matrix() is None


def test_cli_turns_from_the_text_itself(lm_dir, capsys):
    chat = "User: the cat sat\nAssistant: a dog ran\nUser: the big dog"
    argv = ["explain", "--context", chat, "--query", QUERY, "--model", lm_dir]
    argv += ["--method", "iba-deletion", "--steps", "2"]
    assert main(argv + ["--sources", "turns"]) == 0
    out = capsys.readouterr().out
    assert "context: 3 sources (turns)" in out
    assert re.search(r"\[\d\] +[-\d.e]+  Assistant: a dog ran", out), out


def _refused(argv, capsys):
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    return err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--context", "the cat sat on the mat"], "1 source by --sources sentence"),
        (["--context", "the cat sat", "--sources", "turns"], "speaker's label"),
        (["--context", "a b. c d.", "--query", " "], "--query is empty"),
        (["--context", "a b. c d."], "--query is empty or missing"),
        (["the cat", "--context", "a b. c d.", "--query", "x"], "give the question"),
        (["the cat", "--query", "x"], "--query goes with --context"),
        (["the cat", "--sources", "lines"], "--sources goes with --context"),
        ([], "give the text to explain"),
        (
            ["--context", "/no/such/notes.txt"],
            "--context /no/such/notes.txt: file not found",
        ),
        (
            ["--context", "no such. notes. v2.md"],
            "--context no such. notes. v2.md: "
            "file not found (a text is taken as the context itself only when",
        ),
        (["--context", "a.b/c.d"], "--context a.b/c.d: file not found"),
    ],
)
def test_cli_refusals_before_the_weights(lm_dir, no_lm_weights, extra, message, capsys):
    argv = ["explain", "--model", lm_dir] + extra
    if "--query" not in extra and extra[:1] == ["--context"] and "a b" not in extra[1]:
        argv += ["--query", QUERY]
    assert message in _refused(argv, capsys)


def test_cli_context_folder_is_refused_and_text_with_a_slash_kept(
    lm_dir, tmp_path, no_lm_weights, capsys
):
    """Issue 79 item 2: a folder was read as the context's text (its path
    split into two sources); a text that only holds a slash is still a text."""
    folder = tmp_path / "a. b"
    folder.mkdir()
    argv = ["explain", "--context", str(folder), "--query", QUERY, "--model", lm_dir]
    assert f"--context {folder}: a folder; give a text file" in _refused(argv, capsys)
    for text in ("the cat and/or the dog. It sat.", "I like Node.js", "notes"):
        assert read_context(text) == text
    notes = tmp_path / "notes.txt"
    notes.write_text("the cat sat. a dog ran.", encoding="utf-8")
    assert read_context(str(notes)) == "the cat sat. a dog ran."


def test_the_page_s_source_legend_says_what_the_score_is(lm):
    """Issue 79 item 17: the legend 'Score: one per source, its own score of
    each source.' said nothing; it says what the method's score is."""
    from captum_iba.app.context_explain import source_rows

    result = _explain(lm, SOURCES, "loso")
    (row,) = source_rows(result)
    assert row.meaning.startswith("one per source, its own score of each source, ")
    assert "in nats: the answer's log-probability it adds" in row.meaning
    assert row.unit == "nats"  # issue 90, item 4


def test_cli_context_past_the_positions_and_for_a_classifier(
    lm_dir, tiny_model_dir, no_lm_weights, capsys
):
    long = ". ".join(["the cat sat on the mat"] * 8)
    argv = ["explain", "--context", long, "--query", QUERY, "--model", lm_dir]
    assert "more than the model's 48 positions" in _refused(argv, capsys)
    argv = ["explain", "--context", "a b. c d.", "--query", QUERY]
    assert "--context is for a causal LM" in _refused(
        argv + ["--model", tiny_model_dir], capsys
    )


def test_iba_sources_ranks_a_long_source_among_short_ones(lm):
    # the long source holds most tokens, all sharing its one weight: IBA's
    # tie check judges one score per source, not the tied tokens
    long = "the cat sat on the mat a dog ran in the park the big red dog is very"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = _explain(
            lm, [long, "a dog ran", "the red cat"], "iba-sources", steps=3
        )
    assert not [w for w in caught if "gives no ranking" in str(w.message)]
    assert result.methods["iba-sources"].no_ranking == ""
    assert len(set(result.source_scores())) == 3


def test_turns_keep_a_turns_lines_and_the_text_before_the_first_label():
    chat = "Notes\nUser: the cat sat\non the mat\nAssistant: a dog: ran\nUser: ok"
    prompt = context_prompt_of(QUERY, chat, "turns")
    assert prompt.sources == [
        "Notes",
        "User: the cat sat\non the mat",
        "Assistant: a dog: ran",
        "User: ok",
    ]


def test_cli_attnlrp_without_lxt_before_the_weights(
    lm_dir, no_lm_weights, monkeypatch, capsys
):
    """AttnLRP pooled to the sources, where lxt is missing: the cause in one
    line, before the weights load."""
    hide_lxt(monkeypatch)
    argv = ["explain", "--context", "a b. c d.", "--query", QUERY, "--model",
            lm_dir, "--method", "attnlrp"]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert "AttnLRP needs the optional package lxt, which is not installed" in err


class _Missing:
    """A finder that says the packages it names are not installed."""

    def __init__(self, *names):
        self.names = names

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


@pytest.mark.parametrize(
    "method, package",
    [("contextcite-32", "context_cite"), ("contextcite-256", "context_cite")],
)  # fmt: skip
def test_cli_context_method_without_its_package_before_the_weights(
    lm_dir, no_lm_weights, monkeypatch, capsys, method, package
):
    """Issue 79 item 4: ContextCite and AT2 without their package were
    refused after the model loaded (~23 CPU-s); now, like AttnLRP without
    lxt, before the weights, naming the package and its install command."""
    import sys

    for name in [m for m in sys.modules if m.partition(".")[0] == package]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_Missing(package), *sys.meta_path])
    argv = ["explain", "--context", "a b. c d.", "--query", QUERY, "--model",
            lm_dir, "--method", method]  # fmt: skip
    err = _refused(argv, capsys)
    assert len(err.strip().splitlines()) == 1, err
    assert (
        f"{method} needs its package {package}, which is not installed: "
        "pip install context-cite (or pip install captum-iba[context])"
    ) in err, err


def test_a_source_method_gives_no_word_level_verdict(lm, monkeypatch):
    """Issue 79 item 11: iba-sources printed a clear source ranking, then 'no
    ranking of the words ... found nothing that changes the answer' (its
    words tie within a source): a method that scores sources as such is
    judged by its sources only."""
    import captum_iba.app.answer_route as route

    say = route._say_no_ranking  # told that IBA found most tokens tied
    monkeypatch.setattr(route, "_say_no_ranking", lambda r, n, _: say(r, n, True))
    result = _explain(lm, SOURCES, "iba-sources", steps=2)
    assert result.methods["iba-sources"].by_source
    assert result.methods["iba-sources"].no_ranking == ""
    assert "no ranking" not in result.to_text()


def test_a_source_method_lists_no_top_words(lm):
    """Issue 79 item 15: 'top words: The (39.4), city (39.4), ...' was a
    source's tie shown as a word ranking; a source method lists its sources
    and says its words share their source's score; a token method keeps its
    top words."""
    listing = _explain(lm, SOURCES, ["loso", "ig"]).to_text()
    loso, ig = listing.split("\nIG: ")
    assert "top words" not in loso
    assert "words: the words of one source share its score; see the source" in loso
    assert "top words: " in ig


def test_a_source_method_whose_sources_tie_says_so_of_the_sources(lm, monkeypatch):
    import torch

    from captum_iba.evaluation.source_methods import LeaveOneSourceOutScorer

    def tied(self, batch, per_token):
        return torch.full((len(batch), batch.n_sources), 0.5, dtype=torch.float64), None

    monkeypatch.setattr(LeaveOneSourceOutScorer, "_source_scores", tied)
    with pytest.warns(UserWarning, match="every source's score is within"):
        result = _explain(lm, SOURCES, "loso")
    assert "every source's score" in result.methods["loso"].no_ranking
    assert "no ranking of the sources: every source's" in result.to_text()


def test_a_span_that_cuts_a_token_is_warned_before_the_weights(lm_dir, no_lm_weights):
    """Issue 79 item 9: spans that cut a token in two ran without a word."""
    context = "the cat sat on the mat"
    with pytest.warns(UserWarning, match=r"source 1 \('the c'\) cuts the token 'cat'"):
        with pytest.raises(Exception, match="the weights were loaded"):
            captum_iba.explain(
                QUERY, model=lm_dir, context=context, sources=[(0, 5), (5, 22)],
                method="loso",
            )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # spans between words: no warning
        with pytest.raises(Exception, match="the weights were loaded"):
            captum_iba.explain(
                QUERY, model=lm_dir, context=context, sources=[(0, 7), (8, 22)],
                method="loso",
            )  # fmt: skip


@pytest.mark.parametrize("method", ["contextcite-32"])
def test_an_answer_of_only_whitespace_is_refused_before_at2_or_contextcite(
    method, monkeypatch
):
    """Issue 79 item 8: AT2 and ContextCite on the answer '\\n\\n' were refused
    after their work ('reads the prompt as other tokens ([] ... for [198,
    198])'); refused before the weights, naming the answer."""
    refuses_a_whitespace_answer(method, monkeypatch)


def refuses_a_whitespace_answer(method, monkeypatch):
    """``method`` (its package taken as installed) on the answer '\\n\\n' is
    refused before the weights load, naming the answer."""
    from captum_iba._utils import common
    from tests.helpers import byte_level_tokenizer, tiny_causal_lm

    monkeypatch.setattr(common, "import_problem", lambda name: None)  # as installed
    tok = byte_level_tokenizer()
    model = tiny_causal_lm("gpt2", positions=128)
    model.resize_token_embeddings(len(tok), mean_resizing=False)
    with pytest.raises(
        ValueError,
        match=rf"{method} cannot explain the answer '\\n\\n': it holds only whitespace",
    ):
        captum_iba.explain(
            QUERY, model=model, tokenizer=tok, context=SOURCES, method=method,
            target="\n\n",
        )  # fmt: skip


_FAKE_CONTEXT_CITE = {
    "__init__.py": (
        "import sys, warnings\n"
        "print('[nltk_data] Error loading punkt_tab', file=sys.stderr)\n"
        "warnings.warn('a dependency moves', FutureWarning)\n"
    ),
    "context_partitioner.py": (
        "class BaseContextPartitioner:\n"
        "    def __init__(self, context):\n"
        "        self.context = context\n"
    ),
    "utils.py": "",
    "context_citer.py": (
        "import warnings\n"
        "import numpy as np\n"
        "class ContextCiter:\n"
        "    def __init__(self, model, tokenizer, context, query, partitioner=None,"
        " **kw):\n"
        "        warnings.warn('a dependency notes', UserWarning)\n"
        "        self.tokenizer, self.partitioner, self._cache = tokenizer, "
        "partitioner, {}\n"
        "    @property\n"
        "    def _response_ids(self):\n"
        "        _, prompt = self._get_prompt_ids(return_prompt=True)\n"
        "        rest = self._cache['output'][len(prompt):]\n"
        "        return self.tokenizer(rest, add_special_tokens=False).input_ids\n"
        "    def get_attributions(self, verbose=True):\n"
        "        warnings.warn('an argument is deprecated', FutureWarning)\n"
        "        print('[nltk_data] Error loading punkt_tab')\n"
        "        n = self.partitioner.num_sources\n"
        "        return np.array([-0.0] + [0.5 * (k + 1) for k in range(n - 1)])\n"
    ),
}


@pytest.fixture
def fake_context_cite(tmp_path, monkeypatch):
    """A stand-in for the context_cite package that prints NLTK's failed
    download and warns as the real one does offline."""
    import sys

    folder = tmp_path / "fake" / "context_cite"
    folder.mkdir(parents=True)
    for name, text in _FAKE_CONTEXT_CITE.items():
        (folder / name).write_text(text)
    monkeypatch.syspath_prepend(str(folder.parent))
    # the real package, imported by an earlier request's check (issue 90,
    # item 15: a package is imported before the weights), is not the stand-in
    for name in [n for n in sys.modules if n.split(".")[0] == "context_cite"]:
        monkeypatch.delitem(sys.modules, name)
    yield
    for name in [n for n in sys.modules if n.split(".")[0] == "context_cite"]:
        del sys.modules[name]


def test_contextcite_s_noise_is_kept_from_the_terminal(lm, fake_context_cite, capsys):
    """Issue 79 item 19: ContextCite's adapter let '[nltk_data] Error loading
    punkt_tab', a FutureWarning and a UserWarning through, and showed a zero
    score as '-0'."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = _explain(lm, SOURCES, "contextcite-32")
    printed = capsys.readouterr()
    assert "nltk_data" not in printed.out + printed.err
    assert not [w for w in caught if "dependency" in str(w.message)]
    assert not [w for w in caught if "deprecated" in str(w.message)]
    scores = result.source_scores("contextcite-32")
    assert scores == [0.0, 0.5, 1.0] and str(scores[0]) == "0.0"
    listing = result.to_text()
    assert "-0 " not in listing and "  [1]         0  the cat sat" in listing
