"""Kept for backward compatibility: see the module named below."""

from captum_iba.app.data import *  # noqa: F401,F403
from captum_iba.app.data import __all__  # noqa: F401
from captum_iba.app.data.splits import DEFAULT_SEED, HELDOUT_TRAIN_FRACTION  # noqa: F401
