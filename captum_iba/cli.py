"""Kept for backward compatibility: see :mod:`captum_iba.app.cli`."""

from captum_iba.app.cli import *  # noqa: F401,F403
from captum_iba.app.cli import __all__  # noqa: F401
