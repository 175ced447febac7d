"""captum-iba's lab: the methods its studies measured that left the product
(issue 88), registered through the entry-point group ``captum_iba.methods``
(``experiments/lab/pyproject.toml``), the door a user's package uses.

* ``at2`` (:class:`~captum_iba_lab.at2.AT2Scorer`): AT2 (Cohen-Wang et al.
  2025), its head weights trained by its own trainer
  (``experiments/train_at2.py``); at random's level on a prompt's words,
  below ContextCite-32 and one deletion step on contexts;
* ``iba-heads`` (:class:`~captum_iba_lab.at2_taught.TaughtHeadsScorer`): AT2's
  head weights taught by one ``iba-deletion`` step
  (``experiments/teach_at2.py``); level with its teacher, below ContextCite-32
  and the product's default for contexts;
* ``iba-amortized-lm`` (:class:`~captum_iba_lab.amortized_lm.AmortizedLMScorer`):
  ``iba-amortized`` on a causal LM, its explainer fitted on a prompt task's
  prompts or a context task's contexts
  (``python -m captum_iba_lab.amortized_lm``); at random's level on a
  prompt's words, below random on topic contexts (the product's
  ``iba-amortized`` explains classifiers);
* ``iba-surrogate`` 's sparse design
  (:class:`~captum_iba_lab.sparse_surrogate.SparseSurrogateScorer`, no
  method name: the context study's ``iba-surrogate-<k>-sparse``), no more
  faithful than the product's default at 1.2x its cost.

Installed (``pip install ./experiments/lab``), the methods are found by name
(``captum-iba explain --method at2``, ``captum_iba.explain(method="at2")``);
the studies, which run from the repository without installing it, call
:func:`register` instead.
"""

from typing import Dict, List

__all__ = ["ENTRY_POINTS", "register"]

#: The methods the lab registers: name -> ``"module:Class"`` (the entry
#: points of ``experiments/lab/pyproject.toml``; tests/lab/test_lab.py checks
#: that the two agree).
ENTRY_POINTS: Dict[str, str] = {
    "at2": "captum_iba_lab.at2:AT2Scorer",
    "iba-heads": "captum_iba_lab.at2_taught:TaughtHeadsScorer",
    "iba-amortized-lm": "captum_iba_lab.amortized_lm:AmortizedLMScorer",
}


def register() -> List[str]:
    """Register the lab's methods in captum-iba's registry as its entry
    points would, where they are not registered yet (an installed lab's
    entry points register them first); returns the names it added."""
    import importlib

    from captum_iba.registry import METHODS

    added = []
    for name, target in ENTRY_POINTS.items():
        if name in METHODS:
            continue
        module, _, attribute = target.partition(":")
        METHODS.adopt(getattr(importlib.import_module(module), attribute), name)
        added.append(name)
    return added
