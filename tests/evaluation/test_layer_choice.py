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


def test_the_last_layer_of_a_cls_classifier_is_marked_and_not_chosen(
    tokenizer, model, monkeypatch
):
    """IBA after the last layer of a BERT classifier ranks nothing (its head
    reads [CLS] alone, issue 31): the sweep marks that layer and chooses
    another, even where its score is the highest (made so here: each layer's
    AOPC is its index)."""
    from types import SimpleNamespace

    from captum_iba.evaluation import layer_choice

    calls = iter(range(10))
    monkeypatch.setattr(
        layer_choice,
        "degradation_test",
        lambda *a, **k: SimpleNamespace(aopc=next(calls)),
    )
    texts = ["the movie was great !", "i liked it", "not bad , i liked the movie ."]
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        labels = model(**enc).logits.argmax(-1).tolist()
    data = _Data(texts, labels)
    options = dict(steps=2, n_samples=2)
    with pytest.warns(UserWarning, match="reads only the first token"):
        choice = choose_layer(model, tokenizer, data, iba_options=options)
    assert set(choice.scores) == {0, 1} and list(choice.no_ranking) == [1]
    assert "reads only the first token" in choice.no_ranking[1]
    assert choice.scores == {0: 0.0, 1: 1.0} and choice.index == 0
    calls = iter(range(10))
    with pytest.warns(UserWarning, match="reads only the first token"):
        only = choose_layer(model, tokenizer, data, [1], iba_options=options)
    assert only.index == 1 and list(only.no_ranking) == [1]  # nothing else to take
