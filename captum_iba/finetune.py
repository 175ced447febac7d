"""Deprecated since 0.2: import from :mod:`captum_iba.app.finetune`.

The old module paths and their new homes are listed in ``CHANGELOG.md``.
"""

from captum_iba._utils.moved import warn_moved

warn_moved(__name__)

from captum_iba.app.finetune import *  # noqa: E402,F401,F403
from captum_iba.app.finetune import __all__  # noqa: E402,F401
from captum_iba.app.finetune.recipes import DEFAULT_BASE_MODEL_NAME, PathLike  # noqa: E402,F401
from captum_iba.app.finetune.store import RESULT_FILE  # noqa: E402,F401
