"""Attribution methods for causal LMs: which prompt tokens an answer needs.

Every scorer explains a :class:`~captum_iba.attr.llm_batch.PromptBatch` -
prompts and their answers, padded on the left - with one call::

    scores = scorer.attribute(batch, per_token=True)
    scores.answer        # (B, W): for the whole answer (its log-probability)
    scores.tokens        # (B, T, W): for each output token (or None)

and scores only the prompt's own tokens (``batch.scored``: never padding, a
special token, a chat template's tokens or the answer). They are the
causal-LM classes of the methods of :data:`captum_iba.registry.METHODS`
(``IBA``, ``iba-faithful``, ``iba-deletion``, ``random``, ``LOO`` alias
``ablation``, ``shapley``, ``LIME``, ``kernel-shap``, ``IG``, ``saliency``,
``input-x-gradient``; ``AttnLRP``'s is in
:mod:`~captum_iba.evaluation.attnlrp`), each name the same for a classifier
and a causal LM, and built by :func:`~captum_iba.evaluation.build_scorers`
for a causal LM.

* :class:`LLMIBAScorer` - IBA on the batch route
  (:func:`~captum_iba.attr.llm.explain_answers`): the whole batch, the whole
  answer and each output token in one IBA call.
* Captum's own methods (``IG``, ``LIME``, ``LOO``, ``kernel-shap``,
  ``shapley``, ``saliency``, ``input-x-gradient``) are each one class for both
  kinds, run on a causal LM through Captum's LLM API by
  :mod:`~captum_iba.evaluation.captum_prompts`; :class:`CaptumLLMScorer`,
  0.3's one class of them all, is a deprecated shim that builds the method's
  class.
"""

import warnings
from typing import Any, Optional

from captum_iba._utils import common
from captum_iba.attr._precision import precision_used
from captum_iba.attr.iba import InformationBottleneckAttribution
from captum_iba.attr.llm import (
    AnswerScores,
    CausalLMLogLikelihood,
    explain_answers,
    llm_options,
)
from captum_iba.attr.llm_batch import PromptBatch
from captum_iba.attr.options import ConfigLike, IBAOptions
from captum_iba.attr.priors import PriorLike
from captum_iba.attr.text import LayerLike, resolve_layer
from captum_iba.evaluation.random_scorer import seeded_uniform
from captum_iba.evaluation.scorers import TokenScorer, build_scorer
from captum_iba.registry import METHODS, OPTIONS

__all__ = [
    "ROW_TOKENS",
    "CaptumLLMScorer",
    "LLMIBAScorer",
    "LLMRandomScorer",
    "LLMScorer",
]

#: Default bound of one forward and backward pass of IBA's noise copies or
#: integrated gradients' steps: rows x tokens. A decoder keeps far more per
#: token for its backward pass than the small encoders IBA's own default is
#: set for (SmolLM2-135M: about 1.5 MB per token), so a long prompt runs one
#: row per pass.
ROW_TOKENS = 2048


def rows_per_pass(width: int, given: Optional[int]) -> int:
    """``given``, else as many rows as keep rows x tokens within
    :data:`ROW_TOKENS` (at least 1)."""
    return given if given is not None else max(1, ROW_TOKENS // max(width, 1))


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
    models = ("causal-lm",)

    def __init__(self, model: Any, **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        if self.kind != "causal-lm":  # a causal LM this class does not know
            self.kind = "causal-lm"
            self.settings = {k: self.settings[k] for k in ("method", "setting")}
            eos = getattr(self.tokenizer, "eos_token_id", None)
            given = kwargs.get("pad_token_id")
            self.pad_token_id = int(
                common.pad_token_id(self.tokenizer, given, eos or 0)
            )

    def attribute(self, batch: PromptBatch, per_token: bool = False) -> AnswerScores:  # type: ignore[override]
        """The scores of ``batch``'s prompt tokens
        (:meth:`TokenScorer.attribute <captum_iba.evaluation.TokenScorer.attribute>`).

        Args:
            batch (PromptBatch): Prompts and answers
                (:func:`~captum_iba.attr.llm_batch.prompt_batch`).
            per_token (bool): Also score each output token (``tokens``).

        Returns:
            AnswerScores: ``answer`` ``(B, W)`` and, when asked for and the
            method gives them, ``tokens`` ``(B, T, W)``; zero wherever
            ``batch.scored`` is False.
        """
        if not isinstance(batch, PromptBatch):
            raise TypeError(
                f"batch must be a PromptBatch (prompt_batch builds one); got "
                f"{type(batch).__name__}"
            )
        return super().attribute(batch, per_token=per_token)

    def _prompt_scores(self, batch: PromptBatch, per_token: bool) -> AnswerScores:
        return self._scores(batch, per_token)  # type: ignore[call-arg,arg-type]

    def _scores(self, batch: PromptBatch, per_token: bool) -> AnswerScores:  # type: ignore[override]
        raise NotImplementedError


class LLMIBAScorer(LLMScorer):
    """IBA for a causal LM, on the batch route.

    Args:
        model (nn.Module): A Hugging Face ``...ForCausalLM``.
        layer (int, str, Module or LayerRef, optional): The bottleneck's layer
            (:func:`~captum_iba.attr.text.resolve_layer`; ``"embeddings"`` for
            ``config="deletion"``); None: the decoder's default layer.
        config (str or IBAOptions): IBA's configuration. Default ``"paper"``.
        prior (str or NoisePrior, optional): Replaces the configuration's.
        seed (int, optional): Noise seed. Default 0.
        precision (str, optional): ``"float32"`` (default: bfloat16 is not
            measured on causal LMs), ``"bf16"`` or ``"auto"``; ``settings``
            records the precision it resolves to on the model's device.
        **kwargs: Further :class:`~captum_iba.attr.options.IBAOptions`
            fields (``beta``, ``steps``, ``internal_batch_size``: default, as
            many noise rows per pass as keep rows x tokens within
            :data:`ROW_TOKENS`), then the arguments of :class:`LLMScorer`.
    """

    def __init__(
        self,
        model: Any,
        layer: LayerLike = None,
        config: ConfigLike = "paper",
        prior: Optional[PriorLike] = None,
        seed: Optional[int] = 0,
        precision: Optional[str] = None,
        **kwargs: Any,
    ) -> None:
        knobs = {k: kwargs.pop(k) for k in list(kwargs) if k in IBAOptions.names()}
        if prior is not None:
            knobs["prior"] = prior
        knobs = llm_options({**knobs, "config": config})
        config = knobs.pop("config")
        super().__init__(model, **kwargs)
        ref = resolve_layer(model, layer)
        #: The IBA options every call uses.
        self.options = IBAOptions.from_config(config, seed=seed, **knobs)
        precision, used = precision_used(model, precision, self.options, causal=True)
        self.iba = InformationBottleneckAttribution(
            CausalLMLogLikelihood(model),
            ref.module,
            precision=precision,
            pad_token_id=self.pad_token_id,
            special_token_ids=self.special_token_ids,
        )
        mask = self.options.readout == "mask_mean"
        self.score_meaning = (
            "the share of the token's signal the answer needs (the mask in "
            "[0, 1], averaged over the steps and the features; 0: none)"
            if mask
            else "the information (nats) the answer needs from the token"
        )
        self.settings.update(
            layer_index=ref.index,
            layer=ref.label if ref.index is not None else "embeddings",
            options=self.options.record(),
            precision=used,
        )

    def _scores(self, batch: PromptBatch, per_token: bool) -> AnswerScores:
        rows = rows_per_pass(batch.input_ids.shape[1], self.options.internal_batch_size)
        options = self.options.replace(internal_batch_size=rows)
        scores = explain_answers(self.iba, batch, per_token=per_token, config=options)
        run = (getattr(self.iba, "last_run", None) or [{}])[0]
        if run.get("precision"):  # what ran, on the model's device now
            self.settings["precision"] = run["precision"]
        return scores


class LLMRandomScorer(LLMScorer):
    """Seeded uniform random scores of the prompt's tokens (a floor for any
    method). Each prompt's scores come from a generator seeded with
    :func:`~captum_iba._utils.common.instance_seed` (``seed`` and the row's
    real token ids): the same in any batch, order or padding.

    Args:
        model (nn.Module): The causal LM (not called).
        seed (int): Default 0.
        **kwargs: The arguments of :class:`LLMScorer`.
    """

    score_meaning = "uniform random numbers in [0, 1): a floor to compare with"

    def __init__(self, model: Any, seed: int = 0, **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        self.seed = int(seed)
        self.settings.update(distribution="uniform[0, 1)", seed=self.seed)

    def _scores(self, batch: PromptBatch, per_token: bool) -> AnswerScores:
        out = seeded_uniform(batch.input_ids, batch.attention_mask, self.seed)
        tokens = None
        if per_token:  # every output token gets the answer's draw
            width = int(batch.answer_mask.sum(1).max())
            tokens = out[:, None].expand(-1, width, -1).clone()
        return AnswerScores(out, tokens, "random")


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
            f"CaptumLLMScorer(captum={captum!r}) is deprecated (it goes in 0.4): "
            f"write build_scorer({name!r}, model, ...) or "
            f"{entry.target.rsplit(':', 1)[-1]}(model, ...), one class for a "
            "classifier and a causal LM",
            DeprecationWarning,
            stacklevel=2,
        )
        return build_scorer(name, model, **kwargs)
