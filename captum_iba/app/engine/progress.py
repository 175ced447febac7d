"""Progress of a corpus run: one bar per rank; rank 0's shows the whole run.

Rank 0 counts the rows every rank appends to its shard (it reads only the
bytes added since its last look), so its bar covers all processes without any
extra communication; the other ranks show their own share. The bar moves as
each method finishes a unit and says which unit and method run now. When
the output is no terminal (piped, or written to a log), where a bar shows
nothing, plain lines say the same: one when scoring starts, then at most one
every :data:`LINE_EVERY` seconds, and the last.

A unit can run for minutes (a causal LM's methods and its degradation test on
one batch of prompts): while one runs, a heartbeat thread says it still works
- a line (or, beside a bar, the time spent in it) whenever :data:`LINE_EVERY`
seconds have passed with nothing said - so the output never falls silent for
longer.
"""

import sys
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, TextIO

from tqdm.auto import tqdm

from captum_iba.app.engine.dist import World

__all__ = ["LINE_EVERY", "Progress"]

#: A shard's record of a scored instance, and of one a method refused (done
#: too), as the shard writes them.
_ROW, _FAILED = b'"kind": "row"', b'"kind": "failed"'
#: Seconds between two plain progress lines (output that is no terminal), and
#: at most between two signs of life while a unit runs.
LINE_EVERY = 10.0
#: Seconds the heartbeat thread sleeps between two looks at the clock.
WAKE_EVERY = 1.0


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min"


class Progress:
    """A tqdm bar per rank (plain lines without a terminal), counted in
    scores (one instance by one method), labelled in plain words.

    Every rank must build it at the same point (it gathers the ranks' shares).

    Args:
        out (Path): The run's folder.
        world (World): This process's place.
        total (int): Attributions of the whole run.
        todo (dict): This rank's units to do -> their methods.
        sizes (Sequence[int]): Instances per unit.
        stream (TextIO, optional): Where bars and lines go (default stderr).
        clock (callable, optional): Seconds, monotonic (default
            :func:`time.perf_counter`; tests pass a fake one).
    """

    def __init__(
        self,
        out: Path,
        world: World,
        total: int,
        todo: Dict[int, List[str]],
        sizes: Sequence[int],
        stream: Optional[TextIO] = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        own = sum(sizes[u] * len(ms) for u, ms in todo.items())
        shares = world.gather(own)
        self._main = world.is_main
        self._folder = out / "shards"
        self._offsets: Dict[Path, int] = {}
        self._new = 0
        self._stream = stream or sys.stderr
        self._units = {u: i + 1 for i, u in enumerate(todo)}
        self._clock = clock
        self._start = clock()
        self._last_line = -LINE_EVERY
        self._now: Optional[str] = None  # the unit and method running
        self._since = 0.0
        self._stop = threading.Event()
        self._beat: Optional[threading.Thread] = None
        if self._main:
            self._poll()  # skip what is on disk already
            self._new = 0
            every = f" ({world.size} processes)" if world.size > 1 else ""
            self.total, initial = total, total - sum(shares)
            desc = f"instances x methods scored{every}"
        else:
            self.total, initial = own, 0
            desc = f"scored by process {world.rank}"
        self._todo, self._count = self.total - initial, initial
        self.bar = tqdm(
            total=self.total,
            initial=initial,
            desc=desc,
            unit="score",
            disable=None,  # no bar without a terminal: the lines below
            position=0 if self._main else world.rank,
            file=self._stream,
        )
        self._lines = bool(getattr(self.bar, "disable", False)) and self._todo > 0
        if self._lines:
            self._say(
                f"scoring {self._todo} of {self.total} instances x methods "
                f"({len(todo)} unit(s) here); a line at least every "
                f"{LINE_EVERY:.0f} s"
            )

    def _say(self, text: str) -> None:
        print(f"[captum_iba] {text}", file=self._stream, flush=True)

    def _poll(self) -> int:
        """Rows appended to any shard since the last look."""
        found = 0
        for path in sorted(self._folder.glob("rank-*.jsonl")):
            start = self._offsets.get(path, 0)
            with open(path, "rb") as fh:
                fh.seek(start)
                data = fh.read()
            end = data.rfind(b"\n") + 1
            found += data[:end].count(_ROW) + data[:end].count(_FAILED)
            self._offsets[path] = start + end
        self._new += found
        return found

    def _elapsed(self) -> float:
        return self._clock() - self._start

    def working(self, unit: int, method: str) -> None:
        """This rank starts ``method`` on ``unit`` (said beside the bar); the
        heartbeat (:meth:`beat`) says it still works until :meth:`update`."""
        what = f"unit {self._units.get(unit, '?')} of {len(self._units)}: {method}"
        self.bar.set_postfix_str(what, refresh=True)
        self._now, self._since = what, self._elapsed()
        if self._lines and self._count == self.total - self._todo:
            self._say(f"working on {what}")  # the first: said at once
            self._last_line = self._since
        if self._beat is None:
            self._beat = threading.Thread(
                target=self._beating, name="captum-iba-progress", daemon=True
            )
            self._beat.start()

    def _beating(self) -> None:
        while not self._stop.wait(WAKE_EVERY):
            self.beat()

    def beat(self) -> None:
        """A sign of life when :data:`LINE_EVERY` seconds passed with nothing
        said while a unit runs: a line (without a terminal) or the time spent
        in the unit beside the bar. Called by the heartbeat thread."""
        what, now = self._now, self._elapsed()
        if what is None or now - self._last_line < LINE_EVERY:
            return
        self._last_line = now
        inside = _duration(now - self._since)
        if self._lines:
            self._say(
                f"still working on {what} ({inside} in it); {self._count} of "
                f"{self.total} instances x methods scored, {_duration(now)} so far"
            )
        else:
            self.bar.set_postfix_str(f"{what} ({inside} in it)", refresh=True)

    def update(self, rows: int) -> None:
        """This rank appended ``rows`` rows."""
        self._now = None
        added = self._poll() if self._main else rows
        self._count += added
        self.bar.update(added)
        if not self._lines:
            return
        now = self._elapsed()
        if now - self._last_line < LINE_EVERY and self._count < self.total:
            return
        self._last_line = now
        done = self._count - (self.total - self._todo)
        left = ""
        if 0 < done < self._todo:
            left = f", about {_duration(now / done * (self._todo - done))} left"
        self._say(
            f"{self._count} of {self.total} instances x methods scored "
            f"({100 * self._count / max(self.total, 1):.0f} %), "
            f"{_duration(now)} so far{left}"
        )

    def new_rows(self) -> int:
        """Rank 0: rows all ranks appended during this run (after they finished)."""
        self._poll()
        return self._new

    def close(self) -> None:
        """Stop the heartbeat and close the bar."""
        self._now = None
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        self.bar.close()
