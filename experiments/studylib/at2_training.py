"""AT2's head weights trained by its own trainer (``at2.AT2Trainer``) on
given contexts, for :mod:`~captum_iba_lab.at2`.

:func:`at2_trainer` hands the package our contexts (a task of its own over
our prompt and sources), lets it generate each response (greedy) and run
its random ablations (each source kept with probability 1/2, removed by the
attention mask), recording its features (the attention the response pays
to each source, per head) and outcomes (the response's logit-probability);
its store under ``work_dir`` makes a run resumable. :func:`train_at2` fits
the weights on ``n`` ablated examples (AT2's defaults: 1000 Adam steps,
learning rate 1e-3, negative Pearson correlation) and saves them in the
package's format with the model's fingerprint
(:func:`~captum_iba_lab.at2.load_at2` checks it). The response is one
target (``split_target_by=None``: the package's sentence splitter needs an
NLTK download, which fails offline).

Study machinery (``experiments/train_at2.py`` runs it; the package only
reads the weights it saves), so it lives beside the studies, not in
``captum_iba``.
"""

import json
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch
from captum_iba_lab.at2 import (
    PathLike,
    _task_class,
    import_at2,
    layout,
)
from captum_iba_lab.at2_model import (
    at2_model,
    check_window,
    model_as_found,
    model_type_of,
)
from captum_iba_lab.at2_taught import save_at2_weights

from captum_iba.attr.llm_batch import _pad_id

__all__ = ["AblationPlan", "at2_trainer", "check_store", "train_at2", "wall_seconds"]

#: AT2's batch of examples a training step (its trainer's default, sampled
#: without replacement); a budget below it trains on all its examples a step.
AT2_BATCH = 512


@dataclass(frozen=True)
class AblationPlan:
    """Which examples :func:`at2_trainer` ablates, and how many responses and
    ablations a pass.

    Attributes:
        limit (int, optional): Ablate the first ``limit`` examples only
            (default all): a store for many, trained on as it grows.
        first (int): Ablate from this example on (a second worker on the
            same store takes a later range). Default 0.
        generate_batch (int): Responses generated together (the package's
            batched generation, left-padded). A store keeps the batch size
            it was begun with: resume it with the same. Default 1.
        ablation_batch (int): Ablations run together. Default 4.
        stop_after (float, optional): Wall-seconds after which no further
            example is ablated (the store keeps those done: resume later).
    """

    limit: Optional[int] = None
    first: int = 0
    generate_batch: int = 1
    ablation_batch: int = 4
    stop_after: Optional[float] = None


def at2_trainer(
    model: Any,
    tokenizer: Any,
    examples: Sequence[Tuple[Sequence[str], str]],
    work_dir: PathLike,
    ablations: int = 32,
    max_new_tokens: int = 24,
    plan: Optional[AblationPlan] = None,
    chat: bool = True,
    suffix: str = "",
    laid: bool = False,
) -> Tuple[Any, List[float]]:
    """AT2's trainer over ``examples`` with every example's responses
    generated and the ablations of ``plan``'s examples run (resumable: the
    package caches both under ``work_dir``, made for all ``examples``).

    Args:
        model: A causal LM of a family AT2 knows.
        tokenizer: Its fast tokenizer (with a chat template for ``chat``).
        examples (sequence): ``(sources, query)`` pairs (:func:`layout`),
            or with ``laid`` ``(prompt, spans)`` pairs: prompts laid out
            already and their sources' characters (a prompt task's prompt
            and its content's words).
        work_dir (str or Path): The package's store (generations, features).
        ablations (int): Random ablations per example. Default 32.
        max_new_tokens (int): The longest response (greedy). Default 24.
        plan (AblationPlan, optional): Which examples to ablate and how many
            responses and ablations a pass (default :class:`AblationPlan`'s:
            all, one response and four ablations a pass).
        chat (bool): The prompts as user turns of the chat template (the
            package's way); False: as plain text (a base model, as
            :func:`~captum_iba_lab.at2.at2_token_scores` reads them).
            Default True.
        suffix (str): After each prompt (a base model's ``"\\nAnswer:"``).
        laid (bool): ``examples`` are ``(prompt, spans)`` pairs. Default
            False.

    Raises:
        ValueError: For ``chat`` without a chat template, a model family AT2
            does not know, a prompt and response longer than the model's
            sliding window.

    Returns:
        (trainer, list of float): The trainer and each example's CPU-seconds
        (its response and ablations, whenever they were run; kept in
        ``work_dir/cpu_seconds.json``, and the wall-seconds in
        ``wall_seconds.json``, :func:`wall_seconds`; 0 for an example not
        ablated; a batch's response time shared by its examples).
    """
    from datasets import Dataset

    kind = model_type_of(model)
    if chat and not getattr(tokenizer, "chat_template", None):
        raise ValueError(
            "chat=True: AT2 reads a prompt as a user turn of the chat template; "
            "this tokenizer has none (a base model: chat=False)"
        )
    at2 = import_at2()
    if laid:
        laid_out = [(prompt + suffix, spans) for prompt, spans in examples]
    else:
        laid_out = [layout(sources, query, suffix) for sources, query in examples]
    for prompt, _ in laid_out:  # the longest text: the prompt and a full response
        check_window(model, len(tokenizer(prompt)["input_ids"]) + max_new_tokens)
    layers, heads = model.config.num_hidden_layers, model.config.num_attention_heads
    task_class = _task_class(at2)
    kwargs = dict(at2.tasks.base.DEFAULT_GENERATE_KWARGS, max_new_tokens=max_new_tokens)
    rows = [{"prompt": p, "spans": [list(s) for s in spans]} for p, spans in laid_out]
    trainer = at2.AT2Trainer(
        save_path=Path(work_dir),
        dataset=Dataset.from_list(rows),
        model=at2_model(model),
        tokenizer=tokenizer,
        task_from_example=lambda row, m, t: task_class(
            row["prompt"], row["spans"], m, t, chat=chat, generate_kwargs=kwargs
        ),
        feature_extractor=at2.AT2FeatureExtractor(layers, heads, model_type=kind),
        split_target_by=None,
        num_masks=ablations,
    )
    plan = AblationPlan() if plan is None else plan
    record = _Clocks(Path(work_dir), len(rows), plan.first)
    with model_as_found(model), _padded(tokenizer, left=False):
        _generate(trainer, tokenizer, Path(work_dir), record, plan.generate_batch)
        end = len(rows) if plan.limit is None else min(plan.limit, len(rows))
        stop = plan.stop_after
        deadline = None if stop is None else time.perf_counter() + stop
        examples = range(plan.first, end)
        _ablate(trainer, examples, record, plan.ablation_batch, deadline)
    return trainer, record.cpu.totals()


def _generate(
    trainer: Any, tokenizer: Any, work_dir: Path, record: "_Clocks", batch: int
) -> None:
    """Every example's response, ``batch`` a job of the package's (left-padded
    where several), each job's time shared by its examples."""
    n = len(trainer.dataset)
    jobs = -(-n // batch)
    check_store(work_dir, n, batch)
    for job in range(jobs):
        record.start()
        with torch.no_grad(), _padded(tokenizer, left=batch > 1):
            trainer.generate(job, jobs, batch_size=batch)
        record.stop(range(job * batch, min(n, (job + 1) * batch)), "response")


class _Seconds:
    """Each example's seconds of one clock (its response, its ablations),
    kept in JSON files beside the package's store as they are spent (one per
    worker: ``<clock>_seconds.json``, ``<clock>_seconds_<first>.json``): a
    resumed run reads the earlier runs'."""

    def __init__(
        self, folder: Path, n: int, first: int = 0, clock: str = "cpu"
    ) -> None:
        self.folder, self.n, self.clock = folder, n, clock
        self.path = folder / (
            f"{clock}_seconds_{first}.json" if first else f"{clock}_seconds.json"
        )
        self.data = json.loads(self.path.read_text()) if self.path.exists() else {}

    def add(self, i: int, part: str, seconds: float) -> None:
        known = self.data.get(str(i), {})
        if seconds > 0.5 or part not in known:  # not a cached example's ~0 s
            self.data.setdefault(str(i), {})[part] = seconds
            self.path.write_text(json.dumps(self.data))

    def totals(self) -> List[float]:
        merged: Dict[str, Dict[str, float]] = {}
        for path in sorted(self.folder.glob(f"{self.clock}_seconds*.json")):
            for i, parts in json.loads(path.read_text()).items():
                mine = merged.setdefault(i, {})
                for part, spent in parts.items():  # a cached call spent ~0
                    mine[part] = max(spent, mine.get(part, 0.0))
        return [sum(merged.get(str(i), {}).values()) for i in range(self.n)]


class _Clocks:
    """CPU- and wall-seconds (:class:`_Seconds` of each), a step's time
    shared by the examples it served."""

    def __init__(self, folder: Path, n: int, first: int = 0) -> None:
        self.cpu = _Seconds(folder, n, first, "cpu")
        self.wall = _Seconds(folder, n, first, "wall")

    def start(self) -> None:
        self.began = (time.process_time(), time.perf_counter())

    def stop(self, examples: range, part: str) -> None:
        cpu, wall = time.process_time(), time.perf_counter()
        for i in examples:
            self.cpu.add(i, part, (cpu - self.began[0]) / len(examples))
            self.wall.add(i, part, (wall - self.began[1]) / len(examples))


def check_store(work_dir: PathLike, n: int, generate_batch: int) -> None:
    """Refuse a store of ``n`` examples begun with another ``generate_batch``
    (the package names its response files ``<job>_of_<jobs>.json`` and reads
    them all), before any model loads.

    Raises:
        ValueError: Naming the store and the batch it was begun with.
    """
    jobs = -(-n // generate_batch)
    folder = Path(work_dir) / "generations"
    found = sorted(p.name for p in folder.glob("*.json")) if folder.is_dir() else []
    other = [name for name in found if not name.endswith(f"_of_{jobs}.json")]
    if other:
        raise ValueError(
            f"{work_dir} was begun with another generate_batch (its response "
            f"files: {other[0]}, ...; {generate_batch} makes {jobs} jobs): "
            "resume it with the batch it was begun with, or use another store"
        )


@contextmanager
def _padded(tokenizer: Any, left: bool) -> Iterator[None]:
    """The tokenizer padding on the left while ``left`` (the package's
    batched generation reads each prompt as ending where the batch's does),
    else on the right (its ablations read the response's positions from the
    start), with a pad token (``llm_batch``'s rule: its own, else EOS); its
    own side and pad token restored afterwards."""
    side, pad = tokenizer.padding_side, tokenizer.pad_token
    tokenizer.padding_side = "left" if left else "right"
    if pad is None:
        tokenizer.pad_token_id = _pad_id(tokenizer)
    try:
        yield
    finally:
        tokenizer.padding_side = side
        if pad is None:
            tokenizer.pad_token = None


def wall_seconds(work_dir: PathLike, n: int) -> List[float]:
    """Each of the store's ``n`` examples' wall-seconds (its response and
    ablations; 0 where none was recorded)."""
    return _Seconds(Path(work_dir), n, clock="wall").totals()


def _ablate(
    trainer: Any,
    examples: range,
    record: _Clocks,
    batch_size: int = 4,
    deadline: Optional[float] = None,
) -> None:
    """The package's ablations and features of ``examples`` not yet in its
    store (its ``compute_features_and_outputs`` as one job, the same store,
    over a range of it), ``batch_size`` ablations a pass, none begun after
    ``deadline`` (``time.perf_counter``)."""
    features, outputs, completed, starts = trainer.get_store_for_job(0, 1)
    for i in examples:
        if completed[i]:
            continue
        if deadline is not None and time.perf_counter() > deadline:
            return
        record.start()
        found, outcomes = trainer.compute_features_and_outputs_for_example(
            i, batch_size
        )
        end = starts[i] + trainer.task_datas[i]["num_targets"]
        features[starts[i] : end], outputs[starts[i] : end] = found, outcomes
        features.flush()
        outputs.flush()
        completed[i] = True
        completed.flush()
        record.stop(range(i, i + 1), "ablations")


def train_at2(
    trainer: Any,
    n: int,
    path: PathLike,
    extras: Optional[Dict[str, Any]] = None,
    iterations: int = 1000,
    seed: int = 0,
    device: str = "cpu",
) -> Any:
    """AT2's head weights fitted by its trainer on ``n`` examples of
    :func:`at2_trainer`'s (the first ``n`` ablated, in order: with two
    workers, some of each range), saved to ``path`` (with the model's
    fingerprint).
    ``n = 0`` saves the package's starting point untrained: every head the
    same weight (the attention averaged over heads, the paper's baseline).

    Args:
        trainer: From :func:`at2_trainer`.
        n (int): Training examples (0: none).
        path (str or Path): The file written (AT2's format, ``torch.save``).
        extras (dict, optional): Kept in the file (budget, CPU-seconds).
        iterations (int): Adam steps (AT2's default 1000, learning rate
            1e-3, negative Pearson correlation), each on a batch of
            :data:`AT2_BATCH` examples (AT2's default) or all ``n`` if fewer.
        seed (int): The batches' seed.
        device (str): Where the fit runs (the weights are saved from the
            CPU). Default ``"cpu"``.

    Returns:
        AT2's score estimator.

    Raises:
        ValueError: For ``n`` beyond the trainer's examples or those ablated.
    """
    if not 0 <= n <= len(trainer.dataset):
        raise ValueError(f"n must be 0..{len(trainer.dataset)}; got {n}")
    if n == 0:
        at2 = import_at2()
        estimator = at2.AT2ScoreEstimator(trainer.feature_extractor)
        estimator.finalize_parameters()  # 1 / heads each, as training starts
        return save_at2_weights(estimator, trainer.model, path, dict(extras or {}, n=0))
    done = [
        i
        for i in range(len(trainer.dataset))
        if trainer.is_features_and_outputs_completed(i)
    ][:n]
    if len(done) < n:
        raise ValueError(
            f"only {len(done)} examples have their ablations; {n} asked "
            "(at2_trainer's limit)"
        )
    used = [i for i in done if trainer.task_datas[i]["num_targets"] > 0]
    if not used:
        raise ValueError(f"none of the {n} examples has a response")
    np.random.seed(seed)
    torch.manual_seed(seed)
    estimator = trainer.train(
        num_iterations=iterations,
        batch_size=min(len(used), AT2_BATCH),  # n <= 512: every example a step
        train_indices=used,
        device=device,
        print_every=iterations,
    )
    return save_at2_weights(
        estimator.cpu(), trainer.model, path, dict(extras or {}, n=n)
    )


def at2_fit_path(weights: PathLike) -> Path:
    """Where ``experiments/train_at2.py`` writes the statistics of the fit
    that made ``weights`` (its examples, ablations, CPU- and wall-seconds,
    the CPU's kind): the weights' file with the suffix ``.json``."""
    return Path(weights).with_suffix(".json")
