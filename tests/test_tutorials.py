"""The tutorial notebooks: committed outputs (fast) and a full re-execution (slow)."""

import json
import os
import shutil
from pathlib import Path
from typing import Any, Dict, List

import pytest

TUTORIALS = Path(__file__).resolve().parent.parent / "tutorials"
NOTEBOOKS = sorted(TUTORIALS.glob("*.ipynb"))
EXPECTED = {
    "01_getting_started.ipynb",
    "02_faithfulness.ipynb",
    "03_layers_and_beta.ipynb",
    "04_captum_integration.ipynb",
}
CELL_TIMEOUT_S = 900


def _ids(paths: List[Path]) -> List[str]:
    return [p.stem for p in paths]


def test_all_tutorials_present() -> None:
    assert EXPECTED <= {p.name for p in NOTEBOOKS}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_committed_with_outputs(path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.cells and nb.cells[0].cell_type == "markdown"
    assert nb.cells[0].source.startswith("# "), "the first cell holds the title"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, "no code cells"
    assert any("torch.manual_seed" in c.source for c in code), "not seeded"
    for i, cell in enumerate(code):
        assert cell.outputs, f"code cell {i} has no committed output"
        assert cell.execution_count is not None, f"code cell {i} was not executed"
        for out in cell.outputs:
            assert out.output_type != "error", f"code cell {i}: {out.get('ename')}"
            if out.output_type == "stream":
                assert "Traceback (most recent call last)" not in out.text
    counts = [c.execution_count for c in code]
    assert counts == sorted(counts), "cells were not executed top to bottom"


def _finetuned_sst2_cached() -> bool:
    """True when get_finetuned_model("sst2") would return at once (no training)."""
    try:
        from captum_iba.data import default_data_dir
        from captum_iba.finetune import RESULT_FILE, cached_model_dir, recipe_settings

        default_data_dir()
        folder = cached_model_dir("sst2")
        record: Dict[str, Any] = json.loads((folder / RESULT_FILE).read_text())
    except (ImportError, OSError, ValueError):
        return False
    return record.get("dataset") == "sst2" and record.get(
        "settings"
    ) == recipe_settings("sst2")


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_executes(path: Path, tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    if not _finetuned_sst2_cached():
        pytest.skip(
            "the fine-tuned SST-2 model is not cached (run "
            "captum_iba.finetune.get_finetuned_model('sst2') once, ~15 min) or the "
            "SST-2 data folder is missing"
        )
    work = tmp_path / "tutorials"
    shutil.copytree(TUTORIALS, work)
    nb = nbformat.read(work / path.name, as_version=4)
    repo = str(TUTORIALS.parent)
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = repo if not old else os.pathsep.join([repo, old])
    try:
        client = nbclient.NotebookClient(
            nb,
            timeout=CELL_TIMEOUT_S,
            kernel_name="python3",
            resources={"metadata": {"path": str(work)}},
        )
        client.execute()  # raises CellExecutionError on any error
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if out.output_type == "error"
    ]
    assert not errors
