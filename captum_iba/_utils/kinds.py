"""Which kind of model a Hugging Face class is, by its name, torch-free: the
one rule that the core's resolver (:mod:`captum_iba.evaluation.resolve`) and
the application's kind decision (:mod:`captum_iba.app.model_kind`) both
read, so that the command line can decide before torch loads."""

from typing import Iterable, Optional

__all__ = [
    "CAUSAL_LM_CLASSES",
    "CLASSIFIER_CLASSES",
    "is_causal_lm",
    "kind_of_class_names",
]

#: The class-name endings of Hugging Face's causal LMs (the models that
#: predict the next token).
CAUSAL_LM_CLASSES = ("ForCausalLM", "LMHeadModel")
#: The class-name endings of Hugging Face's sequence classifiers.
CLASSIFIER_CLASSES = ("ForSequenceClassification",)


def is_causal_lm(model: object) -> bool:
    """Whether ``model`` is a Hugging Face causal LM (a ``...ForCausalLM`` or
    ``...LMHeadModel``), by its class; a sequence classifier (even one on a
    decoder, such as ``GPT2ForSequenceClassification``) is not."""
    return type(model).__name__.endswith(CAUSAL_LM_CLASSES)


def kind_of_class_names(names: Iterable[object]) -> Optional[str]:
    """``"causal-lm"`` or ``"classifier"`` as class names say it (a
    configuration's ``architectures``; a causal-LM class wins), None when
    none of them says."""
    names = [str(n) for n in names or ()]
    if any(n.endswith(CAUSAL_LM_CLASSES) for n in names):
        return "causal-lm"
    if any(n.endswith(CLASSIFIER_CLASSES) for n in names):
        return "classifier"
    return None
