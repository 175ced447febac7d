"""Fixtures of the evaluation tests: a tiny vocabulary, a tiny random BERT,
batches (single sentences and pairs), an exactly linear bag-of-words model
and the tiny Llamas trained to copy a value from their prompt (one fact, or
two facts into two sentences)."""

import pytest
import torch
from torch import nn

from tests.copy_model import train_copy_model, train_two_fact_model
from tests.helpers import bert_tokenizer, tiny_bert

WORDS = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "movie", "was", "great",
    "bad", "play", "##ing", "!", ",", ".", "i", "liked", "it", "not", "a",
]  # fmt: skip


@pytest.fixture(scope="session")
def copy_model():
    """The copy model trained from seed 0 and its tokenizer (shared by the
    context and the amortized explainer's tests: trained once a session)."""
    return train_copy_model(0)


@pytest.fixture(scope="session")
def two_fact_model():
    """The model trained (seed 0) to copy two facts into two sentences, and
    its tokenizer (trained once a session)."""
    return train_two_fact_model(0)


@pytest.fixture(scope="session")
def tokenizer():
    return bert_tokenizer(WORDS)


@pytest.fixture(scope="session")
def model():
    return tiny_bert(len(WORDS), pad_token_id=0)


@pytest.fixture(scope="session")
def batch(tokenizer):
    enc = tokenizer(
        ["the movie was great!", "playing it", "not bad , i liked it ."],
        padding=True,
        return_tensors="pt",
    )
    return enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]


@pytest.fixture(scope="session")
def pair_batch(tokenizer):
    enc = tokenizer(
        ["the movie was great!", "playing it"],
        ["i liked it", "not bad"],
        padding=True,
        return_tensors="pt",
    )
    return enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]


def check_scores(scores, ids, mask):
    assert scores.shape == ids.shape
    assert torch.isfinite(scores).all()
    assert (scores[mask == 0] == 0).all()


class BagOfWords(nn.Module):
    """logits = bias + sum of attended token weights (exactly linear for LIME)."""

    def __init__(self, vocab, classes=2):
        super().__init__()
        g = torch.Generator().manual_seed(5)
        self.weight = nn.Parameter(torch.randn(vocab, classes, generator=g))
        self.bias = nn.Parameter(torch.zeros(classes))

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        w = self.weight[input_ids]
        if attention_mask is not None:
            w = w * attention_mask[..., None]
        return self.bias + w.sum(1)
