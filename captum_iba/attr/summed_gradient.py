"""Captum's ``LLMGradientAttribution`` in one run: the attribution of a whole
response's log-probability at the cost of one of its tokens.

Captum's :class:`captum.attr.LLMGradientAttribution` runs its method once per
response token (the target: that token's log-probability, the prompt and the
tokens before it as input) and sums the runs into ``seq_attr``. For a method
linear in its target - Integrated Gradients and gradient x activation at the
token embeddings, whose attribution is the input's difference from the
baseline times gradients, averaged over a path that does not depend on the
target - the sum of the runs is one run on the sum of the targets: the
response's log-probability, every response token's at its own position of one
forward pass over the prompt and the whole response (a causal LM's position
reads only the tokens before it, so it is the log-probability Captum's run of
that token computes). :class:`SummedLLMGradientAttribution` does that: the same
``seq_attr`` (to float rounding) at ``1 / len(response)`` of the passes, and no
per-token ``token_attr``. Methods that draw random baselines per run
(``LayerGradientShap``) are not linear in this sense and are refused.
"""

from typing import Any, Dict, List, Optional, Union

import torch
from captum.attr import (
    InterpretableInput,
    LayerGradientXActivation,
    LayerIntegratedGradients,
    LLMAttributionResult,
    LLMGradientAttribution,
    TextTokenInput,
)
from torch import Tensor, nn

__all__ = ["SummedLLMGradientAttribution", "LINEAR_METHODS"]

#: Captum's layer methods whose attribution is linear in the target (no random
#: draws): their per-token runs sum to one run on the summed target.
LINEAR_METHODS = (LayerIntegratedGradients, LayerGradientXActivation)


class _SummedForward(nn.Module):
    """The response's log-probability given the (perturbed) prompt: one
    forward pass over the prompt and the whole response, each response token's
    log-probability read at the position before it, summed."""

    def __init__(self, attr: "SummedLLMGradientAttribution") -> None:
        super().__init__()
        self.attr = attr
        self.model: nn.Module = attr.model

    def forward(
        self, perturbed_tensor: Tensor, inp: InterpretableInput, target_ids: List[int]
    ) -> Tensor:
        prompt = self.attr._format_model_input(inp.to_model_input(perturbed_tensor))
        prompt = prompt["input_ids"]
        response = torch.tensor(target_ids, device=prompt.device)
        response = response.unsqueeze(0).expand(prompt.size(0), -1)
        ids = torch.cat([prompt, response], dim=1)
        start = prompt.size(1) - 1  # the logits that predict the response
        logits = self.model(ids).logits[:, start : start + response.size(1)]
        log_probs = torch.log_softmax(logits.float(), dim=-1)
        return log_probs.gather(-1, response.unsqueeze(-1)).squeeze(-1).sum(-1)


class SummedLLMGradientAttribution(LLMGradientAttribution):
    """Captum's ``LLMGradientAttribution`` with its method run once, on the
    response's summed log-probability (see the module docstring): the same
    ``seq_attr``; ``token_attr`` is None.

    Args:
        attr_method (LayerIntegratedGradients or LayerGradientXActivation):
            Built with the causal LM at its token embeddings, as for Captum's
            class.
        tokenizer: The model's tokenizer.

    Raises:
        TypeError: For a method not linear in its target (``LayerGradientShap``).
    """

    def __init__(self, attr_method: Any, tokenizer: Any) -> None:
        if not isinstance(attr_method, LINEAR_METHODS):
            raise TypeError(
                "SummedLLMGradientAttribution sums the runs of a method linear in "
                f"its target ({', '.join(c.__name__ for c in LINEAR_METHODS)}); "
                f"got {type(attr_method).__name__}: use LLMGradientAttribution"
            )
        super().__init__(attr_method, tokenizer)
        self.attr_method.forward_func = _SummedForward(self)

    def attribute(
        self,
        inp: InterpretableInput,
        target: Union[str, Tensor, None] = None,
        gen_args: Optional[Dict[str, Any]] = None,
        **kwargs: Any,
    ) -> LLMAttributionResult:
        """The attribution of ``target``'s summed log-probability to ``inp``'s
        features, in one run of the method.

        Args:
            inp (TextTokenInput): The prompt (Captum's interpretable input).
            target (str or Tensor, optional): The response (None: generated
                with ``gen_args``, as Captum's class does).
            gen_args (dict, optional): Generation arguments for a missing
                ``target``.
            **kwargs (Any): Passed to the method's ``attribute``.

        Returns:
            LLMAttributionResult: ``seq_attr`` (one score per feature);
            ``token_attr`` None.

        Raises:
            ValueError: For an empty ``target``.
        """
        target_tokens = self._get_target_tokens(inp, target, gen_args=gen_args)
        if len(target_tokens) == 0:
            raise ValueError("target is empty: no response to attribute")
        attr = self.attr_method.attribute(
            inp.to_tensor().to(self.device),
            # a list, not a tensor: Captum repeats tensor arguments per step
            additional_forward_args=(inp, target_tokens.tolist()),
            **kwargs,
        ).detach()
        attr = attr[:, : -len(target_tokens)].sum(-1)  # the prompt's positions
        if isinstance(inp, TextTokenInput) and inp.itp_mask is not None:
            mask = inp.itp_mask.to(attr.device).expand_as(attr)
            attr = attr[mask].view(attr.size(0), -1)
        return LLMAttributionResult(
            seq_attr=attr[0],
            token_attr=None,
            input_tokens=inp.values,
            output_tokens=self.tokenizer.convert_ids_to_tokens(target_tokens.tolist()),
        )
