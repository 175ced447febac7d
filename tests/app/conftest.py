"""Fixtures of the application tests: a tiny base model to fine-tune, the
fine-tune cache with counted fine-tunes on synthetic data, and a tiny causal
LM for the SST-2 prompt task."""

import time

import pytest

from tests.helpers import (
    SENTIMENT_FILLER,
    SENTIMENT_WORDS,
    SST2_TASK_WORDS,
    bert_tokenizer,
    synthetic_sentiment,
    tiny_bert,
    tiny_causal_lm,
    tiny_word_tokenizer,
)


@pytest.fixture(scope="session")
def tiny_base(tmp_path_factory):
    """A 2-layer, hidden-32 random BERT with a word-level tokenizer, saved."""
    folder = tmp_path_factory.mktemp("tiny_bert")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += sorted(set(SENTIMENT_FILLER + SENTIMENT_WORDS[0] + SENTIMENT_WORDS[1]))
    tok = bert_tokenizer(vocab)
    assert tok.convert_ids_to_tokens(tok("good film")["input_ids"])[1] == "good"
    tok.save_pretrained(folder)
    tiny_bert(len(vocab), max_position_embeddings=64).save_pretrained(folder)
    return folder


@pytest.fixture
def counted_fine_tune(monkeypatch, tmp_path):
    """The fine-tune cache in ``tmp_path / "cache"``; the fine-tunes that
    ``get_finetuned_model`` starts are recorded (their keywords) and run on
    synthetic data, after ``delay["s"]`` seconds.

    Returns:
        (calls, delay): the list of recorded keywords and the delay dict.
    """
    from captum_iba.app import finetune as ft
    from captum_iba.app.finetune import cache as ft_cache

    monkeypatch.setenv(ft.CACHE_ENV_VAR, str(tmp_path / "cache"))
    calls = []
    real = ft.fine_tune
    delay = {"s": 0.0}

    def fake(*args, **kwargs):
        calls.append(kwargs)
        time.sleep(delay["s"])
        kwargs["eval_dataset"] = synthetic_sentiment(16, 1)
        return real(synthetic_sentiment(32, 0), *args[1:], **kwargs)

    monkeypatch.setattr(ft_cache, "fine_tune", fake)
    monkeypatch.setattr(ft_cache, "heldout_data", lambda *a: synthetic_sentiment(16, 1))
    return calls, delay


@pytest.fixture
def tiny_llm_dir(tmp_path):
    """A tiny random two-layer Llama saved as a folder, with a word tokenizer
    over :data:`~tests.helpers.SST2_TASK_WORDS`."""
    tok = tiny_word_tokenizer(SST2_TASK_WORDS)
    model = tiny_causal_lm("llama", layers=2, seed=0)
    model.resize_token_embeddings(len(SST2_TASK_WORDS))
    folder = tmp_path / "tiny-llama"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)
