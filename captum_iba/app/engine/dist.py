"""The processes of a corpus run: ``torch.distributed``, as launchers start it.

One process is the default. Under ``torchrun`` (and ``accelerate launch``,
which runs it) the environment holds ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``MASTER_ADDR`` and ``MASTER_PORT``; under Slurm's ``srun`` it holds
``SLURM_PROCID``, ``SLURM_STEP_NUM_TASKS`` and ``SLURM_LOCALID``, and the
rendezvous address is ``MASTER_ADDR`` or the node ``srun`` was launched from
(``SLURM_LAUNCH_NODE_IPADDR``), port ``MASTER_PORT`` or one derived from the job
id. The process group is initialised with ``env://``: NCCL with each process on
``cuda:LOCAL_RANK`` when CUDA is present, gloo on the CPU otherwise.
"""

import datetime
import os
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Tuple

import torch
import torch.distributed as dist

from captum_iba.app.errors import CLIError

__all__ = ["World", "init_world", "launch_env"]

#: How long a process waits for the others at a barrier (a rank that finishes
#: its share early waits there for the slowest): ``$CAPTUM_IBA_DIST_TIMEOUT``
#: seconds, default one week.
TIMEOUT_ENV = "CAPTUM_IBA_DIST_TIMEOUT"


def _int_env(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except ValueError:
        raise CLIError(
            f"inconsistent ranks: ${name}={env[name]!r} is no integer"
        ) from None


def launch_env(env: Optional[Mapping[str, str]] = None) -> Tuple[int, int, int, str]:
    """``(rank, world_size, local_rank, launcher)`` read from the environment.

    Args:
        env (Mapping, optional): Default ``os.environ``.

    Returns:
        tuple: ``launcher`` is ``"single"``, ``"torchrun"`` or ``"slurm"``.

    Raises:
        ~captum_iba.app.errors.CLIError:
            On inconsistent values (a rank outside the world, a world size below 1,
            ``WORLD_SIZE`` without ``RANK``, non-integers).
    """
    env = os.environ if env is None else env
    if "WORLD_SIZE" in env or "RANK" in env:
        names, launcher = ("RANK", "WORLD_SIZE", "LOCAL_RANK"), "torchrun"
    elif "SLURM_STEP_NUM_TASKS" in env and "SLURM_PROCID" in env:
        names, launcher = (
            ("SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID"),
            "slurm",
        )
    else:
        return 0, 1, 0, "single"
    missing = [n for n in names[:2] if n not in env]
    if missing:
        raise CLIError(f"inconsistent ranks: ${missing[0]} is not set ({launcher})")
    rank, size = _int_env(env, names[0]), _int_env(env, names[1])
    local = _int_env(env, names[2]) if names[2] in env else 0
    if size < 1 or not 0 <= rank < size or local < 0:
        raise CLIError(
            f"inconsistent ranks: ${names[0]}={rank}, ${names[1]}={size}, "
            f"${names[2]}={local}"
        )
    return rank, size, local, launcher


def _slurm_rendezvous(env: Mapping[str, str]) -> None:
    """``MASTER_ADDR`` / ``MASTER_PORT`` for ``env://`` under ``srun``."""
    if "MASTER_ADDR" not in os.environ:
        addr = env.get("SLURM_LAUNCH_NODE_IPADDR")
        if addr is None:
            raise CLIError("under srun, set MASTER_ADDR to the first node's address")
        os.environ["MASTER_ADDR"] = addr
    if "MASTER_PORT" not in os.environ:
        os.environ["MASTER_PORT"] = str(20000 + int(env.get("SLURM_JOB_ID", 0)) % 20000)


@dataclass
class World:
    """This process's place among the processes of a run.

    Attributes:
        rank (int): 0 .. ``size`` - 1; rank 0 merges.
        size (int): The number of processes.
        local_rank (int): The rank on this machine (its GPU index).
        device (torch.device): Where this process runs the model.
        launcher (str): ``"single"``, ``"torchrun"`` or ``"slurm"``.
    """

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    launcher: str = "single"

    @property
    def is_main(self) -> bool:
        """bool: Whether this process is rank 0."""
        return self.rank == 0

    def barrier(self) -> None:
        """Wait for every process (nothing to do alone)."""
        if self.size > 1:
            dist.barrier()

    def gather(self, value: Any) -> List[Any]:
        """Every process's ``value`` (picklable), in rank order, on every rank."""
        if self.size == 1:
            return [value]
        out: List[Any] = [None] * self.size
        dist.all_gather_object(out, value)
        return out

    def decide(self, decision: Any) -> Any:
        """Rank 0's ``decision`` on every rank (the others pass anything)."""
        if self.size == 1:
            return decision
        box = [decision if self.is_main else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def close(self) -> None:
        """Leave the process group (when one was made)."""
        if self.size > 1 and dist.is_initialized():
            dist.destroy_process_group()


def init_world(device: str = "auto", env: Optional[Mapping[str, str]] = None) -> World:
    """This process's :class:`World`, with the process group initialised.

    Args:
        device (str): ``"auto"`` (``cuda:LOCAL_RANK`` when CUDA is present, else
            the CPU) or ``"cpu"``.
        env (Mapping, optional): Default ``os.environ``.

    Returns:
        World: Call :meth:`World.close` at the end.

    Raises:
        ~captum_iba.app.errors.CLIError:
            On inconsistent launcher variables, or more processes on a machine than it
            has GPUs.
    """
    env = os.environ if env is None else env
    rank, size, local, launcher = launch_env(env)
    cuda = device != "cpu" and torch.cuda.is_available()
    if cuda and local >= torch.cuda.device_count():
        raise CLIError(
            f"LOCAL_RANK {local} but this machine has {torch.cuda.device_count()} "
            "GPU(s): start at most one process per GPU"
        )
    dev = torch.device(f"cuda:{local}") if cuda else torch.device("cpu")
    if size > 1:
        if launcher == "slurm":
            _slurm_rendezvous(env)
        if cuda:
            torch.cuda.set_device(dev)
        timeout = float(os.environ.get(TIMEOUT_ENV, 7 * 24 * 3600))
        dist.init_process_group(
            "nccl" if cuda else "gloo",
            init_method="env://",
            rank=rank,
            world_size=size,
            timeout=datetime.timedelta(seconds=timeout),
        )
    return World(rank, size, local, dev, launcher)
