"""The corpus engine: whole corpora on one process or many (``torchrun``),
resumable and crash-safe.

* :mod:`~captum_iba.app.engine.dist` - the processes (``torch.distributed``
  as ``torchrun``, ``accelerate launch`` or ``srun`` start it);
* :mod:`~captum_iba.app.engine.units` - the work units, independent of the
  number of processes;
* :mod:`~captum_iba.app.engine.records` - the shard files, settings and
  atomic writes;
* :mod:`~captum_iba.app.engine.run` - the loop (:func:`run_corpus_job`);
* :mod:`~captum_iba.app.engine.merge` - rank 0's merge into the outputs;
* :mod:`~captum_iba.app.engine.progress` - the progress bars.
"""

from captum_iba.app.engine.dist import World, init_world, launch_env
from captum_iba.app.engine.merge import Merged, merge_shards
from captum_iba.app.engine.records import read_lines
from captum_iba.app.engine.run import prepare_out, run_corpus_job
from captum_iba.app.engine.units import rank_units, work_units
from captum_iba.evaluation.loop import CorpusJob

__all__ = [
    "CorpusJob",
    "Merged",
    "World",
    "init_world",
    "launch_env",
    "merge_shards",
    "prepare_out",
    "rank_units",
    "read_lines",
    "run_corpus_job",
    "work_units",
]
