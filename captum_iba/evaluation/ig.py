"""Integrated gradients on an embedding layer, as a per-token scorer (of a
classifier, or of a causal LM through Captum's LLM API)."""

from typing import Any, Callable, Optional, Union

from captum.attr import LayerIntegratedGradients
from torch import Tensor, nn

from captum_iba.attr.rows import CaptumRun, Rows
from captum_iba.attr.text import resolve_layer
from captum_iba.evaluation.captum_prompts import CaptumPromptScorer

__all__ = ["IntegratedGradientsScorer", "embedding_layer"]


def embedding_layer(model: Any, layer: Union[None, str, nn.Module]) -> nn.Module:
    """The embedding layer of a method that attributes to embeddings: the
    word embeddings (``model.get_input_embeddings()``) for None, the
    embeddings as every method means them for ``"embeddings"``
    (:func:`~captum_iba.attr.text.resolve_layer`: the whole embedding block of
    a BERT-style encoder, where the paper's code runs IG), or the module given.

    Raises:
        ValueError: For another value.
    """
    if layer is None:
        return model.get_input_embeddings()
    if isinstance(layer, str) and layer == "embeddings":
        return resolve_layer(model, "embeddings").module
    if not isinstance(layer, nn.Module):
        raise ValueError(f"layer must be a module, 'embeddings' or None; got {layer!r}")
    return layer


class IntegratedGradientsScorer(CaptumPromptScorer):
    """Integrated gradients on an embedding layer (Captum ``LayerIntegratedGradients``).

    A classifier's: the baseline keeps the special tokens and padding and puts
    ``baseline_token_id`` (default ``[PAD]``) everywhere else: ``[CLS] [PAD]
    ... [SEP]``. Scores are the attributions summed over the hidden dimension.
    A causal LM's: at its token embeddings, through Captum's
    ``LLMGradientAttribution`` (:mod:`~captum_iba.evaluation.captum_prompts`),
    with ``n_steps`` and ``internal_batch_size`` only (the arguments marked
    "a classifier's" are refused).

    Args:
        model (Callable): HF model, or a function ``(ids, mask[, tt]) -> logits``.
        layer (nn.Module or str, optional): A classifier's embedding layer. Default
            ``model.get_input_embeddings()``; ``"embeddings"``: the whole
            embedding block (:func:`embedding_layer`, the paper's choice).
        n_steps (int): Riemann/Gauss-Legendre steps. Default 50.
        output (str): A classifier's: explain the ``"logits"`` (default) or
            the softmax ``"probs"``.
        normalize (str, optional): A classifier's: ``"l2"`` divides each
            instance's scores by their L2 norm (the paper's code). Default None.
        baseline_token_id (int, optional): A classifier's. Default the pad id.
        internal_batch_size (int, optional): Captum's ``internal_batch_size``
            (rows per forward/backward pass). Default: as many rows as keep a
            pass within ``max_tokens_per_pass`` tokens (at least the batch); a
            causal LM's, within
            :data:`~captum_iba.evaluation.batches.ROW_TOKENS`.
        max_tokens_per_pass (int): A classifier's: bounds the memory of a pass when
            ``internal_batch_size`` is None: a batch of 16 reviews of 256
            tokens at 50 steps is 204,800 tokens in one pass otherwise (tens of
            GB). Default 16,384. The scores do not depend on it.
        target_class (int, optional): Always explain this class (the paper's code: 0).
        **kwargs: See :class:`~captum_iba.evaluation.TokenScorer`.
    """

    meaning = (
        "the part of the class's {output} (against an input of [PAD]s) that the "
        "token's embedding accounts for: + for the class, - against it"
    )

    def __init__(
        self,
        model: Callable[..., Any],
        layer: Union[None, str, nn.Module] = None,
        n_steps: int = 50,
        output: str = "logits",
        normalize: Optional[str] = None,
        baseline_token_id: Optional[int] = None,
        internal_batch_size: Optional[int] = None,
        max_tokens_per_pass: int = 16384,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, **kwargs)
        self.n_steps = int(n_steps)
        self.internal_batch_size = internal_batch_size
        self._refuse_unread(
            layer=layer is not None,
            output=output != "logits",
            normalize=normalize is not None,
            baseline_token_id=baseline_token_id is not None,
            max_tokens_per_pass=max_tokens_per_pass != 16384,
        )
        layer = embedding_layer(model, layer)
        if max_tokens_per_pass < 1:
            raise ValueError("max_tokens_per_pass must be a positive integer")
        if output not in ("logits", "probs"):
            raise ValueError("output must be 'logits' or 'probs'")
        if normalize not in (None, "l2"):
            raise ValueError("normalize must be None or 'l2'")
        self.layer = layer
        self.output = output
        self.normalize = normalize
        self.baseline_token_id = (
            self.pad_token_id if baseline_token_id is None else int(baseline_token_id)
        )
        self.max_tokens_per_pass = int(max_tokens_per_pass)
        self._record(
            dict(
                n_steps=self.n_steps,
                output=output,
                normalize=normalize,
                baseline_token_id=self.baseline_token_id,
                layer=type(layer).__name__,
                internal_batch_size=internal_batch_size,
                max_tokens_per_pass=self.max_tokens_per_pass,
            )
        )
        self.settings["n_steps"] = self.n_steps

    def _captum_run(self) -> CaptumRun:
        return CaptumRun(
            LayerIntegratedGradients,
            options={"n_steps": self.n_steps},
            layer=self.layer,
            output=self.output,
            baseline_token_id=self.baseline_token_id,
            baselines=True,
            features_only=False,
            internal_batch_size=self.internal_batch_size,
            max_tokens_per_pass=self.max_tokens_per_pass,
        )

    def _scores(self, rows: Rows) -> Tensor:
        scores = rows.captum(self._captum_run())
        if self.normalize == "l2":
            scores = scores / scores.norm(dim=1, keepdim=True).clamp_min(1e-12)
        return scores
