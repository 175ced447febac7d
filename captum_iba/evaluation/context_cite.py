"""ContextCite (Cohen-Wang et al., NeurIPS 2024) as an anchor of context
attribution: one score per source, from its own package (``pip install
context-cite``, this package's ``context`` extra), imported on first use.

ContextCite fits a sparse linear surrogate (Lasso) of the response's
logit-probability on random ablations of the sources; a source's weight is
its score. :func:`context_cite_scores` hands it *our* sources (the
``(start, end)`` character spans of any prompt, as a partitioner, instead of
its NLTK sentence splitter, which needs a download), *our* ablation rule
(:func:`~captum_iba.evaluation.sources.ablated_prompt_ids`: the text outside
the sources - the query, ``"Context: "`` - always kept; in ContextCite's
layout exactly the kept sources re-joined, as its own prompt builder does)
and *our* response (the given token ids, decoded, instead of its own
generation), and checks that the package re-tokenises that response to the
same ids, so that it explains the very response the metrics score. Its
ablations, forward passes and surrogate are the package's own; a part of
the response (a batch's explained tokens, ``answer_span``) is given to its
``get_attributions(start_idx=, end_idx=)`` as the characters of its
response (:func:`citer_scores`), the citer's ablations serving every part.
:class:`ContextCiteScorer` runs it on every row of a
:class:`~captum_iba.attr.batches.PromptBatch` with sources (the registered
``contextcite-32`` and ``contextcite-256``).
"""

import contextlib
import io
import warnings
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

from captum_iba._utils.common import import_optional
from captum_iba.attr._user_turn import user_turn
from captum_iba.attr.llm_batch import PromptBatch
from captum_iba.evaluation.source_methods import SourceScorer
from captum_iba.evaluation.sources import (
    ablated_prompt,
    ablated_prompt_ids,
    check_sources,
    plain_text,
    row_chat,
)
from captum_iba.registry import METHODS

__all__ = [
    "ContextCiteScorer",
    "ResponseMismatch",
    "citer_scores",
    "context_cite_scores",
    "import_context_cite",
    "make_citer",
]

#: The install command named when the package is missing (the registry's).
INSTALL = METHODS.entry("contextcite-32").facts["package"][1]


class ResponseMismatch(ValueError):
    """ContextCite's package reads the response's text back as other tokens
    (it tokenises the decoded text again: a model's greedy tokens need not be
    the tokeniser's own reading of their text), so a part of the response,
    given to it as characters, would be another part. The whole response is
    fitted on its given ids and is not refused."""


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The package's own noise kept from the user's terminal, where the
    adapter calls it: what it prints (offline, NLTK's ``[nltk_data] Error
    loading punkt_tab``: its sentence splitter, which the given sources
    replace) and its FutureWarnings and UserWarnings (its dependencies'
    deprecations and notes). An error still raises, with what was printed
    added to its message."""
    said = io.StringIO()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", UserWarning)
            with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
                yield
    except Exception as err:
        printed = " ".join(said.getvalue().split())
        if printed:
            err.args = (f"{err.args[0] if err.args else err} (it printed: {printed})",)
        raise


def import_context_cite() -> Any:
    """ContextCite's modules (``context_citer``, ``context_partitioner``,
    ``utils``), imported (slowly: spaCy, NLTK; offline, NLTK prints a failed
    download, which is harmless here and kept from the terminal:
    :func:`_quiet`).

    Raises:
        ImportError: Without the package, naming the install command.
    """
    names = ("context_citer", "context_partitioner", "utils")
    with _quiet():
        found = import_optional(  # the package first: its submodules may be cached
            ["context_cite"] + [f"context_cite.{n}" for n in names],
            "ContextCite's scores",
            INSTALL,
        )
    return tuple(found[1:])


def _partitioner(base: type, prompt: str, spans: Sequence[Tuple[int, int]]) -> Any:
    """A ContextCite partitioner over given sources of ``prompt``: its
    context is the whole prompt, an ablated one :func:`ablated_prompt`."""

    class GivenSources(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__(prompt)

        @property
        def num_sources(self) -> int:
            return len(spans)

        def split_context(self) -> None:
            return None

        def get_source(self, index: int) -> str:
            return prompt[spans[index][0] : spans[index][1]]

        def get_context(self, mask: Optional[np.ndarray] = None) -> str:
            keep = [True] * len(spans) if mask is None else [bool(k) for k in mask]
            return ablated_prompt(prompt, spans, keep)

    return GivenSources()


def make_citer(
    model: Any,
    tokenizer: Any,
    prompt: str,
    spans: Sequence[Tuple[int, int]],
    response_ids: Sequence[int],
    num_ablations: int = 32,
    seed: int = 0,
    chat: bool = True,
    batch_size: int = 1,
    least: int = 2,
) -> Any:
    """ContextCite's ``ContextCiter`` for ``prompt``'s sources and a given
    response: its prompt ids are
    :func:`~captum_iba.evaluation.sources.ablated_prompt_ids`' (with ``chat``,
    those its own prompt builder makes from the partitioner's context as a
    user turn), its ablations seeded from ``seed``; its ablated passes
    score ``response_ids`` as given (the package would score its own reading
    of their text, which can be other tokens; then ``citer.misread`` holds
    both, and only a part of the response is refused, :func:`citer_scores`).

    Args:
        model: A Hugging Face causal LM.
        tokenizer: Its tokenizer (with a chat template for ``chat``).
        prompt (str): The prompt (e.g. ContextCite's layout,
            :func:`~captum_iba.app.context_tasks.context_prompt`).
        spans (Sequence of (int, int)): Its sources' characters (at least
            ``least``); the text outside them is always kept.
        response_ids (Sequence[int]): The response to explain (token ids
            after the prompt, no end-of-text token), e.g. the model's greedy
            answer.
        num_ablations (int): ContextCite's ablations (its surrogate's
            training set). Default 32.
        seed (int): Its ablations are drawn with NumPy seeds ``seed``,
            ``seed + 1``, ... (the package's ``base_seed``; its own default
            is 0). Default 0.
        chat (bool): The prompt as a user turn of the chat template (as the
            package always has it). Default True.
        batch_size (int): Ablations a forward pass (the package pads on the
            left without position ids, so 1, its default, is exact).
        least (int): The fewest sources taken
            (:func:`~captum_iba.evaluation.sources.check_sources`): 2, the
            default, for a context; 1 for a prompt task's content of one
            word.

    Raises:
        ImportError: Without the package (naming the install command).
        ValueError: For bad sources or an empty response.
    """
    check_sources(spans, len(prompt), least=least)
    if len(response_ids) == 0:
        raise ValueError("response_ids is empty: there is no response to explain")
    citer_module, partitioner_module, utils = import_context_cite()
    partitioner = _partitioner(
        partitioner_module.BaseContextPartitioner, prompt, list(spans)
    )
    given = _citer_class(citer_module.ContextCiter, utils, tokenizer, prompt, spans)
    with _quiet():  # the package's constructor: its dependencies' warnings
        citer = given(
            model,
            tokenizer,
            prompt,
            "",
            num_ablations=num_ablations,
            batch_size=batch_size,
            prompt_template="{context}",
            partitioner=partitioner,
        )
    citer.chat, citer.seed = chat, seed
    # the response given, not generated: the package's cached output is the
    # prompt's text followed by the response's (its characters, for parts)
    _, text = citer._get_prompt_ids(return_prompt=True)
    citer._cache["output"] = text + tokenizer.decode(list(response_ids))
    read: List[int] = list(citer._response_ids)  # the package's reading of it
    citer.given = list(response_ids)  # fitted on these ids, whatever the text
    citer.misread = None if read == citer.given else (read, citer.given)
    return citer


def _citer_class(
    base: type,
    utils: Any,
    tokenizer: Any,
    prompt: str,
    spans: Sequence[Tuple[int, int]],
) -> type:
    """ContextCite's ``ContextCiter`` with our prompt ids (the one ablation
    rule, with the chat template where ``self.chat``) and its ablations
    seeded from ``self.seed``."""

    class GivenCiter(base):  # type: ignore[misc, valid-type]
        chat, seed = True, 0
        #: The response's ids as given (None: the package's reading of its
        #: text); where its text reads back as other tokens, ``misread``.
        given: Optional[List[int]] = None
        misread: Optional[Tuple[List[int], List[int]]] = None

        @property
        def _response_ids(self) -> List[int]:  # the ablations score these
            return super()._response_ids if self.given is None else self.given

        def _indices_to_token_indices(
            self, start_index: Optional[int] = None, end_index: Optional[int] = None
        ) -> Tuple[int, int]:  # the whole response: every given token
            if start_index is None and end_index is None and self.given is not None:
                return 0, len(self.given)
            return super()._indices_to_token_indices(start_index, end_index)

        def _get_prompt_ids(
            self, mask: Optional[np.ndarray] = None, return_prompt: bool = False
        ) -> Any:  # the one ablation rule
            keep = [True] * len(spans) if mask is None else [bool(k) for k in mask]
            ids = ablated_prompt_ids(tokenizer, prompt, spans, keep, self.chat)
            if not return_prompt:
                return ids
            text = ablated_prompt(prompt, spans, keep)
            if self.chat:
                return ids, user_turn(tokenizer, text)[0]
            return ids, plain_text(tokenizer, text)

        def _compute_masks_and_logit_probs(self) -> None:  # its ablations' seed
            self._cache["reg_masks"], self._cache["reg_logit_probs"] = (
                utils.get_masks_and_logit_probs(
                    self.model, self.tokenizer, self.num_ablations,
                    self.num_sources, self._get_prompt_ids, self._response_ids,
                    self.ablation_keep_prob, self.batch_size, base_seed=self.seed,
                )
            )  # fmt: skip

    return GivenCiter


def context_cite_scores(
    model: Any,
    tokenizer: Any,
    prompt: str,
    spans: Sequence[Tuple[int, int]],
    response_ids: Sequence[int],
    part: Optional[Tuple[int, int]] = None,
    **options: Any,
) -> Tensor:
    """ContextCite's score of each source of a prompt for a given response.

    Args:
        model: A Hugging Face causal LM.
        tokenizer: Its tokenizer.
        prompt (str): The prompt.
        spans (Sequence of (int, int)): Its sources' characters.
        response_ids (Sequence[int]): The response to explain.
        part (tuple of int, optional): A part of the response to attribute:
            its tokens ``[start, end)`` (:func:`citer_scores`). Default None:
            the whole response.
        **options: :func:`make_citer`'s ``num_ablations`` (default 32),
            ``seed`` (0), ``chat`` (True), ``batch_size`` (1) and ``least``
            (2).

    Returns:
        Tensor: ``(S,)`` float64, one score per source (higher = removing it
        lowers the response's logit-probability more).

    Raises:
        ImportError: Without the package (naming the install command).
        ValueError: For bad sources (fewer than two, empty, overlapping) or
            an empty response; :class:`ResponseMismatch` for a ``part`` of a
            response whose text the package reads as other tokens.
    """
    citer = make_citer(model, tokenizer, prompt, spans, response_ids, **options)
    return citer_scores(citer, part)


def citer_scores(citer: Any, part: Optional[Tuple[int, int]] = None) -> Tensor:
    """A ``ContextCiter``'s score of each source for its response, or for a
    part of it: the tokens ``part = (start, end)`` of the response, given to
    the package as the characters of its ``response`` they span (its
    ``get_attributions(start_idx=, end_idx=)``, which fits its surrogate to
    that part's logit-probability over the same ablations: a citer's
    ablated forward passes serve every part).

    Raises:
        ResponseMismatch: For a part of a response whose text the package
            reads as other tokens (a ``ValueError``).
        ValueError: When the package reads the part's characters as other
            tokens.
    """
    where: Dict[str, int] = {}
    if part is not None:
        if getattr(citer, "misread", None):
            read, given = citer.misread
            raise ResponseMismatch(
                f"ContextCite reads the response's text as other tokens "
                f"({read[:8]}... for {given[:8]}...): a part of it cannot be "
                "given to the package as characters (the whole response can)"
            )
        where = _part_characters(citer, part)
    with torch.no_grad(), _quiet():
        scores = citer.get_attributions(verbose=False, **where)
    # + 0.0: its surrogate's -0.0 (a source it gives no weight) shown as 0
    return torch.as_tensor(np.asarray(scores), dtype=torch.float64) + 0.0


def _part_characters(citer: Any, part: Tuple[int, int]) -> Dict[str, int]:
    """``start_idx`` and ``end_idx``: the characters of the citer's
    ``response`` that its tokens ``part`` span (from the first token's start
    to the next token's start, or the response's end), checked to read back
    as those tokens."""
    tokens, first = citer._output_tokens, citer._response_start
    offset = tokens.token_to_chars(first).start
    start, end = part
    a = tokens.token_to_chars(first + start).start - offset
    last = len(citer._response_ids)
    b = (
        len(citer.response)
        if end >= last
        else tokens.token_to_chars(first + end).start - offset
    )
    read = tuple(citer._indices_to_token_indices(a, b))
    if read != (start, end):
        raise ValueError(
            f"ContextCite reads the response's characters {a}-{b} as its tokens "
            f"{read}, not {part}: it would attribute another part of the answer"
        )
    return {"start_idx": a, "end_idx": b}


class ContextCiteScorer(SourceScorer):
    """ContextCite's scores of a context's sources, from its own package
    (:func:`context_cite_scores`), for each prompt of a batch with sources
    and its response; every token of a source holds its source's score.

    Args:
        model: A Hugging Face causal LM.
        num_ablations (int): ContextCite's ablations a prompt (the registered
            ``contextcite-32``, ``contextcite-256``). Default 32.
        seed (int): Its ablations' NumPy seeds start here. Default 0.
        **kwargs: See :class:`~captum_iba.evaluation.source_methods.SourceScorer`.

    Raises:
        ImportError: Without the package, naming the install command (before
            any prompt is explained).
    """

    per_token_note = (
        "ContextCite fits its surrogate to the whole response's "
        "logit-probability here, one fit a prompt"
    )
    prompt_meaning = (
        "ContextCite's weight of the token's source (its surrogate of the "
        "response's logit-probability), each token of a source holding it"
    )
    unit = "logit-probability"

    def __init__(
        self, model: Any, num_ablations: int = 32, seed: int = 0, **kwargs: Any
    ) -> None:
        super().__init__(model, **kwargs)
        if isinstance(num_ablations, bool) or int(num_ablations) < 2:
            raise ValueError(f"num_ablations must be >= 2; got {num_ablations!r}")
        import_context_cite()
        self.num_ablations, self.seed = int(num_ablations), int(seed)
        self.settings.update(num_ablations=self.num_ablations, seed=self.seed)

    def _source_scores(
        self, batch: PromptBatch, per_token: bool
    ) -> Tuple[Tensor, Optional[Tensor]]:
        out = self._empty(batch)
        citers: Dict[Any, Any] = {}  # rows of one prompt and response share one
        for b in range(len(batch)):
            chat = row_chat(self.tokenizer, batch, b)
            key = (batch.prompts[b], batch.spans[b], tuple(batch.answer_ids(b)), chat)
            if key not in citers:
                citers[key] = make_citer(
                    self.model, self.tokenizer, batch.prompts[b], batch.spans[b],
                    batch.answer_ids(b), num_ablations=self.num_ablations,
                    seed=self.seed, chat=chat, least=1,  # with_sources checked them
                )  # fmt: skip
            part = None if batch.explained is None else batch.explained_range(b)
            found = citer_scores(citers[key], part)
            out[b, : len(found)] = found
        return out, None
