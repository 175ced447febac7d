"""The lab's tests (``experiments/lab``, the methods that left the product):
its package importable as the studies import it, and its methods registered
for each test as its entry points register them, then taken out again, so
that the product's tests never see them."""

import sys
from pathlib import Path

import pytest

# the product's tiny models, as its context and evaluation tests make them
from tests.app.test_context_evaluate import tiny_llm  # noqa: F401
from tests.app.test_context_explain import lm, lm_dir  # noqa: F401
from tests.evaluation.conftest import copy_model  # noqa: F401

LAB = Path(__file__).resolve().parents[2] / "experiments" / "lab"
if str(LAB) not in sys.path:
    sys.path.insert(0, str(LAB))


@pytest.fixture(autouse=True)
def lab_registered(monkeypatch):
    """The lab's methods in the registry for one test (its entries restored
    after it)."""
    import captum_iba_lab

    from captum_iba.registry import METHODS

    METHODS.names()  # the installed entry points found first
    monkeypatch.setattr(METHODS, "_entries", dict(METHODS._entries))
    captum_iba_lab.register()
