"""Any Captum attribution method as a per-token scorer: one adapter, and the anchors.

:class:`CaptumScorer` evaluates any Captum method on token ids in the harness:

* a **layer method** (a :class:`captum.attr.LayerAttribution`, e.g.
  ``LayerGradientXActivation``, ``LayerIntegratedGradients``,
  ``LayerDeepLift``) runs on an embedding layer (default: the word
  embeddings; ``layer="embeddings"``: the whole embedding block) and its
  attributions are summed over the hidden dimension;
* a **perturbation method** (``FeatureAblation``, ``Occlusion``,
  ``ShapleyValueSampling``, ``KernelShap``, ``Lime``, ...) runs on the token
  ids themselves, one instance at a time: each removable token is one feature
  (``feature_mask``), a removed token becomes ``baseline`` (``"pad"``,
  ``"mask"``, ``"unk"`` or an id; a ``[PAD]`` is also masked out of
  attention, so it is nearly a deletion), and special tokens never change.

Whatever the method, the scorer explains the target passed in (the fair
setting), returns ``(B, L)`` scores with 0 at padding and special tokens, and
records the method and its options in ``settings``. The registered anchors
below are subclasses that fix the method and its defaults; those that also
explain a causal LM (saliency, input x gradient, KernelSHAP, Shapley
sampling) say so in their registry entries, and a causal LM's rows run the
same Captum class through Captum's LLM API
(:mod:`~captum_iba.evaluation.captum_prompts`). Register your own the same
way::

    @register_scorer
    class DeepLiftScorer(CaptumScorer):
        name = "deeplift"
        method = LayerDeepLift
"""

import inspect
from typing import Any, Callable, Dict, Mapping, Optional, Type, Union

from captum.attr import (
    KernelShap,
    LayerAttribution,
    LayerGradientXActivation,
    Occlusion,
    ShapleyValueSampling,
)
from torch import nn

from captum_iba.attr.rows import CaptumRun
from captum_iba.evaluation.captum_prompts import CaptumPromptScorer
from captum_iba.evaluation.ig import embedding_layer

__all__ = [
    "CaptumScorer",
    "SamplingScorer",
    "GradientXActivationScorer",
    "InputXGradientScorer",
    "SaliencyScorer",
    "KernelShapScorer",
    "OcclusionMaskScorer",
    "OcclusionScorer",
    "ShapleySamplingScorer",
]

_BASELINES = ("pad", "mask", "unk")


class CaptumScorer(CaptumPromptScorer):
    """Any Captum attribution method, scoring tokens (see the module docstring).

    On a causal LM (where its registry entry says it explains one:
    :class:`~captum_iba.evaluation.captum_prompts.CaptumPromptScorer`) it
    takes ``n_samples`` (in ``attribute_options``) and ``seed`` only, and
    refuses the other arguments given.

    Args:
        model (Callable): HF model, or a function ``(ids, mask[, tt]) -> logits``.
        method (type, optional): The Captum class, e.g.
            ``captum.attr.FeatureAblation``. Default: the class attribute
            ``method`` of a subclass.
        layer (nn.Module or str, optional): For layer methods: the layer
            (default the word embeddings; ``"embeddings"``: the embedding
            block).
        baseline (str or int, optional): For perturbation methods: what a
            removed token becomes, ``"pad"`` (default), ``"mask"``, ``"unk"``
            or a token id.
        mask_baseline (bool): Give ``[PAD]`` baselines attention mask 0.
            Default True.
        output (str): Explain the ``"logits"`` (default) or the softmax
            ``"probs"``.
        attribute_options (Mapping, optional): More arguments of the method's
            ``attribute`` (e.g. ``n_samples``, ``perturbations_per_eval``).
        seed (int, optional): Seeds torch's generator for every instance of a
            perturbation method (sampling methods draw from it) with
            :func:`~captum_iba._utils.common.instance_seed` of the seed and
            the instance's tokens (so a score does not depend on the batch),
            inside :func:`~captum_iba._utils.common.kept_random_state`: the
            caller's random state is left as it was. Default 0; None leaves
            the generator alone.
        **kwargs: See :class:`~captum_iba.evaluation.TokenScorer`.
    """

    name = "captum"
    needs = ("seed",)
    meaning = "Captum's attribution to the class's {output}: + for it, - against it"
    #: The Captum attribution class (set by subclasses, or given).
    method: Optional[Type[Any]] = None
    #: Default ``attribute`` options of a subclass.
    defaults: Mapping[str, Any] = {}
    #: Arguments of a subclass's Captum class itself (e.g.
    #: ``multiply_by_inputs``).
    method_arguments: Mapping[str, Any] = {}

    def __init__(
        self,
        model: Callable[..., Any],
        method: Optional[Type[Any]] = None,
        layer: Union[None, str, nn.Module] = None,
        baseline: Union[str, int] = "pad",
        mask_baseline: bool = True,
        output: str = "logits",
        attribute_options: Optional[Mapping[str, Any]] = None,
        seed: Optional[int] = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, **kwargs)
        self.seed = seed
        self.method = method or type(self).method
        if not (inspect.isclass(self.method) and hasattr(self.method, "attribute")):
            raise TypeError(
                f"method must be a Captum attribution class; got {self.method!r}"
            )
        options = {**self.defaults, **(attribute_options or {})}
        n_samples = options.get("n_samples")
        self._refuse_unread(
            layer=layer not in (None, "embeddings"),
            baseline=baseline != "pad",
            mask_baseline=not mask_baseline,
            output=output != "logits",
            attribute_options=bool(set(options) - {"n_samples"}),
        )
        if output not in ("logits", "probs"):
            raise ValueError(f"output must be 'logits' or 'probs'; got {output!r}")
        self.output = output
        self.options: Dict[str, Any] = options
        self.is_layer_method = issubclass(self.method, LayerAttribution)
        self.layer = embedding_layer(model, layer) if self.is_layer_method else None
        self.baseline_token_id = self._baseline_id(baseline)
        self.mask_baseline = mask_baseline and (
            self.baseline_token_id == self.pad_token_id
        )
        self._record(
            dict(
                implementation=f"captum.attr.{self.method.__name__}",
                output=output,
                options=dict(self.options),
                layer=None if self.layer is None else type(self.layer).__name__,
                baseline_token_id=None
                if self.is_layer_method
                else self.baseline_token_id,
                mask_baseline=self.mask_baseline,
                seed=seed,
            ),
            n_samples,
        )

    def _baseline_id(self, baseline: Union[str, int]) -> int:
        if isinstance(baseline, bool):
            raise ValueError(f"baseline must be {_BASELINES} or a token id")
        if isinstance(baseline, int):
            return baseline
        if baseline not in _BASELINES:
            raise ValueError(
                f"baseline must be one of {_BASELINES} or a token id; got {baseline!r}"
            )
        found = getattr(self.tokenizer, f"{baseline}_token_id", None)
        if baseline == "pad":
            return self.pad_token_id
        if found is None:
            raise ValueError(
                f"baseline={baseline!r} needs a tokenizer with a {baseline} token"
            )
        return int(found)

    def _captum_run(self) -> CaptumRun:
        return CaptumRun(
            self.method,
            arguments=self.method_arguments,
            options=self.options,
            seed=self.seed,
            layer=self.layer,
            output=self.output,
            baseline_token_id=self.baseline_token_id,
            mask_baseline=self.mask_baseline,
        )


class OcclusionScorer(CaptumScorer):
    """Captum's ``Occlusion`` on one token at a time, replaced by ``[PAD]`` and
    masked out of attention (close to deleting it)."""

    method = Occlusion
    meaning = (
        "how much the class's {output} drops when the token is replaced by [PAD] "
        "(masked): + for the class, - against it"
    )


class OcclusionMaskScorer(CaptumScorer):
    """Captum's ``Occlusion`` on one token at a time, replaced by ``[MASK]``."""

    method = Occlusion
    meaning = (
        "how much the class's {output} drops when the token is replaced by "
        "[MASK]: + for the class, - against it"
    )

    def __init__(self, model: Callable[..., Any], **kwargs: Any) -> None:
        kwargs.setdefault("baseline", "mask")
        super().__init__(model, **kwargs)


class GradientXActivationScorer(CaptumScorer):
    """Gradient x activation at the embedding output (Captum's
    ``LayerGradientXActivation`` on the embedding block), summed per token."""

    method = LayerGradientXActivation
    meaning = (
        "gradient of the class's {output} times the token's embedding: + for "
        "the class, - against it"
    )

    def __init__(self, model: Callable[..., Any], **kwargs: Any) -> None:
        kwargs.setdefault("layer", "embeddings")
        super().__init__(model, **kwargs)


class InputXGradientScorer(CaptumScorer):
    """Input x gradient of the word embeddings (Captum's
    ``LayerGradientXActivation`` there), summed per token: ``input-x-gradient``
    for a classifier, as for a causal LM."""

    method = LayerGradientXActivation
    prompt_label = "InputXGradient"
    meaning = (
        "gradient of the class's {output} times the token's word embedding: + "
        "for the class, - against it"
    )


class SaliencyScorer(GradientXActivationScorer):
    """The gradient at the embedding output, summed over its features
    (Captum's ``LayerGradientXActivation`` without the inputs):
    ``saliency`` for a classifier, as for a causal LM at its token
    embeddings - in both, what the first layer reads. (Not at a BERT's word
    embeddings: its embedding LayerNorm makes their gradient sum to zero
    over the features.)"""

    method_arguments = {"multiply_by_inputs": False}
    prompt_label = "Saliency"
    meaning = (
        "the gradient of the class's {output} at the token's embedding, "
        "summed: + where more of it raises the class"
    )


class SamplingScorer(CaptumScorer):
    """A sampling method with its number of samples as an argument.

    Args:
        model (Callable): See :class:`CaptumScorer`.
        n_samples (int, optional): The method's ``n_samples`` (default: the
            class's ``defaults``).
        **kwargs: See :class:`CaptumScorer`.
    """

    def __init__(
        self, model: Callable[..., Any], n_samples: Optional[int] = None, **kwargs: Any
    ) -> None:
        if n_samples is not None:
            if isinstance(n_samples, bool) or int(n_samples) < 1:
                raise ValueError(f"n_samples must be >= 1; got {n_samples!r}")
            options = dict(kwargs.get("attribute_options") or {})
            kwargs["attribute_options"] = {**options, "n_samples": int(n_samples)}
        super().__init__(model, **kwargs)


class KernelShapScorer(SamplingScorer):
    """Captum's ``KernelShap`` with one feature per token, removed tokens as
    masked ``[PAD]``; ``n_samples`` coalitions per instance (default 500)."""

    method = KernelShap
    per_token_note = (
        "Captum's KernelShap fits one surrogate model to the whole answer's "
        "log-probability, so it scores no single output token"
    )
    meaning = (
        "the token's Shapley value for the class's {output} (KernelSHAP "
        "estimate): + for the class, - against it"
    )
    defaults = {"n_samples": 500}


class ShapleySamplingScorer(SamplingScorer):
    """Captum's ``ShapleyValueSampling`` with one feature per token, removed
    tokens as masked ``[PAD]``; ``n_samples`` permutations (default 25, about
    ``25 (n + 1)`` forward rows for ``n`` tokens)."""

    method = ShapleyValueSampling
    meaning = (
        "the token's Shapley value for the class's {output} (sampled "
        "permutations): + for the class, - against it"
    )
    defaults = {"n_samples": 25}
