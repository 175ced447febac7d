"""Deprecated since 0.2: import from :mod:`captum_iba.evaluation`.

The old module paths and their new homes are listed in ``CHANGELOG.md``.
"""

from captum_iba._utils.moved import warn_moved

warn_moved(__name__)

from captum_iba.app.models import load_classifier  # noqa: E402,F401
from captum_iba.attr.priors import PRIOR_NAMES  # noqa: E402,F401
from captum_iba.attr.text import default_layer_index  # noqa: E402,F401
from captum_iba.evaluation import (  # noqa: E402,F401
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
