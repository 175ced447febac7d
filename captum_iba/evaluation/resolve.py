"""Names to scorers, once: the one resolver of the harness, the CLI and
``reproduce``.

A run names its methods (:data:`captum_iba.registry.METHODS`) and gives the
shared :class:`Resources` (the model, a layer index, prior names, a seed, ...).
:func:`build_scorers` resolves each resource once - the layer index into a
:class:`~captum_iba.attr.LayerRef`, prior names into priors (fitting those that
need data) - and builds every method with what its class declares it
:attr:`~captum_iba.evaluation.TokenScorer.needs`. A resource given as several
values (e.g. two priors) makes one scorer per value, named ``"IBA (paper)"``,
``"IBA (dataset)"``; the registry entry's own arguments (e.g.
``iba-faithful``'s configuration) are never replaced by a resource.

Arguments are applied in this order, later ones winning: the preset's for the
method, the resources it needs, the registry entry's own, ``method_options``.
"""

import itertools
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from torch import nn

from captum_iba.attr.priors import NoisePrior, PriorLike, resolve_prior
from captum_iba.attr.text import LayerRef, as_layer_ref, resolve_layer
from captum_iba.evaluation.corpus import encoded_batches
from captum_iba.evaluation.presets import Preset, get_preset
from captum_iba.evaluation.scorers import TokenScorer
from captum_iba.registry import METHODS

__all__ = ["Resources", "build_scorers"]

LayerLike = Union[None, int, nn.Module, LayerRef]


@dataclass
class Resources:
    """What the methods of one run may need, resolved once (see
    :attr:`TokenScorer.needs`).

    Attributes:
        model (nn.Module): The classifier.
        tokenizer (Any): Its tokenizer (special and pad ids come from it).
        layer (int, Module, LayerRef or list, optional): The bottleneck layer:
            an encoder layer index, a module or a
            :class:`~captum_iba.attr.LayerRef`; a list makes one scorer per
            layer. None: :func:`~captum_iba.attr.text.default_layer_index`.
        prior (str, NoisePrior or list, optional): IBA's prior (names from
            :data:`captum_iba.registry.PRIORS`); a list makes one scorer per
            prior. None: the preset's.
        prior_data (CorpusLike or Iterable, optional): A corpus (encoded
            here) or batches, for priors fitted on data (``"dataset"``); read
            only when such a prior is named.
        seed (int, optional): Seed of every seeded method. Default 0.
        internal_batch_size (int, optional): Rows per forward pass (IG, IBA).
        precision (str, optional): IBA's ``"float32"`` or ``"bf16"``.
        max_length (int): Truncation when ``prior_data`` is a corpus.
        special_token_ids (Sequence[int], optional): Default the tokenizer's.
        pad_token_id (int, optional): Default the tokenizer's.
    """

    model: nn.Module
    tokenizer: Any = None
    layer: Any = None
    prior: Any = None
    prior_data: Any = None
    seed: Optional[int] = 0
    internal_batch_size: Optional[int] = None
    precision: Optional[str] = None
    max_length: int = 128
    special_token_ids: Optional[Sequence[int]] = None
    pad_token_id: Optional[int] = None
    _cache: Dict[str, List[Any]] = field(default_factory=dict, repr=False)

    def values(self, key: str) -> List[Any]:
        """The resolved values of resource ``key`` (one per variant; empty
        when not given), resolved on first use and kept."""
        if key not in self._cache:
            self._cache[key] = self._resolve(key)
        return self._cache[key]

    def _resolve(self, key: str) -> List[Any]:
        if key == "layer":
            return [self._layer(v) for v in _several(self.layer)]
        if key == "prior":
            return [self._prior(p) for p in _several(self.prior) if p is not None]
        value = getattr(self, key, None)
        return [] if value is None else [value]

    def _layer(self, value: LayerLike) -> LayerRef:
        if value is None or isinstance(value, int) and not isinstance(value, bool):
            return resolve_layer(self.model, value)
        return as_layer_ref(value)

    def _prior(self, prior: PriorLike) -> NoisePrior:
        layer = self.values("layer")
        data = self._batches if self.prior_data is not None else None
        return resolve_prior(prior, self.model, layer[0].module, data)

    def _batches(self) -> Any:
        """``prior_data`` as batches (a corpus is encoded, 32 at a time)."""
        data = self.prior_data
        if hasattr(data, "texts") and hasattr(data, "labels"):
            return encoded_batches(self.tokenizer, data, self.max_length, 32)
        return data


def _several(value: Any) -> List[Any]:
    """A resource given as one value or a list of values (a LayerRef is one)."""
    if isinstance(value, (list, tuple)) and not isinstance(value, LayerRef):
        return list(value)
    return [value]


def _label(value: Any) -> str:
    if isinstance(value, LayerRef):
        return value.label
    return getattr(value, "name", None) or str(value)


def build_scorers(
    methods: Sequence[str],
    resources: Resources,
    setting: Union[str, Preset] = "fair",
    method_options: Optional[Mapping[str, Mapping[str, Any]]] = None,
) -> Dict[str, TokenScorer]:
    """Every named method as a scorer, each resource resolved once.

    Args:
        methods (Sequence[str]): Registered method names (any case).
        resources (Resources): The shared resources.
        setting (str or Preset): The preset whose arguments each method gets
            first. Default ``"fair"``.
        method_options (Mapping, optional): Method name -> more constructor
            arguments of its scorer (they win over everything).

    Returns:
        dict[str, TokenScorer]: Name -> scorer, in the order of ``methods``
        (one per variant, see the module docstring).

    Raises:
        ValueError: For an unknown method (before anything is built) or
            resource value.
    """
    entries = [METHODS.entry(m) for m in methods]
    preset = get_preset(setting)
    extra = {METHODS.entry(k).name: dict(v) for k, v in (method_options or {}).items()}
    common = dict(
        tokenizer=resources.tokenizer,
        special_token_ids=resources.special_token_ids,
        pad_token_id=resources.pad_token_id,
        setting=preset.name,
    )
    out: Dict[str, TokenScorer] = {}
    for entry in entries:
        cls = entry.load()
        keys = [k for k in cls.needs if k not in entry.defaults]
        options = {k: resources.values(k) for k in keys}
        varying = [k for k in keys if len(options[k]) > 1]
        fixed = {k: v[0] for k, v in options.items() if len(v) == 1}
        for combo in itertools.product(*(options[k] for k in varying)):
            name = entry.name
            if combo:
                name += " (" + ", ".join(_label(v) for v in combo) + ")"
            kwargs = {**preset.scorer_arguments(entry.name), **fixed}
            kwargs.update(zip(varying, combo))
            kwargs.update(extra.get(entry.name, {}))
            out[name] = entry.build(resources.model, name=name, **kwargs, **common)
    return out
