"""ContextCite (Cohen-Wang et al., NeurIPS 2024) as an anchor of context
attribution: one score per source, from its own package (``pip install
context-cite``, this package's ``context`` extra), imported on first use.

ContextCite fits a sparse linear surrogate (Lasso) of the response's
logit-probability on random ablations of the sources; a source's weight is
its score. :func:`context_cite_scores` hands it *our* sources (a partitioner
built from them, instead of its NLTK sentence splitter, which needs a
download) and *our* response (the given token ids, decoded, instead of its
own generation), and checks that the package re-tokenises that response to
the same ids, so that it explains the very response the metrics score.
Its prompt is its own default: ``"Context: {context}\\n\\nQuery: {query}"``
as a user turn of the tokenizer's chat template.
"""

from typing import Any, List, Optional, Sequence

import numpy as np
import torch
from torch import Tensor

__all__ = ["context_cite_scores", "import_context_cite"]

#: The install command named when the package is missing.
INSTALL = "pip install context-cite (or pip install captum-iba[context])"


def import_context_cite() -> Any:
    """ContextCite's modules (``context_citer``, ``context_partitioner``,
    ``utils``), imported (slowly: spaCy, NLTK; offline, NLTK prints a failed
    download, which is harmless here).

    Raises:
        ImportError: Without the package, naming the install command.
    """
    try:
        import context_cite  # noqa: F401 - slow: it imports spaCy and NLTK
        from context_cite import context_citer, context_partitioner, utils
    except ImportError as err:
        raise ImportError(
            f"ContextCite's scores need its package, which is not installed "
            f"({err}): {INSTALL}"
        ) from err
    return context_citer, context_partitioner, utils


def _partitioner(base: type, sources: Sequence[str], separator: str) -> Any:
    """A ContextCite partitioner over given sources: an ablated context is
    the kept sources joined by ``separator`` (as the full context is)."""

    class GivenSources(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__(separator.join(sources))

        @property
        def num_sources(self) -> int:
            return len(sources)

        def split_context(self) -> None:
            return None

        def get_source(self, index: int) -> str:
            return sources[index]

        def get_context(self, mask: Optional[np.ndarray] = None) -> str:
            keep = [True] * len(sources) if mask is None else list(mask)
            return separator.join(s for s, k in zip(sources, keep) if k)

    return GivenSources()


def context_cite_scores(
    model: Any,
    tokenizer: Any,
    sources: Sequence[str],
    query: str,
    response_ids: Sequence[int],
    num_ablations: int = 32,
    seed: int = 0,
    separator: str = "\n\n",
    batch_size: int = 1,
) -> Tensor:
    """ContextCite's score of each source for a given response.

    Args:
        model: A Hugging Face causal LM.
        tokenizer: Its tokenizer, with a chat template (ContextCite's prompt
            is a user turn).
        sources (Sequence[str]): The context's sources, in order (>= 2).
        query (str): The query.
        response_ids (Sequence[int]): The response to explain (token ids
            after the prompt, no end-of-text token), e.g. the model's greedy
            answer.
        num_ablations (int): ContextCite's ablations (its surrogate's
            training set). Default 32.
        seed (int): Its ablations are drawn with NumPy seeds ``seed``,
            ``seed + 1``, ... (the package's ``base_seed``; its own default
            is 0). Default 0.
        separator (str): What joins two sources in the context. Default a
            blank line (ContextCite's layout of passages).
        batch_size (int): Ablations a forward pass (the package pads on the
            left without position ids, so 1, its default, is exact).

    Returns:
        Tensor: ``(S,)`` float64, one score per source (higher = removing it
        lowers the response's logit-probability more).

    Raises:
        ImportError: Without the package (naming the install command).
        ValueError: For fewer than two sources, an empty response, or a
            response the package reads as other tokens.
    """
    if len(sources) < 2:
        raise ValueError(f"sources: at least two are needed; got {len(sources)}")
    if len(response_ids) == 0:
        raise ValueError("response_ids is empty: there is no response to explain")
    citer_module, partitioner_module, utils = import_context_cite()
    base = partitioner_module.BaseContextPartitioner
    partitioner = _partitioner(base, list(sources), separator)

    class SeededCiter(citer_module.ContextCiter):  # type: ignore[misc]
        def _compute_masks_and_logit_probs(self) -> None:  # its ablations' seed
            self._cache["reg_masks"], self._cache["reg_logit_probs"] = (
                utils.get_masks_and_logit_probs(
                    self.model, self.tokenizer, self.num_ablations,
                    self.num_sources, self._get_prompt_ids, self._response_ids,
                    self.ablation_keep_prob, self.batch_size, base_seed=seed,
                )
            )  # fmt: skip

    citer = SeededCiter(
        model,
        tokenizer,
        partitioner.context,
        query,
        num_ablations=num_ablations,
        batch_size=batch_size,
        partitioner=partitioner,
    )
    # the response given, not generated: the package's cached output is the
    # prompt's text followed by the response's
    _, prompt = citer._get_prompt_ids(return_prompt=True)
    citer._cache["output"] = prompt + tokenizer.decode(list(response_ids))
    read: List[int] = list(citer._response_ids)
    if read != list(response_ids):
        raise ValueError(
            f"ContextCite reads the response as other tokens ({read[:8]}... for "
            f"{list(response_ids)[:8]}...): it would explain another response"
        )
    with torch.no_grad():
        scores = citer.get_attributions(verbose=False)
    return torch.as_tensor(np.asarray(scores), dtype=torch.float64)
