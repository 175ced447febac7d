"""Captum's methods on a causal LM's prompts: the one place a method of Captum
explains a causal LM (through Captum's LLM API).

Each of Captum's methods the package registers for both kinds of model -
``IG``, ``LIME``, ``LOO``/``ablation``, ``kernel-shap``, ``shapley``,
``saliency``, ``input-x-gradient`` - is one class, a
:class:`CaptumPromptScorer`: it explains a classifier its own way
(:meth:`~captum_iba.evaluation.TokenScorer._scores`) and a causal LM's
:class:`~captum_iba.attr.batches.PromptBatch` here. The class names the
Captum class it runs for a causal LM (:attr:`CaptumPromptScorer.prompt_method`),
and the route follows from it:

* a layer method (``LayerIntegratedGradients``, ``LayerGradientXActivation``)
  runs at the token embeddings through
  :class:`captum.attr.LLMGradientAttribution` - once per answer token where
  per-token scores are asked for, else once on the answer's summed
  log-probability
  (:class:`~captum_iba.evaluation.summed_gradient.SummedLLMGradientAttribution`:
  the same scores, these methods being linear in their target);
* a perturbation method (``FeatureAblation``, ``ShapleyValueSampling``,
  ``Lime``, ``KernelShap``) runs on the prompt's tokens through
  :class:`captum.attr.LLMAttribution`, every answer in one forward pass
  (``forward_in_tokens=False``); a removed token becomes the pad token.

One prompt at a time (Captum's API takes one), its scored tokens
(``batch.scored``) the features, the rest of the prompt (a chat template's
tokens) kept; a sampling method's generator is seeded per prompt with
:func:`~captum_iba._utils.common.instance_seed` inside
:func:`~captum_iba._utils.common.kept_random_state`. A score is the
log-probability of the answer (or of one output token) the token adds (+) or
takes away (-).
"""

from typing import Any, Dict, Mapping, Optional, Type

import torch
from captum.attr import (
    LayerAttribution,
    LLMAttribution,
    LLMGradientAttribution,
    TextTokenInput,
)
from torch import Tensor

from captum_iba._utils import common
from captum_iba._utils.modules import embeddings_of
from captum_iba.attr.llm import AnswerScores
from captum_iba.attr.llm_batch import PromptBatch
from captum_iba.evaluation.scorers import TokenScorer
from captum_iba.evaluation.summed_gradient import (
    LINEAR_METHODS,
    SummedLLMGradientAttribution,
)

__all__ = ["CaptumPromptScorer"]


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


class CaptumPromptScorer(TokenScorer):
    """Base class of a method that explains a causal LM through Captum's LLM
    API (see the module docstring) and a classifier its own way.

    A subclass names :attr:`prompt_method` (and, where they differ from
    Captum's defaults, :attr:`prompt_arguments`); its constructor calls
    :meth:`_prompt_setup` when the model is a causal LM
    (:attr:`~captum_iba.attr.kinds.ModelKind.generates`).
    """

    #: Captum's class that explains a causal LM's prompts (None: the method
    #: explains classifiers only).
    prompt_method: Optional[Type[Any]] = None
    #: The arguments of :attr:`prompt_method` itself (e.g.
    #: ``multiply_by_inputs``).
    prompt_arguments: Mapping[str, Any] = {}
    #: What ``settings["captum"]`` records of a causal LM's run (default:
    #: :attr:`prompt_method`'s name).
    prompt_label: str = ""
    prompt_meaning = (
        "log-probability of the answer the token adds (+) or takes away (-)"
    )

    def _explains_prompts(self) -> bool:
        """Whether this scorer explains a causal LM's prompts (its model is
        one and its method has a Captum class for it)."""
        return self.model_kind.generates and self.prompt_method is not None

    def _prompt_setup(
        self, n_samples: Optional[int] = None, seed: Optional[int] = 0, **given: bool
    ) -> None:
        """Ready the scorer for a causal LM: Captum's LLM API around
        :meth:`_prompt_attribution`, and the run's ``settings``.

        Args:
            n_samples (int, optional): A sampling method's samples per prompt
                (None: a method without samples).
            seed (int, optional): Seed of each prompt's draws (None: torch's
                generator is left alone).
            **given (bool): A classifier's arguments of the subclass, each
                True when it was given a value other than its default: they
                mean nothing on a causal LM, so any given is refused.

        Raises:
            ValueError: Naming the classifier's arguments given.
        """
        wrong = [name for name, was_given in given.items() if was_given]
        if wrong:
            raise ValueError(
                f"{self.name} explains a causal LM through Captum's LLM API, which "
                f"takes no {', '.join(wrong)} (arguments of a classifier's "
                f"{type(self).__name__}); leave them out"
            )
        self.seed, self.n_samples = seed, n_samples
        method = self._prompt_attribution()
        if isinstance(method, LayerAttribution):
            self.prompt_api = LLMGradientAttribution(method, self.tokenizer)
        else:
            self.prompt_api = LLMAttribution(method, self.tokenizer)
        # without per-token scores, a method linear in its target runs once
        self.summed = (
            SummedLLMGradientAttribution(method, self.tokenizer)
            if isinstance(method, LINEAR_METHODS)
            else None
        )
        label = self.prompt_label or type(method).__name__
        self.settings.update(captum=label, baseline_token=self.pad_token_id)
        if n_samples is not None:
            self.settings.update(n_samples=n_samples, seed=seed)

    def _prompt_attribution(self) -> Any:
        """Captum's :attr:`prompt_method` on the model (a layer method: at its
        token embeddings)."""
        cls = self.prompt_method
        assert cls is not None
        if issubclass(cls, LayerAttribution):
            layer = embeddings_of(self.model)
            return cls(self.model, layer, **self.prompt_arguments)
        return cls(self.model, **self.prompt_arguments)

    def _prompt_options(self, length: int) -> Dict[str, Any]:
        """The arguments of Captum's ``attribute`` for a prompt of ``length``
        tokens."""
        if isinstance(self.prompt_api, LLMGradientAttribution):
            return {}
        out: Dict[str, Any] = {"forward_in_tokens": False}
        if self.n_samples is not None:
            out["n_samples"] = self.n_samples
        return out

    def _prompt_scores(self, batch: PromptBatch, per_token: bool) -> AnswerScores:
        """Each prompt's scores for its answer and (unless
        :attr:`~captum_iba.evaluation.TokenScorer.per_token_note` says why
        not) for each output token."""
        if self.prompt_method is None:  # a method for classifiers only
            return super()._prompt_scores(batch, per_token)
        width = batch.input_ids.shape[1]
        answer = torch.zeros(len(batch), width)
        longest = int(batch.explained_mask.sum(1).max())
        tokens = torch.zeros(len(batch), longest, width)
        device = common.model_device(self.model, batch.input_ids.device)
        has_tokens = per_token and not self.per_token_note
        api = self.prompt_api if has_tokens or self.summed is None else self.summed
        for b in range(len(batch)):
            # the prompt (and the answer before its explained tokens, read as
            # given) then the explained tokens as Captum's target
            prompt = batch.lead_mask[b]
            ids = batch.input_ids[b][prompt].unsqueeze(0).to(device)
            features = batch.scored[b][prompt].unsqueeze(0).to(device)
            target = torch.tensor(batch.explained_ids(b), device=device)
            inp = _PromptIds(ids, features, self.tokenizer, self.pad_token_id)
            with common.kept_random_state(device):  # the caller's state kept
                if self.seed is not None:
                    torch.manual_seed(common.instance_seed(self.seed, ids[0]))
                options = self._prompt_options(ids.shape[1])
                res = api.attribute(inp, target=target, **options)
            columns = prompt.nonzero().flatten()[features[0].cpu()]
            answer[b, columns] = res.seq_attr.detach().float().cpu()
            if res.token_attr is not None:
                found = res.token_attr.detach().float().cpu()
                tokens[b, : found.shape[0], columns] = found
        return AnswerScores(answer, tokens if has_tokens else None, "nats")
