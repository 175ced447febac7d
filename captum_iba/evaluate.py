"""Kept for backward compatibility: see :mod:`captum_iba.evaluation.suite`
(and :func:`captum_iba.app.models.load_classifier`)."""

from captum_iba.app.models import load_classifier  # noqa: F401
from captum_iba.attr.priors import PRIOR_NAMES  # noqa: F401
from captum_iba.attr.text import default_layer_index  # noqa: F401
from captum_iba.evaluation.suite import (  # noqa: F401
    METHODS,
    encode,
    evaluate_corpus,
    fit_dataset_prior,
)

__all__ = [
    "METHODS",
    "PRIOR_NAMES",
    "default_layer_index",
    "encode",
    "evaluate_corpus",
    "fit_dataset_prior",
    "load_classifier",
]
