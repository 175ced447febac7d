"""Deprecated since 0.2: import from :mod:`captum_iba.app.data`.

The old module paths and their new homes are listed in ``CHANGELOG.md``.
"""

from captum_iba._utils.moved import warn_moved

warn_moved(__name__)

from captum_iba.app.data import *  # noqa: E402,F401,F403
from captum_iba.app.data import __all__  # noqa: E402,F401
from captum_iba.app.data.splits import DEFAULT_SEED, HELDOUT_TRAIN_FRACTION  # noqa: E402,F401
