"""AttnLRP (Achtibat et al., ICML 2024) through the ``lxt`` package: an optional anchor.

AttnLRP propagates relevance through attention and the non-linearities with
rules that keep it conserved, in one backward pass: it is as cheap as a
gradient and, on BERT-type classifiers, among the most faithful methods on
deletion tests. The ``lxt`` package implements it by patching the modelling
code of Hugging Face ``transformers`` (and ``LayerNorm`` / ``Dropout``) at the
class level. This scorer therefore:

* never patches the caller's model: it builds a patched *copy* (same config,
  same weights) for each call and restores every patched attribute of
  ``transformers`` and ``torch.nn`` afterwards, also on errors;
* scores token ``i`` by :math:`R_i = \\sum_h e_{ih} \\, \\partial f_y / \\partial
  e_{ih}` computed with the AttnLRP rules, :math:`e` the input embeddings and
  :math:`f_y` the target's logit.

Requirements (an optional extra, ``pip install "captum-iba[attnlrp]"``):
``lxt`` 2.1 supports BERT, GPT-2, Llama, Qwen and Gemma; it imports
``transformers.pytorch_utils.find_pruneable_heads_and_indices``, which
transformers 5 removed, so it needs ``transformers<5`` (4.51 to 4.53 work;
older lack the Qwen3 module it imports). It also imports ``torchvision`` for
its ViT rules. Where it cannot be imported the scorer raises an ``ImportError``
that says so.
"""

import importlib
from contextlib import contextmanager
from typing import Any, Dict, Iterator, Mapping, Optional, Tuple

import torch
from torch import Tensor, nn

from captum_iba.evaluation.scorers import TokenScorer

__all__ = ["AttnLRPScorer", "attnlrp_available"]

#: The model families the scorer knows: model_type -> transformers module.
_MODULES = {
    "bert": "transformers.models.bert.modeling_bert",
    "gpt2": "transformers.models.gpt2.modeling_gpt2",
    "llama": "transformers.models.llama.modeling_llama",
}
_HINT = (
    "AttnLRP needs the optional package lxt (pip install 'captum-iba[attnlrp]'). "
    "lxt 2.1 imports transformers.pytorch_utils.find_pruneable_heads_and_indices, "
    "which transformers 5 removed: use it in an environment with "
    "transformers>=4.51,<5 (and torchvision, which it imports for its ViT rules)."
)


def attnlrp_available() -> Tuple[bool, str]:
    """Whether ``lxt`` imports here, and why not.

    Returns:
        (bool, str): ``(True, "")`` or ``(False, reason)``.
    """
    try:
        importlib.import_module("lxt.efficient")
        importlib.import_module("lxt.efficient.models")
    except Exception as err:  # ImportError, or errors raised while importing
        return False, f"{_HINT} (import failed: {type(err).__name__}: {err})"
    return True, ""


def _restore(owner: Any, saved: Mapping[str, Any]) -> None:
    """Put back every attribute of ``owner`` that differs from ``saved``."""
    for name in set(vars(owner)) | set(saved):
        current = vars(owner).get(name, _MISSING)
        before = saved.get(name, _MISSING)
        if current is before:
            continue
        if before is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, before)


_MISSING = object()


@contextmanager
def _patched(module_name: str) -> Iterator[Any]:
    """Apply lxt's AttnLRP patches; restore every patched attribute on exit."""
    from lxt.efficient import monkey_patch

    module = importlib.import_module(module_name)
    owners = [module, nn.LayerNorm, nn.Dropout, nn.GELU, nn.SiLU]
    saved = [dict(vars(owner)) for owner in owners]
    try:
        monkey_patch(module)
        yield module
    finally:
        for owner, attrs in zip(owners, saved):
            _restore(owner, attrs)


class AttnLRPScorer(TokenScorer):
    """AttnLRP relevance of each token (see the module docstring).

    Args:
        model (nn.Module): A Hugging Face ``...ForSequenceClassification``
            model of a family ``lxt`` supports (BERT, GPT-2, Llama).
        **kwargs: See :class:`TokenScorer`.

    Raises:
        ImportError: When ``lxt`` cannot be imported here (the message says
            which versions it needs).
        ValueError: For a model family lxt does not support.
    """

    meaning = (
        "the token's relevance for the class's logit (LRP: the relevances add "
        "up to about the logit): + for the class, - against it"
    )

    def __init__(self, model: nn.Module, **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        ok, reason = attnlrp_available()
        if not ok:
            raise ImportError(reason)
        model_type = getattr(getattr(model, "config", None), "model_type", None)
        if model_type not in _MODULES:
            raise ValueError(
                f"AttnLRP supports the model types {sorted(_MODULES)}; got "
                f"{model_type!r}"
            )
        self.module_name = _MODULES[model_type]
        self.settings.update(implementation="lxt.efficient (AttnLRP rules)")

    def _copy(self, module: Any) -> nn.Module:
        """The caller's model rebuilt from the patched classes, same weights."""
        cls = getattr(module, type(self.model).__name__)
        copy = cls(self.model.config)
        copy.load_state_dict(self.model.state_dict())
        copy.to(next(self.model.parameters()).device)
        for p in copy.parameters():
            p.requires_grad_(False)
        return copy.eval()

    def _scores(
        self, ids: Tensor, mask: Tensor, tt: Optional[Tensor], target: Tensor
    ) -> Tensor:
        with _patched(self.module_name) as module, torch.enable_grad():
            copy = self._copy(module)
            embeds = copy.get_input_embeddings()(ids).detach().requires_grad_(True)
            extra: Dict[str, Tensor] = {"attention_mask": mask}
            if tt is not None:
                extra["token_type_ids"] = tt
            logits = copy(inputs_embeds=embeds, **extra).logits
            chosen = logits.gather(1, target[:, None].to(logits.device)).sum()
            (grad,) = torch.autograd.grad(chosen, embeds)
        relevance = (embeds.detach() * grad).sum(-1)
        return relevance.float() * self._removable(ids, mask)
