"""Fixtures of the metrics tests: the hand-computable model and batch."""

import pytest
import torch

from tests.helpers import tiny_hf_model
from tests.metrics.bow import BagOfWords, make_batch


@pytest.fixture
def bow():
    torch.manual_seed(0)
    return BagOfWords(seed=1).eval()


@pytest.fixture
def batch():
    return make_batch()


@pytest.fixture
def tiny_bert():
    """A tiny random 3-class BERT (pad id 0, two segments)."""
    torch.manual_seed(0)
    return tiny_hf_model("bert", num_labels=3, layers=2)
