"""LIME as per-token scorers: Captum's ``Lime`` and the ``lime`` package.

* :class:`CaptumLimeScorer` (``"LIME"``) - Captum's ``Lime`` with one feature
  per token and text-appropriate sampling, kernel and regression (a causal
  LM: through Captum's ``LLMAttribution``,
  :mod:`~captum_iba.evaluation.captum_prompts`);
* :class:`LimeTextScorer` (``"LIME-text"``) - the ``lime`` package's
  ``LimeTextExplainer``, either as the paper's released code runs it
  (``mode="released"``) or on whole words with exact deletion
  (``mode="words"``); each comparison setting's preset says which
  (:mod:`~captum_iba.evaluation.presets`).
"""

import re
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence

import numpy as np
import torch
from captum.attr import Lime
from torch import Tensor

from captum_iba._utils.captum_compat import (
    SkLearnRidge,
    get_exp_kernel_similarity_function,
)
from captum_iba._utils.common import hf_call
from captum_iba.attr.rows import CaptumRun, Rows
from captum_iba.evaluation.captum_prompts import CaptumPromptScorer
from captum_iba.evaluation.scorers import TokenScorer

__all__ = ["CaptumLimeScorer", "LimeTextScorer"]

#: 0.2's names of :class:`LimeTextScorer`'s modes (those of the settings that
#: used them), read as the modes' own.
_OLD_MODES = {"paper": "released", "fair": "words"}


def _word_starts(pieces: Sequence[str]) -> List[bool]:
    """Whether each piece starts a word (WordPiece ``##``; ``▁``/``Ġ`` markers)."""
    marked = any(p.startswith(("\u2581", "\u0120")) for p in pieces)
    if marked:
        return [
            p.startswith(("\u2581", "\u0120")) or i == 0 for i, p in enumerate(pieces)
        ]
    return [not p.startswith("##") for p in pieces]


class CaptumLimeScorer(CaptumPromptScorer):
    """Captum's ``Lime`` with one interpretable feature per (non-special) token.

    Captum's defaults suit images, not text; on a classifier this scorer uses:

    * a feature mask with one feature per removable token; special tokens and
      padding form one extra feature that is always on (never perturbed);
    * removal by ``baseline_token_id`` (default ``[PAD]``), masked out of attention
      when it is the pad id (``mask_baseline``);
    * lime-style sampling: the number of tokens removed is uniform in ``1..n``, then
      the tokens are drawn uniformly, from a generator seeded per instance with
      :func:`~captum_iba._utils.common.instance_seed` (``seed`` and the
      instance's tokens: the same result in any batch, order or process);
    * the ``lime`` package's text kernel on the binary vector: cosine distance
      ``d`` to the all-ones vector, weight ``exp(-d^2 / (2 w^2))`` with ``w = 0.25``;
    * ridge regression (alpha 1) as the interpretable model (Lasso(0.01), Captum's
      default, can zero every weight).

    On a causal LM: Captum's ``Lime`` through its ``LLMAttribution``
    (:mod:`~captum_iba.evaluation.captum_prompts`), with the same ridge
    regression and Captum's exponential cosine kernel (width 1); it fits one
    surrogate model to the whole answer, so it gives no per-token scores. It
    takes ``n_samples`` and ``seed`` only (the arguments marked "a
    classifier's" are refused).

    Args:
        model (Callable): HF model, or ``(ids, mask[, tt]) -> logits``.
        n_samples (int): Perturbed samples per instance. Default 500.
        perturbations_per_eval (int): A classifier's: samples per forward
            pass. Default 50.
        kernel_width (float): A classifier's ``w``. Default 0.25.
        ridge_alpha (float): A classifier's. Default 1.0.
        baseline_token_id (int, optional): A classifier's. Default the pad id.
        mask_baseline (bool): A classifier's: give replaced tokens attention
            mask 0 when the baseline is the pad id. Default True.
        output (str): A classifier's: ``"probs"`` (default) or ``"logits"``.
        seed (int): Seed of the sampling. Default 0.
        **kwargs: See :class:`~captum_iba.evaluation.TokenScorer`.
    """

    per_token_note = (
        "Captum's Lime fits one surrogate model to the whole answer's "
        "log-probability, so it scores no single output token"
    )

    meaning = (
        "the token's weight in LIME's linear model of the class's {output} "
        "(tokens removed as [PAD]): + for the class, - against it"
    )

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
        self._refuse_unread(
            perturbations_per_eval=perturbations_per_eval != 50,
            kernel_width=kernel_width != 0.25,
            ridge_alpha=ridge_alpha != 1.0,
            baseline_token_id=baseline_token_id is not None,
            mask_baseline=not mask_baseline,
            output=output != "probs",
        )
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
        self._record(
            dict(
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
                seeding="per instance",
            ),
            self.n_samples,
        )

    def _captum_run(self) -> CaptumRun:
        """Captum's ``Lime`` with ridge regression (Captum's Lasso(0.01) can
        zero every weight): through a causal LM's LLM API with Captum's
        exponential cosine kernel (width 1) and sampling; where the model is
        read directly, one per row with the count-then-tokens sampling and
        the ``lime`` package's kernel (:meth:`_per_row`)."""
        return CaptumRun(
            Lime,
            arguments={
                "interpretable_model": SkLearnRidge(alpha=1.0),
                "similarity_func": get_exp_kernel_similarity_function("cosine", 1.0),
            },
            options={"n_samples": self.n_samples},
            seed=self.seed,
            output=self.output,
            baseline_token_id=self.baseline_token_id,
            mask_baseline=self.mask_baseline,
            direct_options={"perturbations_per_eval": self.perturbations_per_eval},
            per_row=self._per_row,
        )

    def _per_row(self, n: int, gen: torch.Generator) -> Dict[str, Any]:
        """Lime's arguments for a row of ``n`` features: a uniform count of
        tokens removed, then uniform tokens (drawn from ``gen``), the
        ``lime`` package's kernel on the share kept."""
        width = self.kernel_width

        def perturb(original_inp: Any, **kw: Any) -> Tensor:
            z = torch.ones(1, n + 1, dtype=torch.long)
            off = int(torch.randint(1, n + 1, (1,), generator=gen))
            z[0, torch.randperm(n, generator=gen)[:off]] = 0
            return z.to(original_inp.device)

        def similarity(orig: Any, pert: Any, interp: Tensor, **kw: Any) -> float:
            kept = float(interp[0, :n].sum())
            d = 1.0 - (kept / n) ** 0.5
            return float(np.exp(-(d**2) / (2 * width**2)))

        return {
            "interpretable_model": SkLearnRidge(alpha=self.ridge_alpha),
            "similarity_func": similarity,
            "perturb_func": perturb,
        }


class LimeTextScorer(TokenScorer):
    """The ``lime`` package's ``LimeTextExplainer``, mapped onto word pieces.

    ``mode="released"`` (the paper's released code): the non-special pieces are
    decoded to a text, LIME splits it into words (``\\W+``), every perturbed text
    is re-tokenised and padded to ``max_length`` and run WITHOUT attention mask or
    segment ids; a piece gets the weight of the LIME word equal to it, and a piece
    that equals no LIME word (``##`` continuations, punctuation, pieces of split
    words) gets the maximum weight of the instance. Sentence pairs are decoded as
    one text (the paper's pair branch never ran).

    ``mode="words"``: LIME's words are the instance's whole words (pieces joined on
    ``##``/``▁``/``Ġ``), given to LIME as placeholders ``w0 w1 ...`` so that every
    perturbed text maps back to token ids exactly, without re-tokenising; removed
    words are deleted (sequence compacted, attention mask and segment ids follow) and
    each piece gets its word's weight. Special tokens are always kept.

    Args:
        model (Callable): HF model, or ``(ids, mask[, tt]) -> logits``.
        tokenizer: The model's tokenizer (needed).
        mode (str): ``"released"`` or ``"words"`` (0.2's ``"paper"`` and
            ``"fair"`` are read as these). Default ``"words"``.
        n_samples (int): LIME samples. Default 500 (the paper: 100).
        batch_size (int): Perturbed texts per forward pass. Default 50.
        max_length (int): Released mode's padding length. Default 512.
        num_features (int, optional): LIME's ``num_features``. Default: every word.
        seed (int): LIME's ``random_state``. Default 0.
        **kwargs: See :class:`TokenScorer`.
    """

    meaning = (
        "the word's weight in LIME's linear model of the class's probability: "
        "+ for the class, - against it"
    )

    def __init__(
        self,
        model: Callable[..., Any],
        tokenizer: Any,
        mode: str = "words",
        n_samples: int = 500,
        batch_size: int = 50,
        max_length: int = 512,
        num_features: Optional[int] = None,
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        if tokenizer is None:
            raise ValueError("LimeTextScorer needs the tokenizer")
        mode = _OLD_MODES.get(mode, mode)
        if mode not in ("released", "words"):
            raise ValueError(f"mode must be 'released' or 'words'; got {mode!r}")
        if mode == "released":  # the released code ran without the mask
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
            max_length=max_length if mode == "released" else None,
            num_features=num_features,
            seed=self.seed,
            unmatched_pieces="maximum weight"
            if mode == "released"
            else "n/a (exact map)",
        )

    def _explainer(self) -> Any:
        from lime.lime_text import LimeTextExplainer

        return LimeTextExplainer(random_state=self.seed)

    def _probs(self, batches: Iterable[Sequence[Tensor]]) -> np.ndarray:
        outs = []
        with torch.no_grad():
            for ids, mask, tt in batches:
                logits = hf_call(self.model, ids, mask, tt)
                outs.append(logits.float().softmax(-1).cpu().numpy())
        return np.concatenate(outs, 0)

    # ---- released mode ---------------------------------------------------------------
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

    # ---- words mode ------------------------------------------------------------------
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

    def _scores(self, rows: Rows) -> Tensor:
        read = rows.read()
        ids, mask, target = rows.input_ids, rows.attention_mask, read.target
        assert target is not None
        tt = read.args[1] if len(read.args) > 1 else None
        rem = rows.removable()
        out = []
        for b in range(ids.shape[0]):
            if self.mode == "released":
                out.append(self._paper_instance(ids[b], rem[b], int(target[b])))
            else:
                row_tt = None if tt is None else tt[b]
                out.append(
                    self._fair_instance(ids[b], mask[b], row_tt, rem[b], int(target[b]))
                )
        return torch.stack(out)
