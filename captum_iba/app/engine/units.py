"""The work of a corpus run, cut into units that do not depend on the processes.

The corpus is put in its one fixed order
(:func:`~captum_iba.evaluation.corpus_order`) and cut into units of
``batch_size`` consecutive instances, dealt to the ranks in a snake order
(:func:`rank_units`). A
unit is scored as one batch, so every number it gives is the same whichever
rank computes it, in whichever run: CPU float results depend on the batch's
composition (its padding width and size), and the units fix that composition
for any number of processes.
"""

from typing import Sequence

from captum_iba.evaluation.loop import work_units

__all__ = ["rank_units", "work_units"]


def rank_units(n_units: int, rank: int, world_size: int) -> Sequence[int]:
    """The units of ``rank`` among ``world_size`` processes, dealt in a snake
    order: units ``0 .. N-1`` to ranks ``0 .. N-1``, the next ``N`` to ranks
    ``N-1 .. 0``, and so on. The units grow longer along the corpus order, so
    a plain round robin would give the last rank the longest unit of every
    round; the snake balances the ranks' work.

    Args:
        n_units (int): The number of units.
        rank (int): This process's rank.
        world_size (int): The number of processes ``N``.

    Returns:
        Sequence[int]: The unit indices of ``rank``, ascending.
    """

    def owner(u: int) -> int:
        position = u % world_size
        forward = (u // world_size) % 2 == 0
        return position if forward else world_size - 1 - position

    return [u for u in range(n_units) if owner(u) == rank]
