"""The names the package knows, one registry per kind, importable without torch.

* :data:`METHODS` - attribution methods as per-token scorers (the evaluation
  harness, ``captum-iba evaluate --methods``, ``explain --method``);
* :data:`PRIORS` - IBA's noise priors (``prior="paper"``, ``--priors``);
* :data:`SETTINGS` - the comparison settings of the degradation test
  (``setting="fair"``, ``--setting``; their presets in
  :mod:`captum_iba.evaluation.presets`).

IBA's named configurations (``"paper"``, ``"faithful"``) are registered next
to their options, in :data:`captum_iba.attr.options.CONFIGS`.

Entries name where their object lives (``"module:attribute"``); it is
imported only when the name is used, so listing the names (``--help``) is
fast. Adding a method or a prior is one line here plus its class; user code
adds its own with :func:`captum_iba.evaluation.register_scorer` or
``METHODS.add(name, cls)`` / ``PRIORS.add(name, cls)``.
"""

from captum_iba._utils.registry import Entry, Registry

__all__ = ["METHODS", "PRIORS", "SETTINGS", "Entry", "Registry"]

_EV = "captum_iba.evaluation"

#: Attribution methods as per-token scorers (:class:`~captum_iba.evaluation.TokenScorer`
#: subclasses), by name; ``defaults`` are the constructor arguments an entry fixes.
METHODS = Registry("method")
METHODS.add("random", f"{_EV}.scorers:RandomScorer", "uniform random scores (floor)")
METHODS.add("IG", f"{_EV}.ig:IntegratedGradientsScorer", "integrated gradients")
METHODS.add("LIME", f"{_EV}.lime:CaptumLimeScorer", "LIME on tokens (Captum)")
METHODS.add("LIME-text", f"{_EV}.lime:LimeTextScorer", "LIME on words (lime package)")
METHODS.add(
    "IBA", f"{_EV}.iba:IBAScorer", "IBA, the paper's configuration", config="paper"
)
METHODS.add(
    "iba-faithful",
    f"{_EV}.iba:IBAScorer",
    "IBA, the most faithful information bottleneck measured (docs/faithfulness.rst)",
    config="faithful",
    prior=None,
)
METHODS.add(
    "iba-amortized",
    f"{_EV}.amortized:IBAAmortizedScorer",
    "amortized IBA: an explainer taught by iba-deletion once per model, then one "
    "forward pass per attribution (docs/amortized.rst)",
    layer="embeddings",
)
METHODS.add(
    "iba-deletion",
    f"{_EV}.iba:IBAScorer",
    "IBA's mask acting by deletion through attention, with the complement term: "
    "the most faithful IBA measured (docs/faithfulness.rst)",
    config="deletion",
    layer="embeddings",
    prior=None,
)
METHODS.add("LOO", f"{_EV}.loo:LeaveOneOutScorer", "leave-one-out (deletion)")
METHODS.add(
    "occlusion",
    f"{_EV}.captum_methods:OcclusionScorer",
    "occlusion by [PAD], masked",
)
METHODS.add(
    "occlusion-mask",
    f"{_EV}.captum_methods:OcclusionMaskScorer",
    "occlusion by [MASK]",
)
METHODS.add(
    "grad-x-act",
    f"{_EV}.captum_methods:GradientXActivationScorer",
    "gradient x activation of the embeddings",
)
METHODS.add(
    "kernel-shap", f"{_EV}.captum_methods:KernelShapScorer", "KernelSHAP on tokens"
)
METHODS.add(
    "shapley",
    f"{_EV}.captum_methods:ShapleySamplingScorer",
    "Shapley value sampling on tokens",
)
METHODS.add(
    "AttnLRP",
    f"{_EV}.attnlrp:AttnLRPScorer",
    "attention-aware LRP (needs lxt and transformers 4.x)",
)

_PR = "captum_iba.attr.priors"

#: IBA's noise priors (:class:`~captum_iba.attr.priors.NoisePrior` subclasses).
PRIORS = Registry("prior")
PRIORS.add("paper", f"{_PR}:PaperPrior", "the instance's own layer statistics")
PRIORS.add(
    "reference", f"{_PR}:ReferencePrior", "the released code's (mean = layer input)"
)
PRIORS.add(
    "dataset", f"{_PR}:DatasetPrior", "per-feature statistics fitted on training data"
)
PRIORS.add("baseline", f"{_PR}:BaselinePrior", "deletion-like: the layer on [PAD]")

_PS = "captum_iba.evaluation.presets"

#: The settings of a comparison (:class:`~captum_iba.evaluation.presets.Preset`).
SETTINGS = Registry("setting")
SETTINGS.add("paper", f"{_PS}:PAPER", "the released code's baselines, quirks included")
SETTINGS.add(
    "fair", f"{_PS}:FAIR", "every method explains the same class, proper masks"
)

# The degradation test's aggregates (AOPC, sufficiency, ...) are registered next
# to their functions, with a decorator: captum_iba.metrics.aggregates.AGGREGATES
# and register_aggregate (the metrics layer may not import this module).
