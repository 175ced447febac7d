"""A user's scorer from an installed package reaches the command line through
the entry-point group ``captum_iba.methods``, as docs/extending.rst says:
tested with a test distribution (a ``.dist-info`` folder on the path) in a
fresh process."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PLUGIN = '''
"""A test plug-in: the first real token scores 1, the rest 0."""
import torch
from captum_iba.evaluation import TokenScorer


class FirstTokenScorer(TokenScorer):
    """the first real token (a test plug-in)"""

    name = "first-token"
    needs = ("seed",)
    signed = False

    def __init__(self, model, seed=0, **kwargs):
        super().__init__(model, **kwargs)
        self.seed = seed
        self.settings["seed"] = seed

    def _scores(self, ids, mask, tt, target):
        out = torch.zeros(ids.shape)
        out[:, 1] = 1.0
        return out
'''


def _distribution(folder: Path) -> None:
    (folder / "firsttok").mkdir()
    (folder / "firsttok" / "__init__.py").write_text(textwrap.dedent(PLUGIN))
    info = folder / "firsttok-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: firsttok\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text(
        "[captum_iba.methods]\nfirst-token = firsttok:FirstTokenScorer\n"
    )


def _run(folder: Path, *argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(folder), str(ROOT)]))
    return subprocess.run(
        [sys.executable, "-m", "captum_iba", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=folder,
    )


def test_an_installed_scorer_is_a_method_of_the_command_line(tmp_path, tiny_model_dir):
    _distribution(tmp_path)
    listed = _run(tmp_path, "explain", "--help")
    assert listed.returncode == 0, listed.stderr
    assert "first-token" in listed.stdout and "a test plug-in" in listed.stdout
    ran = _run(
        tmp_path, "explain", "a fine film", "--model", tiny_model_dir,
        "--compare", "first-token,random", "--seed", "3",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "first-token" in ran.stdout and "top 3 words: a (1.00)" in ran.stdout
    refused = _run(
        tmp_path, "explain", "a fine film", "--model", tiny_model_dir,
        "--method", "first-token", "--steps", "3",
    )  # fmt: skip
    assert refused.returncode == 2
    assert "--steps: none of the chosen methods (first-token)" in refused.stderr


def test_a_broken_plugin_is_left_out_with_a_warning(tmp_path):
    _distribution(tmp_path)
    (tmp_path / "firsttok" / "__init__.py").write_text("raise ImportError('boom')\n")
    listed = _run(tmp_path, "explain", "--help")
    assert listed.returncode == 0
    assert "first-token" in listed.stderr and "boom" in listed.stderr
