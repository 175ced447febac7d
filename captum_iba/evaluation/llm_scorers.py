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
* :class:`CaptumLLMScorer` - Captum's own methods through its LLM API
  (:class:`captum.attr.LLMAttribution` for the perturbation methods,
  :class:`captum.attr.LLMGradientAttribution` for the gradient methods), one
  prompt at a time (Captum's API takes one), every answer in one forward pass
  (``forward_in_tokens=False``); a removed token becomes the pad token.
"""

from typing import Any, Dict, Optional

import torch
from captum.attr import (
    FeatureAblation,
    KernelShap,
    LayerGradientXActivation,
    LayerIntegratedGradients,
    Lime,
    LLMAttribution,
    LLMGradientAttribution,
    ShapleyValueSampling,
    TextTokenInput,
)
from torch import Tensor

from captum_iba._utils import common
from captum_iba._utils.captum_compat import get_exp_kernel_similarity_function
from captum_iba._utils.modules import embeddings_of
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
from captum_iba.evaluation.scorers import TokenScorer

__all__ = [
    "CAPTUM_METHODS",
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


#: Captum's methods for causal LMs, by the name a registry entry gives
#: (``captum=``): the class and whether it runs through
#: ``LLMGradientAttribution`` (at the token embeddings).
CAPTUM_METHODS: Dict[str, Any] = {
    "FeatureAblation": (FeatureAblation, False),
    "ShapleyValueSampling": (ShapleyValueSampling, False),
    "Lime": (Lime, False),
    "KernelShap": (KernelShap, False),
    "LayerIntegratedGradients": (LayerIntegratedGradients, True),
    "Saliency": (LayerGradientXActivation, True),
    "InputXGradient": (LayerGradientXActivation, True),
}


class _PromptIds(TextTokenInput):
    """Captum's ``TextTokenInput`` made from token ids (the batch's prompt,
    chat template included) instead of text; its features are the scored
    tokens, the rest are kept as they are."""

    def __init__(self, ids: Tensor, features: Tensor, tokenizer: Any, baseline: int):
        self.inp_tensor = ids
        self.itp_mask = features
        self.itp_tensor = ids[features].unsqueeze(0)
        self.skip_tokens = None
        self.values = tokenizer.convert_ids_to_tokens(self.itp_tensor[0].tolist())
        self.tokenizer = tokenizer
        self.n_itp_features = len(self.values)
        self.baselines = baseline


class CaptumLLMScorer(LLMScorer):
    """One of Captum's methods through its LLM API (see the module docstring).

    Args:
        model (nn.Module): A Hugging Face ``...ForCausalLM``.
        captum (str): A name of :data:`CAPTUM_METHODS`.
        n_steps (int): Integrated gradients' steps. Default 50.
        n_samples (int, optional): Shapley sampling's permutations (default
            25), LIME's and KernelSHAP's samples (default 500).
        seed (int, optional): Seed of the sampling methods. Default 0.
        internal_batch_size (int, optional): Integrated gradients' steps per
            pass. Default: as many as keep steps x tokens within
            :data:`ROW_TOKENS`.
        **kwargs: The arguments of :class:`LLMScorer`.
    """

    def __init__(
        self,
        model: Any,
        captum: str = "FeatureAblation",
        n_steps: int = 50,
        n_samples: Optional[int] = None,
        seed: Optional[int] = 0,
        internal_batch_size: Optional[int] = None,
        **kwargs: Any,
    ) -> None:
        if captum not in CAPTUM_METHODS:
            raise ValueError(
                f"captum must be one of {list(CAPTUM_METHODS)}, got {captum!r}"
            )
        super().__init__(model, **kwargs)
        cls, self.gradient = CAPTUM_METHODS[captum]
        self.captum = captum
        self.seed = seed
        self.n_steps, self.internal_batch_size = n_steps, internal_batch_size
        default = 25 if captum == "ShapleyValueSampling" else 500
        self.n_samples = default if n_samples is None else n_samples
        if self.gradient:
            multiply = {"Saliency": False}.get(captum, True)
            extra = (
                {}
                if captum == "LayerIntegratedGradients"
                else {"multiply_by_inputs": multiply}
            )
            method = cls(model, embeddings_of(model), **extra)
            self.llm = LLMGradientAttribution(method, self.tokenizer)
        else:
            self.llm = LLMAttribution(self._method(cls), self.tokenizer)
        self.per_token = captum not in ("Lime", "KernelShap")
        if not self.per_token:
            self.per_token_note = (
                f"Captum's {captum} fits one surrogate model to the whole answer's "
                "log-probability, so it scores no single output token"
            )
        self.score_meaning = (
            "log-probability of the answer the token adds (+) or takes away (-)"
        )
        self.settings.update(captum=captum, baseline_token=self.pad_token_id)
        if captum == "LayerIntegratedGradients":
            self.settings["n_steps"] = n_steps
        if captum in ("ShapleyValueSampling", "Lime", "KernelShap"):
            self.settings.update(n_samples=self.n_samples, seed=seed)

    def _method(self, cls: Any) -> Any:
        if cls is Lime:  # Captum's Lasso(0.01) can zero every weight
            from captum_iba._utils.captum_compat import SkLearnRidge

            return Lime(
                self.model,
                interpretable_model=SkLearnRidge(alpha=1.0),
                similarity_func=get_exp_kernel_similarity_function("cosine", 1.0),
            )
        return cls(self.model)

    def _options(self, length: int) -> Dict[str, Any]:
        if self.captum == "LayerIntegratedGradients":
            rows = rows_per_pass(length, self.internal_batch_size)
            return {"n_steps": self.n_steps, "internal_batch_size": rows}
        if self.gradient:
            return {}
        out: Dict[str, Any] = {"forward_in_tokens": False}
        if self.captum != "FeatureAblation":
            out["n_samples"] = self.n_samples
        return out

    def _scores(self, batch: PromptBatch, per_token: bool) -> AnswerScores:
        width = batch.input_ids.shape[1]
        answer = torch.zeros(len(batch), width)
        longest = int(batch.answer_mask.sum(1).max())
        tokens = torch.zeros(len(batch), longest, width)
        device = common.model_device(self.model, batch.input_ids.device)
        for b in range(len(batch)):
            prompt = batch.prompt_mask[b]
            ids = batch.input_ids[b][prompt].unsqueeze(0).to(device)
            features = batch.scored[b][prompt].unsqueeze(0).to(device)
            target = torch.tensor(batch.answer_ids(b), device=device)
            inp = _PromptIds(ids, features, self.tokenizer, self.pad_token_id)
            with common.kept_random_state(device):  # the caller's state kept
                if self.seed is not None:
                    torch.manual_seed(common.instance_seed(self.seed, ids[0]))
                options = self._options(ids.shape[1])
                res = self.llm.attribute(inp, target=target, **options)
            columns = prompt.nonzero().flatten()[features[0].cpu()]
            answer[b, columns] = res.seq_attr.detach().float().cpu()
            if res.token_attr is not None:
                found = res.token_attr.detach().float().cpu()
                tokens[b, : found.shape[0], columns] = found
        has_tokens = per_token and self.per_token
        return AnswerScores(answer, tokens if has_tokens else None, "nats")
