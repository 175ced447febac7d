"""AT2 (Cohen-Wang et al. 2025, *Learning to Attribute with Attention*) as
an anchor of context attribution: one score per source, from its own
package (``pip install at2``, this package's ``context`` extra), imported
on first use.

AT2 learns, once per model, one weight per attention head: a source's score
is the weighted sum, over heads, of the attention the response's tokens pay
to the source's tokens (summed over the source, averaged over the response).
The weights are fitted by the package's own trainer
(``at2.AT2Trainer``) on random ablations of training contexts' sources
(each kept with probability 1/2, ablated by the attention mask), so that
the scores of the kept sources correlate (Pearson) with the response's
logit-probability.

Here :func:`train_at2` runs that trainer on given contexts (our corpora's
search split, :mod:`experiments/train_at2.py <train_at2>`) and saves the
weights with what they were trained for (:func:`load_at2` refuses them for
another model), and :func:`at2_scores` scores *our* sources for *our*
response, as :func:`~captum_iba.evaluation.context_cite.context_cite_scores`
does for ContextCite. Adapted, not patched: a task class of the package's
(``ContextAttributionTask``) is given our sources as its documents, and the
response is one target (``split_target_by=None``: the package's sentence
splitter needs an NLTK download, which offline fails). Its prompt is its own
default, as ContextCite's: ``"Context: {context}\\n\\nQuery: {query}"`` as a
user turn of the tokenizer's chat template.
"""

import hashlib
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch import Tensor

from captum_iba._utils.io import cache_root

__all__ = [
    "TRAIN_COMMAND",
    "at2_scores",
    "at2_weights_path",
    "import_at2",
    "load_at2",
    "model_fingerprint",
    "train_at2",
]

#: The install command named when the package is missing.
INSTALL = "pip install at2 (or pip install captum-iba[context])"
#: The command that trains weights (named when a file is missing).
TRAIN_COMMAND = (
    "python experiments/train_at2.py --model MODEL --task TASK --n {n} "
    "--ablations {a} --out {folder}"
)
#: AT2's (and ContextCite's) prompt layout.
LAYOUT = "Context: {context}\n\nQuery: {query}"
#: The model families whose attention AT2 recomputes (its ``model_type``).
MODEL_TYPES = ("llama", "qwen2", "phi3", "gemma3")
PathLike = Union[str, Path]


def import_at2() -> Any:
    """AT2's package, imported (slowly: spaCy, NLTK, datasets; offline, NLTK
    prints a failed download, which is harmless here).

    Raises:
        ImportError: Without the package, naming the install command.
    """
    try:
        import at2  # noqa: F401 - slow
        import at2.tasks  # noqa: F401
    except ImportError as err:
        raise ImportError(
            f"AT2's scores need its package, which is not installed ({err}): {INSTALL}"
        ) from err
    return at2


def model_type_of(model: Any) -> str:
    """The model's family as AT2 names it (its attention is recomputed from
    hidden states per family).

    Raises:
        ValueError: For a family AT2 does not know.
    """
    kind = str(getattr(model.config, "model_type", ""))
    if kind not in MODEL_TYPES:
        raise ValueError(
            f"AT2 recomputes the attention of {MODEL_TYPES} models only; this "
            f"model is {kind!r}"
        )
    return kind


def model_fingerprint(model: Any) -> str:
    """What a trained file must match: the model's family, shape and first
    embedding weights (exact bytes), hashed."""
    cfg = model.config
    shape = (
        str(cfg.model_type),
        int(cfg.num_hidden_layers),
        int(cfg.num_attention_heads),
        int(cfg.hidden_size),
        int(cfg.vocab_size),
    )
    weights = model.get_input_embeddings().weight[:4, :16].detach()
    digest = hashlib.sha256(repr(shape).encode())
    digest.update(weights.to(torch.float32).cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


def at2_weights_path(
    model_name: str,
    task: str,
    n: int,
    ablations: int,
    folder: Optional[PathLike] = None,
) -> Path:
    """The file of AT2's weights for ``model_name`` trained on ``n`` examples
    of ``task`` with ``ablations`` each: ``<folder>/<model>-<task>-n<n>-a<a>.pt``
    (``folder`` by default ``<cache>/at2``, ``<cache>`` being
    ``$CAPTUM_IBA_CACHE`` or ``~/.cache/captum_iba``)."""
    name = model_name.rstrip("/").split("/")[-1]
    slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in name)
    folder = cache_root() / "at2" if folder is None else Path(folder)
    return folder / f"{slug}-{task}-n{n}-a{ablations}.pt"


def _task_class(at2: Any) -> type:
    """A task of AT2's over given sources (its documents, one source each)."""
    base = at2.tasks.ContextAttributionTask

    class GivenSources(base):  # type: ignore[misc, valid-type]
        def __init__(self, sources, query, model, tokenizer, **kwargs):
            self.given, self.query = list(sources), query
            super().__init__(model, tokenizer, source_type="document", **kwargs)

        @property
        def prompt(self) -> str:
            return LAYOUT.format(context="\n\n".join(self.given), query=self.query)

        def _get_document_ranges(self) -> List[Tuple[int, int]]:
            spans, pos = [], LAYOUT.index("{context}")
            for i, source in enumerate(self.given):
                pos += 2 if i else 0
                spans.append((pos, pos + len(source)))
                pos += len(source)
            return spans

    return GivenSources


def _check_sources(sources: Sequence[str]) -> None:
    if len(sources) < 2:
        raise ValueError(f"sources: at least two are needed; got {len(sources)}")
    if any(not s.strip() for s in sources):
        raise ValueError("sources: every source must hold text")


def at2_scores(
    model: Any,
    tokenizer: Any,
    sources: Sequence[str],
    query: str,
    response_ids: Sequence[int],
    estimator: Any,
) -> Tensor:
    """AT2's score of each source for a given response.

    Args:
        model: A Hugging Face causal LM of a family AT2 knows
            (:data:`MODEL_TYPES`).
        tokenizer: Its fast tokenizer, with a chat template.
        sources (Sequence[str]): The context's sources, in order (>= 2),
            joined by blank lines.
        query (str): The query.
        response_ids (Sequence[int]): The response to explain (token ids
            after the prompt, no end-of-text token).
        estimator: AT2's trained weights for this model (:func:`load_at2`).

    Returns:
        Tensor: ``(S,)`` float64, one score per source (higher = the
        response attends to it more, by the learned head weights).

    Raises:
        ImportError: Without the package (naming the install command).
        ValueError: For fewer than two sources, an empty response, or a
            response the package reads as other tokens.
    """
    _check_sources(sources)
    if len(response_ids) == 0:
        raise ValueError("response_ids is empty: there is no response to explain")
    at2 = import_at2()
    task = _task_class(at2)(sources, query, model, tokenizer)
    task.set_generation(tokenizer.decode(list(response_ids)))
    start, end = task.target_token_range
    read = list(task.get_tokens()["input_ids"][start:end])
    if read != list(response_ids):
        raise ValueError(
            f"AT2 reads the response as other tokens ({read[:8]}... for "
            f"{list(response_ids)[:8]}...): it would explain another response"
        )
    attributor = at2.AT2Attributor(task, estimator)
    scores = attributor.get_attribution_scores()
    return torch.as_tensor(np.asarray(scores), dtype=torch.float64)


def load_at2(path: PathLike, model: Any) -> Any:
    """AT2's trained weights from ``path``, checked against ``model``.

    Raises:
        FileNotFoundError: For a missing file (naming the training command).
        ValueError: For weights trained for another model.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no AT2 weights at {path}: train them with "
            + TRAIN_COMMAND.format(n="N", a="A", folder=path.parent)
        )
    at2 = import_at2()
    estimator = at2.AT2ScoreEstimator.load(path, device="cpu")
    extras = estimator.kwargs.get("extras", {})
    found, wanted = extras.get("model"), model_fingerprint(model)
    if found != wanted:
        raise ValueError(
            f"the AT2 weights {path} were trained for another model (fingerprint "
            f"{found}, {extras.get('model_name', '?')}; this model's is "
            f"{wanted}): train them for it with "
            + TRAIN_COMMAND.format(n="N", a="A", folder=path.parent)
        )
    return estimator


def _trainer_class(at2: Any) -> type:
    """AT2's trainer, timing each example's ablations (CPU-seconds)."""

    class TimedTrainer(at2.AT2Trainer):  # type: ignore[misc, valid-type]
        seconds: Dict[int, float] = {}

        def compute_features_and_outputs_for_example(self, i, batch_size=4):
            began = time.process_time()
            out = super().compute_features_and_outputs_for_example(i, batch_size)
            self.seconds[i] = time.process_time() - began
            return out

    return TimedTrainer


def at2_trainer(
    model: Any,
    tokenizer: Any,
    examples: Sequence[Tuple[Sequence[str], str]],
    work_dir: PathLike,
    ablations: int = 32,
    max_new_tokens: int = 24,
) -> Tuple[Any, List[float]]:
    """AT2's trainer over ``examples`` with every example's responses
    generated and ablations run (resumable: the package caches both under
    ``work_dir``).

    Args:
        model: A causal LM of a family AT2 knows.
        tokenizer: Its fast tokenizer, with a chat template.
        examples (sequence): ``(sources, query)`` pairs.
        work_dir (str or Path): The package's store (generations, features).
        ablations (int): Random ablations per example. Default 32.
        max_new_tokens (int): The longest response (greedy). Default 24.

    Returns:
        (trainer, list of float): The trainer and each example's CPU-seconds
        (its response and ablations) in this call (0 where cached).
    """
    from datasets import Dataset

    at2 = import_at2()
    for sources, _ in examples:
        _check_sources(sources)
    kind = model_type_of(model)
    layers, heads = model.config.num_hidden_layers, model.config.num_attention_heads
    task_class = _task_class(at2)
    kwargs = dict(at2.tasks.base.DEFAULT_GENERATE_KWARGS, max_new_tokens=max_new_tokens)
    rows = [{"sources": list(s), "query": q} for s, q in examples]
    trainer = _trainer_class(at2)(
        save_path=Path(work_dir),
        dataset=Dataset.from_list(rows),
        model=model,
        tokenizer=tokenizer,
        task_from_example=lambda row, m, t: task_class(
            row["sources"], row["query"], m, t, generate_kwargs=kwargs
        ),
        feature_extractor=at2.AT2FeatureExtractor(layers, heads, model_type=kind),
        split_target_by=None,
        num_masks=ablations,
    )
    seconds = [0.0] * len(rows)
    for i in range(len(rows)):  # one job per example: each one's time
        began = time.process_time()
        with torch.no_grad():
            trainer.generate(job_index=i, num_jobs=len(rows), batch_size=1)
        seconds[i] += time.process_time() - began
    trainer.seconds = {}
    trainer.compute_features_and_outputs(batch_size=4)
    for i, s in trainer.seconds.items():
        seconds[i] += s
    return trainer, seconds


def train_at2(
    trainer: Any,
    n: int,
    path: PathLike,
    extras: Optional[Dict[str, Any]] = None,
    iterations: int = 1000,
    seed: int = 0,
) -> Any:
    """AT2's head weights fitted by its trainer on the first ``n`` examples of
    :func:`at2_trainer`'s, saved to ``path`` (with the model's fingerprint).

    Args:
        trainer: From :func:`at2_trainer`.
        n (int): Training examples (the first ``n``).
        path (str or Path): The file written (AT2's format, ``torch.save``).
        extras (dict, optional): Kept in the file (budget, CPU-seconds).
        iterations (int): Adam steps (AT2's default 1000, learning rate
            1e-3, negative Pearson correlation).
        seed (int): The batches' seed.

    Returns:
        AT2's score estimator.

    Raises:
        ValueError: For ``n`` beyond the trainer's examples.
    """
    if not 1 <= n <= len(trainer.dataset):
        raise ValueError(f"n must be 1..{len(trainer.dataset)}; got {n}")
    used = [i for i in range(n) if trainer.task_datas[i]["num_targets"] > 0]
    if not used:
        raise ValueError(f"none of the first {n} examples has a response")
    np.random.seed(seed)
    torch.manual_seed(seed)
    estimator = trainer.train(
        num_iterations=iterations,
        batch_size=len(used),  # each step: every example once (no replacement)
        train_indices=used,
        device="cpu",
        print_every=iterations,
    )
    meta = dict(extras or {}, model=model_fingerprint(trainer.model), n=n)
    meta.setdefault("model_name", str(getattr(trainer.model, "name_or_path", "")))
    path = Path(path)
    estimator.save(path, extras=meta)
    return estimator
