"""The identity check of refactors: every method and IBA path on tiny seeded
models gives the scores recorded in ``tests/reference_scores.json`` (written
by ``python -m tests.reference_cases`` before the refactor).

Bit for bit on the machine that wrote the file; here within a float
tolerance, since another CPU may round the last bits differently.
"""

import json

import pytest
import torch

from tests.reference_cases import FILE, compute


@pytest.fixture(scope="module")
def computed():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the file was written
    try:
        return compute()
    finally:
        torch.set_num_threads(threads)


RECORDED = json.loads(FILE.read_text())


@pytest.mark.parametrize("case", sorted(RECORDED))
def test_scores_are_those_recorded(case, computed):
    assert case in computed, f"case {case} is no longer computed"
    got = torch.tensor(computed[case], dtype=torch.float64)
    want = torch.tensor(RECORDED[case], dtype=torch.float64)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_every_case_is_recorded(computed):
    assert sorted(computed) == sorted(RECORDED)
