"""Kept for backward compatibility: see the module named below."""

from captum_iba.attr.priors import *  # noqa: F401,F403
from captum_iba.attr.priors import __all__  # noqa: F401
