r"""Baseline attribution methods as per-token scorers, in one harness with IBA.

Every scorer turns one batch into per-token scores ``(B, L)`` aligned with
``input_ids`` (zero at padding), with one call::

    scores = scorer.attribute(input_ids, target=labels,
                              attention_mask=attention_mask,
                              token_type_ids=token_type_ids)

and records how it ran in ``scorer.settings``. :func:`make_scorers` builds the
paper's four methods in one of two settings, and :func:`run_degradation_suite`
scores a data set with each of them and runs :func:`captum_iba.metrics.degradation_test`
on the result, recording every setting with it.

The two settings:

``"paper"`` reproduces the released code of Jiang et al. (2020), quirks included:

    * IG: on the embedding output (``model.base_model.embeddings`` when it exists),
      10 steps, baseline ``[CLS] [PAD] ... [SEP]``, explaining the softmax probability
      of class 0 whatever the label, scores summed over the hidden features and
      L2-normalised per instance (signed).
    * LIME: the ``lime`` package's ``LimeTextExplainer`` on the decoded text, 100
      samples, explaining class 1 whatever the label; perturbed texts are
      re-tokenised and padded to ``max_length`` (512) WITHOUT an attention mask; a word
      piece (or punctuation) that matches no LIME word gets the maximum weight.
    * random: uniform scores.
    * IBA: the ``"reference"`` prior (the released code's), target the gold label.

    The test itself: deletion, levels ``k/9``, ``length_convention="paper"``.

``"fair"`` gives every method the same target as IBA (the label passed in), proper
attention masks and its usual budget:

    * IG: the word-embedding layer, 50 steps, the target's logit, raw signed sums.
    * LIME (Captum): token features, removed tokens set to ``[PAD]`` and masked out of
      attention, the lime package's text kernel, lime-style sampling, 500 samples,
      ridge regression.
    * LIME (lime package): LIME words are whole words built from the word pieces (so
      the mapping back onto pieces is exact), removal by deletion with proper masks,
      500 samples.
    * random: uniform scores. IBA: the ``"paper"`` prior (or any prior given).

    The test itself: deletion, levels ``k/9`` of the removable tokens.
"""

import re
import time
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence

import numpy as np
import torch
from captum.attr import LayerIntegratedGradients, Lime
from captum.log import log_usage
from torch import Tensor, nn

from captum_iba._utils.common import logits_of
from captum_iba.metrics import PAPER_LEVELS, DegradationResult, degradation_test

__all__ = [
    "TokenScorer",
    "IntegratedGradientsScorer",
    "CaptumLimeScorer",
    "LimeTextScorer",
    "RandomScorer",
    "IBAScorer",
    "make_scorers",
    "run_degradation_suite",
    "PAPER_TEST_SETTINGS",
    "FAIR_TEST_SETTINGS",
    "SETTINGS",
]

SETTINGS = ("paper", "fair")

#: Degradation-test arguments of the paper's code.
PAPER_TEST_SETTINGS: Dict[str, Any] = {
    "removal": "delete",
    "levels": list(PAPER_LEVELS),
    "length_convention": "paper",
    "order": "morf",
}
#: Degradation-test arguments of the fair setting.
FAIR_TEST_SETTINGS: Dict[str, Any] = {
    "removal": "delete",
    "levels": list(PAPER_LEVELS),
    "length_convention": "tokens",
    "order": "morf",
}


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def _call(
    model: Callable[..., Any], ids: Tensor, mask: Optional[Tensor], tt: Optional[Tensor]
) -> Tensor:
    """Logits of ``model(ids[, mask][, tt])`` (positional, Hugging Face order)."""
    if tt is not None and mask is None:
        mask = torch.ones_like(ids)
    args = [a for a in (ids, mask, tt) if a is not None]
    return logits_of(model(*args))


def _device(model: Any) -> torch.device:
    if isinstance(model, nn.Module):
        for p in model.parameters():
            return p.device
    return torch.device("cpu")


def _special_ids(
    tokenizer: Any, special_token_ids: Optional[Iterable[int]]
) -> List[int]:
    if special_token_ids is not None:
        return sorted({int(i) for i in special_token_ids})
    if tokenizer is None:
        return []
    ids = set(getattr(tokenizer, "all_special_ids", []) or [])
    ids -= {
        getattr(tokenizer, "unk_token_id", None),
        getattr(tokenizer, "pad_token_id", None),
        None,
    }
    return sorted(int(i) for i in ids)


def _pad_id(tokenizer: Any, pad_token_id: Optional[int]) -> int:
    if pad_token_id is not None:
        return int(pad_token_id)
    pid = getattr(tokenizer, "pad_token_id", None) if tokenizer is not None else None
    return 0 if pid is None else int(pid)


def _target_tensor(
    target: Any, batch: int, fixed: Optional[int], fallback: Optional[Tensor]
) -> Tensor:
    """The class explained per instance: the fixed one, the given one or predicted."""
    if fixed is not None:
        return torch.full((batch,), int(fixed), dtype=torch.long)
    if target is None:
        if fallback is None:
            raise ValueError("target is needed")
        return fallback
    if isinstance(target, int):
        return torch.full((batch,), target, dtype=torch.long)
    t = torch.as_tensor(target).reshape(-1).long().cpu()
    if t.numel() == 1:
        return t.expand(batch).clone()
    if t.numel() != batch:
        raise ValueError(f"target has {t.numel()} entries for {batch} instances")
    return t


def _word_starts(pieces: Sequence[str]) -> List[bool]:
    """Whether each piece starts a word (WordPiece ``##``; ``▁``/``Ġ`` markers)."""
    marked = any(p.startswith(("\u2581", "\u0120")) for p in pieces)
    if marked:
        return [
            p.startswith(("\u2581", "\u0120")) or i == 0 for i, p in enumerate(pieces)
        ]
    return [not p.startswith("##") for p in pieces]


class TokenScorer:
    """Base class: turn a batch of token ids into per-token scores ``(B, L)``.

    Subclasses implement :meth:`_scores`. :meth:`attribute` validates the inputs,
    moves them to the model's device, zeroes padding and records the time spent.

    Attributes:
        name (str): The method's name, as used in results and tables.
        settings (dict): Everything that defines the run (setting, target rule,
            steps, samples, seed, ...).
    """

    name = "scorer"

    def __init__(
        self,
        model: Callable[..., Any],
        *,
        special_token_ids: Optional[Iterable[int]] = None,
        tokenizer: Any = None,
        pad_token_id: Optional[int] = None,
        target_class: Optional[int] = None,
        use_attention_mask: bool = True,
        name: Optional[str] = None,
        setting: str = "fair",
    ) -> None:
        if setting not in SETTINGS and setting != "custom":
            raise ValueError(f"setting must be one of {SETTINGS}; got {setting!r}")
        self.model = model
        self.tokenizer = tokenizer
        self.special_token_ids = _special_ids(tokenizer, special_token_ids)
        self.pad_token_id = _pad_id(tokenizer, pad_token_id)
        self.target_class = target_class
        self.use_attention_mask = use_attention_mask
        if name is not None:
            self.name = name
        self.settings: Dict[str, Any] = {
            "method": self.name,
            "setting": setting,
            "explains": "given target"
            if target_class is None
            else f"class {target_class}",
            "attention_mask": use_attention_mask,
        }
        self.seconds = 0.0
        self.instances = 0

    def _predicted(
        self, ids: Tensor, mask: Optional[Tensor], tt: Optional[Tensor]
    ) -> Tensor:
        with torch.no_grad():
            return _call(self.model, ids, mask, tt).argmax(-1).cpu()

    @log_usage()
    def attribute(
        self,
        input_ids: Tensor,
        target: Any = None,
        attention_mask: Optional[Tensor] = None,
        token_type_ids: Optional[Tensor] = None,
    ) -> Tensor:
        """Per-token scores of one batch.

        Args:
            input_ids (Tensor): ``(B, L)`` token ids.
            target (int, sequence, Tensor or None): The class to explain per instance
                (ignored when the scorer explains a fixed class, as in the paper
                setting). None: the predicted class.
            attention_mask (Tensor, optional): ``(B, L)``, 0 at padding.
            token_type_ids (Tensor, optional): ``(B, L)`` segment ids.

        Returns:
            Tensor: ``(B, L)`` float scores on the CPU, higher = more relevant, zero at
            padding.
        """
        if input_ids.dim() != 2:
            raise ValueError("input_ids must be (B, L)")
        B, L = input_ids.shape
        dev = _device(self.model)
        ids = input_ids.to(dev)
        mask = self._mask_of(input_ids, attention_mask).to(dev)
        tt = token_type_ids.to(dev) if token_type_ids is not None else None
        fallback = None
        if self.target_class is None and target is None:
            fallback = self._predicted(ids, mask, tt)
        tgt = _target_tensor(target, B, self.target_class, fallback)
        # Columns that are padding in every row (a slice of a data set padded
        # to its longest instance) are dropped for the method and put back.
        real = mask.bool().any(dim=0).nonzero()
        width = int(real.max()) + 1 if real.numel() else L
        start = time.perf_counter()
        scores = self._scores(
            ids[:, :width],
            mask[:, :width],
            None if tt is None else tt[:, :width],
            tgt.to(dev),
        )
        self.seconds += time.perf_counter() - start
        self.instances += B
        if scores.shape != (B, width):
            raise RuntimeError(
                f"{self.name} returned {tuple(scores.shape)}; expected {(B, width)}"
            )
        out = torch.zeros(B, L)
        out[:, :width] = scores.detach().float().cpu()
        return out.masked_fill(~mask.bool().cpu(), 0.0)

    def _scores(
        self, ids: Tensor, mask: Tensor, tt: Optional[Tensor], target: Tensor
    ) -> Tensor:
        raise NotImplementedError

    def _mask_of(self, input_ids: Tensor, attention_mask: Optional[Tensor]) -> Tensor:
        """The attention mask, or ``input_ids != pad`` when none is given."""
        if attention_mask is not None:
            return attention_mask
        return (input_ids != self.pad_token_id).long()

    def _removable(self, ids: Tensor, mask: Tensor) -> Tensor:
        special = torch.isin(
            ids,
            torch.tensor(self.special_token_ids, dtype=ids.dtype, device=ids.device),
        )
        return mask.bool() & ~special

    def _forward(self, output: str) -> Callable[..., Tensor]:
        model, use_mask = self.model, self.use_attention_mask

        def forward(ids: Tensor, mask: Tensor, tt: Optional[Tensor] = None) -> Tensor:
            logits = _call(
                model, ids, mask if use_mask else None, tt if use_mask else None
            )
            return logits.softmax(-1) if output == "probs" else logits

        return forward


# --------------------------------------------------------------------------------------
# Integrated gradients
# --------------------------------------------------------------------------------------


class IntegratedGradientsScorer(TokenScorer):
    """Integrated gradients on an embedding layer (Captum ``LayerIntegratedGradients``).

    The baseline keeps the special tokens and padding and puts ``baseline_token_id``
    (default ``[PAD]``) everywhere else: ``[CLS] [PAD] ... [SEP]``. Scores are the
    attributions summed over the hidden dimension.

    Args:
        model (Callable): HF model, or a function ``(ids, mask[, tt]) -> logits``.
        layer (nn.Module, optional): The embedding layer. Default
            ``model.get_input_embeddings()``.
        n_steps (int): Riemann/Gauss-Legendre steps. Default 50.
        output (str): Explain the ``"logits"`` (default) or the softmax ``"probs"``.
        normalize (str, optional): ``"l2"`` divides each instance's scores by their L2
            norm (the paper's code). Default None.
        baseline_token_id (int, optional): Default the pad id.
        internal_batch_size (int, optional): Captum's ``internal_batch_size``
            (rows per forward/backward pass). Default: as many rows as keep a
            pass within ``max_tokens_per_pass`` tokens (at least the batch).
        max_tokens_per_pass (int): Bounds the memory of a pass when
            ``internal_batch_size`` is None: a batch of 16 reviews of 256
            tokens at 50 steps is 204,800 tokens in one pass otherwise (tens of
            GB). Default 16,384. The scores do not depend on it.
        target_class (int, optional): Always explain this class (the paper's code: 0).
        **kwargs: See :class:`TokenScorer`.
    """

    name = "IG"

    def __init__(
        self,
        model: Callable[..., Any],
        layer: Optional[nn.Module] = None,
        n_steps: int = 50,
        output: str = "logits",
        normalize: Optional[str] = None,
        baseline_token_id: Optional[int] = None,
        internal_batch_size: Optional[int] = None,
        max_tokens_per_pass: int = 16384,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, **kwargs)
        if layer is None:
            layer = model.get_input_embeddings()  # type: ignore[union-attr]
        if max_tokens_per_pass < 1:
            raise ValueError("max_tokens_per_pass must be a positive integer")
        if output not in ("logits", "probs"):
            raise ValueError("output must be 'logits' or 'probs'")
        if normalize not in (None, "l2"):
            raise ValueError("normalize must be None or 'l2'")
        self.layer = layer
        self.n_steps = int(n_steps)
        self.output = output
        self.normalize = normalize
        self.baseline_token_id = (
            self.pad_token_id if baseline_token_id is None else int(baseline_token_id)
        )
        self.internal_batch_size = internal_batch_size
        self.max_tokens_per_pass = int(max_tokens_per_pass)
        self.settings.update(
            n_steps=self.n_steps,
            output=output,
            normalize=normalize,
            baseline_token_id=self.baseline_token_id,
            layer=type(layer).__name__,
            internal_batch_size=internal_batch_size,
            max_tokens_per_pass=self.max_tokens_per_pass,
        )

    def _scores(
        self, ids: Tensor, mask: Tensor, tt: Optional[Tensor], target: Tensor
    ) -> Tensor:
        lig = LayerIntegratedGradients(self._forward(self.output), self.layer)
        removable = self._removable(ids, mask)
        baseline = ids.masked_fill(removable, self.baseline_token_id)
        extra = (mask,) if tt is None else (mask, tt)
        rows = self.internal_batch_size
        if rows is None and ids.numel() * self.n_steps > self.max_tokens_per_pass:
            rows = max(ids.shape[0], self.max_tokens_per_pass // ids.shape[1])
        attr = lig.attribute(
            ids,
            baselines=baseline,
            target=target,
            additional_forward_args=extra,
            n_steps=self.n_steps,
            internal_batch_size=rows,
        )
        scores = attr.sum(-1) * mask
        if self.normalize == "l2":
            scores = scores / scores.norm(dim=1, keepdim=True).clamp_min(1e-12)
        return scores


# --------------------------------------------------------------------------------------
# LIME (Captum)
# --------------------------------------------------------------------------------------


def _import_ridge(alpha: float) -> Any:
    from captum._utils.models.linear_model import SkLearnRidge

    return SkLearnRidge(alpha=alpha)


class CaptumLimeScorer(TokenScorer):
    """Captum's ``Lime`` with one interpretable feature per (non-special) token.

    Captum's defaults suit images, not text; this scorer uses:

    * a feature mask with one feature per removable token; special tokens and
      padding form one extra feature that is always on (never perturbed);
    * removal by ``baseline_token_id`` (default ``[PAD]``), masked out of attention
      when it is the pad id (``mask_baseline``);
    * lime-style sampling: the number of tokens removed is uniform in ``1..n``, then
      the tokens are drawn uniformly (seeded);
    * the ``lime`` package's text kernel on the binary vector: cosine distance
      ``d`` to the all-ones vector, weight ``exp(-d^2 / (2 w^2))`` with ``w = 0.25``;
    * ridge regression (alpha 1) as the interpretable model (Lasso(0.01), Captum's
      default, can zero every weight).

    Args:
        model (Callable): HF model, or ``(ids, mask[, tt]) -> logits``.
        n_samples (int): Perturbed samples per instance. Default 500.
        perturbations_per_eval (int): Samples per forward pass. Default 50.
        kernel_width (float): ``w``. Default 0.25.
        ridge_alpha (float): Default 1.0.
        baseline_token_id (int, optional): Default the pad id.
        mask_baseline (bool): Give replaced tokens attention mask 0 when the baseline
            is the pad id. Default True.
        output (str): ``"probs"`` (default) or ``"logits"``.
        seed (int): Seed of the sampling. Default 0.
        **kwargs: See :class:`TokenScorer`.
    """

    name = "LIME"

    def __init__(
        self,
        model: Callable[..., Any],
        n_samples: int = 500,
        perturbations_per_eval: int = 50,
        kernel_width: float = 0.25,
        ridge_alpha: float = 1.0,
        baseline_token_id: Optional[int] = None,
        mask_baseline: bool = True,
        output: str = "probs",
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, **kwargs)
        self.n_samples = int(n_samples)
        self.perturbations_per_eval = int(perturbations_per_eval)
        self.kernel_width = float(kernel_width)
        self.ridge_alpha = float(ridge_alpha)
        self.baseline_token_id = (
            self.pad_token_id if baseline_token_id is None else int(baseline_token_id)
        )
        self.mask_baseline = (
            mask_baseline and self.baseline_token_id == self.pad_token_id
        )
        self.output = output
        self.seed = int(seed)
        self._generator = torch.Generator().manual_seed(self.seed)
        self.settings.update(
            implementation="captum.attr.Lime",
            n_samples=self.n_samples,
            kernel_width=self.kernel_width,
            kernel="exp(-d^2/(2w^2)), d = cosine distance",
            interpretable_model=f"Ridge(alpha={self.ridge_alpha})",
            sampling="uniform count then uniform tokens",
            baseline_token_id=self.baseline_token_id,
            mask_baseline=self.mask_baseline,
            output=output,
            seed=self.seed,
        )

    def _lime_forward(self) -> Callable[..., Tensor]:
        base = self._forward(self.output)
        pad, masked = self.pad_token_id, self.mask_baseline

        def forward(ids: Tensor, mask: Tensor, tt: Optional[Tensor] = None) -> Tensor:
            if masked:
                mask = mask * (ids != pad).to(mask.dtype)
            return base(ids, mask, tt)

        return forward

    def _scores(
        self, ids: Tensor, mask: Tensor, tt: Optional[Tensor], target: Tensor
    ) -> Tensor:
        out = torch.zeros(ids.shape, dtype=torch.float32)
        removable = self._removable(ids, mask)
        forward = self._lime_forward()
        gen = self._generator
        width = self.kernel_width
        for b in range(ids.shape[0]):
            rem = removable[b]
            n = int(rem.sum())
            if n == 0:
                continue
            fmask = torch.full_like(ids[b], n)
            fmask[rem] = torch.arange(n, device=ids.device)

            def perturb(original_inp: Any, n: int = n, **kw: Any) -> Tensor:
                z = torch.ones(1, n + 1, dtype=torch.long)
                off = int(torch.randint(1, n + 1, (1,), generator=gen))
                z[0, torch.randperm(n, generator=gen)[:off]] = 0
                return z.to(ids.device)

            def similarity(
                orig: Any, pert: Any, interp: Tensor, n: int = n, **kw: Any
            ) -> float:
                kept = float(interp[0, :n].sum())
                d = 1.0 - (kept / n) ** 0.5
                return float(np.exp(-(d**2) / (2 * width**2)))

            lime = Lime(
                forward,
                interpretable_model=_import_ridge(self.ridge_alpha),
                similarity_func=similarity,
                perturb_func=perturb,
            )
            extra = (
                (mask[b : b + 1],) if tt is None else (mask[b : b + 1], tt[b : b + 1])
            )
            attr = lime.attribute(
                ids[b : b + 1],
                baselines=ids[b : b + 1].masked_fill(rem[None], self.baseline_token_id),
                target=int(target[b]),
                additional_forward_args=extra,
                feature_mask=fmask[None],
                n_samples=self.n_samples,
                perturbations_per_eval=self.perturbations_per_eval,
            )
            out[b] = attr[0].float().cpu() * rem.cpu()
        return out


# --------------------------------------------------------------------------------------
# LIME (lime package)
# --------------------------------------------------------------------------------------


class LimeTextScorer(TokenScorer):
    """The ``lime`` package's ``LimeTextExplainer``, mapped onto word pieces.

    ``mode="paper"`` (the released code): the non-special pieces are decoded to a
    text, LIME splits it into words (``\\W+``), every perturbed text is re-tokenised
    and padded to ``max_length`` and run WITHOUT attention mask or segment ids; a
    piece gets the weight of the LIME word equal to it, and a piece that equals no
    LIME word (``##`` continuations, punctuation, pieces of split words) gets the
    maximum weight of the instance. Sentence pairs are decoded as one text (the
    paper's pair branch never ran).

    ``mode="fair"``: LIME's words are the instance's whole words (pieces joined on
    ``##``/``▁``/``Ġ``), given to LIME as placeholders ``w0 w1 ...`` so that every
    perturbed text maps back to token ids exactly, without re-tokenising; removed
    words are deleted (sequence compacted, attention mask and segment ids follow) and
    each piece gets its word's weight. Special tokens are always kept.

    Args:
        model (Callable): HF model, or ``(ids, mask[, tt]) -> logits``.
        tokenizer: The model's tokenizer (needed).
        mode (str): ``"paper"`` or ``"fair"``. Default ``"fair"``.
        n_samples (int): LIME samples. Default 500 (the paper: 100).
        batch_size (int): Perturbed texts per forward pass. Default 50.
        max_length (int): Paper mode's padding length. Default 512.
        num_features (int, optional): LIME's ``num_features``. Default: every word.
        seed (int): LIME's ``random_state``. Default 0.
        **kwargs: See :class:`TokenScorer`.
    """

    name = "LIME-text"

    def __init__(
        self,
        model: Callable[..., Any],
        tokenizer: Any,
        mode: str = "fair",
        n_samples: int = 500,
        batch_size: int = 50,
        max_length: int = 512,
        num_features: Optional[int] = None,
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        if tokenizer is None:
            raise ValueError("LimeTextScorer needs the tokenizer")
        if mode not in ("paper", "fair"):
            raise ValueError("mode must be 'paper' or 'fair'")
        kwargs.setdefault("setting", mode)
        if mode == "paper":
            kwargs.setdefault("use_attention_mask", False)
        super().__init__(model, tokenizer=tokenizer, **kwargs)
        self.mode = mode
        self.n_samples = int(n_samples)
        self.batch_size = int(batch_size)
        self.max_length = int(max_length)
        self.num_features = num_features
        self.seed = int(seed)
        self.settings.update(
            implementation="lime.lime_text.LimeTextExplainer",
            mode=mode,
            n_samples=self.n_samples,
            max_length=max_length if mode == "paper" else None,
            num_features=num_features,
            seed=self.seed,
            unmatched_pieces="maximum weight" if mode == "paper" else "n/a (exact map)",
        )

    def _explainer(self) -> Any:
        from lime.lime_text import LimeTextExplainer

        return LimeTextExplainer(random_state=self.seed)

    def _probs(self, batches: Iterable[Sequence[Tensor]]) -> np.ndarray:
        outs = []
        with torch.no_grad():
            for ids, mask, tt in batches:
                logits = _call(self.model, ids, mask, tt)
                outs.append(logits.float().softmax(-1).cpu().numpy())
        return np.concatenate(outs, 0)

    # ---- paper mode ------------------------------------------------------------------
    def _paper_instance(self, ids: Tensor, rem: Tensor, target: int) -> Tensor:
        tok, dev = self.tokenizer, ids.device
        text = tok.decode(ids[rem].tolist())

        def classifier(texts: List[str]) -> np.ndarray:
            def batches() -> Iterable[Sequence[Tensor]]:
                for s in range(0, len(texts), self.batch_size):
                    enc = tok(
                        list(texts[s : s + self.batch_size]),
                        padding="max_length",
                        truncation=True,
                        max_length=self.max_length,
                        return_tensors="pt",
                    )
                    yield enc["input_ids"].to(dev), None, None

            return self._probs(batches())

        words: Dict[str, float] = {}
        if text.strip():
            exp = self._explainer().explain_instance(
                text,
                classifier,
                labels=(target,),
                num_features=self.num_features or 10**6,
                num_samples=self.n_samples,
            )
            words = {w: float(v) for w, v in exp.as_list(label=target)}
        return self.map_paper_weights(
            tok.convert_ids_to_tokens(ids.tolist()), rem.tolist(), words
        )

    @staticmethod
    def map_paper_weights(
        pieces: Sequence[str], removable: Sequence[bool], words: Mapping[str, float]
    ) -> Tensor:
        """The paper's mapping of LIME word weights onto word pieces.

        Args:
            pieces (Sequence[str]): The instance's word pieces.
            removable (Sequence[bool]): False at special tokens and padding (score 0).
            words (Mapping[str, float]): LIME word -> weight.

        Returns:
            Tensor: ``(L,)`` a piece's word weight, or the maximum weight when the piece
            equals no LIME word.
        """
        top = max(words.values()) if words else 0.0
        return torch.tensor(
            [(words.get(p, top) if r else 0.0) for p, r in zip(pieces, removable)],
            dtype=torch.float32,
        )

    # ---- fair mode -------------------------------------------------------------------
    @staticmethod
    def word_units(pieces: Sequence[str], removable: Sequence[bool]) -> List[int]:
        """Word index of each removable piece (-1 for specials and padding).

        Args:
            pieces (Sequence[str]): The word pieces.
            removable (Sequence[bool]): Which positions are words' pieces.

        Returns:
            list[int]: Unit (word) index per position.
        """
        idx = [i for i, r in enumerate(removable) if r]
        starts = _word_starts([pieces[i] for i in idx])
        units, u = [-1] * len(pieces), -1
        for i, s in zip(idx, starts):
            if s or u < 0:
                u += 1
            units[i] = u
        return units

    def _fair_instance(
        self, ids: Tensor, mask: Tensor, tt: Optional[Tensor], rem: Tensor, target: int
    ) -> Tensor:
        pieces = self.tokenizer.convert_ids_to_tokens(ids.tolist())
        units = torch.tensor(self.word_units(pieces, rem.tolist()), device=ids.device)
        n_units = int(units.max()) + 1 if rem.any() else 0
        if n_units == 0:
            return torch.zeros(ids.shape, dtype=torch.float32)
        valid = mask.bool()
        text = " ".join(f"w{u}" for u in range(n_units))
        pattern = re.compile(r"\bw(\d+)\b")

        def classifier(texts: List[str]) -> np.ndarray:
            def batches() -> Iterable[Sequence[Tensor]]:
                for s in range(0, len(texts), self.batch_size):
                    chunk = texts[s : s + self.batch_size]
                    keep = torch.zeros(
                        len(chunk), n_units + 1, dtype=torch.bool, device=ids.device
                    )
                    keep[:, n_units] = True  # index of "no unit" (specials) via -1
                    for j, t in enumerate(chunk):
                        for m in pattern.findall(t):
                            keep[j, int(m)] = True
                    tok_keep = (
                        keep[:, units] & valid[None]
                    )  # units -1 -> column n_units
                    yield self._compact(ids, mask, tt, tok_keep)

            return self._probs(batches())

        exp = self._explainer().explain_instance(
            text,
            classifier,
            labels=(target,),
            num_features=self.num_features or n_units,
            num_samples=self.n_samples,
        )
        weights = torch.zeros(n_units + 1)
        for w, v in exp.as_list(label=target):
            weights[int(w[1:])] = float(v)
        return weights[units.cpu()] * rem.cpu()

    def _compact(
        self, ids: Tensor, mask: Tensor, tt: Optional[Tensor], keep: Tensor
    ) -> Sequence[Any]:
        n = keep.shape[0]
        perm = torch.sort((~keep).to(torch.uint8), dim=1, stable=True).indices
        lengths = keep.sum(1)
        width = max(int(lengths.max()), 1)
        tail = torch.arange(ids.shape[0], device=ids.device)[None] >= lengths[:, None]
        new_ids = (
            ids[None].expand(n, -1).gather(1, perm).masked_fill(tail, self.pad_token_id)
        )
        new_mask = mask[None].expand(n, -1).gather(1, perm).masked_fill(tail, 0)
        new_tt = (
            None
            if tt is None
            else tt[None].expand(n, -1).gather(1, perm).masked_fill(tail, 0)
        )
        return (
            new_ids[:, :width],
            new_mask[:, :width],
            None if new_tt is None else new_tt[:, :width],
        )

    def _scores(
        self, ids: Tensor, mask: Tensor, tt: Optional[Tensor], target: Tensor
    ) -> Tensor:
        rem = self._removable(ids, mask)
        rows = []
        for b in range(ids.shape[0]):
            if self.mode == "paper":
                rows.append(self._paper_instance(ids[b], rem[b], int(target[b])))
            else:
                row_tt = None if tt is None else tt[b]
                rows.append(
                    self._fair_instance(ids[b], mask[b], row_tt, rem[b], int(target[b]))
                )
        return torch.stack(rows)


# --------------------------------------------------------------------------------------
# random and IBA
# --------------------------------------------------------------------------------------


class RandomScorer(TokenScorer):
    """Seeded uniform random scores (a lower bound for any method).

    The generator is seeded once at construction: two scorers built with the same seed
    return the same scores for the same sequence of calls.

    Args:
        model (Callable, optional): Unused (kept for a uniform interface).
        seed (int): Default 0.
        **kwargs: See :class:`TokenScorer`.
    """

    name = "random"

    def __init__(
        self, model: Optional[Callable[..., Any]] = None, seed: int = 0, **kwargs: Any
    ) -> None:
        super().__init__(model, **kwargs)  # type: ignore[arg-type]
        self.seed = int(seed)
        self._generator = torch.Generator().manual_seed(self.seed)
        self.settings.update(distribution="uniform[0, 1)", seed=self.seed)
        self.settings["explains"] = "n/a"

    @log_usage()
    def attribute(
        self,
        input_ids: Tensor,
        target: Any = None,
        attention_mask: Optional[Tensor] = None,
        token_type_ids: Optional[Tensor] = None,
    ) -> Tensor:
        """Uniform scores ``(B, L)``, zero at padding (no forward pass)."""
        mask = self._mask_of(input_ids, attention_mask)
        scores = torch.rand(input_ids.shape, generator=self._generator)
        self.instances += input_ids.shape[0]
        return scores.masked_fill(~mask.bool().cpu(), 0.0)


class IBAScorer(TokenScorer):
    """Information Bottleneck Attribution (the project's own class), summed per token.

    Args:
        model (Callable): HF model (``(ids, mask[, tt])`` positionally).
        layer (nn.Module): The layer after which the bottleneck goes.
        prior (str or prior): ``"paper"``, ``"reference"`` or a ``DatasetPrior``.
        beta (float), steps (int), n_samples (int), lr (float): IBA's settings.
        seed (int, optional): Noise seed. Default 0.
        internal_batch_size (int, optional): IBA's ``internal_batch_size``.
        iba_class (type, optional): The attribution class (default
            ``captum_iba.InformationBottleneckAttribution``), for tests.
        **kwargs: See :class:`TokenScorer`.
    """

    name = "IBA"

    def __init__(
        self,
        model: Callable[..., Any],
        layer: nn.Module,
        prior: Any = "paper",
        beta: float = 1e-5,
        steps: int = 10,
        n_samples: int = 10,
        lr: float = 1.0,
        seed: Optional[int] = 0,
        internal_batch_size: Optional[int] = None,
        iba_class: Optional[type] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, **kwargs)
        if iba_class is None:
            from captum_iba.attribution import (
                InformationBottleneckAttribution as iba_class,
            )
        self.iba = iba_class(model, layer)
        self.options = dict(
            beta=beta,
            steps=steps,
            n_samples=n_samples,
            lr=lr,
            prior=prior,
            seed=seed,
            internal_batch_size=internal_batch_size,
        )
        prior_name = (
            prior
            if isinstance(prior, str)
            else getattr(prior, "name", type(prior).__name__)
        )
        self.settings.update(
            {**self.options, "prior": prior_name, "layer": type(layer).__name__}
        )

    def _scores(
        self, ids: Tensor, mask: Tensor, tt: Optional[Tensor], target: Tensor
    ) -> Tensor:
        extra = (mask,) if tt is None else (mask, tt)
        attr = self.iba.attribute(
            ids,
            target=target,
            additional_forward_args=extra,
            token_mask=mask,
            **self.options,
        )
        return attr.sum(-1) if attr.dim() == 3 else attr


# --------------------------------------------------------------------------------------
# factory and harness
# --------------------------------------------------------------------------------------


def _paper_ig_layer(model: Any) -> nn.Module:
    base = getattr(model, "base_model", None)
    emb = getattr(base, "embeddings", None)
    return emb if isinstance(emb, nn.Module) else model.get_input_embeddings()


def make_scorers(
    model: nn.Module,
    tokenizer: Any = None,
    setting: str = "fair",
    iba_layer: Optional[nn.Module] = None,
    iba_prior: Any = None,
    methods: Sequence[str] = ("random", "IG", "LIME", "LIME-text", "IBA"),
    seed: int = 0,
    ig_steps: Optional[int] = None,
    lime_samples: Optional[int] = None,
    lime_max_length: int = 512,
    special_token_ids: Optional[Iterable[int]] = None,
    pad_token_id: Optional[int] = None,
    internal_batch_size: Optional[int] = None,
    iba_options: Optional[Mapping[str, Any]] = None,
) -> Dict[str, TokenScorer]:
    """Build the compared methods in the ``"paper"`` or the ``"fair"`` setting.

    See the module docstring for what each setting means. ``"LIME"`` is Captum's Lime
    (always the fair configuration, with the paper's 100 samples in the paper
    setting), ``"LIME-text"`` the lime package (the paper's method).

    Args:
        model (nn.Module): HF sequence classifier (in eval mode).
        tokenizer: Its tokenizer (special ids; needed for ``"LIME-text"``).
        setting (str): ``"paper"`` or ``"fair"``. Default ``"fair"``.
        iba_layer (nn.Module, optional): Needed for ``"IBA"`` (skipped when None).
        iba_prior (optional): Default ``"reference"`` (paper) / ``"paper"`` (fair).
        methods (Sequence[str]): Which methods. Default all five.
        seed (int): Seed of random, LIME and IBA. Default 0.
        ig_steps (int, optional): Default 10 (paper) / 50 (fair).
        lime_samples (int, optional): Default 100 (paper) / 500 (fair).
        lime_max_length (int): Paper LIME's padding length. Default 512.
        special_token_ids (Iterable[int], optional): Default the tokenizer's.
        pad_token_id (int, optional): Default the tokenizer's.
        internal_batch_size (int, optional): For IG and IBA.
        iba_options (Mapping, optional): More IBA options (beta, steps, ...).

    Returns:
        dict[str, TokenScorer]: Name -> scorer.
    """
    if setting not in SETTINGS:
        raise ValueError(f"setting must be one of {SETTINGS}; got {setting!r}")
    paper = setting == "paper"
    common: Dict[str, Any] = dict(
        tokenizer=tokenizer,
        special_token_ids=special_token_ids,
        pad_token_id=pad_token_id,
        setting=setting,
    )
    samples = lime_samples or (100 if paper else 500)
    out: Dict[str, TokenScorer] = {}
    for name in methods:
        if name == "random":
            out[name] = RandomScorer(model, seed=seed, **common)
        elif name == "IG":
            out[name] = IntegratedGradientsScorer(
                model,
                layer=_paper_ig_layer(model) if paper else None,
                n_steps=ig_steps or (10 if paper else 50),
                output="probs" if paper else "logits",
                normalize="l2" if paper else None,
                target_class=0 if paper else None,
                internal_batch_size=internal_batch_size,
                **common,
            )
        elif name == "LIME":
            out[name] = CaptumLimeScorer(model, n_samples=samples, seed=seed, **common)
        elif name == "LIME-text":
            common_text = {
                k: v for k, v in common.items() if k not in ("tokenizer", "setting")
            }
            out[name] = LimeTextScorer(
                model,
                tokenizer,
                mode=setting,
                n_samples=samples,
                seed=seed,
                max_length=lime_max_length,
                target_class=1 if paper else None,
                **common_text,
            )
        elif name == "IBA":
            if iba_layer is None:
                continue
            prior = (
                iba_prior
                if iba_prior is not None
                else ("reference" if paper else "paper")
            )
            out[name] = IBAScorer(
                model,
                iba_layer,
                prior=prior,
                seed=seed,
                internal_batch_size=internal_batch_size,
                **dict(iba_options or {}),
                **common,
            )
        else:
            raise ValueError(f"unknown method {name!r}")
    return out


@log_usage()
def run_degradation_suite(
    model: nn.Module,
    scorers: Mapping[str, TokenScorer],
    input_ids: Tensor,
    target: Any,
    attention_mask: Optional[Tensor] = None,
    token_type_ids: Optional[Tensor] = None,
    tokenizer: Any = None,
    setting: str = "fair",
    batch_size: int = 8,
    test_kwargs: Optional[Mapping[str, Any]] = None,
    show_progress: bool = False,
) -> Dict[str, DegradationResult]:
    """Score a data set with every method and run the degradation test on each.

    The test's target is always ``target`` (the gold labels, as in the paper), even
    for methods that explain another class (the paper setting's IG and LIME).

    Args:
        model (nn.Module): The classifier (eval mode).
        scorers (Mapping[str, TokenScorer]): From :func:`make_scorers`.
        input_ids (Tensor): ``(N, L)``.
        target (Tensor or sequence): ``(N,)`` labels.
        attention_mask (Tensor, optional): ``(N, L)``.
        token_type_ids (Tensor, optional): ``(N, L)``.
        tokenizer (optional): For the test's special ids.
        setting (str): Chooses :data:`PAPER_TEST_SETTINGS` or
            :data:`FAIR_TEST_SETTINGS`. Default ``"fair"``.
        batch_size (int): Instances per scorer call and per test forward. Default 8.
        test_kwargs (Mapping, optional): Overrides for :func:`degradation_test`.
        show_progress (bool): Progress bars. Default False.

    Returns:
        dict[str, DegradationResult]: Name -> result, each recording the scorer's
        settings (``settings["attribution"]``) and its seconds per instance.
    """
    if setting not in SETTINGS:
        raise ValueError(f"setting must be one of {SETTINGS}; got {setting!r}")
    kwargs: Dict[str, Any] = dict(
        PAPER_TEST_SETTINGS if setting == "paper" else FAIR_TEST_SETTINGS
    )
    kwargs.update(test_kwargs or {})
    kwargs.setdefault("max_examples_per_batch", batch_size * 4)
    tgt = torch.as_tensor(target).reshape(-1)
    N = input_ids.shape[0]
    results: Dict[str, DegradationResult] = {}
    for name, scorer in scorers.items():
        starts = range(0, N, batch_size)
        if show_progress:
            from tqdm.auto import tqdm

            starts = tqdm(starts, desc=name)
        chunks = []
        t0 = time.perf_counter()
        for s in starts:
            sl = slice(s, s + batch_size)
            chunks.append(
                scorer.attribute(
                    input_ids[sl],
                    target=tgt[sl],
                    attention_mask=None
                    if attention_mask is None
                    else attention_mask[sl],
                    token_type_ids=None
                    if token_type_ids is None
                    else token_type_ids[sl],
                )
            )
        seconds = time.perf_counter() - t0
        record = dict(scorer.settings, seconds_per_instance=seconds / max(N, 1))
        results[name] = degradation_test(
            model,
            input_ids,
            torch.cat(chunks),
            target=tgt,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            tokenizer=tokenizer,
            special_token_ids=scorer.special_token_ids or None,
            pad_token_id=scorer.pad_token_id,
            method=name,
            seed=getattr(scorer, "seed", None),
            settings=dict(record, setting=setting),
            show_progress=show_progress,
            **kwargs,
        )
    return results
