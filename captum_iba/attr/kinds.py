"""The kind of model a method explains, decided once: one object per kind.

A sequence classifier and a causal LM differ in what is explained (a class's
logit; an answer's log-probability), in the batch a method takes (a
:class:`~captum_iba.attr.batches.TokenBatch`; a
:class:`~captum_iba.attr.batches.PromptBatch`), in IBA's arguments, its
configuration's per-kind fields, its default precision and what it records,
in the padding id, the default method and what a score means (IBA's default
layer follows the layer stack instead,
:func:`~captum_iba.attr.text.default_layer`: a decoder's token embeddings,
for a classifier on GPT-2 too). Each difference is a member of
:class:`ModelKind`, and :func:`kind_of` decides which kind a loaded model
is, once, at the entry (a scorer's constructor,
:func:`~captum_iba.evaluation.build_scorers`, the application's routes);
everything after asks the object and never tests the kind itself.
:func:`kind_named` gives the object of a kind's name (what the registry's
``models`` fact and a request hold; the command line decides a name from a
model's configuration before torch loads, :mod:`captum_iba.app.model_kind`).

The module imports neither torch nor the rest of the package at import (the
command line's parser reads :attr:`ModelKind.article` before anything heavy
loads); what a member needs is imported when it runs.

The door: a model of no kind the package explains (another head - token
classification, masked LM, question answering, multiple choice -, an
encoder-decoder, a vision or audio model, a base model without a head) is
refused where its kind is decided, from its configuration before any
weights load (:func:`config_kind`) or from a loaded model's class
(:func:`kind_of`), with one line naming what it is
(:class:`NotExplainedError`).

Room for a third kind (an encoder-decoder): a subclass of :class:`ModelKind`
added to :data:`KINDS` and its name to
:data:`captum_iba.registry.MODEL_KINDS`.
"""

from typing import Any, Dict, Iterable, Mapping, Optional, Tuple

from captum_iba._utils.kinds import (
    ENCODER_DECODER,
    NotExplainedError,
    head_of,
    not_explained,
    transformers_table,
)
from captum_iba.registry import (
    DEFAULT_COMPARISON,
    DEFAULT_CONTEXT_METHOD,
    DEFAULT_LLM_COMPARISON,
    DEFAULT_LLM_METHOD,
    DEFAULT_METHOD,
    MODEL_KINDS,
)

__all__ = [
    "CAUSAL_LM",
    "CLASSIFIER",
    "KINDS",
    "OUTPUT_WORDS",
    "ModelKind",
    "NotExplainedError",
    "check_explained",
    "config_kind",
    "kind_named",
    "kind_of",
    "kind_of_config",
    "kinds_named",
]

#: What a classifier scorer's ``output`` option explains, in words (its
#: :meth:`ModelKind.score_meaning`).
OUTPUT_WORDS = {"logits": "logit", "probs": "probability", "log_odds": "log-odds"}


class ModelKind:
    """What differs between kinds of model, asked of one object.

    Attributes:
        name (str): The kind's name, one of
            :data:`~captum_iba.registry.MODEL_KINDS`.
        article (str): The kind in a sentence (``"a classifier"``).
        plural (str): The kind in plural (``"classifiers"``).
        layers (str): How messages name its layer stack (``"encoder"``).
        has_classes (bool): Whether it predicts classes (a target is a
            class index; the comparison presets' arguments apply).
        generates (bool): Whether it generates text: a method explains its
            answers to prompts.
        default_method (str): The method explained when none is named.
        default_comparison (tuple of str): The methods ``evaluate``
            compares when none is named.
        context_method (str, optional): The method that attributes an answer
            to the sources of a context when none is named (None: the kind
            takes no context).
    """

    name = ""
    article = ""
    plural = ""
    layers = "encoder"
    has_classes = True
    generates = False
    default_method = DEFAULT_METHOD
    default_comparison: Tuple[str, ...] = DEFAULT_COMPARISON
    context_method: Optional[str] = None

    def default_for(self, context: bool) -> str:
        """The method run when none is named: :attr:`context_method` for a
        question about a context (when the kind takes one), else
        :attr:`default_method`."""
        if context and self.context_method:
            return self.context_method
        return self.default_method

    def check_generates(self, refusal: Exception) -> None:
        """The guard of a route that explains answers to prompts: raises
        ``refusal`` (naming the model and the route) unless models of this
        kind generate text (:attr:`generates`)."""
        if not self.generates:
            raise refusal

    def __repr__(self) -> str:
        return f"<model kind {self.name}>"

    @property
    def batch_type(self) -> type:
        """type: The batch its methods explain."""
        raise NotImplementedError

    @property
    def rows_type(self) -> type:
        """type: Its :class:`~captum_iba.attr.rows.Rows`: how a batch packs
        into what a method scores, and how the result is built back."""
        raise NotImplementedError

    def explain(self, scorer: Any, batch: Any) -> Any:
        """The scores of ``scorer`` for ``batch``: the kind packs the batch
        into rows (:attr:`rows_type`), the method scores them with its one
        hook (``scorer._scores(rows)``), and the kind builds the result
        (a classifier's ``(B, L)`` tensor, a causal LM's
        :class:`~captum_iba.attr.batches.AnswerScores`). Records the time the
        method took and the instances."""
        import time

        start = time.process_time()
        rows = self.rows_type.pack(batch, scorer)
        wall = time.perf_counter()
        scores = scorer._scores(rows)
        scorer.seconds += time.perf_counter() - wall
        out = rows.unpack(scorer, scores)
        rows.record(scorer, time.process_time() - start)
        scorer.instances += rows.instances
        return out

    def explained(self, model: Any) -> Any:
        """The function IBA's attribution runs: the model itself, or what
        wraps it so that its output is the quantity explained."""
        return model

    def configure(self, options: Dict[str, Any]) -> Dict[str, Any]:
        """IBA's keyword options with this kind's fields of the named
        configuration (``options["config"]``) added where not given."""
        return options

    def default_precision(self, options: Any) -> str:
        """The precision IBA runs in when none is asked for: ``"float32"``
        unless its bfloat16 scores were measured as faithful."""
        return "float32"

    def pad_token_id(self, tokenizer: Any, given: Optional[int]) -> int:
        """The padding id: ``given``, else the tokenizer's, else 0."""
        from captum_iba._utils.common import pad_token_id

        return int(pad_token_id(tokenizer, given, 0))

    def scorer_settings(
        self, target_class: Optional[int], use_attention_mask: bool
    ) -> Dict[str, Any]:
        """What a scorer records of what it explains (its ``settings``)."""
        return {}

    def score_meaning(self, scorer: Any) -> str:
        """What one score of ``scorer`` means, in one sentence."""
        raise NotImplementedError

    def preset_arguments(self, preset: Any, method: str) -> Dict[str, Any]:
        """The constructor arguments a comparison preset gives ``method``."""
        return {}

    def iba_arguments(
        self,
        precision: str,
        options: Any,
        pad_token_id: int,
        special_token_ids: Iterable[int],
    ) -> Dict[str, Any]:
        """The keyword arguments of
        :class:`~captum_iba.attr.iba.InformationBottleneckAttribution` a
        scorer builds it with, beside the model and the layer."""
        raise NotImplementedError

    def iba_settings(self, layer: Any, options: Any, precision: str) -> Dict[str, Any]:
        """What an IBA scorer records of its layer, options and precision."""
        raise NotImplementedError

    def explained_output(self) -> Dict[str, Any]:
        """What a method that reads the logits records it explains."""
        return {}

    def captum_settings(
        self,
        label: str,
        pad_token_id: int,
        own: Mapping[str, Any],
        n_samples: Optional[int] = None,
        seed: Optional[int] = None,
    ) -> Dict[str, Any]:
        """What a method run on Captum's class ``label`` records of the run:
        its ``own`` settings where the model is read directly."""
        return dict(own)

    def refuse_unread(self, method: str, owner: str, given: Mapping[str, bool]) -> None:
        """Refuses arguments of ``method`` (a class ``owner``) that this
        kind's way of running Captum's methods does not read (``given``:
        each argument, True where it was given a value other than its
        default); none for a kind whose model is read directly."""


class Classifier(ModelKind):
    """A sequence classifier (``...ForSequenceClassification``): a method
    explains a class's output for a
    :class:`~captum_iba.attr.batches.TokenBatch`, ``(B, L)`` scores."""

    name = "classifier"
    article = "a classifier"
    plural = "classifiers"

    @property
    def batch_type(self) -> type:
        from captum_iba.attr.batches import TokenBatch

        return TokenBatch

    @property
    def rows_type(self) -> type:
        from captum_iba.attr.class_rows import ClassRows

        return ClassRows

    def scorer_settings(
        self, target_class: Optional[int], use_attention_mask: bool
    ) -> Dict[str, Any]:
        explains = "given target" if target_class is None else f"class {target_class}"
        return {"explains": explains, "attention_mask": use_attention_mask}

    def default_precision(self, options: Any) -> str:
        from captum_iba.attr._precision import default_precision

        return default_precision(options)

    def score_meaning(self, scorer: Any) -> str:
        output = OUTPUT_WORDS.get(getattr(scorer, "output", None), "score")
        return str(scorer.meaning).format(output=output)

    def preset_arguments(self, preset: Any, method: str) -> Dict[str, Any]:
        return dict(preset.scorers.get(method, {}))

    def iba_arguments(
        self,
        precision: str,
        options: Any,
        pad_token_id: int,
        special_token_ids: Iterable[int],
    ) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        if precision != "float32":
            out["precision"] = precision
        # the deletion baseline, or the tokens the attention removal may remove
        if options.prior.needs_baseline or options.removal == "attention":
            out.update(pad_token_id=pad_token_id, special_token_ids=special_token_ids)
        return out

    def iba_settings(self, layer: Any, options: Any, precision: str) -> Dict[str, Any]:
        from captum_iba.attr.options import used_options

        out: Dict[str, Any] = {
            **used_options(options),
            "layer": type(layer.module).__name__,
        }
        out["precision"] = precision
        if layer.index is not None:
            out["layer_index"] = layer.index
        return out


class CausalLM(ModelKind):
    """A causal LM (``...ForCausalLM``, ``...LMHeadModel``): a method
    explains an answer's log-probability for a
    :class:`~captum_iba.attr.batches.PromptBatch` (prompts and answers),
    :class:`~captum_iba.attr.batches.AnswerScores`."""

    name = "causal-lm"
    article = "a causal LM"
    plural = "causal LMs"
    layers = "decoder"
    has_classes = False
    generates = True
    default_method = DEFAULT_LLM_METHOD
    default_comparison = DEFAULT_LLM_COMPARISON
    context_method = DEFAULT_CONTEXT_METHOD

    @property
    def batch_type(self) -> type:
        from captum_iba.attr.batches import PromptBatch

        return PromptBatch

    @property
    def rows_type(self) -> type:
        from captum_iba.attr.answer_rows import AnswerRows

        return AnswerRows

    def explained(self, model: Any) -> Any:
        from captum_iba.attr.llm import CausalLMLogLikelihood

        return CausalLMLogLikelihood(model)

    def configure(self, options: Dict[str, Any]) -> Dict[str, Any]:
        from captum_iba.attr.llm import llm_options

        return llm_options(options)

    def pad_token_id(self, tokenizer: Any, given: Optional[int]) -> int:
        # A causal LM's tokenizer often has no pad token: its end-of-text then.
        from captum_iba._utils.common import pad_token_id

        eos = getattr(tokenizer, "eos_token_id", None)
        return int(pad_token_id(tokenizer, given, eos or 0))

    def score_meaning(self, scorer: Any) -> str:
        return str(scorer.prompt_meaning)

    def iba_arguments(
        self,
        precision: str,
        options: Any,
        pad_token_id: int,
        special_token_ids: Iterable[int],
    ) -> Dict[str, Any]:
        # the answer's tokens are never scored nor removed: always named
        return {
            "precision": precision,
            "pad_token_id": pad_token_id,
            "special_token_ids": special_token_ids,
        }

    def iba_settings(self, layer: Any, options: Any, precision: str) -> Dict[str, Any]:
        return {  # as 0.3's records hold them
            "layer_index": layer.index,
            "layer": layer.label if layer.index is not None else "embeddings",
            "options": options.record(),
            "precision": precision,
        }

    def explained_output(self) -> Dict[str, Any]:
        return {"explained": "the sum of the answer tokens' logits"}

    def captum_settings(
        self,
        label: str,
        pad_token_id: int,
        own: Mapping[str, Any],
        n_samples: Optional[int] = None,
        seed: Optional[int] = None,
    ) -> Dict[str, Any]:
        # through Captum's LLM API: its class and the id a removed token
        # becomes, and a sampling method's samples and seed
        out: Dict[str, Any] = {"captum": label, "baseline_token": pad_token_id}
        if n_samples is not None:
            out.update(n_samples=n_samples, seed=seed)
        return out

    def refuse_unread(self, method: str, owner: str, given: Mapping[str, bool]) -> None:
        wrong = [name for name, was_given in given.items() if was_given]
        if wrong:
            raise ValueError(
                f"{method} explains a causal LM through Captum's LLM API, which "
                f"takes no {', '.join(wrong)} (arguments of a classifier's "
                f"{owner}); leave them out"
            )


#: The model kinds' objects.
CLASSIFIER, CAUSAL_LM = Classifier(), CausalLM()
#: The model kinds' objects, by name (in the order of
#: :data:`~captum_iba.registry.MODEL_KINDS`).
KINDS: Mapping[str, ModelKind] = {k.name: k for k in (CLASSIFIER, CAUSAL_LM)}
assert tuple(KINDS) == MODEL_KINDS, "KINDS and registry.MODEL_KINDS differ"


def kind_of(model: Any) -> ModelKind:
    """The kind of a loaded model, decided once by its class
    (:func:`~captum_iba._utils.kinds.head_of`): a Hugging Face causal LM
    (a ``...ForCausalLM``, ``...LMHeadModel``, or a class in transformers'
    causal-LM table such as ``Gemma3ForConditionalGeneration``) is
    :data:`CAUSAL_LM`; a sequence classifier (even one on a decoder, such as
    ``GPT2ForSequenceClassification``) is :data:`CLASSIFIER`, and so is
    what is no Hugging Face model (a forward function or an ``nn.Module``
    without a ``config``: its output is read as a classifier's, ``(B,
    classes)``, as Captum reads a ``forward_func``) or a class the rule does
    not know.

    Args:
        model (Any): The model, or a :class:`ModelKind` (returned as it is).

    Returns:
        ModelKind: Its kind's object.

    Raises:
        NotExplainedError: For a Hugging Face model of no kind the package
            explains (a token classifier, a masked LM, question answering,
            multiple choice, an encoder-decoder, a vision or audio model, a
            base model without a head), naming its class.
    """
    if isinstance(model, ModelKind):
        return model
    return kind_named(_kind_of_class(model) or CLASSIFIER.name)


def check_explained(model: Any) -> None:
    """Refuses a loaded model of no kind the package explains, before any
    work (:func:`kind_of`'s refusal; a forward function or a plain
    ``nn.Module`` passes, as a classifier's forward).

    Raises:
        NotExplainedError: Naming the model's class and what it is.
    """
    kind_of(model)


def _classes(names: Any) -> Tuple[Optional[str], Optional[Tuple[str, str]]]:
    """The kind Hugging Face class names say (a causal-LM class wins; None
    when none says), and the first class of another head with what it is
    (None when none is)."""
    heads = [(str(n), head_of(str(n))) for n in names or ()]
    explained = [h for _, h in heads if h in KINDS]
    other = next(((n, h) for n, h in heads if h is not None and h not in KINDS), None)
    if CAUSAL_LM.name in explained:
        return CAUSAL_LM.name, other
    return (explained[0] if explained else None), other


def _kind_of_class(model: Any) -> Optional[str]:
    """The kind's name of a loaded Hugging Face model by its class; None
    for what is no Hugging Face model (no ``config``) or a class the rule
    does not know.

    Raises:
        NotExplainedError: For another head or an encoder-decoder.
    """
    config = getattr(model, "config", None)
    if config is None:
        return None  # a forward function, a plain module
    name = type(model).__name__
    found, other = _classes([name])
    if other is not None or getattr(config, "is_encoder_decoder", False) is True:
        raise not_explained(
            f"the model ({name})", other[1] if other else ENCODER_DECODER
        )
    return found


def _kind_of_model_type(model_type: Any, subject: str) -> Optional[str]:
    """A ``model_type``'s kind by transformers' own auto-class tables (for a
    configuration without ``architectures``; :func:`config_kind`).

    Raises:
        NotExplainedError: For a type transformers has a sequence-to-sequence
            class of (an encoder-decoder), or has neither a sequence
            classifier nor a causal LM of.
    """
    if not isinstance(model_type, str) or not model_type:
        return None
    subject = f"{subject} (model_type {model_type!r}, no architectures)"
    seq2seq = transformers_table("MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES")
    if model_type in seq2seq:
        raise not_explained(subject, ENCODER_DECODER)
    encoder = model_type in transformers_table("MODEL_FOR_MASKED_LM_MAPPING_NAMES")
    lm = model_type in transformers_table("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES")
    if lm and not encoder:
        return CAUSAL_LM.name
    if model_type in transformers_table(
        "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES"
    ):
        return CLASSIFIER.name
    if model_type in transformers_table("CONFIG_MAPPING_NAMES"):
        raise not_explained(
            subject,
            "a model type without a sequence classifier or causal LM in transformers",
        )
    return None


def config_kind(config: Any, name: Optional[str] = None) -> Optional[str]:
    """The one decision of a model's kind from its configuration (a
    ``transformers`` configuration, or ``config.json`` read as a dict),
    before any weights load.

    The rule, in order:

    1. A GGUF file's configuration (its ``quantization_config``) is a causal
       LM: transformers reads only language models from GGUF files.
    2. An encoder-decoder (``is_encoder_decoder``) is refused, whatever its
       head.
    3. ``architectures``, the classes the weights were saved from
       (:func:`~captum_iba._utils.kinds.head_of`: the name's ending, else
       transformers' auto tables): a causal LM's class
       (``...ForCausalLM``, ``...LMHeadModel``, or one in
       ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``) is a causal LM, a
       ``...ForSequenceClassification`` a classifier. Else a class of
       another head (``...ForTokenClassification``, ``...ForMaskedLM``,
       ``...ForQuestionAnswering``, ``...ForMultipleChoice``, a
       sequence-to-sequence, vision, audio or pretraining class, a base
       ``...Model`` without a head) is refused. It is the folder's own word,
       so it wins.
    4. Else ``model_type`` (a folder saved without ``architectures``),
       conservatively, by transformers' tables: a type with a
       sequence-to-sequence class (T5, BART, ...) is refused; a type with a
       causal-LM class (``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``) is a causal
       LM unless it is an encoder - a type with a masked-LM class
       (``MODEL_FOR_MASKED_LM_MAPPING_NAMES``: BERT, RoBERTa, ELECTRA, ...,
       whose causal-LM class is a rarely used variant, so such a folder is
       far more likely a classifier or a base encoder); Llama, GPT-2,
       Gemma, Qwen, Mistral have a causal-LM class and no masked-LM class: a
       Llama folder is never taken for a classifier with a random head. A
       type with a sequence-classification class (DistilBERT, ...) is a
       classifier (its loader refuses a folder whose classification head is
       missing, :func:`~captum_iba.app.models.load_classifier`). A type
       transformers knows that has neither (ViT, Wav2Vec2, ...) is refused.
    5. Else None (no ``model_type``, or one transformers does not know: the
       caller's default, a classifier, whose loader says what is wrong).

    Args:
        config (Any): The configuration.
        name (str, optional): The model as a refusal names it (default: the
            configuration's ``name_or_path``).

    Returns:
        str or None: ``"causal-lm"``, ``"classifier"``, or None (unknown).

    Raises:
        NotExplainedError: In one line naming the model, what it is and
            what the package explains, for a model of no kind it explains.
    """
    if isinstance(config, dict):
        get = config.get
    else:

        def get(key: str) -> Any:
            return getattr(config, key, None)

    quant = get("quantization_config") or {}
    if isinstance(quant, dict) and quant.get("quant_method") == "gguf":
        return CAUSAL_LM.name
    name = name or get("_name_or_path") or get("name_or_path")
    subject = f"model {name}" if name else "the model"
    classes = [str(c) for c in get("architectures") or ()]
    found, other = _classes(classes)
    if get("is_encoder_decoder") is True:
        said = (
            ", ".join(classes) or f"model_type {get('model_type')!r}, no architectures"
        )
        raise not_explained(
            f"{subject} ({said})", other[1] if other else ENCODER_DECODER
        )
    if found is None and other is not None:
        raise not_explained(f"{subject} ({other[0]})", other[1])
    return found or _kind_of_model_type(get("model_type"), subject)


def kind_of_config(model_or_config: Any) -> ModelKind:
    """The kind of a loaded Hugging Face model or of a configuration (a
    ``transformers`` configuration, or ``config.json`` read as a dict), as
    a route that needs a Hugging Face model decides it: a loaded model by
    its class (:func:`kind_of`), where the class does not say by its
    configuration (:func:`config_kind`); a configuration by
    :func:`config_kind`; a classifier when neither says.

    Raises:
        NotExplainedError: For a model of no kind the package explains, and
            for a loaded model (anything callable) without a Hugging Face
            ``config`` (a plain ``nn.Module`` or function), naming its class.
    """
    if isinstance(model_or_config, ModelKind):
        return model_or_config
    config = model_or_config
    if callable(model_or_config):  # a loaded model
        config = getattr(model_or_config, "config", None)
        if config is None:
            raise not_explained(
                f"the model ({type(model_or_config).__name__})",
                "no Hugging Face model (it has no config)",
                "a forward function's scores come from "
                "captum_iba.evaluation.build_scorers or "
                "InformationBottleneckAttribution",
            )
        found = _kind_of_class(model_or_config)
        if found is not None:
            return kind_named(found)
    return kind_named(config_kind(config) or CLASSIFIER.name)


def kind_named(name: Any) -> ModelKind:
    """The object of the kind named ``name`` (a :class:`ModelKind` is
    returned as it is).

    Raises:
        ValueError: For an unknown name, naming the kinds.
    """
    if isinstance(name, ModelKind):
        return name
    found = KINDS.get(name) if isinstance(name, str) else None
    if found is None:
        raise ValueError(f"unknown model kind {name!r}; the kinds are {MODEL_KINDS}")
    return found


def kinds_named(names: Iterable[str]) -> Tuple[ModelKind, ...]:
    """The objects of ``names``, in :data:`KINDS`' order."""
    wanted = set(names)
    return tuple(k for n, k in KINDS.items() if n in wanted)
