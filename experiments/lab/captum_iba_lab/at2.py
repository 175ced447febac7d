"""AT2 (Cohen-Wang et al. 2025, *Learning to Attribute with Attention*) as
an anchor of context attribution: one score per source, from its own
package (``pip install at2``), imported on first use. A method of the lab
(``experiments/lab``), registered as ``at2`` through the entry point
``captum_iba.methods``: measured at random's level on a prompt's words and
below ContextCite and one deletion step on contexts
(docs/studies/amortized_llm_transfer.rst, docs/studies/context_at2.rst).

AT2 learns, once per model, one weight per attention head: a source's score
is the weighted sum, over heads, of the attention the response's tokens pay
to the source's tokens (summed over the source, averaged over the response).
The weights are fitted by the package's own trainer
(``at2.AT2Trainer``) on random ablations of training contexts' sources
(each kept with probability 1/2, ablated by the attention mask), so that
the scores of the kept sources correlate (Pearson) with the response's
logit-probability.

The study's ``experiments/studylib/at2_training.py`` runs that trainer on given
contexts (``experiments/train_at2.py``: our corpora's search split) and
saves the weights with the model's fingerprint (:func:`load_at2` refuses
them for another model); here :func:`at2_scores` scores *our* sources for
*our* response, as
:func:`~captum_iba.evaluation.context_cite.context_cite_scores` does for
ContextCite, and :class:`AT2Scorer` is the registered method ``at2`` (token
scores, and ``AnswerScores.sources``). Adapted, not patched: a task class
of the package's (``ContextAttributionTask``) is given our prompt and our
sources' spans as its documents. Its prompt is its own default, as
ContextCite's: ``"Context: {context}\\n\\nQuery: {query}"`` as a user turn of the
tokenizer's chat template; for a base model (``chat=False``: no template)
the prompt as plain text, its ids those
:func:`~captum_iba.evaluation.sources.ablated_prompt_ids` gives (a BOS
before it), exactly the ids the study's other methods explain.

The model is handed to the package as
:func:`~captum_iba_lab.at2_model.at2_model` makes it (Gemma 3
through a view) and left as found.
"""

import hashlib
import warnings
import weakref
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from captum_iba._utils.common import import_optional
from captum_iba._utils.digest import weights_digest
from captum_iba._utils.io import cache_root, model_slug
from captum_iba.attr.rows import Rows, RowScores
from captum_iba.evaluation.scorers import TokenScorer
from captum_iba.evaluation.sources import plain_text, row_chat
from captum_iba_lab.at2_model import (
    at2_model,
    check_window,
    model_as_found,
)

__all__ = [
    "AT2Scorer",
    "FINGERPRINT_MARK",
    "TRAIN_COMMAND",
    "at2_scores",
    "at2_token_scores",
    "at2_weights_path",
    "check_fingerprint",
    "find_at2_weights",
    "import_at2",
    "layout",
    "load_at2",
    "model_fingerprint",
    "read_extras",
    "read_task",
]

#: The install command named when the package is missing.
INSTALL = "pip install at2 (or pip install ./experiments/lab, the lab with it)"
#: The command that trains weights (named when a file is missing).
TRAIN_COMMAND = (
    "python experiments/train_at2.py --model MODEL --task TASK --n {n} "
    "--ablations {a} --out {folder}"
)
#: How the lab teaches ``iba-heads`` (AT2's weights taught by IBA).
TEACH_COMMAND = (
    "python experiments/teach_at2.py --model MODEL --task context-facts --n 128 "
    "(or --task context-topics)"
)
#: What begins a fingerprint of all the model's weights (:func:`model_fingerprint`);
#: a file without it was saved by a version that fingerprinted the model's shape
#: and first embedding values only (which a fine-tune can keep).
FINGERPRINT_MARK = "weights-"
#: AT2's (and ContextCite's) prompt layout.
LAYOUT = "Context: {context}\n\nQuery: {query}"
#: What joins two sources in it.
JOIN = "\n\n"
PathLike = Union[str, Path]


def import_at2() -> Any:
    """AT2's package, imported (slowly: spaCy, NLTK, datasets; offline, NLTK
    prints a failed download, which is harmless here).

    Raises:
        ImportError: Without the package, naming the install command.
    """
    return import_optional(("at2", "at2.tasks"), "AT2's scores", INSTALL)[0]


#: Values of each tensor read by the cheap check of a cached fingerprint.
_SAMPLED = 64
#: Each model's last fingerprint, with the state of its tensors it was of.
_FINGERPRINTS: "weakref.WeakKeyDictionary[Any, Tuple[Any, str]]" = (
    weakref.WeakKeyDictionary()
)


def _shape(model: Any) -> Tuple[str, int, int, int, int]:
    """The model's family and shape, from its config."""
    cfg = model.config
    return (
        str(cfg.model_type),
        int(cfg.num_hidden_layers),
        int(cfg.num_attention_heads),
        int(cfg.hidden_size),
        int(cfg.vocab_size),
    )


def _tensors_state(model: Any) -> Tuple[Any, ...]:
    """A cheap check (milliseconds) that the model's tensors are those last
    fingerprinted: each one's name, storage, shape, dtype, version (which an
    optimizer's step, ``load_state_dict`` and any in-place write through
    autograd advance) and :data:`_SAMPLED` of its values, evenly spaced."""
    state = []
    for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
        flat = tensor.detach().reshape(-1)
        sample = flat[:: max(1, flat.numel() // _SAMPLED)].contiguous()
        try:
            version: Optional[int] = tensor._version
        except RuntimeError:  # an inference tensor keeps none
            version = None
        state.append(
            (name, tensor.data_ptr(), tuple(tensor.shape), str(tensor.dtype))
            + (version, sample.view(torch.uint8).cpu().numpy().tobytes())
        )
    return tuple(state)


def model_fingerprint(model: Any) -> str:
    """What a trained file must match: the model's family and shape and the
    digest of all its weights (every parameter and buffer, their bytes as
    they are: :func:`~captum_iba._utils.digest.weights_digest`), hashed,
    after :data:`FINGERPRINT_MARK`. A fine-tune differs from its parent even
    where it kept (or froze) its embeddings; the same model in another dtype
    differs too (the command line loads every model in float32).

    Hashing every weight takes about a second per 135M float32 parameters
    (SmolLM2-135M: 0.85 s on one CPU core), so a model's fingerprint is kept
    while the model lives and recomputed only when its tensors change: one
    replaced, written in place (its version), or any of the values sampled
    from each (:data:`_SAMPLED`) changed.

    Returns:
        str: :data:`FINGERPRINT_MARK` and 24 hexadecimal digits.
    """
    state = _tensors_state(model)
    try:
        kept = _FINGERPRINTS.get(model)
    except TypeError:  # not weakly referable: computed each time
        kept = None
    if kept is not None and kept[0] == state:
        return kept[1]
    digest = hashlib.sha256(repr(_shape(model)).encode())
    digest.update(weights_digest(model).encode())
    fingerprint = FINGERPRINT_MARK + digest.hexdigest()[:24]
    try:
        _FINGERPRINTS[model] = (state, fingerprint)
    except TypeError:
        pass
    return fingerprint


def _older_fingerprint(model: Any) -> str:
    """The fingerprint files saved before :data:`FINGERPRINT_MARK` hold: the
    model's family, shape and first 4 x 16 embedding values, hashed (the
    same for a fine-tune that kept its embeddings; only to recognise them)."""
    weights = model.get_input_embeddings().weight[:4, :16].detach()
    digest = hashlib.sha256(repr(_shape(model)).encode())
    digest.update(weights.to(torch.float32).cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


def _again(extras: Dict[str, Any], folder: Path, how: str = "again") -> str:
    """How to make a file's weights again (``how``: "again", "for it"): the
    training command (its budget filled in), or for weights taught by a
    teacher the teaching command."""
    if extras.get("teacher") is not None:
        return f"teach them {how} with " + TEACH_COMMAND
    n, a = extras.get("n", "N"), extras.get("ablations", "A")
    return f"train them {how} with " + TRAIN_COMMAND.format(n=n, a=a, folder=folder)


#: What a file whose fingerprint lacks :data:`FINGERPRINT_MARK` is.
_OLDER = (
    "saved by an older version of captum-iba, whose check of the model (its "
    "shape and first embedding values) could not tell a fine-tune from its parent"
)


def check_fingerprint(path: PathLike, extras: Dict[str, Any], model: Any) -> None:
    """Refuse weights (``extras`` read from ``path``) that were not trained
    for ``model``: another model's, or a file of an older version's
    fingerprint (:data:`FINGERPRINT_MARK`), even if it was this model's.

    Raises:
        ValueError: Naming the file and the command that trains (or teaches)
            the weights again.
    """
    path, found = Path(path), extras.get("model")
    wanted = model_fingerprint(model)
    if found == wanted:
        return
    if found is None:
        raise ValueError(
            f"the AT2 weights {path} record no model's fingerprint (not saved by "
            f"captum-iba): {_again(extras, path.parent, 'for it')}"
        )
    if not str(found).startswith(FINGERPRINT_MARK):
        raise ValueError(
            f"the AT2 weights {path} were {_OLDER}: {_again(extras, path.parent)}"
        )
    raise ValueError(
        f"the AT2 weights {path} were trained for another model (fingerprint "
        f"{found}, {extras.get('model_name', '?')}; this model's is "
        f"{wanted}): {_again(extras, path.parent, 'for it')}"
    )


def read_extras(path: PathLike) -> Optional[Dict[str, Any]]:
    """What a file of AT2's weights records beside them (``"extras"``: the
    model's fingerprint, its name, the budget, the task, a teacher), without
    AT2's package; None for a file that torch reads but that is not AT2's
    (no ``"extras"``).

    Raises:
        Exception: ``torch.load`` 's error for a file it cannot read (a
            damaged or truncated one, or not torch's).
    """
    data = torch.load(Path(path), map_location="cpu", weights_only=True)
    extras = data.get("extras") if isinstance(data, dict) else None
    return extras if isinstance(extras, dict) else None


def _one_line(err: BaseException) -> str:
    """An error's first line, after its kind."""
    text = str(err).strip()
    return type(err).__name__ + (f": {text.splitlines()[0]}" if text else "")


def at2_weights_path(
    model_name: str,
    task: str,
    n: int,
    ablations: int,
    folder: Optional[PathLike] = None,
    teacher: Optional[str] = None,
) -> Path:
    """The file of AT2's weights for ``model_name`` trained on ``n`` examples
    of ``task`` with ``ablations`` each: ``<folder>/<model>-<task>-n<n>-a<a>.pt``
    (``folder`` by default ``<cache>/at2``, ``<cache>`` being
    ``$CAPTUM_IBA_CACHE`` or ``~/.cache/captum_iba``); weights taught by a
    ``teacher`` instead of ablations
    (:mod:`~captum_iba_lab.at2_taught`): ``...-n<n>-<teacher>.pt``."""
    folder = cache_root() / "at2" if folder is None else Path(folder)
    how = f"a{ablations}" if teacher is None else teacher
    return folder / f"{model_slug(model_name)}-{task}-n{n}-{how}.pt"


def layout(
    sources: Sequence[str], query: str, suffix: str = ""
) -> Tuple[str, List[Tuple[int, int]]]:
    """AT2's prompt (:data:`LAYOUT`, the sources joined by blank lines;
    ``suffix`` after it, e.g. a base model's ``"\\nAnswer:"``) and each
    source's characters in it.

    Raises:
        ValueError: For fewer than two sources or an empty one.
    """
    if len(sources) < 2:
        raise ValueError(f"sources: at least two are needed; got {len(sources)}")
    if any(not s.strip() for s in sources):
        raise ValueError("sources: every source must hold text")
    spans, pos = [], LAYOUT.index("{context}")
    for i, source in enumerate(sources):
        pos += len(JOIN) if i else 0
        spans.append((pos, pos + len(source)))
        pos += len(source)
    return LAYOUT.format(context=JOIN.join(sources), query=query) + suffix, spans


def _task_class(at2: Any) -> type:
    """A task of AT2's over a given prompt whose sources are given spans (its
    documents, one source each): a user turn of the chat template with
    ``chat`` (the package's own), else the prompt as plain text
    (:func:`~captum_iba.evaluation.sources.plain_text`: a base model's)."""

    class GivenSources(at2.tasks.ContextAttributionTask):  # type: ignore[misc, name-defined]
        def __init__(self, prompt, spans, model, tokenizer, chat=True, **kwargs):
            self.given, self.spans = prompt, [tuple(s) for s in spans]
            self.chat = chat
            super().__init__(model, tokenizer, source_type="document", **kwargs)

        @property
        def prompt(self) -> str:
            return self.given

        def apply_chat_template(self, prompt: str) -> str:
            if self.chat:
                return super().apply_chat_template(prompt)
            return plain_text(self.tokenizer, prompt)

        def _get_document_ranges(self) -> List[Tuple[int, int]]:
            return self.spans

    return GivenSources


def at2_token_scores(
    model: Any,
    tokenizer: Any,
    prompt: str,
    spans: Sequence[Tuple[int, int]],
    response_ids: Sequence[int],
    estimator: Any,
    ids: Optional[Sequence[int]] = None,
    chat: bool = True,
) -> Tuple[Tensor, Tensor, Tensor]:
    """AT2's scores of a prompt's tokens and sources for a given response.

    The package's estimator gives, per response token, a score of each
    token before it (its learned heads' attention); a source's score is the
    sum over its tokens, averaged over the response's tokens (as the
    package's ``ScoreEstimationAttributor`` computes it).

    Args:
        model: A causal LM of a family AT2 knows
            (:data:`~captum_iba_lab.at2_model.MODEL_TYPES`).
        tokenizer: Its fast tokenizer (with a chat template for ``chat``).
        prompt (str): The prompt (before the template).
        spans (sequence of (int, int)): Its sources' characters (>= 2).
        response_ids (sequence of int): The response to explain (no
            end-of-text token).
        estimator: AT2's trained weights for this model (:func:`load_at2`).
        ids (sequence of int, optional): The prompt's and response's ids as
            the caller has them (checked to be the package's).
        chat (bool): The prompt as a user turn of the chat template (as the
            package has it); False: as plain text, encoded as
            :func:`~captum_iba.evaluation.sources.ablated_prompt_ids` encodes
            it (a base model, which has no template). Default True.

    Returns:
        (Tensor, Tensor, Tensor): ``(N,)`` each token's score (the mean
        over the response's tokens; ``N`` the package's tokens, the template
        and the response included), ``(R, N)`` per response token, ``(S,)``
        per source; float64.

    Raises:
        ValueError: For an empty response, ``chat`` with a tokenizer without
            a chat template, a prompt or response the package reads as other
            tokens, or a text longer than the model's sliding window.
    """
    if len(response_ids) == 0:
        raise ValueError("response_ids is empty: there is no response to explain")
    if chat and not getattr(tokenizer, "chat_template", None):
        raise ValueError(
            "chat=True: AT2 reads the prompt as a user turn of the chat "
            "template; this tokenizer has none (a base model: chat=False reads "
            "it as plain text)"
        )
    at2 = import_at2()
    with model_as_found(model):
        return _token_scores(
            at2, model, tokenizer, (prompt, spans, chat), response_ids, ids, estimator
        )


def read_task(
    at2: Any,
    model: Any,
    tokenizer: Any,
    laid: Tuple[str, Sequence[Tuple[int, int]], bool],
    response_ids: Sequence[int],
    ids: Optional[Sequence[int]] = None,
) -> Tuple[Any, int, int]:
    """AT2's task of ``laid`` 's prompt, sources and chat flag with the
    response ``response_ids``, checked to read the ids the caller has
    (``ids``: the prompt's and response's; default the package's prompt and
    the response) within the model's sliding window.

    Returns:
        (task, int, int): The task and the response's token range in it.

    Raises:
        ValueError: For a prompt or response the package reads as other
            tokens, or a text longer than the model's sliding window.
    """
    prompt, spans, chat = laid
    task = _task_class(at2)(prompt, spans, at2_model(model), tokenizer, chat=chat)
    task.set_generation(tokenizer.decode(list(response_ids)))
    start, end = task.target_token_range
    read = list(task.get_tokens()["input_ids"])
    expected = list(read[:start]) + list(response_ids) if ids is None else list(ids)
    if read[:end] != expected:
        part = "response" if read[:start] == expected[:start] else "prompt"
        how = "applies the tokenizer's chat template to" if chat else "re-encodes"
        raise ValueError(
            f"AT2 reads the {part} as other tokens ({read[start:end][:8]}... for "
            f"{list(response_ids)[:8]}...): it would explain another text (it "
            f"{how} the prompt)"
        )
    check_window(model, len(read))
    return task, start, end


def _token_scores(
    at2: Any,
    model: Any,
    tokenizer: Any,
    laid: Tuple[str, Sequence[Tuple[int, int]], bool],
    response_ids: Sequence[int],
    ids: Optional[Sequence[int]],
    estimator: Any,
) -> Tuple[Tensor, Tensor, Tensor]:
    """:func:`at2_token_scores`' work (the package imported, the hooks it
    makes transformers install removed afterwards)."""
    task, start, end = read_task(at2, model, tokenizer, laid, response_ids, ids)
    read = len(task.get_tokens()["input_ids"])
    estimator = estimator.to(device=model.device, dtype=model.dtype)
    with torch.no_grad():  # (R, N - 1): the last token is attended by none
        per = estimator.get_scores(task, start, end).double().cpu()
    per = torch.nn.functional.pad(per, (0, read - per.shape[1]))
    sources = torch.stack([per[:, s:e].sum(-1) for s, e in task.source_token_ranges])
    return per.mean(0), per, sources.mean(-1)


def at2_scores(
    model: Any,
    tokenizer: Any,
    sources: Sequence[str],
    query: str,
    response_ids: Sequence[int],
    estimator: Any,
    chat: bool = True,
) -> Tensor:
    """AT2's score of each source for a given response (as
    :func:`~captum_iba.evaluation.context_cite.context_cite_scores` gives
    ContextCite's).

    Args:
        model: A Hugging Face causal LM of a family AT2 knows
            (:data:`~captum_iba_lab.at2_model.MODEL_TYPES`).
        tokenizer: Its fast tokenizer (with a chat template for ``chat``).
        sources (Sequence[str]): The context's sources, in order (>= 2),
            joined by blank lines (:func:`layout`).
        query (str): The query.
        response_ids (Sequence[int]): The response to explain (token ids
            after the prompt, no end-of-text token).
        estimator: AT2's trained weights for this model (:func:`load_at2`).
        chat (bool): The prompt as a user turn of the chat template; False:
            as plain text (a base model). Default True.

    Returns:
        Tensor: ``(S,)`` float64, one score per source (higher = the
        response attends to it more, by the learned head weights).

    Raises:
        ImportError: Without the package (naming the install command).
        ValueError: For fewer than two sources, an empty response, ``chat``
            without a chat template, or a response the package reads as
            other tokens.
    """
    prompt, spans = layout(sources, query)
    return at2_token_scores(
        model, tokenizer, prompt, spans, response_ids, estimator, chat=chat
    )[2]


def find_at2_weights(
    model: Any,
    folder: Optional[PathLike] = None,
    teacher: Optional[str] = None,
    task: Optional[str] = None,
) -> Path:
    """The weights trained for ``model`` in ``folder`` (default
    ``<cache>/at2``) on the most examples (then ablations): AT2's own, or
    with ``teacher`` those taught by it instead of ablations
    (:mod:`~captum_iba_lab.at2_taught`); with ``task``, only those
    trained on that task.

    Each ``.pt`` file that cannot be read (:func:`read_extras`: damaged,
    truncated) is warned of, in one line naming it and the error, and
    skipped; one that torch reads but that is not AT2's (no ``"extras"``) is
    skipped without a word. Files saved by an older version for this model's
    shape and first embedding values (:data:`FINGERPRINT_MARK`) are never
    taken: that check could not tell a fine-tune from its parent.

    Raises:
        FileNotFoundError: When none was trained for it (naming the folder,
            the files of an older version for this model, the files that
            cannot be read, and the command that trains them).
    """
    folder = cache_root() / "at2" if folder is None else Path(folder)
    wanted, older_form = model_fingerprint(model), _older_fingerprint(model)
    found, older, damaged = [], [], []
    for path in sorted(folder.glob("*.pt")) if folder.is_dir() else []:
        try:
            extras = read_extras(path)
        except Exception as err:  # noqa: BLE001 - whatever torch says of it
            damaged.append(str(path))
            warnings.warn(
                f"the AT2 weights file {path} cannot be read ({_one_line(err)}); "
                "skipped",
                stacklevel=2,
            )
            continue
        if (
            extras is None
            or extras.get("teacher") != teacher
            or task not in (None, extras.get("task"))
        ):
            continue
        if extras.get("model") == wanted:
            found.append(
                (int(extras.get("n", 0)), int(extras.get("ablations", 0)), path)
            )
        elif extras.get("model") == older_form:
            older.append(str(path))
    if not found:
        on = f" on {task}" if task else ""
        said = ""
        if older:
            said += f"; {', '.join(older)}: {_OLDER}"
        if damaged:
            said += f"; {', '.join(damaged)}: cannot be read"
        again = " (again)" if older or damaged else ""
        if teacher is not None:
            raise FileNotFoundError(
                f"no weights taught by {teacher}{on} for this model (fingerprint "
                f"{wanted}) in {folder}{said}: teach them{again} with " + TEACH_COMMAND
            )
        raise FileNotFoundError(
            f"no AT2 weights{on} for this model (fingerprint {wanted}) in {folder}"
            f"{said}: train them{again} with "
            + TRAIN_COMMAND.format(n="N", a="A", folder=folder)
        )
    return max(found)[2]


def load_at2(path: PathLike, model: Any) -> Any:
    """AT2's trained weights from ``path``, checked against ``model``
    (:func:`check_fingerprint`) before AT2's package loads them.

    Raises:
        FileNotFoundError: For a missing file (naming the training command).
        ValueError: For a file that cannot be read or is not AT2's weights,
            weights trained for another model, or saved by an older version
            whose check could not tell a fine-tune from its parent.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no AT2 weights at {path}: train them with "
            + TRAIN_COMMAND.format(n="N", a="A", folder=path.parent)
        )
    try:
        extras = read_extras(path)
    except Exception as err:  # noqa: BLE001 - whatever torch says of it
        raise ValueError(
            f"the AT2 weights file {path} cannot be read ({_one_line(err)}): "
            "train them again with "
            + TRAIN_COMMAND.format(n="N", a="A", folder=path.parent)
        ) from None
    if extras is None:
        raise ValueError(
            f"{path} is not a file of AT2's weights (it records no extras): train "
            "them with " + TRAIN_COMMAND.format(n="N", a="A", folder=path.parent)
        )
    check_fingerprint(path, extras, model)
    return import_at2().AT2ScoreEstimator.load(path, device="cpu")


class AT2Scorer(TokenScorer):
    """AT2 (Cohen-Wang et al. 2025): the response's attention to each source,
    weighted per head by weights learned once per model from source
    ablations (its package; a prompt with sources).

    A prompt token's score is the response's mean attention to it through
    the learned head weights; a source's (``AnswerScores.sources``) the sum
    over its tokens, exactly as the package scores sources
    (:func:`at2_token_scores`). The batch must hold its prompts' sources
    (:func:`~captum_iba.evaluation.sources.with_sources`); a row wrapped in
    the chat template (``prompt_batch(..., chat=True)``) is read as a user
    turn (the package's way), a row of plain text (a base model's) as its
    text, whichever gives the row's ids
    (:func:`~captum_iba.evaluation.sources.row_chat`).

    Args:
        model: A causal LM of a family AT2 knows
            (:data:`~captum_iba_lab.at2_model.MODEL_TYPES`).
        weights (str or Path, optional): AT2's weights for it
            (``experiments/train_at2.py``); default: the file trained for
            this model on the most examples in ``<cache>/at2``
            (:func:`find_at2_weights`).
        **kwargs: See :class:`~captum_iba.evaluation.scorers.TokenScorer`
            (``tokenizer`` is needed).

    Raises:
        ImportError: Without the package (naming the install command).
        FileNotFoundError: Without weights for the model.
        ValueError: Without a tokenizer, or weights for another model.
    """

    # the method's facts, read by the registry from its entry point (they
    # were its entry's in captum_iba.registry before the lab): a prompt with
    # sources; its package re-reads the answer as text and reads only the
    # whole answer (explains_spans: False, the default)
    models = ("causal-lm",)
    needs_sources = True
    reads_answer_text = True
    package = ("at2", INSTALL)
    prompt_meaning = (
        "the response's attention to the token through AT2's learned head "
        "weights (a source's score: the sum over its tokens)"
    )
    meaning = prompt_meaning

    def __init__(
        self, model: Any, weights: Optional[PathLike] = None, **kwargs: Any
    ) -> None:
        super().__init__(model, **kwargs)
        if self.tokenizer is None:
            raise ValueError("AT2 needs the model's tokenizer (tokenizer=...)")
        import_at2()
        path = Path(weights) if weights is not None else find_at2_weights(model)
        self.estimator = load_at2(path, model)
        extras = self.estimator.kwargs.get("extras", {})
        self.settings.update(
            weights=str(path),
            trained_examples=extras.get("n"),
            ablations=extras.get("ablations"),
            trained_on=extras.get("task"),
        )

    def _scores(self, rows: Rows) -> RowScores:
        """Each prompt's token and source scores, row by row (AT2 reads one
        text at a time)."""
        batch, per_token = rows.prompts, rows.per_token
        if batch.sources is None or not batch.prompts:
            raise ValueError(
                "AT2 scores the sources of a context: the batch has none "
                "(captum_iba.evaluation.sources.with_sources adds them)"
            )
        B, W = batch.input_ids.shape
        width = int(batch.answer_mask.sum(1).max())
        answer = torch.zeros(B, W)
        tokens = torch.zeros(B, width, W) if per_token else None
        sources = torch.full((B, batch.n_sources), float("nan"), dtype=torch.float64)
        for b in range(B):
            real = batch.attention_mask[b].bool().cpu()
            ids = batch.input_ids[b].cpu()[real].tolist()
            mean, per, own = at2_token_scores(
                self.model, self.tokenizer, batch.prompts[b], batch.spans[b],
                batch.answer_ids(b), self.estimator, ids=ids,
                chat=row_chat(self.tokenizer, batch, b),
            )  # fmt: skip
            answer[b, real] = mean[: len(ids)].float()
            if tokens is not None:
                tokens[b, : per.shape[0], real] = per[:, : len(ids)].float()
            sources[b, : own.shape[0]] = own
        return RowScores(rows.spread(answer, tokens), "attention", groups=sources)
