"""Kept for backward compatibility: see the module named below."""

from captum_iba.app.finetune import *  # noqa: F401,F403
from captum_iba.app.finetune import __all__  # noqa: F401
from captum_iba.app.finetune.recipes import DEFAULT_BASE_MODEL_NAME, PathLike  # noqa: F401
from captum_iba.app.finetune.store import RESULT_FILE  # noqa: F401
