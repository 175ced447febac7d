"""Kept for backward compatibility: see the module named below."""

from captum_iba.attr.bottleneck import *  # noqa: F401,F403
from captum_iba.attr.bottleneck import __all__  # noqa: F401
