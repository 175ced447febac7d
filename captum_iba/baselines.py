"""Deprecated since 0.2: import from :mod:`captum_iba.evaluation`.

The old module paths and their new homes are listed in ``CHANGELOG.md``.
"""

from captum_iba._utils.moved import warn_moved

warn_moved(__name__)

from captum_iba.evaluation import (  # noqa: E402,F401
    FAIR_TEST_SETTINGS,
    PAPER_TEST_SETTINGS,
    SETTINGS,
    CaptumLimeScorer,
    IBAScorer,
    IntegratedGradientsScorer,
    LimeTextScorer,
    RandomScorer,
    TokenScorer,
    make_scorers,
    run_degradation_suite,
)

__all__ = [
    "TokenScorer",
    "IntegratedGradientsScorer",
    "CaptumLimeScorer",
    "LimeTextScorer",
    "RandomScorer",
    "IBAScorer",
    "make_scorers",
    "run_degradation_suite",
    "PAPER_TEST_SETTINGS",
    "FAIR_TEST_SETTINGS",
    "SETTINGS",
]
