"""What a Hugging Face model class does, by its name, torch-free at import:
the table that the kind's one decision
(:func:`~captum_iba.attr.kinds.config_kind` from a configuration,
:func:`~captum_iba.attr.kinds.kind_of` from a loaded model) reads, so that
the command line can decide before torch loads.

A class is a causal LM (``...ForCausalLM``, ``...LMHeadModel``), a sequence
classifier (``...ForSequenceClassification``), another head the package does
not explain (a token classifier, a masked LM, question answering, ...), or
unknown. The name's ending decides where it can (no import); else
transformers' own auto tables (``MODEL_FOR_*_MAPPING_NAMES``, read when
first needed: they import torch) - e.g. ``Gemma3ForConditionalGeneration``
is in its causal-LM table, ``T5ForConditionalGeneration`` in its
sequence-to-sequence table.
"""

import functools
from typing import Optional

__all__ = [
    "CAUSAL_LM_CLASSES",
    "CLASSIFIER_CLASSES",
    "ENCODER_DECODER",
    "EXPLAINED",
    "NotExplainedError",
    "head_of",
    "not_explained",
    "transformers_table",
]

#: The class-name endings of Hugging Face's causal LMs (the models that
#: predict the next token).
CAUSAL_LM_CLASSES = ("ForCausalLM", "LMHeadModel")
#: The class-name endings of Hugging Face's sequence classifiers.
CLASSIFIER_CLASSES = ("ForSequenceClassification",)

#: What the package explains, as the refusal of any other model says it.
EXPLAINED = (
    "captum-iba explains a Hugging Face ...ForSequenceClassification (a "
    "classifier's prediction) or ...ForCausalLM (an answer)"
)

#: How a refusal describes an encoder-decoder.
ENCODER_DECODER = "an encoder-decoder (sequence-to-sequence) model"

#: The heads the package does not explain whose class-name ending says so
#: unambiguously (no class so named is in transformers' causal-LM or
#: sequence-classification tables), read without importing anything.
_OTHER_ENDINGS = (
    ("ForTokenClassification", "a token classifier (a label per token)"),
    ("ForMaskedLM", "a masked LM (it fills in masked tokens)"),
    ("ForQuestionAnswering", "a question-answering model (it points at a span)"),
    ("ForQuestionAnsweringSimple", "a question-answering model (it points at a span)"),
    ("ForMultipleChoice", "a multiple-choice model"),
    ("ForNextSentencePrediction", "a next-sentence predictor"),
    ("ForPreTraining", "a pretraining model (several heads)"),
    ("ForImageClassification", "a vision model"),
    ("ForAudioClassification", "an audio model"),
    ("ForCTC", "an audio model"),
)
#: The name ending read only after transformers' tables (a few classes so
#: named are causal LMs: ``Gemma3ForConditionalGeneration``).
_GENERATION_ENDING = (
    "ForConditionalGeneration",
    "a sequence-to-sequence or multimodal model",
)

#: transformers' auto tables (``transformers.models.auto.modeling_auto``),
#: in the order a class is looked up: the first that holds it says what it
#: is (a class is in several: T5's in the sequence-to-sequence and the
#: pretraining tables). A table missing from an older release is skipped.
_TABLES = (
    ("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "causal-lm"),
    ("MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES", "classifier"),
    ("MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES", _OTHER_ENDINGS[0][1]),
    ("MODEL_FOR_MASKED_LM_MAPPING_NAMES", _OTHER_ENDINGS[1][1]),
    ("MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES", _OTHER_ENDINGS[2][1]),
    ("MODEL_FOR_TABLE_QUESTION_ANSWERING_MAPPING_NAMES", _OTHER_ENDINGS[2][1]),
    ("MODEL_FOR_MULTIPLE_CHOICE_MAPPING_NAMES", _OTHER_ENDINGS[4][1]),
    ("MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", ENCODER_DECODER),
    ("MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES", "a speech-to-text encoder-decoder"),
    ("MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES", "a vision-language model"),
    ("MODEL_FOR_VISION_2_SEQ_MAPPING_NAMES", "a vision-language model"),
    ("MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES", "a multimodal model"),
    ("MODEL_FOR_NEXT_SENTENCE_PREDICTION_MAPPING_NAMES", _OTHER_ENDINGS[5][1]),
    ("MODEL_FOR_PRETRAINING_MAPPING_NAMES", _OTHER_ENDINGS[6][1]),
    ("MODEL_FOR_IMAGE_MAPPING_NAMES", "a vision model"),
    ("MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES", "a vision model"),
    ("MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES", "an audio model"),
    ("MODEL_FOR_CTC_MAPPING_NAMES", "an audio model"),
    ("MODEL_MAPPING_NAMES", "a base model without a head (it outputs hidden states)"),
)  # fmt: skip
#: What any other class in transformers' tables is.
_ANOTHER_TASK = "a model of another task"


class NotExplainedError(ValueError):
    """A model of no kind the package explains (another head, an
    encoder-decoder, a vision or audio model, a module without a Hugging
    Face configuration): one line naming what it is and what the package
    explains (:data:`EXPLAINED`)."""


def not_explained(subject: str, what: str, hint: str = "") -> NotExplainedError:
    """The refusal of a model of no kind the package explains.

    Args:
        subject (str): The model as the message names it (``"model x
            (LlamaForTokenClassification)"``).
        what (str): What it is (``"a token classifier (a label per token)"``).
        hint (str): What to do instead, appended after a semicolon.

    Returns:
        NotExplainedError: The error, to raise.
    """
    return NotExplainedError(
        f"{subject} is {what}: {EXPLAINED}" + (f"; {hint}" if hint else "")
    )


def transformers_table(name: str) -> dict:
    """transformers' auto table ``name`` (``{}`` where this release has none)."""
    from transformers.models.auto import modeling_auto

    return getattr(modeling_auto, name, None) or {}


@functools.cache
def _tables() -> dict:
    """Class name -> what it is (``"causal-lm"``, ``"classifier"`` or a
    description), from every auto table of transformers, in
    :data:`_TABLES`' order first."""
    from transformers.models.auto import modeling_auto

    names = [n for n, _ in _TABLES]
    names += sorted(n for n in dir(modeling_auto) if n.endswith("_MAPPING_NAMES"))
    said = dict(_TABLES)
    out: dict = {}
    for table in names:
        for classes in transformers_table(table).values():
            for cls in (classes,) if isinstance(classes, str) else classes:
                out.setdefault(cls, said.get(table, _ANOTHER_TASK))
    return out


@functools.cache
def head_of(name: str) -> Optional[str]:
    """What the Hugging Face class ``name`` is: ``"causal-lm"``,
    ``"classifier"``, a description of another head (``"a masked LM (it
    fills in masked tokens)"``), or None (unknown: not a transformers class
    and no ending that says).

    The ending decides first (a causal LM's, a sequence classifier's, an
    unambiguous other head's: no import), then transformers' tables, then
    the ending ``ForConditionalGeneration``.
    """
    if name.endswith(CAUSAL_LM_CLASSES):
        return "causal-lm"
    if name.endswith(CLASSIFIER_CLASSES):
        return "classifier"
    for ending, what in _OTHER_ENDINGS:
        if name.endswith(ending):
            return what
    try:
        found = _tables().get(name)
    except ImportError:  # (transformers or torch missing: the ending alone)
        found = None
    if found is None and name.endswith(_GENERATION_ENDING[0]):
        return _GENERATION_ENDING[1]
    return found
