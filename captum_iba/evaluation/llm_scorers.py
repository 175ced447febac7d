"""0.3's home of the causal-LM scorers, kept for one release.

Every method is now one class for a classifier and a causal LM alike
(:class:`~captum_iba.evaluation.TokenScorer`: ``scorer.attribute(batch)``
takes a classifier's :class:`~captum_iba.attr.batches.TokenBatch` or a
causal LM's :class:`~captum_iba.attr.batches.PromptBatch`). This module
keeps what users of 0.3 import from it, until 0.4:

* :class:`LLMScorer` - 0.3's base class of a method for causal LMs only
  (deprecated: write a :class:`~captum_iba.evaluation.TokenScorer` with
  ``_prompt_scores``);
* ``LLMIBAScorer`` and ``LLMRandomScorer`` - deprecated names of
  :class:`~captum_iba.evaluation.iba.IBAScorer` and
  :class:`~captum_iba.evaluation.random_scorer.RandomScorer` (a
  ``DeprecationWarning`` names them);
* :class:`CaptumLLMScorer` - 0.3's one class of Captum's methods (``IG``,
  ``LIME``, ``LOO``, ``kernel-shap``, ``shapley``, ``saliency``,
  ``input-x-gradient``, each one class for both kinds now, run on a causal LM
  through Captum's LLM API by :mod:`~captum_iba.evaluation.captum_prompts`):
  a deprecated shim that builds the method's class;
* :data:`ROW_TOKENS` and :func:`rows_per_pass` - re-exported from
  :mod:`~captum_iba.evaluation.batches`, which sizes a causal LM's passes.
"""

import warnings
from typing import Any, Optional

from captum_iba._utils.lazy import renamed
from captum_iba.attr.kinds import CAUSAL_LM, ModelKind
from captum_iba.attr.llm import AnswerScores
from captum_iba.attr.llm_batch import PromptBatch
from captum_iba.evaluation.batches import ROW_TOKENS, rows_per_pass
from captum_iba.evaluation.scorers import TokenScorer, build_scorer
from captum_iba.registry import METHODS, OPTIONS

__all__ = [
    "ROW_TOKENS",
    "CaptumLLMScorer",
    "LLMScorer",
    "rows_per_pass",
]

_EV = "captum_iba.evaluation"
#: 0.3's classes of IBA and random on a causal LM (one class each now), until
#: 0.4.
__getattr__ = renamed(
    __name__,
    {
        "LLMIBAScorer": f"{_EV}.iba:IBAScorer",
        "LLMRandomScorer": f"{_EV}.random_scorer:RandomScorer",
    },
)


class LLMScorer(TokenScorer):
    """0.3's base class of a method that explains causal LMs only: a
    :class:`~captum_iba.evaluation.TokenScorer` whose subclasses implement
    ``_scores(batch, per_token)`` (the hook a method for both kinds calls
    :meth:`~captum_iba.evaluation.TokenScorer._prompt_scores`). Kept for
    users' subclasses; write a :class:`~captum_iba.evaluation.TokenScorer`
    with ``_prompt_scores`` now.

    Attributes:
        method_name (str): The registered method (e.g. ``"iba-deletion"``).
        name (str): The name shown.
        settings (dict): Everything that defines the run.
    """

    #: The kinds of model a user's subclass explains, when it is registered
    #: with :func:`~captum_iba.evaluation.register_scorer`.
    models = (CAUSAL_LM.name,)

    @classmethod
    def _kind_of(cls, model: Any) -> ModelKind:
        return CAUSAL_LM  # also a causal LM whose class the rule does not know

    def _scores(self, batch: PromptBatch, per_token: bool) -> AnswerScores:  # type: ignore[override]
        raise NotImplementedError


class CaptumLLMScorer:
    """Deprecated (it goes in 0.4): each of Captum's methods is one class that
    explains a classifier and a causal LM alike
    (:mod:`~captum_iba.evaluation.captum_prompts`). ``CaptumLLMScorer(model,
    captum=...)`` builds that method's scorer - ``captum="FeatureAblation"``:
    ``build_scorer("ablation", model, ...)`` - with a ``DeprecationWarning``
    naming it.

    Args:
        model (nn.Module): A Hugging Face ``...ForCausalLM``.
        captum (str): 0.3's name of the Captum method: ``"FeatureAblation"``,
            ``"LayerIntegratedGradients"``, ``"ShapleyValueSampling"``,
            ``"Lime"``, ``"KernelShap"``, ``"Saliency"`` or
            ``"InputXGradient"``.
        n_steps (int): Integrated gradients' steps. Default 50.
        n_samples (int, optional): The sampling methods' samples. Default: the
            method's.
        seed (int, optional): Seed of the sampling methods. Default 0.
        internal_batch_size (int, optional): Integrated gradients' steps per
            pass.
        **kwargs: The arguments of :class:`~captum_iba.evaluation.TokenScorer`.
    """

    #: 0.3's names of Captum's methods -> the method's name (goes in 0.4, with
    #: this class).
    _RENAMED = {
        "FeatureAblation": "ablation",
        "LayerIntegratedGradients": "ig",
        "ShapleyValueSampling": "shapley",
        "Lime": "lime",
        "KernelShap": "kernel-shap",
        "Saliency": "saliency",
        "InputXGradient": "input-x-gradient",
    }

    def __new__(  # type: ignore[misc]
        cls,
        model: Any,
        captum: str = "FeatureAblation",
        n_steps: int = 50,
        n_samples: Optional[int] = None,
        seed: Optional[int] = 0,
        internal_batch_size: Optional[int] = None,
        **kwargs: Any,
    ) -> TokenScorer:
        if captum not in cls._RENAMED:
            raise ValueError(
                f"captum must be one of {list(cls._RENAMED)}, got {captum!r}"
            )
        name = cls._RENAMED[captum]
        entry = METHODS.entry(name)
        taken = {OPTIONS.entry(o).facts["kwarg"] for o in entry.facts["options"]}
        given = dict(
            n_steps=n_steps,
            n_samples=n_samples,
            seed=seed,
            internal_batch_size=internal_batch_size,
        )
        kwargs.update(
            {
                k: v
                for k, v in given.items()
                if k in taken and (v is not None or k == "seed")
            }
        )
        warnings.warn(
            f"CaptumLLMScorer(captum={captum!r}) is deprecated since 0.3; removed in "
            "0.4: "
            f"write build_scorer({name!r}, model, ...) or "
            f"{entry.target.rsplit(':', 1)[-1]}(model, ...), one class for a "
            "classifier and a causal LM",
            DeprecationWarning,
            stacklevel=2,
        )
        return build_scorer(name, model, **kwargs)
