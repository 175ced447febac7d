"""Kept for backward compatibility: see :mod:`captum_iba.evaluation`."""

from captum_iba.evaluation import (  # noqa: F401
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
