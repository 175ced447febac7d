"""Choosing IBA's layer with a held-in degradation test."""

import pytest
import torch
from torch import nn

from captum_iba.evaluation import choose_layer


class ScrambleModel(nn.Module):
    """Layer 0 is token-local; layer 1 replaces every token by the sentence
    mean, so after it no token can be told apart and IBA there ranks tokens
    arbitrarily: the choice must be layer 0."""

    def __init__(self, vocab: int = 30, dim: int = 8) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.embed = nn.Embedding(vocab, dim)
        with torch.no_grad():
            self.embed.weight.copy_(torch.randn(vocab, dim, generator=g) * 2)
        self.layers = nn.ModuleList([nn.Linear(dim, dim), Scramble()])
        self.head = nn.Linear(dim, 2)

    def forward(self, input_ids, attention_mask=None):
        m = attention_mask.unsqueeze(-1).float()
        h = torch.tanh(self.layers[0](self.embed(input_ids))) * m
        h = self.layers[1](h, m)
        return self.head(h[:, 0])


class Scramble(nn.Module):
    def forward(self, h, m):
        mean = h.sum(1, keepdim=True) / m.sum(1, keepdim=True)
        return mean.expand_as(h) * m


def _data(tokenizer, model):
    texts = [
        "the movie was great !",
        "i liked it",
        "not bad , i liked the movie .",
        "playing it was bad",
        "a great movie , not bad",
        "it was the movie",
    ]
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        labels = model(enc["input_ids"], enc["attention_mask"]).argmax(-1).tolist()
    return _Data(texts, labels)


class _Data:
    def __init__(self, texts, labels):
        self.texts, self.text_pairs, self.labels = texts, None, labels

    def __len__(self):
        return len(self.texts)


def test_choose_layer_prefers_the_layer_where_tokens_are_apart(tokenizer):
    model = ScrambleModel().eval()
    data = _data(tokenizer, model)
    choice = choose_layer(
        model, tokenizer, data, iba_options=dict(steps=5, n_samples=4), batch_size=4
    )
    assert set(choice.scores) == {0, 1}
    assert choice.index == 0 and choice.layer is model.layers[0]
    assert choice.scores[0] > choice.scores[1]
    assert choice.results[0].num_instances == len(data)
    only = choose_layer(
        model, tokenizer, data, candidates=[1], iba_options=dict(steps=2, n_samples=2)
    )
    assert only.index == 1 and list(only.scores) == [1]


def test_choose_layer_bad_arguments(tokenizer):
    model = ScrambleModel().eval()
    data = _data(tokenizer, model)
    with pytest.raises(ValueError, match="metric"):
        choose_layer(model, tokenizer, data, metric="accuracy")
    with pytest.raises(ValueError, match=r"valid indices are 0\.\.1"):
        choose_layer(model, tokenizer, data, candidates=[2])
    with pytest.raises(ValueError, match="at least one"):
        choose_layer(model, tokenizer, _Data([], []))
