"""Progress bars of a corpus run: one per rank; rank 0's shows the whole run.

Rank 0 counts the rows every rank appends to its shard (it reads only the
bytes added since its last look), so its bar covers all processes without any
extra communication; the other ranks show their own share.
"""

from pathlib import Path
from typing import Dict, List, Sequence

from tqdm.auto import tqdm

from captum_iba.app.engine.dist import World

__all__ = ["Progress"]

_ROW = b'"kind": "row"'


class Progress:
    """A tqdm bar per rank, counted in scores (one instance by one method),
    labelled in plain words.

    Every rank must build it at the same point (it gathers the ranks' shares).

    Args:
        out (Path): The run's folder.
        world (World): This process's place.
        total (int): Attributions of the whole run.
        todo (dict): This rank's units to do -> their methods.
        sizes (Sequence[int]): Instances per unit.
    """

    def __init__(
        self,
        out: Path,
        world: World,
        total: int,
        todo: Dict[int, List[str]],
        sizes: Sequence[int],
    ) -> None:
        own = sum(sizes[u] * len(ms) for u, ms in todo.items())
        shares = world.gather(own)
        self._main = world.is_main
        self._folder = out / "shards"
        self._offsets: Dict[Path, int] = {}
        self._new = 0
        if self._main:
            self._poll()  # skip what is on disk already
            self._new = 0
            every = f" ({world.size} processes)" if world.size > 1 else ""
            self.bar = tqdm(
                total=total,
                initial=total - sum(shares),
                desc=f"instances x methods scored{every}",
                unit="score",
                disable=None,
                position=0,
            )
        else:
            self.bar = tqdm(
                total=own,
                desc=f"scored by process {world.rank}",
                unit="score",
                disable=None,
                position=world.rank,
            )

    def _poll(self) -> int:
        """Rows appended to any shard since the last look."""
        found = 0
        for path in sorted(self._folder.glob("rank-*.jsonl")):
            start = self._offsets.get(path, 0)
            with open(path, "rb") as fh:
                fh.seek(start)
                data = fh.read()
            end = data.rfind(b"\n") + 1
            found += data[:end].count(_ROW)
            self._offsets[path] = start + end
        self._new += found
        return found

    def update(self, rows: int) -> None:
        """This rank appended ``rows`` rows."""
        self.bar.update(self._poll() if self._main else rows)

    def new_rows(self) -> int:
        """Rank 0: rows all ranks appended during this run (after they finished)."""
        self._poll()
        return self._new

    def close(self) -> None:
        """Close the bar."""
        self.bar.close()
