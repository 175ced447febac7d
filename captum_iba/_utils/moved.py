"""The module paths of captum-iba 0.1 that moved in 0.2 (see ``CHANGELOG.md``).

Each old module (``captum_iba/attribution.py`` and its siblings) still imports
and re-exports its new home, and calls :func:`warn_moved` once, when it is
first imported. This module imports nothing heavy (no torch): it is the
one list of old paths, read by the old modules and by the tests.
"""

import warnings
from typing import Dict

#: The first release with the new paths.
MOVED_IN = "0.2"

#: Old module -> where its names live now (a name living elsewhere is named).
MOVED_MODULES: Dict[str, str] = {
    "captum_iba.attribution": "captum_iba.attr.iba",
    "captum_iba.bottleneck": "captum_iba.attr.bottleneck",
    "captum_iba.priors": "captum_iba.attr.priors",
    "captum_iba.text": "captum_iba.attr.text",
    "captum_iba.baselines": "captum_iba.evaluation",
    "captum_iba.evaluate": (
        "captum_iba.evaluation (load_classifier: captum_iba.app.models)"
    ),
    "captum_iba.data": (
        "captum_iba.app.data (DEFAULT_SEED, HELDOUT_TRAIN_FRACTION: "
        "captum_iba.app.data.splits)"
    ),
    "captum_iba.finetune": (
        "captum_iba.app.finetune (DEFAULT_BASE_MODEL_NAME, PathLike: "
        "captum_iba.app.finetune.recipes)"
    ),
    "captum_iba.cli": "captum_iba.app.cli",
}


def moved_message(old: str) -> str:
    """The one-line deprecation message of the old module ``old``.

    Args:
        old (str): An old module path, a key of :data:`MOVED_MODULES`.

    Returns:
        str: What to import instead.
    """
    return (
        f"{old} is deprecated since captum-iba {MOVED_IN} and will be removed: "
        f"import from {MOVED_MODULES[old]} instead."
    )


def warn_moved(old: str) -> None:
    """Emits the :class:`DeprecationWarning` of an old module, at its importer.

    Called from the body of the old module itself: the warning points at the
    ``import`` line that imported it (the import machinery's frames are
    skipped by :func:`warnings.warn`).

    Args:
        old (str): The old module's ``__name__``.
    """
    warnings.warn(moved_message(old), DeprecationWarning, stacklevel=3)
