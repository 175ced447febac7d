"""Names to scorers, once: the one resolver of the harness, the CLI,
:func:`captum_iba.explain` and ``reproduce``.

A run names its methods (:data:`captum_iba.registry.METHODS`), gives options
(declared once in :data:`captum_iba.registry.OPTIONS`: ``layer``, ``prior``,
``beta``, ``seed``, ...) for every method that takes them or per method
(``method_options``), and the shared :class:`Resources` (the model, its
tokenizer, data to fit priors on, a fitted explainer). :func:`build_scorers`
first checks the request against the declarations
(:func:`~captum_iba._utils.request.check_request`: an option no chosen method
takes is an error, never ignored), then resolves each value once - a layer
into a :class:`~captum_iba.attr.LayerRef`, prior names into priors (fitting
those that need data at the method's layer) - and builds every method with
the options its registry entry says it takes. An option given as several
values (two priors, two layers) makes one scorer per value, named
``"IBA (paper)"``, ``"IBA (dataset)"``.

Arguments are applied in this order, later ones winning: the preset's for the
method, the registry entry's own (its configuration, its default layer), the
options given for every method, those given for the method, and its other
constructor keywords (``method_options`` that are no declared option).
"""

import itertools
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from torch import nn

from captum_iba.attr.kinds import ModelKind, kind_named, kind_of
from captum_iba.attr.priors import NoisePrior, resolve_prior
from captum_iba.attr.text import LayerRef, resolve_layer
from captum_iba.evaluation.corpus import encoded_batches
from captum_iba.evaluation.presets import Preset, get_preset
from captum_iba.registry import MODEL_KINDS, OPTIONS, method_entry
from captum_iba.request import (
    MethodRequest,
    check_model_kind,
    check_request,
    models_of,
    options_of,
    unknown_keyword,
)

__all__ = ["Resources", "build_scorers"]

#: The options :class:`Resources` also takes as fields (earlier releases).
_FIELDS = ("layer", "prior", "seed", "internal_batch_size", "precision")


@dataclass
class Resources:
    """What the methods of one run share, and the options given for all of
    them.

    Attributes:
        model (nn.Module): The classifier.
        tokenizer (Any): Its tokenizer (special and pad ids come from it).
        layer (int, str, Module, LayerRef or list, optional): The option
            ``layer`` for every method that takes it (a list makes one scorer
            per layer). None: each method's default.
        prior (str, NoisePrior or list, optional): The option ``prior``
            (names from :data:`captum_iba.registry.PRIORS`; a list makes one
            scorer per prior). None: each method's default (the preset's for
            ``IBA``).
        prior_data (CorpusLike or Iterable, optional): A corpus (encoded
            here) or batches, for priors fitted on data (``"dataset"``); read
            only when such a prior is named.
        seed (int, optional): The option ``seed`` (None: each method's, 0).
        internal_batch_size (int, optional): The option of that name.
        precision (str, optional): The option ``precision``
            (``"float32"`` or ``"bf16"``).
        max_length (int): Truncation when ``prior_data`` is a corpus.
        special_token_ids (Sequence[int], optional): Default the tokenizer's.
        pad_token_id (int, optional): Default the tokenizer's.
        explainer (optional): ``iba-amortized``'s fitted explainer, or a
            function of the layer module returning one (called only when
            that method is built).
        options (Mapping[str, Any]): More declared options for every method
            that takes them (e.g. ``{"beta": 1e-4, "steps": 5}``).
    """

    model: nn.Module
    tokenizer: Any = None
    layer: Any = None
    prior: Any = None
    prior_data: Any = None
    seed: Optional[int] = None
    internal_batch_size: Optional[int] = None
    precision: Optional[str] = None
    max_length: int = 128
    special_token_ids: Optional[Sequence[int]] = None
    pad_token_id: Optional[int] = None
    explainer: Any = None
    options: Mapping[str, Any] = field(default_factory=dict)
    _layers: Dict[Any, LayerRef] = field(default_factory=dict, repr=False)
    _priors: Dict[Tuple[Any, int], NoisePrior] = field(default_factory=dict, repr=False)

    @classmethod
    def from_keywords(
        cls, model: nn.Module, tokenizer: Any = None, **keywords: Any
    ) -> "Resources":
        """Resources from keywords: its fields, and declared options (e.g.
        ``beta=1e-4``) into :attr:`options`.

        Raises:
            TypeError: For a keyword that is neither (listing both).
        """
        fields = {f for f in cls.__dataclass_fields__ if not f.startswith("_")}
        options = dict(keywords.pop("options", None) or {})
        for key in [k for k in keywords if k not in fields]:
            if key not in OPTIONS:
                raise TypeError(
                    f"unknown argument {key!r}: neither a resource "
                    f"({', '.join(sorted(fields - {'model', 'options'}))}) nor an "
                    f"option ({', '.join(OPTIONS.names())})"
                )
            options[key] = keywords.pop(key)
        return cls(model, tokenizer, options=options, **keywords)

    def given(self) -> Dict[str, Any]:
        """The options given for every method (those not None)."""
        fields = {k: getattr(self, k) for k in _FIELDS}
        both = {**fields, **dict(self.options)}
        return {k: v for k, v in both.items() if v is not None}

    def layer_ref(self, value: Any) -> LayerRef:
        """A layer option's value resolved (once per value)."""
        key = value if isinstance(value, (int, str, type(None))) else id(value)
        if key not in self._layers:
            self._layers[key] = resolve_layer(self.model, value)
        return self._layers[key]

    def noise_prior(self, value: Any, layer: LayerRef) -> NoisePrior:
        """A prior option's value resolved (fitted once per layer when it
        needs data)."""
        key = (value if isinstance(value, str) else id(value), id(layer.module))
        if key not in self._priors:
            data = self._batches if self.prior_data is not None else None
            self._priors[key] = resolve_prior(value, self.model, layer.module, data)
        return self._priors[key]

    def _batches(self) -> Any:
        """``prior_data`` as batches (a corpus is encoded, 32 at a time)."""
        data = self.prior_data
        if hasattr(data, "texts") and hasattr(data, "labels"):
            return encoded_batches(self.tokenizer, data, self.max_length, 32)
        return data


def _several(name: str, value: Any) -> List[Any]:
    """An option's value as the list of its variants (one unless the option
    makes variants and several values are given)."""
    many = OPTIONS.entry(name).facts.get("variants")
    if many and isinstance(value, (list, tuple)) and not isinstance(value, LayerRef):
        return list(value)
    return [value]


def _label(value: Any) -> str:
    if isinstance(value, LayerRef):
        return value.label
    return getattr(value, "name", None) or str(value)


def _method_values(
    method: str, request: MethodRequest, resources: Resources, kind: ModelKind
) -> Dict[str, List[Any]]:
    """Option name -> the method's resolved values (one per variant): the
    given ones, and its default layer (for models of ``kind``) when it takes
    one."""
    entry = method_entry(method, kind)
    given = request.values(method)
    if "layer" in options_of(method):
        given.setdefault("layer", entry.defaults.get("layer"))
    out: Dict[str, List[Any]] = {}
    layers: List[LayerRef] = []
    if "layer" in given:  # (one without a layer needs no layer stack)
        layers = [resources.layer_ref(v) for v in _several("layer", given["layer"])]
    for name, value in given.items():
        if name == "layer":
            out[name] = layers
        elif name == "prior":
            out[name] = [resources.noise_prior(p, layers[0]) for p in value]
        else:
            out[name] = _several(name, value)
    return out


def _common(resources: Resources, preset: Preset) -> Dict[str, Any]:
    return dict(
        tokenizer=resources.tokenizer,
        special_token_ids=resources.special_token_ids,
        pad_token_id=resources.pad_token_id,
        setting=preset.name,
    )


def model_kind_of(methods: Sequence[str], model: Any) -> ModelKind:
    """The kind of model to build ``methods`` for when no one said it: the
    one kind they all explain when there is one (e.g. the deprecated
    ``llm-*`` names: causal LMs), else the model's
    (:func:`~captum_iba.attr.kinds.kind_of`, the one decision: a model of
    no kind the package explains is refused there)."""
    own = kind_of(model)
    common = [k for k in MODEL_KINDS if all(k in models_of(m) for m in methods)]
    return kind_named(common[0]) if len(common) == 1 else own


def build_scorers(
    methods: Union[Sequence[str], MethodRequest],
    resources: Resources,
    setting: Union[str, Preset] = "fair",
    method_options: Optional[Mapping[str, Mapping[str, Any]]] = None,
    kind: Union[None, str, ModelKind] = None,
) -> Dict[str, Any]:
    """Every named method as a scorer, each option checked and resolved once.

    Args:
        methods (Sequence[str] or MethodRequest): Registered method names
            (any case), or a request checked by
            :func:`~captum_iba.request.check_request` (which then holds every
            option: none in ``resources`` nor ``method_options``).
        resources (Resources): The shared resources and the options given
            for every method.
        setting (str or Preset): The preset whose arguments each method gets
            first. Default ``"fair"``.
        method_options (Mapping, optional): Method name -> its options (by
            name, e.g. ``{"IG": {"ig_steps": 20}}``) or more constructor
            keywords of its scorer (``{"IG": {"n_steps": 20}}``).
        kind (ModelKind or str, optional): The kind of ``resources.model``,
            ``"classifier"`` or ``"causal-lm"``: each method is built as its
            class for that kind (:func:`~captum_iba.registry.method_entry`).
            None: the request's (:attr:`MethodRequest.kind`), else
            :func:`model_kind_of`.

    Returns:
        dict[str, TokenScorer or LLMScorer]: Name -> scorer, in the order of
        ``methods`` (one per variant, see the module docstring).

    ``resources.model`` is a Hugging Face sequence classifier or causal LM,
    or a forward function or plain ``nn.Module`` (no Hugging Face
    ``config``), which is explained as a classifier, as Captum explains a
    ``forward_func``: called with the token ids (then the attention mask and
    the segment ids, where given) in a Hugging Face model's positional
    order, its output (or its ``logits``), ``(B, classes)``, is read as a
    classifier's. A method that reaches into the model needs what it reads
    there (IG: ``get_input_embeddings()``; IBA: a ``layer`` given, where the
    module has no layer stack).

    Raises:
        ValueError: Before anything is built: for a Hugging Face model of no
            kind the package explains (another head, an encoder-decoder: a
            :class:`~captum_iba.attr.kinds.NotExplainedError` naming its
            class), an unknown method, an option no chosen method takes, a
            bad value, options for a method not asked for, or a method that
            does not explain the model's kind. While building: for a layer
            out of range.
    """
    preset = get_preset(setting)
    if isinstance(methods, MethodRequest):
        if resources.given() or method_options:
            raise ValueError(
                "give the options in the request, or give names and options"
            )
        request = methods
    else:
        request = check_request(
            methods, resources.given(), method_options, setting=preset.name
        )
    # the kind's object from here on (given as an object or a name)
    kind = kind_named(
        kind or request.kind or model_kind_of(request.methods, resources.model)
    )
    # (a request checked for the model's kind is not checked again)
    request.checked_for(kind) or check_model_kind(request.methods, kind)
    out: Dict[str, Any] = {}
    for method in request.methods:
        entry = method_entry(method, kind)
        values = _method_values(method, request, resources, kind)
        kwargs = {**preset.scorer_arguments(entry.name, kind), **entry.defaults}
        for used in entry.facts.get("uses", ()):
            kwargs[used] = getattr(resources, used)
        varying = [k for k, v in values.items() if len(v) > 1]
        keyword = {k: OPTIONS.entry(k).facts["kwarg"] for k in values}
        kwargs.update({keyword[k]: v[0] for k, v in values.items() if len(v) == 1})
        for combo in itertools.product(*(values[k] for k in varying)):
            name = entry.name
            if combo:
                name += " (" + ", ".join(_label(v) for v in combo) + ")"
            built = dict(kwargs, **{keyword[k]: v for k, v in zip(varying, combo)})
            extra = request.passthrough.get(method, {})
            built.update(extra)
            try:
                out[name] = entry.build(
                    resources.model,
                    name=name,
                    method_name=entry.name,
                    model_kind=kind,
                    **built,
                    **_common(resources, preset),
                )
            except TypeError as err:  # a keyword its scorer does not take
                unknown_keyword(method, extra, err)
                raise
    return out
