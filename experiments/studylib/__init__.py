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
"""
