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
  :math:`f_y` the target's logit of a classifier, or the sum of a causal
  LM's answer tokens' logits (:class:`AttnLRPScorer`, one class for both).

Requirements (an optional extra, ``pip install "captum-iba[attnlrp]"``):
``lxt`` 2.1 supports BERT, GPT-2, Llama, Qwen and Gemma (offered here for
BERT, GPT-2, Llama and Gemma 3's text model, ``model_type`` ``"gemma3_text"``,
run on Gemma 3 270M in docs/context.rst); it imports
``transformers.modeling_attn_mask_utils`` and
``transformers.pytorch_utils.find_pruneable_heads_and_indices``, which
transformers 5 removed, so it needs ``transformers<5`` (4.51 to 4.53 work;
older lack the Qwen3 module it imports). It also imports ``torchvision`` for
its ViT rules. Where it cannot be imported the scorer raises an ``ImportError``
that says why: lxt missing, or the import's own error and the transformers
version installed (:func:`attnlrp_available`, also what the command line
checks before any model loads).
"""

import importlib
from contextlib import contextmanager, nullcontext
from typing import Any, Iterator, Mapping, Optional, Tuple

import torch
from torch import Tensor, nn

from captum_iba._utils.lazy import renamed
from captum_iba.attr.rows import Rows
from captum_iba.evaluation.scorers import TokenScorer

__all__ = [
    "AttnLRPScorer",
    "attnlrp_available",
    "lxt_module",
    "patched_copy",
]

#: The model families the scorer knows: model_type -> transformers module.
_MODULES = {
    "bert": "transformers.models.bert.modeling_bert",
    "gemma3_text": "transformers.models.gemma3.modeling_gemma3",
    "gpt2": "transformers.models.gpt2.modeling_gpt2",
    "llama": "transformers.models.llama.modeling_llama",
}
#: What lxt 2.1 needs (docs/llm.rst; measured: it does not import under 5.x).
_NEEDS = (
    "lxt 2.1 needs transformers>=4.51,<5 (and torchvision, which it imports "
    "for its ViT rules)"
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
        return False, _why_not(err)
    return True, ""


def _why_not(err: Exception) -> str:
    """Why ``lxt`` did not import, in one line: not installed, or its own
    import error, with the transformers version installed."""
    from importlib.metadata import version

    here = f"transformers {version('transformers')} is installed here"
    if isinstance(err, ModuleNotFoundError) and err.name == "lxt":
        return (
            "AttnLRP needs the optional package lxt, which is not installed "
            f"(pip install 'captum-iba[attnlrp]'); {_NEEDS}, and {here}."
        )
    return (
        "AttnLRP needs the optional package lxt, which does not import here "
        f"({type(err).__name__}: {err}); {_NEEDS}, and {here}."
    )


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
    # lxt replaces the module's names (BERT) or patches its classes' methods
    # in place (Llama: the MLP and the RMS norm): both are put back.
    classes = [
        obj
        for obj in vars(module).values()
        if isinstance(obj, type) and obj.__module__ == module.__name__
    ]
    owners = [module, *classes, nn.LayerNorm, nn.Dropout, nn.GELU, nn.SiLU]
    saved = [dict(vars(owner)) for owner in owners]
    try:
        monkey_patch(module)
        yield module
    finally:
        for owner, attrs in zip(owners, saved):
            _restore(owner, attrs)


def lxt_module(model: nn.Module) -> str:
    """The ``transformers`` module that ``lxt`` patches for ``model`` 's family.

    Raises:
        ImportError: When ``lxt`` cannot be imported here (the message says
            which versions it needs).
        ValueError: For a model family lxt does not support.
    """
    ok, reason = attnlrp_available()
    if not ok:
        raise ImportError(reason)
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in _MODULES:
        raise ValueError(
            f"AttnLRP supports the model types {sorted(_MODULES)}; got {model_type!r}"
        )
    return _MODULES[model_type]


def _no_init() -> Any:
    """transformers' context that skips the weights' random initialisation
    (``transformers.modeling_utils`` in 4.x), or a no-op."""
    from transformers import modeling_utils

    skip = getattr(modeling_utils, "no_init_weights", None)
    return skip() if skip is not None else nullcontext()


def patched_copy(model: nn.Module, module: Any) -> nn.Module:
    """``model`` rebuilt from ``module`` 's patched classes, with its weights
    (frozen, in eval mode): the caller's model is never patched."""
    cls = getattr(module, type(model).__name__)
    with _no_init():  # the weights are loaded next: no random init (seconds)
        copy = cls(model.config)
    copy.load_state_dict(model.state_dict())
    copy.to(next(model.parameters()).device)
    for p in copy.parameters():
        p.requires_grad_(False)
    return copy.eval()


class _CopyCache:
    """A scorer's patched copy of its model, built on first use and again
    whenever a weight of the model changed (its storage or version)."""

    def __init__(self) -> None:
        self._key: Optional[Tuple[Tuple[int, int], ...]] = None
        self._copy: Optional[nn.Module] = None

    def get(self, model: nn.Module, module: Any) -> nn.Module:
        key = tuple((p.data_ptr(), p._version) for p in model.parameters())
        if self._copy is None or key != self._key:
            self._copy, self._key = patched_copy(model, module), key
        return self._copy


class AttnLRPScorer(TokenScorer):
    """AttnLRP relevance of each token (see the module docstring), for a
    classifier's class or a causal LM's answer.

    On a causal LM the relevance explained is the sum of the answer tokens'
    logits (each at the position that predicts it), as AttnLRP explains a
    logit; padding on the left is read with position ids counted over the
    real tokens.

    Args:
        model (nn.Module): A Hugging Face ``...ForSequenceClassification``
            or ``...ForCausalLM`` model of a family ``lxt`` supports (BERT,
            GPT-2, Llama, Gemma 3's text model).
        **kwargs: See :class:`TokenScorer`.

    Raises:
        ImportError: When ``lxt`` cannot be imported here (the message says
            which versions it needs).
        ValueError: For a model family lxt does not support.
    """

    unit = "relevance"
    meaning = (
        "the token's relevance for the class's logit (LRP: the relevances add "
        "up to about the logit): + for the class, - against it"
    )
    prompt_meaning = (
        "the token's relevance for the answer's logits (LRP: the relevances add "
        "up to about them): + for the answer, - against it"
    )

    def __init__(self, model: nn.Module, **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        self.module_name = lxt_module(model)
        self._copies = _CopyCache()
        self.settings.update(implementation="lxt.efficient (AttnLRP rules)")
        self.settings.update(self.model_kind.explained_output())

    def _scores(self, rows: Rows) -> Tensor:
        ids = rows.read().input_ids
        with _patched(self.module_name) as module, torch.enable_grad():
            copy = self._copies.get(self.model, module)
            embeds = copy.get_input_embeddings()(ids).detach().requires_grad_(True)
            (grad,) = torch.autograd.grad(rows.logits(copy, embeds).sum(), embeds)
        relevance = (embeds.detach() * grad).sum(-1).float()
        return relevance * rows.removable()[:, : ids.shape[1]].to(relevance.device)


#: 0.3's class of AttnLRP on a causal LM (``AttnLRPScorer`` now), until 0.4.
__getattr__ = renamed(__name__, {"LLMAttnLRPScorer": f"{__name__}:AttnLRPScorer"})
