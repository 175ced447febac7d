"""The compared methods' configurations as data: the ``"paper"`` and ``"fair"`` presets.

``"paper"`` reproduces the released code of Jiang et al. (2020), quirks included:

* IG: on the embedding output (``model.base_model.embeddings`` when it exists),
  10 steps, baseline ``[CLS] [PAD] ... [SEP]``, explaining the softmax
  probability of class 0 whatever the label, scores summed over the hidden
  features and L2-normalised per instance (signed).
* LIME: the ``lime`` package's ``LimeTextExplainer`` on the decoded text, 100
  samples, explaining class 1 whatever the label; perturbed texts are
  re-tokenised and padded to ``max_length`` (512) WITHOUT an attention mask; a
  word piece (or punctuation) that matches no LIME word gets the maximum
  weight. Captum's LIME (``"LIME"``) keeps its fair configuration with 100
  samples.
* random: uniform scores.
* IBA: the ``"reference"`` prior (the released code's), target the gold label.

The test itself (``PAPER.test``, a
:class:`~captum_iba.metrics.DegradationOptions`): deletion, levels ``k/9``,
``length_convention="paper"``.

``"fair"`` gives every method the same target as IBA (the label passed in),
proper attention masks and its usual budget:

* IG: the word-embedding layer, 50 steps, the target's logit, raw signed sums.
* LIME (Captum): token features, removed tokens set to ``[PAD]`` and masked out
  of attention, the lime package's text kernel, lime-style sampling, 500
  samples, ridge regression.
* LIME (lime package): LIME words are whole words built from the word pieces
  (so the mapping back onto pieces is exact), removal by deletion with proper
  masks, 500 samples.
* random: uniform scores. IBA: the ``"paper"`` prior (or any prior given).

The test itself (``FAIR.test``): deletion, levels ``k/9`` of the removable tokens.

The tokenizer's ids are added where the test runs
(``preset.test.with_tokenizer(tokenizer)``), so a preset serves any model.
"""

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Dict, Iterator, Mapping, Tuple, Union

from captum_iba.attr.kinds import CLASSIFIER, ModelKind, kind_named
from captum_iba.metrics import PAPER_LEVELS, DegradationOptions, Deletion
from captum_iba.registry import SETTINGS as _SETTING_NAMES

__all__ = [
    "FAIR",
    "FAIR_TEST_SETTINGS",
    "PAPER",
    "PAPER_TEST_SETTINGS",
    "PRESETS",
    "SETTINGS",
    "Preset",
    "get_preset",
]


def _frozen(**kwargs: Any) -> Mapping[str, Any]:
    return MappingProxyType(dict(kwargs))


@dataclass(frozen=True)
class Preset:
    """A named configuration of the degradation test and of every method.

    Attributes:
        name (str): ``"paper"`` or ``"fair"`` (recorded as each scorer's
            ``setting``).
        test (DegradationOptions): The options of
            :func:`~captum_iba.metrics.degradation_test` (no tokenizer ids: add
            them with ``test.with_tokenizer(tokenizer)``).
        scorers (Mapping): Method name -> constructor arguments of its scorer
            for a classifier (methods not listed, and every method's scorer
            for a causal LM, use their class defaults).
        table1 (tuple[str, ...]): The methods IBA is compared with in the
            paper's Table 1 in this setting (``reproduce``): which LIME runs.
        own_prior (bool): Whether IBA's prior in Table 1 is the one the user
            chooses (``reproduce --fair-prior``), else the preset's own.
    """

    name: str
    test: DegradationOptions
    scorers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    table1: Tuple[str, ...] = ("random", "IG", "LIME")
    own_prior: bool = True

    def scorer_arguments(
        self, method: str, kind: Union[str, ModelKind] = CLASSIFIER
    ) -> Dict[str, Any]:
        """The constructor arguments this preset gives ``method``'s scorer
        for models of ``kind`` (a copy; none for a causal LM's:
        :meth:`~captum_iba.attr.kinds.ModelKind.preset_arguments`)."""
        return kind_named(kind).preset_arguments(self, method)


PAPER = Preset(
    name="paper",
    test=DegradationOptions(
        removal=Deletion(),
        levels=PAPER_LEVELS,
        length_convention="paper",
        order="morf",
    ),
    scorers=_frozen(
        IG=_frozen(
            layer="embeddings",
            n_steps=10,
            output="probs",
            normalize="l2",
            target_class=0,
        ),
        LIME=_frozen(n_samples=100),
        **{"LIME-text": _frozen(mode="released", n_samples=100, target_class=1)},
        IBA=_frozen(prior="reference"),
    ),
    table1=("random", "IG", "LIME-text"),
    own_prior=False,
)

FAIR = Preset(
    name="fair",
    test=replace(PAPER.test, length_convention="tokens"),
    scorers=_frozen(
        IG=_frozen(n_steps=50),
        LIME=_frozen(n_samples=500),
        **{"LIME-text": _frozen(mode="words", n_samples=500)},
        IBA=_frozen(prior="paper"),
    ),
)


class _Presets(Mapping):
    """The presets by name, read from the one registry of setting names
    (:data:`captum_iba.registry.SETTINGS`): a setting registered there is a
    preset here."""

    def __getitem__(self, name: str) -> Preset:
        if name not in _SETTING_NAMES:
            raise KeyError(name)
        return _SETTING_NAMES.load(name)

    def __iter__(self) -> Iterator[str]:
        return iter(_SETTING_NAMES.names())

    def __len__(self) -> int:
        return len(_SETTING_NAMES)


#: The presets by name (the registry's settings).
PRESETS: Mapping[str, Preset] = _Presets()
#: Their names (registered, with a summary each, in
#: :data:`captum_iba.registry.SETTINGS`, which ``--help`` lists).
SETTINGS: Tuple[str, ...] = tuple(_SETTING_NAMES.names())


def _test_keywords(options: DegradationOptions) -> Dict[str, Any]:
    """The preset's test as the keyword arguments of earlier versions."""
    return dict(
        removal=options.removal.name,
        levels=list(options.levels),
        length_convention=options.length_convention,
        order=options.order,
    )


#: Deprecated (use ``PAPER.test``): the paper's test as the old keyword
#: arguments of :func:`~captum_iba.metrics.degradation_test`, which warns.
PAPER_TEST_SETTINGS: Dict[str, Any] = _test_keywords(PAPER.test)
#: Deprecated (use ``FAIR.test``): the fair test as the old keyword arguments.
FAIR_TEST_SETTINGS: Dict[str, Any] = _test_keywords(FAIR.test)


def get_preset(setting: Union[str, Preset]) -> Preset:
    """The preset named ``setting`` (or ``setting`` itself).

    Args:
        setting (str or Preset): ``"paper"``, ``"fair"`` or a preset.

    Returns:
        Preset: The preset.

    Raises:
        ValueError: For an unknown name (the message lists the settings).
    """
    if isinstance(setting, Preset):
        return setting
    return _SETTING_NAMES.load(setting)
