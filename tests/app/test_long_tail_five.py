"""Issue 90, "the long tail, round 5", on tiny random Llamas: citations a
reader can follow (one numbering, scores with their unit), the same
context in any form giving the same prompt, shorter listings, options that
say what ran, and the inputs a careful user gives (NumPy integers,
``--answer-span -3:5``, ``--context -``, a broken package) - each refused
or read before the weights where it can be."""

import html
import io
import sys
import threading

import numpy as np
import pytest

import captum_iba
from captum_iba.app.answer_spans import check_answer_span
from captum_iba.app.context_explain import context_prompt_of
from captum_iba.app.errors import CLIError
from captum_iba.request import check_request
from tests.app.test_answer_spans import (
    ANSWER,
    QUERY,
    SOURCES,
    _refused,
    two_fact_tokenizer,
)
from tests.app.test_answer_spans import _tiny_lm as _two_fact_lm
from tests.helpers import saved_lm


@pytest.fixture(scope="module")
def lm():
    return _two_fact_lm(), two_fact_tokenizer()


@pytest.fixture(scope="module")
def lm_dir(tmp_path_factory, lm):
    return saved_lm(tmp_path_factory.mktemp("tiny-long-tail"), *lm)


def _explain(lm, context=SOURCES, method="loso", **options):
    model, tok = lm
    return captum_iba.explain(
        QUERY, model=model, tokenizer=tok, context=context, method=method, **options
    )


# -- items 3 and 4: one numbering, scores with their unit ----------------------


def test_citations_number_sources_as_the_page_and_the_listing_do(lm):
    """Item 3: ``Citation.sources`` held 0-based indices beside the page's
    and the listing's [1]-based marks, and the page showed rank superscripts
    beside them. Python keeps the index (it indexes ``result.sources()``)
    and names the mark's number (``.number``, ``.mark``); the page's and the
    listing's source rows carry the sources' numbers only."""
    from captum_iba.app.answer_spans import CitedSource

    result = _explain(lm, method=["loso", "iba-deletion"], target=ANSWER,
                      answer_span="sentences", steps=2)  # fmt: skip
    page, listing = result.to_html(), result.to_text()
    cited = [s for c in result.citations(3, "iba-deletion") for s in c.sources]
    assert cited and all(isinstance(s, CitedSource) for s in cited)
    for s in cited:
        index, text, score = s  # a tuple as before
        assert s.number == index + 1 and s.mark == f"[{index + 1}]"
        assert result.sources()[index] == text
        assert f'<sup class="mark" title="score {score:.4g}: {text}">{s.mark}' in page
    rows = page.split('<div class="row">')[1:3]  # the two methods' sources
    for row in rows:
        assert "<sup>" not in row  # no rank beside a source's number
        for i, text in enumerate(SOURCES, 1):
            assert f"[{i}] {text}</span>" in row
    # the listing: sources best first, each by its number, no rank column
    assert "sources, best first" in listing and "  1. " not in listing
    scores = result.source_scores("loso")
    best = max(range(3), key=lambda i: scores[i])
    assert f"  [{best + 1}] " in listing.split("loso:")[1].splitlines()[2]


def test_a_source_s_score_says_its_unit_where_it_is_shown(lm):
    """Item 4: "21.69 against 2.146" and "logit-probability" were shown
    without what they are."""
    result = _explain(lm, method=["loso", "iba-surrogate"], target=ANSWER)
    listing, page = result.to_text(), html.unescape(result.to_html())
    assert "its own score of each source, in nats: the answer's log-probability" in (
        listing
    )
    said = "logit-probability, log(p / (1 - p)) of the answer's probability p"
    assert said in " ".join(listing.split()) and said in page
    assert result.methods["iba-surrogate"].unit == "logit-probability"


# -- item 5: the same text, the same prompt ------------------------------------


def test_the_same_context_gives_the_same_prompt_in_any_form(lm):
    """Item 5: a notes file's text (its last line break kept), the same
    documents as a list, and sentences as a list got different prompts (and
    on SmolLM2 different answers). A text is laid out without its outer
    whitespace, a list of documents joined by blank lines, a list of
    sentences with spaces (``sources="sentence"``, ContextCite's layout)."""
    notes = "\n\n".join(SOURCES) + "\n"  # as a file reads
    by_file = context_prompt_of(QUERY, notes, "documents")
    by_list = context_prompt_of(QUERY, SOURCES)
    assert by_file.text == by_list.text and by_file.sources == by_list.sources
    assert by_list.split == "a list, joined by a blank line"
    sentences = [s + " ." for s in SOURCES]
    as_text = context_prompt_of(QUERY, " ".join(sentences))
    as_list = context_prompt_of(QUERY, sentences, "sentence")
    assert as_text.text == as_list.text and as_text.sources == as_list.sources
    assert as_list.split == "a list, joined by a space"
    with pytest.raises(ValueError, match="for a list of sources, how its items"):
        context_prompt_of(QUERY, SOURCES, [(0, 3), (4, 9)])
    # on a model: the same prompt ids, the same scores
    forms = [(notes, "documents"), (SOURCES, None), (SOURCES, "documents")]
    results = [_explain(lm, c, target=ANSWER, sources=s) for c, s in forms]
    first = results[0]
    for other in results[1:]:
        assert other.subject.prompt == first.subject.prompt
        assert other.tokens(pieces=True) == first.tokens(pieces=True)
        assert other.source_scores() == first.source_scores()
    listing = results[1].to_text()
    assert "3 sources (a list, joined by a blank line)" in listing


# -- items 6 and 7: shorter listings that say what ran -------------------------


def test_the_listings_say_a_method_in_one_line_and_relative_once(tiny_model_dir):
    """Item 6: a method's 6-10 lines of description, and "(relative:
    min-max ...)" twice per method."""
    result = captum_iba.explain(
        "a fine film", model=tiny_model_dir, method=["iba-deletion", "ig"]
    )
    text = result.to_text()
    for name in ("iba-deletion", "IG"):
        block = text.split(f"\n{name}: ")[1].split("\n\n")[0]
        head = block.splitlines()[0]
        assert head == result.details(name, brief=True)
        assert len(head) < len(result.details(name))
        assert block.count("relative") == 1, block


def test_a_classifier_s_listing_says_what_a_score_means_in_brief(tiny_model_dir):
    """Item 6, seen on a fresh clone after the first round: a classifier's
    listing still gave each method's whole meaning (iba-deletion's: five
    lines) before its top words. It gives the sentence before the colon,
    without its asides; the page keeps it whole."""
    result = captum_iba.explain(
        "a fine film", model=tiny_model_dir, method=["iba-deletion", "ig"]
    )
    text = result.to_text()
    for name in ("iba-deletion", "IG"):
        block = text.split(f"\n{name}: ")[1].split("\n\n")[0]
        said = block.split("score = ")[1].split("\n  (")[0]
        assert len(said.splitlines()) <= 2, block
        assert "[0, 1]" not in said and ": " not in said
        page = html.unescape(result.to_html())
        assert result.methods[name].meaning in page


def test_iba_fast_on_a_short_prompt_says_it_took_no_second_step(lm):
    """Item 7: under 128 scored tokens iba-fast runs one step (its scores
    are one step's), but its details said "then 1 with its top 50 % of the
    tokens deleted" (its top 25 % since 0.3)."""
    model, tok = lm
    result = captum_iba.explain(
        QUERY, model=model, tokenizer=tok, method="iba-fast", target=ANSWER
    )
    details = result.details("iba-fast")
    assert "then 1 with its top" not in details
    n = len(result.scores("iba-fast", pieces=True))
    assert f"% deleted (the prompt's {n} scored tokens are under its 128)" in details
    assert "no step with its top " in details


# -- items 8 and 10: one rule for both doors; clear errors ---------------------


def test_an_option_a_method_does_not_declare_is_refused_at_both_doors():
    """Item 8: ``{"iba-deletion": {"rest_share": 0.5}}`` was accepted in
    Python (and changed the scores by up to 0.117) where the command line
    refused it; item 10: loso's ``surrogate_design`` reached an internal
    TypeError."""
    for method, key, value in (
        ("iba-deletion", "rest_share", 0.5),
        ("loso", "surrogate_design", "factorial"),
    ):
        for cli in (False, True):
            with pytest.raises(ValueError, match=f"{method} takes no option '{key}'"):
                check_request([method], method_options={method: {key: value}}, cli=cli)
    # a constructor keyword that is no option still passes (the Python API's)
    assert check_request(["IG"], method_options={"IG": {"n_steps": 5}}).methods


def test_a_keyword_no_scorer_takes_is_a_clear_error(lm):
    model, tok = lm
    with pytest.raises(ValueError, match=r"method_options\['loso'\]: 'foo' is "):
        captum_iba.explain(
            QUERY, model=model, tokenizer=tok, context=SOURCES, method="loso",
            method_options={"loso": {"foo": 1}},
        )  # fmt: skip


def test_a_bad_per_method_value_is_named_once():
    """Item 10: ``--set iba-fast:rest_share=1`` said "iba-fast:rest_share
    rest_share: must be ..."."""
    bad = {"iba-fast": {"rest_share": 1}}
    with pytest.raises(ValueError, match=r"^--set iba-fast:rest_share: must be"):
        check_request(["iba-fast"], method_options=bad, cli=True)
    with pytest.raises(
        ValueError, match=r"^method_options\['iba-fast'\]\['rest_share'\]: must be"
    ):
        check_request(["iba-fast"], method_options=bad)


# -- items 11 and 12: the inputs a careful user gives --------------------------


@pytest.mark.parametrize(
    "span, message",
    [
        ("-3:5", "--answer-span -3:5 is empty or starts before the answer"),
        ("1_0:20", "--answer-span 1_0:20: give START:END, two integers"),
    ],
)
def test_cli_answer_span_negative_and_underscored(
    lm_dir, no_lm_weights, capsys, span, message
):
    """Item 11: ``--answer-span -3:5`` got argparse's "expected one
    argument", and ``1_0:20`` was read as 10:20."""
    argv = ["explain", "--model", lm_dir, "--context", "a b. c d.", "--query",
            QUERY, "--answer-span", span]  # fmt: skip
    assert message in _refused(argv, capsys)


def test_numpy_integers_are_integers(lm):
    """Item 12: ``answer_span=(np.int64(1), np.int64(5))`` was refused as
    "give two integers", ``span=np.int64(1)`` as "the parts are 0..1"."""
    assert check_answer_span((np.int64(1), np.int32(5))) == (1, 5)
    result = _explain(lm, target=ANSWER, answer_span="sentences")
    one = result.source_scores(span=np.int64(1))
    assert one == result.source_scores(span=1)
    assert len(result.citations(np.int64(2), share=np.float32(0.5))) == 2


# -- item 13: a context from standard input ------------------------------------


def test_context_from_standard_input_and_an_empty_one(monkeypatch, tmp_path):
    """Item 13: ``--context -`` and ``/dev/stdin`` were refused as "file not
    found"; ``/dev/null`` should say the context is empty."""
    from captum_iba.app.context_explain import read_context

    monkeypatch.setattr(sys, "stdin", io.StringIO("Lars moved.\n\nOil rose.\n"))
    assert read_context("-") == "Lars moved.\n\nOil rose.\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO("  \n"))
    with pytest.raises(CLIError, match="--context -: standard input is empty"):
        read_context("-")
    with pytest.raises(CLIError, match="/dev/null: the file is empty"):
        read_context("/dev/null")
    import os

    pipe = tmp_path / "pipe"  # what /dev/stdin is under a shell's pipe
    os.mkfifo(pipe)
    writer = threading.Thread(target=lambda: pipe.write_text("From a pipe."))
    writer.start()
    assert read_context(str(pipe)) == "From a pipe."
    writer.join()


# -- item 14: per-token scores of a context, shown -----------------------------


def test_per_token_scores_of_a_context_are_listed(lm):
    result = _explain(lm, target=ANSWER, method="iba-deletion", steps=1,
                      per_token=True)  # fmt: skip
    assert result.matrix("iba-deletion") is not None
    listing = result.to_text()
    assert "per output token (top words):" in listing
    assert "'key'" in listing.split("per output token")[1]


# -- item 15: a package that does not import, before the weights ---------------


def test_a_package_that_fails_to_import_is_refused_before_the_weights(
    lm_dir, no_lm_weights, monkeypatch, tmp_path, capsys
):
    """Item 15: an installed package whose import fails (ContextCite's,
    AT2's) was refused only after the model loaded (54 s with a GGUF)."""
    fake = tmp_path / "site" / "context_cite"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("print('noise'); raise ImportError('broken')\n")
    for name in [m for m in sys.modules if m.partition(".")[0] == "context_cite"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    argv = ["explain", "--context", "a b. c d.", "--query", QUERY, "--model",
            lm_dir, "--method", "contextcite-32"]  # fmt: skip
    err = _refused(argv, capsys)
    assert "contextcite-32 needs its package context_cite, which is installed but " \
        "does not import (ImportError: broken)" in err  # fmt: skip
    assert "noise" not in capsys.readouterr().out


# -- item 16: warnings that point at the user and say what is so ---------------


def test_the_source_cut_warning_points_at_the_user_s_call(lm):
    with pytest.warns(UserWarning, match="cuts the token") as got:
        _explain(lm, "the key alpha is red a door omega is blue",
                 sources=[(0, 10), (10, 41)], target=ANSWER)  # fmt: skip
    assert [w.filename for w in got if "cuts the token" in str(w.message)] == [__file__]


def test_a_cache_that_is_a_file_is_named(monkeypatch, tmp_path):
    """Item 16: with ``CAPTUM_IBA_CACHE`` a file, at2 suggested ``--out
    <file>/at2``."""
    from captum_iba._utils.io import cache_root

    afile = tmp_path / "cache.txt"
    afile.write_text("")
    monkeypatch.setenv("CAPTUM_IBA_CACHE", str(afile))
    with pytest.raises(NotADirectoryError, match="CAPTUM_IBA_CACHE=.* is a file"):
        cache_root()


def test_near_flat_and_tied_warnings_speak_of_the_method_that_ran():
    """Item 16: AT2's near-flat warning spoke of IBA's mask; iba-sources on
    duplicate sources advised "use config='deletion'", its configuration."""
    from captum_iba.app.llm_explain_text import near_flat_said

    assert "mask" not in near_flat_said([1.0, 0.999], mask=False)
    assert "IBA's mask barely moved" in near_flat_said([1.0, 0.999])
    import torch

    from captum_iba.attr import InformationBottleneckAttribution
    from captum_iba.attr._ranking import say_if_flat
    from captum_iba.attr.options import CONFIGS

    model = _two_fact_lm()
    iba = InformationBottleneckAttribution(model, model.model.embed_tokens)
    deletion = CONFIGS.load("deletion")
    with pytest.warns(UserWarning, match="gives no ranking") as got:
        say_if_flat(torch.tensor([True]), iba, deletion)
    said = str(got[0].message)
    assert "use config='deletion'" not in said
    assert "the deletion configuration already ran" in said


# -- item 17: a ranking that looks wrong, said where it is shown ---------------


class _Ranked:
    """An explanation's ``methods`` and ``top`` as the note reads them."""

    def __init__(self, tops):
        self.tops = tops
        self.methods = {n: type("M", (), {"no_ranking": ""})() for n in tops}

    def top(self, k, name, pieces=False):
        return [(w, 1.0) for w in self.tops[name][:k]]


def test_function_words_ranked_first_are_explained_where_shown(tiny_model_dir):
    """Item 17: a whole answer ranked "the" first and "France?" last, and
    iba-deletion ranked "," and "." third and fourth on a classifier, with
    no hint: a note says why, under the page and in the listing."""
    from captum_iba.app.subjects import ClassifierSubject, PromptSubject
    from captum_iba.app.words import form_words_note

    causal, classifier_why = (
        PromptSubject.form_words_why,
        ClassifierSubject.form_words_why,
    )
    answer = _Ranked({"iba-deletion": ["the", "capital", "France?"]})
    note = form_words_note(answer, False, causal)
    assert "iba-deletion: 'the'" in note and "copies from the prompt" in note
    assert "--per-token" in note
    classifier = _Ranked({"iba-deletion": ["gripping", "film", ","], "IG": ["dull"]})
    note = form_words_note(classifier, False, classifier_why)
    assert "iba-deletion: ','" in note and "IG" not in note
    assert (
        form_words_note(_Ranked({"IG": ["gripping", "film", "dull"]}), False, True)
        == ""
    )
    # where it is shown: a classifier's listing and page carry the notes
    result = captum_iba.explain(". , the", model=tiny_model_dir, method="ig")
    assert "Function words or punctuation among the top words" in result.to_text()
    assert "Function words or punctuation among the top words" in result.to_html()


def test_an_answer_s_listing_says_why_form_words_rank(lm):
    model, tok = lm
    result = captum_iba.explain(
        "the key is the door", model=model, tokenizer=tok,
        method="iba-deletion", target=ANSWER, steps=1,
    )  # fmt: skip
    top = [w for w, _ in result.top(3, "iba-deletion")]
    assert any(w in ("the", "is") for w in top), top  # 3 of the 5 words are
    assert "note: Function words or punctuation among the top words" in (
        result.to_text()
    )
