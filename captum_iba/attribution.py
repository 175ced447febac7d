"""Deprecated since 0.2: import from :mod:`captum_iba.attr.iba`.

The old module paths and their new homes are listed in ``CHANGELOG.md``.
"""

from captum_iba._utils.moved import warn_moved

warn_moved(__name__)

from captum_iba.attr.iba import *  # noqa: E402,F401,F403
from captum_iba.attr.iba import __all__  # noqa: E402,F401
