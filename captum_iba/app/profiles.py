"""What ``captum-iba reproduce`` can run: its corpora, parts and profiles.

Plain data, importable without torch, so that ``captum-iba reproduce --help``
lists them without loading the stack; :mod:`captum_iba.app.reproduce` runs
them.
"""

from typing import Any, Dict, Tuple

__all__ = ["CORPORA", "PARTS", "PROFILES"]

#: Corpora of the paper's Table 1 that can be measured here.
CORPORA: Tuple[str, ...] = ("sst2", "imdb", "ag_news", "rte")
#: The parts of a reproduction: Table 1, the layer and beta sweeps, the maps.
PARTS: Tuple[str, ...] = ("table", "sweeps", "examples")
#: Sample sizes and lengths of each profile.
PROFILES: Dict[str, Dict[str, Any]] = {
    "cpu": {
        "n": {"sst2": 100, "imdb": 30, "ag_news": 100, "rte": 60},
        "max_length": {"sst2": 128, "imdb": 256, "ag_news": 128, "rte": 256},
        "sweep_n": 60,
        "batch_size": 16,
        # The paper's LIME pads each perturbed text to 512 tokens (no mask);
        # on a CPU it pads to the corpus' truncation length instead.
        "lime_max_length": {"sst2": 128, "imdb": 256, "ag_news": 128, "rte": 256},
    },
    "paper": {
        "n": {"sst2": 872, "imdb": 1000, "ag_news": 1000, "rte": 277},
        "max_length": {"sst2": 512, "imdb": 512, "ag_news": 512, "rte": 512},
        "sweep_n": 1000,
        "batch_size": 32,
        "lime_max_length": {"sst2": 512, "imdb": 512, "ag_news": 512, "rte": 512},
    },
}
#: One line per profile, for ``--help``.
PROFILE_SUMMARIES: Dict[str, str] = {
    "cpu": "small samples, IMDB and RTE cut to 256 tokens (about 70 min on 2 cores)",
    "paper": "the paper's sizes: up to 1,000 instances of 512 tokens (for a GPU)",
}
