"""The training loop of a fine-tune: AdamW, the linear schedule, the steps.

:func:`train_steps` trains a model in place for a fixed number of
optimisation steps (:func:`planned_steps`) with AdamW (:func:`adamw`) and a
linear warm-up and decay, over length-bucketed batches; it says how long the
run takes on this machine after the first steps (:func:`estimate_line`), says
it again when the machine's speed changes (:class:`Estimate`), and stops
with :class:`FineTuneTimeoutError` past a time guard, never silently.
:mod:`~captum_iba.app.finetune.train` builds the run around it.
"""

import math
import random
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import torch
from tqdm.auto import tqdm

from captum_iba.app.finetune.batches import bucketed_batches, collate, on_terminal
from captum_iba.app.finetune.recipes import FineTuneOptions

__all__ = [
    "ESTIMATE_AFTER",
    "Estimate",
    "FineTuneTimeoutError",
    "TrainingStats",
    "adamw",
    "estimate_line",
    "planned_steps",
    "train_steps",
]

# Parameters without weight decay (matched by the end of their names).
_NO_DECAY = ("bias", "LayerNorm.weight", "layer_norm.weight", "norm.weight")


class FineTuneTimeoutError(RuntimeError):
    """A fine-tune ran past its time guard (``max_seconds``); nothing was saved."""


@dataclass
class TrainingStats:
    """What the training loop did.

    Attributes:
        planned (int): The steps of the run (:func:`planned_steps`).
        steps (int): The steps taken.
        seen (int): The training examples seen (with repeats).
        epochs_done (float): ``steps`` in epochs.
        seconds (float): Wall seconds of the loop.
    """

    planned: int
    steps: int = 0
    seen: int = 0
    epochs_done: float = 0.0
    seconds: float = 0.0


def planned_steps(n_train: int, options: FineTuneOptions) -> int:
    """The run's number of optimisation steps: ``steps``, else from ``epochs``.

    Args:
        n_train (int): Training examples.
        options (FineTuneOptions): The run's settings.

    Returns:
        int: ``options.steps`` when given, else ``ceil(epochs x steps per
        epoch)`` (at least 1).
    """
    if options.steps is not None:
        return int(options.steps)
    per_epoch = math.ceil(n_train / options.batch_size)
    return max(1, int(math.ceil(per_epoch * options.epochs)))


def _check_guard(
    run: TrainingStats, elapsed: float, max_seconds: Optional[float], name: str
) -> None:
    """Raises :class:`FineTuneTimeoutError` once ``elapsed`` passes the guard."""
    if max_seconds is None or elapsed <= max_seconds:
        return
    eta = elapsed / max(run.steps, 1) * (run.planned - run.steps)
    raise FineTuneTimeoutError(
        f"fine-tuning {name!r} passed its time guard of {max_seconds:.0f} s after "
        f"{run.steps} of {run.planned} steps (about {eta / 60:.0f} more minutes "
        "needed); nothing was saved. The recipe is a number of steps, so the "
        "model is the same on any machine: raise the guard (max_seconds= or "
        "$CAPTUM_IBA_FINETUNE_MAX_S), run when the CPU is less busy, or pass a "
        "fine-tuned model (--model)."
    )


#: After how many steps the time of the whole run is estimated (the first
#: step, slower while memory is allocated, is left out of the estimate).
ESTIMATE_AFTER = 10

#: A step's fixed cost (the optimiser's update, the batch's set-up) in
#: padded positions of its batch: a step of a batch padded to ``w`` positions
#: takes about ``(STEP_OVERHEAD + w)`` times one unit (MiniLM-L6, batches of
#: 16, two CPU threads: 0.18 s at 8 positions, 0.45 s at 40). Issue 90,
#: item 2: SST-2's first ten batches are padded to 24 positions on average,
#: its 900 to 14, so an estimate from their seconds per step said 18 min
#: where the run took 10.
STEP_OVERHEAD = 13.0


def _per_step(
    step_seconds: List[float],
    widths: Optional[List[int]] = None,
    mean_width: Optional[float] = None,
) -> float:
    """The seconds of a step of the whole run, from the steps after the
    first: their median (a step slowed by a burst of load, or by warming up,
    weighs little), and, given each step's padded width and the run's mean
    one, per unit of ``STEP_OVERHEAD + width`` (a run's first batches are no
    sample of its lengths)."""
    steady = step_seconds[1:] or step_seconds
    if widths is None or mean_width is None:
        return statistics.median(steady)
    sized = widths[1:] if len(step_seconds) > 1 else widths
    unit = statistics.median(s / (STEP_OVERHEAD + w) for s, w in zip(steady, sized))
    return unit * (STEP_OVERHEAD + mean_width)


def estimate_line(
    step_seconds: List[float],
    planned: int,
    widths: Optional[List[int]] = None,
    mean_width: Optional[float] = None,
) -> str:
    """The one line saying how long the training takes on this machine.

    Args:
        step_seconds (list[float]): Seconds of each step taken so far.
        planned (int): Steps of the whole run.
        widths (list[int], optional): The padded width of each step's batch.
        mean_width (float, optional): The mean padded width of the run's
            batches: with ``widths``, a step's time is scaled to it
            (:data:`STEP_OVERHEAD`).

    Returns:
        str: The estimate of the remaining time, from the median step after
        the first, and what it depends on.
    """
    per_step = _per_step(step_seconds, widths, mean_width)
    left = per_step * (planned - len(step_seconds))
    when = _when(left)
    sized = " at the run's mean batch length," if mean_width is not None else ""
    return (
        f"[captum_iba] Training time left on this machine: {when} ({per_step:.2f} "
        f"s per step{sized} over steps 2-{len(step_seconds)}; it depends on the "
        f"CPU, on how busy it is and on torch's threads, {torch.get_num_threads()} "
        "here)."
    )


#: How often the estimate is checked (steps), over how many recent steps the
#: speed is measured, by how much (relative, and in seconds of the time left)
#: it must have changed, and at how many checks in a row (the same way), to be
#: said again: a machine whose load comes and goes is not re-estimated each
#: time it does (issue 53: 24 revisions in one run, "busier?" and "less busy?"
#: in turn).
REVISE_EVERY, REVISE_WINDOW, REVISE_RATIO, REVISE_SECONDS = 10, 100, 0.25, 60.0
REVISE_SUSTAIN = 10


def _when(seconds: float) -> str:
    minutes = seconds / 60
    return f"about {minutes:.0f} min" if minutes >= 1.5 else f"about {seconds:.0f} s"


def _mean(values: List[float]) -> float:
    return sum(values) / len(values)


@dataclass
class Estimate:
    """The last estimate said: at which step, from which speed, and the change
    of speed seen since (not yet said).

    Attributes:
        step (int): The steps taken when it was said.
        per_step (float): The seconds per step it assumed.
        since (int or None): The step from which the speed has differed, the
            same way, at every check since; None when it has not.
        direction (int): +1 slower, -1 faster, 0 none.
    """

    step: int
    per_step: float
    since: Optional[int] = None
    direction: int = 0

    @classmethod
    def first(
        cls,
        step_seconds: List[float],
        widths: Optional[List[int]] = None,
        mean_width: Optional[float] = None,
    ) -> "Estimate":
        """The estimate of :func:`estimate_line` (steps after the first)."""
        return cls(len(step_seconds), _per_step(step_seconds, widths, mean_width))

    def _changed(self, per_step: float, left: int) -> int:
        """+1 or -1 when ``per_step`` differs from the estimate's enough to be
        said (:data:`REVISE_RATIO`, :data:`REVISE_SECONDS`), else 0."""
        change = abs(per_step - self.per_step)
        if change < REVISE_RATIO * self.per_step or change * left < REVISE_SECONDS:
            return 0
        return 1 if per_step > self.per_step else -1

    def revised(self, step_seconds: List[float], planned: int) -> Optional[str]:
        """A line revising the estimate when the speed of the last
        :data:`REVISE_WINDOW` steps has differed from the estimate's, the same
        way, by more than :data:`REVISE_RATIO` and :data:`REVISE_SECONDS`, at
        :data:`REVISE_SUSTAIN` checks in a row (a machine that became busy, or
        idle, and stayed so); None otherwise. The new estimate is the speed
        of the steps since the change was first seen. Call it every
        :data:`REVISE_EVERY` steps.

        Args:
            step_seconds (list[float]): Seconds of each step taken so far.
            planned (int): Steps of the whole run.

        Returns:
            str or None: The line.
        """
        done = len(step_seconds)
        window = step_seconds[max(1, done - REVISE_WINDOW) :]
        if done - self.step < REVISE_EVERY or done >= planned:
            return None
        left = planned - done
        direction = self._changed(_mean(window), left)
        if direction == 0 or direction != self.direction:
            self.direction = direction
            self.since = done - REVISE_EVERY if direction else None
            return None
        streak = (done - self.since) // REVISE_EVERY
        if self.since is None or streak < REVISE_SUSTAIN:
            return None
        recent = step_seconds[self.since :]
        per_step = _mean(recent)
        said = _when(self.per_step * left)
        load = "busier" if direction > 0 else "less busy"
        line = (
            f"[captum_iba] Training time left, revised: {_when(per_step * left)} "
            f"(the last {len(recent)} steps took {per_step:.2f} s each; the "
            f"estimate at step {self.step} assumed {self.per_step:.2f} s, "
            f"{said} from here: the machine got {load})"
        )
        self.step, self.per_step, self.since, self.direction = done, per_step, None, 0
        return line


def adamw(model: Any, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW, without weight decay on biases and norm weights."""
    params = list(model.named_parameters())
    groups = [
        {
            "params": [p for n, p in params if not n.endswith(_NO_DECAY)],
            "weight_decay": weight_decay,
        },
        {
            "params": [p for n, p in params if n.endswith(_NO_DECAY)],
            "weight_decay": 0.0,
        },
    ]
    return torch.optim.AdamW(groups, lr=lr)


def _lr_schedule(
    optimizer: torch.optim.Optimizer, warmup_ratio: float, planned: int, step: int = 0
) -> Any:
    """Linear warm-up then decay to zero at step ``planned``, from ``step`` on."""
    from transformers import get_linear_schedule_with_warmup

    warmup = int(round(warmup_ratio * planned))
    if step == 0:
        return get_linear_schedule_with_warmup(optimizer, warmup, planned)
    return get_linear_schedule_with_warmup(
        optimizer, min(warmup, planned), planned, last_epoch=step - 1
    )


def _train_step(
    model: Any, optimizer: torch.optim.Optimizer, scheduler: Any, batch: Dict
) -> torch.Tensor:
    """One optimizer step (gradient norm clipped to 1); returns the loss."""
    loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return loss


def train_steps(
    model: Any,
    optimizer: torch.optim.Optimizer,
    feats: List[Dict[str, Any]],
    pad_id: int,
    rng: random.Random,
    options: FineTuneOptions,
    name: str,
    progress: bool,
    max_seconds: Optional[float] = None,
) -> TrainingStats:
    """Trains ``model`` in place for the planned number of steps.

    Args:
        model (Any): The classifier (put in training mode).
        optimizer (torch.optim.Optimizer): From :func:`adamw`.
        feats (list[dict]): The encoded training examples.
        pad_id (int): The tokenizer's padding id.
        rng (random.Random): The seeded batch order.
        options (FineTuneOptions): The run's settings.
        name (str): The corpus, for the bar and messages.
        progress (bool): Show the bar and the time estimate (plain lines,
            one each tenth of the steps, when stderr is no terminal).
        max_seconds (float, optional): The time guard.

    Returns:
        TrainingStats: What the loop did.

    Raises:
        FineTuneTimeoutError: Past ``max_seconds``.
    """
    batch_size = options.batch_size
    lengths = [len(f["input_ids"]) for f in feats]
    run = TrainingStats(planned=planned_steps(len(feats), options))
    scheduler = _lr_schedule(optimizer, options.warmup_ratio, run.planned)
    model.train()
    train_start = time.time()
    # a bar on a terminal; logged to a file, plain lines (no carriage returns)
    lines = progress and not on_terminal(sys.stderr)
    every = max(1, run.planned // 10)
    bar = tqdm(
        total=run.planned,
        desc=f"fine-tuning on {name} (once)",
        unit="step",
        smoothing=0.05,  # the ETA follows the mean speed, not the last step
        disable=not progress or lines,
    )
    step_seconds: List[float] = []
    widths: List[int] = []
    estimate: Optional[Estimate] = None
    while run.steps < run.planned:
        batches = bucketed_batches(lengths, batch_size, rng)
        mean_width = _mean([max(lengths[i] for i in idx) for idx in batches])
        for idx in batches:
            if run.steps >= run.planned:
                break
            batch = collate([feats[i] for i in idx], pad_id)
            widths.append(int(batch["input_ids"].shape[1]))
            run.seen += len(idx)
            started = time.perf_counter()
            loss = _train_step(model, optimizer, scheduler, batch)
            step_seconds.append(time.perf_counter() - started)
            run.steps += 1
            bar.update(1)
            if lines and (run.steps % every == 0 or run.steps == run.planned):
                print(
                    f"[captum_iba] fine-tuning on {name} (once): step {run.steps} of "
                    f"{run.planned}, loss {loss.item():.3f}",
                    file=sys.stderr,
                    flush=True,
                )
            if progress and run.steps == min(ESTIMATE_AFTER, run.planned - 1):
                said = estimate_line(step_seconds, run.planned, widths, mean_width)
                bar.write(said)
                estimate = Estimate.first(step_seconds, widths, mean_width)
            elif estimate is not None and run.steps % REVISE_EVERY == 0:
                line = estimate.revised(step_seconds, run.planned)
                if line:
                    bar.write(line)
            if run.steps % 10 == 0:
                bar.set_postfix(
                    loss=f"{loss.item():.3f}",
                    lr=f"{scheduler.get_last_lr()[0]:.1e}",
                )
            _check_guard(run, time.time() - train_start, max_seconds, name)
    bar.close()
    run.seconds = time.time() - train_start
    run.epochs_done = run.steps / math.ceil(len(feats) / batch_size)
    return run
