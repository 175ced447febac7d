"""Deprecated since 0.2: import from :mod:`captum_iba.app.cli`.

The old module paths and their new homes are listed in ``CHANGELOG.md``.
"""

from captum_iba._utils.moved import warn_moved

warn_moved(__name__)

from captum_iba.app.cli import *  # noqa: E402,F401,F403
from captum_iba.app.cli import __all__  # noqa: E402,F401
