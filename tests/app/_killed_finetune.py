"""A fine-tune through the cache that kills itself (SIGKILL) at one phase, for
the cache's crash tests. Run as a script::

    python _killed_finetune.py BASE_MODEL_DIR PHASE

with ``CAPTUM_IBA_CACHE`` set; PHASE is ``training`` (after the first
optimisation step), ``save`` (the weights written, not yet the record) or
``rename`` (the folder complete, not yet moved into place)."""

import os
import pathlib
import signal
import sys

import torch

from captum_iba.app import finetune as ft
from captum_iba.app.finetune import cache as ft_cache
from captum_iba.app.finetune import train as ft_train
from tests.app.test_finetune_cache import OPTIONS
from tests.helpers import synthetic_sentiment as _synthetic


def _die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)


def main(base: str, phase: str) -> None:
    if phase == "training":
        step = torch.optim.AdamW.step
        calls = []

        def killing_step(self, *args, **kwargs):
            calls.append(1)
            if len(calls) > 1:
                _die()
            return step(self, *args, **kwargs)

        torch.optim.AdamW.step = killing_step
    elif phase == "save":
        ft_train.file_manifest = _die  # called after the weights are written
    elif phase == "rename":
        pathlib.Path.rename = _die
    else:
        raise SystemExit(f"unknown phase {phase!r}")
    real = ft.fine_tune

    def on_synthetic(*args, **kwargs):
        kwargs["eval_dataset"] = _synthetic(16, 1)
        return real(_synthetic(32, 0), *args[1:], **kwargs)

    ft_cache.fine_tune = on_synthetic
    ft_cache.heldout_data = lambda *args: _synthetic(16, 1)
    ft.get_finetuned_model("toy", base_model=base, options=OPTIONS, progress=False)
    raise SystemExit("the fine-tune was not killed")


if __name__ == "__main__":
    main(*sys.argv[1:])
