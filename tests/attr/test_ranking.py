"""IBA says when its result ranks no token (issue 31, item 1): refused before
any optimisation where it is provably flat (the deletion through attention
after the last layer), warned and recorded where the model's output reads
only the first token of the layer, or where an instance's scores are flat."""

import warnings

import pytest
import torch

from captum_iba import InformationBottleneckAttribution
from captum_iba._utils.ranking import RTOL, flat_rows, is_flat, tied_rows
from captum_iba.attr import default_layer_index, encoder_layers
from tests.helpers import bert_tokenizer, no_hooks, tiny_bert

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "fine", "dull", "film"]


@pytest.fixture(scope="module")
def setup():
    tok = bert_tokenizer(WORDS)
    model = tiny_bert(len(WORDS), seed=0, pad_token_id=0)  # two layers
    enc = tok(["a fine film", "a dull dull film"], padding=True, return_tensors="pt")
    return model, tok, enc


def _run(model, tok, enc, layer, **options):
    iba = InformationBottleneckAttribution(
        model, layer, special_token_ids=tok.all_special_ids
    )
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        extra = (enc["attention_mask"],)
        attr = iba.attribute(
            enc["input_ids"], target=1, additional_forward_args=extra, steps=3,
            **options,
        )  # fmt: skip
    return attr, iba, [w for w in said if "ranking" in str(w.message)]


def test_deletion_after_the_last_layer_is_refused_before_any_work(setup):
    """Every token got 192.0 (std 0) at encoder.layer[5] of MiniLM."""
    model, tok, enc = setup
    last = model.bert.encoder.layer[1]
    forward = []
    handle = model.register_forward_hook(lambda *a: forward.append(1))
    try:
        with pytest.raises(ValueError) as caught:
            _run(model, tok, enc, last, config="deletion")
    finally:
        handle.remove()
    message = str(caught.value)
    assert "layer 'bert.encoder.layer.1' (the last of 0..1)" in message
    assert "no layer above it reads the tokens" in message
    assert "embeddings" in message and "an earlier layer (0..0)" in message
    assert not forward and no_hooks(model)


def test_a_sweep_marks_the_flat_layer_instead(setup):
    model, tok, enc = setup
    attrs, iba, said = _run(model, tok, enc, encoder_layers(model), config="deletion")
    first, last = iba.last_run
    assert first["no_ranking"] == "" and first["flat_instances"] == []
    assert "no layer above it reads the tokens" in last["no_ranking"]
    assert last["flat_instances"] == [0, 1]  # exactly 0.5 everywhere
    assert torch.allclose(attrs[1], torch.full_like(attrs[1], 0.5) * enc[
        "attention_mask"].unsqueeze(-1))  # fmt: skip
    assert len(said) == 1 and said[0].filename == __file__


def test_a_layer_whose_first_token_alone_is_read_is_warned_and_recorded(setup):
    """`--layer 5` of MiniLM gave every word 191.8 and 'top 5 words: that
    (1.00), . (0.98)'; the head reads only [CLS] there."""
    model, tok, enc = setup
    for config in ("faithful", "paper"):
        _, iba, said = _run(model, tok, enc, model.bert.encoder.layer[1], config=config)
        reason = iba.last_run[0]["no_ranking"]
        assert "reads only the first token of this layer's output" in reason
        assert "(the last of 0..1)" in reason and "an earlier layer (0..0)" in reason
        assert len(said) == 1 and said[0].filename == __file__
        assert no_hooks(model)


def test_a_layer_that_ranks_says_nothing(setup):
    model, tok, enc = setup
    _, iba, said = _run(model, tok, enc, model.bert.embeddings, config="deletion")
    assert (
        iba.last_run[0]["no_ranking"] == "" and iba.last_run[0]["flat_instances"] == []
    )
    assert said == []


def test_flat_instances_are_found_per_instance_across_chunks(setup):
    model, tok, enc = setup
    ids = enc["input_ids"].repeat(3, 1)
    mask = enc["attention_mask"].repeat(3, 1)
    iba = InformationBottleneckAttribution(
        model, encoder_layers(model), special_token_ids=tok.all_special_ids
    )
    with pytest.warns(UserWarning, match=r"the scores of 6 of 6 instance\(s\)"):
        iba.attribute(ids, target=1, additional_forward_args=(mask,),
                      config="deletion", steps=2, internal_batch_size=2)  # fmt: skip
    assert iba.last_run[1]["flat_instances"] == [0, 1, 2, 3, 4, 5]


def test_the_default_layer_is_never_the_last():
    for n, expected in ((1, 0), (2, 0), (3, 1), (6, 4), (12, 9), (24, 18)):
        model = tiny_bert(len(WORDS), seed=0, num_hidden_layers=n, hidden_size=8,
                          intermediate_size=8)  # fmt: skip
        assert default_layer_index(model) == expected, n


def test_flat_means_within_rtol_of_the_largest():
    scores = torch.tensor(
        [
            [192.0, 192.0, 192.0, 0.0],
            [0.5, 0.5 + RTOL / 4, 0.5, 0.0],
            [0.5, 0.6, 0.2, 0],
        ]
    )
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 0], [1, 1, 1, 0]])
    assert flat_rows(scores, mask) == [0, 1]
    assert flat_rows(scores[:, :1]) == []  # one token: nothing to rank, not flat
    assert is_flat([191.8, 191.8, 191.8]) and not is_flat([0.2, 0.5])
    assert not is_flat([1.0])


def test_tied_means_most_tokens_at_the_median():
    """The causal LMs' looser test (attr.llm.no_ranking): a few tokens apart
    do not make a ranking when most tie."""
    scores = torch.tensor([[288.0, 288.0, 288.0, 288.1, 290.0], [1.0, 2, 3, 4, 5]])
    mask = torch.ones_like(scores, dtype=torch.bool)
    assert tied_rows(scores, mask) == [0] and flat_rows(scores, mask) == []
    assert tied_rows(scores[:, :2], mask[:, :2]) == []  # fewer than three tokens
