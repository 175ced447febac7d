"""The studies' own machinery, beside the scripts that run it (issue 76).

``captum_iba`` holds what a user calls (methods, metrics, ``explain``,
``evaluate``, the pages, the anchors' adapters); what only a study runs -
training AT2's heads for a study, its fit statistics, the studies' plots -
lives here. It imports the package; the package never imports it
(``tests/test_layering.py``).

The scripts of ``experiments/`` run from the repository's root as
``python experiments/X.py`` and put their own folder on ``sys.path``, so they
import it as ``studylib`` (``from studylib.at2_training import
train_at2``); the tests import it the same way (``tests.helpers.study_module``).

The lab's methods (``captum_iba_lab``, ``experiments/lab``: AT2 and its heads
taught by IBA, out of the product since issue 88) are imported the same way:
this package puts their folder on ``sys.path`` for its modules.
"""

import sys
from pathlib import Path

_LAB = str(Path(__file__).resolve().parents[1] / "lab")
if _LAB not in sys.path:
    sys.path.insert(0, _LAB)
