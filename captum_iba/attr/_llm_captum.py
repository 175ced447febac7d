"""A causal LM's way of running one of Captum's methods on its rows
(:meth:`AnswerRows.captum <captum_iba.attr.answer_rows.AnswerRows.captum>`):
through Captum's LLM API, which replaces the method's forward by the
answer's log-probability - the method never learns that it explains an LLM.

* a layer method (``LayerIntegratedGradients``, ``LayerGradientXActivation``)
  runs at the token embeddings through
  :class:`captum.attr.LLMGradientAttribution` - once per answer token where
  the rows hold per-token rows, else once on the answer's summed
  log-probability
  (:class:`~captum_iba.attr.summed_gradient.SummedLLMGradientAttribution`:
  the same scores, these methods being linear in their target);
* a perturbation method (``FeatureAblation``, ``ShapleyValueSampling``,
  ``Lime``, ``KernelShap``) runs on the prompt's tokens through
  :class:`captum.attr.LLMAttribution`, every answer in one forward pass
  (``forward_in_tokens=False``); a removed token becomes the pad token.

One prompt at a time (Captum's API takes one), its scored tokens the
features, the rest of the prompt (a chat template's tokens) kept; a sampling
method's generator is seeded per prompt with
:func:`~captum_iba._utils.common.instance_seed` inside
:func:`~captum_iba._utils.common.kept_random_state`. A score is the
log-probability of the answer (or of one output token) the token adds (+) or
takes away (-).
"""

from typing import Any, Dict, Optional

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
from captum_iba.attr.batches import rows_per_pass
from captum_iba.attr.summed_gradient import (
    LINEAR_METHODS,
    SummedLLMGradientAttribution,
)

__all__ = ["llm_captum"]


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


def llm_captum(rows: Any, run: Any) -> Tensor:
    """``(R, W)`` scores of a causal LM's rows
    (:class:`~captum_iba.attr.answer_rows.AnswerRows`) by Captum's method ``method``
    (built on the model, and for a ``layer`` method at its token
    embeddings), through Captum's LLM API (see the module docstring).

    Args:
        rows (AnswerRows): The prompts and answers, per-token rows after them.
        run (CaptumRun): The method: its class (built on the model, a layer
            method at the token embeddings) and arguments, its
            ``attribute``'s options (an ``internal_batch_size`` sized per
            prompt within :data:`~captum_iba.attr.batches.ROW_TOKENS` where
            the run sizes its passes), the baseline id and seed.
    """
    model, tokenizer = rows.model, rows.tokenizer
    if run.is_layer_method:
        attribution = run.method(model, embeddings_of(model), **run.arguments)
    else:
        attribution = run.method(model, **run.arguments)
    if isinstance(attribution, LayerAttribution):
        api: Any = LLMGradientAttribution(attribution, tokenizer)
        kind_options: Dict[str, Any] = {}
    else:
        api = LLMAttribution(attribution, tokenizer)
        kind_options = {"forward_in_tokens": False}
    # without per-token rows, a method linear in its target runs once
    if isinstance(attribution, LINEAR_METHODS) and not rows.per_token:
        api = SummedLLMGradientAttribution(attribution, tokenizer)
    given = run.baseline_token_id
    baseline = rows.pad_token_id if given is None else given
    sized = run.max_tokens_per_pass is not None or run.internal_batch_size is not None
    batch = rows.batch
    B, width = rows.instances, batch.input_ids.shape[1]
    out = torch.zeros(len(rows), width)
    firsts = _first_token_rows(rows)
    device = common.model_device(model, batch.input_ids.device)
    for b in range(B):
        # the prompt (and the answer before its explained tokens, read as
        # given) then the explained tokens as Captum's target
        prompt = batch.lead_mask[b]
        ids = batch.input_ids[b][prompt].unsqueeze(0).to(device)
        features = batch.scored[b][prompt].unsqueeze(0).to(device)
        target = torch.tensor(batch.explained_ids(b), device=device)
        inp = _PromptIds(ids, features, tokenizer, baseline)
        with common.kept_random_state(device):  # the caller's state kept
            if run.seed is not None:
                torch.manual_seed(common.instance_seed(run.seed, ids[0]))
            options = dict(run.options)
            if sized:
                options["internal_batch_size"] = rows_per_pass(
                    ids.shape[1], run.internal_batch_size
                )
            res = api.attribute(inp, target=target, **kind_options, **options)
        columns = prompt.nonzero().flatten()[features[0].cpu()]
        out[b, columns] = res.seq_attr.detach().float().cpu()
        if res.token_attr is not None and firsts is not None:
            found = res.token_attr.detach().float().cpu()
            out[firsts[b] : firsts[b] + found.shape[0], columns] = found
    return out


def _first_token_rows(rows: Any) -> Optional[Tensor]:
    """Per instance, the first of its per-token rows (None without them)."""
    if rows.which is None:
        return None
    first = torch.zeros(rows.instances, dtype=torch.long)
    for r in range(rows.which.shape[0] - 1, -1, -1):
        first[int(rows.which[r, 0])] = rows.instances + r
    return first
