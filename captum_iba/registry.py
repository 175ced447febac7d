"""The names the package knows, one registry per kind, importable without torch.

* :data:`OPTIONS` - the options a method may take (``beta``, ``layer``,
  ``ig_steps``, ...), each declared once: its check, its constructor keyword,
  its command-line flag and its help line;
* :data:`METHODS` - attribution methods as per-token scorers (the evaluation
  harness, ``captum-iba evaluate --methods``, ``explain --method``); each
  entry's facts say which options it takes (``options``), which shared
  resources it uses (``uses``), whether its scores are ``signed``, how a
  word's score is made from its pieces' (``reduction``) and which kind of
  model it explains (``models``: ``"classifier"``, ``"causal-lm"``, see
  :data:`MODEL_KINDS`);
* :data:`PRIORS` - IBA's noise priors (``prior="paper"``, ``--prior``);
* :data:`SETTINGS` - the comparison settings of the degradation test
  (``setting="fair"``, ``--setting``; their presets in
  :mod:`captum_iba.evaluation.presets`).

The degradation test's aggregates are registered beside their functions
(:data:`captum_iba.metrics.aggregates.AGGREGATES`, with
:func:`~captum_iba.metrics.aggregates.register_aggregate`), since they are
used only with the metrics loaded.

IBA's named configurations (``"paper"``, ``"faithful"``, ``"deletion"``) are
registered next to their options, in :data:`captum_iba.attr.options.CONFIGS`.

Entries name where their object lives (``"module:attribute"``); it is
imported only when the name is used, so listing the names (``--help``) and
checking a request's options happen before torch loads. Adding a method or a
prior is one line here plus its class; user code adds its own with
:func:`captum_iba.evaluation.register_scorer`, ``METHODS.add(name, cls, ...)``
or a package's entry point in the group ``captum_iba.methods``
(docs/extending.rst).
"""

from captum_iba._utils import values as _v
from captum_iba._utils.registry import Entry, Registry

__all__ = [
    "DEFAULT_COMPARISON",
    "DEFAULT_LLM_COMPARISON",
    "DEFAULT_LLM_METHOD",
    "DEFAULT_METHOD",
    "METHODS",
    "MODEL_KINDS",
    "OPTIONS",
    "PRIORS",
    "SETTINGS",
    "Entry",
    "Registry",
]

#: The options of the methods, by name. An entry's object is the check of a
#: value (a string from the command line, or a Python value); its facts:
#: ``kwarg`` (the scorer's constructor keyword it sets), ``flag`` (its
#: command-line flag, None for options of the Python API only), ``const``
#: (the value a flag without argument gives), ``variants`` (a list of values
#: makes one scorer per value), ``settings`` (the comparison settings in
#: which it acts; all when absent).
OPTIONS = Registry("option")


def _option(name: str, check: object, summary: str, **facts: object) -> None:
    facts.setdefault("kwarg", name)
    facts.setdefault("flag", "--" + name.replace("_", "-"))
    OPTIONS.add(name, check, summary, facts=facts)


def _prior_names(value: object) -> list:
    """Prior names (registered, any case) or prior objects, as a list."""
    out = []
    for item in _v.comma_list(value):
        if isinstance(item, str):
            if item not in PRIORS:
                raise _v.BadValue(
                    f"unknown prior {item!r}; choose from {', '.join(PRIORS.names())}"
                )
            item = PRIORS.entry(item).name
        out.append(item)
    return out


#: What ``iba-amortized``'s explainer can be trained on (the settings of each:
#: :data:`captum_iba.evaluation.amortized.EXPLAINER_OBJECTIVES`).
EXPLAINER_OBJECTIVES = ("distil", "deletion")


def _explainer_objective(value: object) -> str:
    if value not in EXPLAINER_OBJECTIVES:
        names = ", ".join(map(repr, EXPLAINER_OBJECTIVES))
        raise _v.BadValue(f"must be one of {names}, got {value!r}")
    return str(value)


def _precision(value: object) -> str:
    if value not in ("float32", "bf16", "auto"):
        raise _v.BadValue(f"must be 'float32', 'bf16' or 'auto', got {value!r}")
    return str(value)


_option(
    "layer",
    _v.layer_value,
    "the layer of the method's bottleneck: an encoder (or decoder) layer index "
    "(0-based) or 'embeddings'; default: the method's own (iba, iba-faithful: "
    "int(0.75 x the number of layers), below the last, 4 of 0..5 for the default "
    "model; iba-deletion, iba-amortized and every llm- method: embeddings)",
    variants=True,
)
_option(
    "prior",
    _prior_names,
    "IBA's noise prior(s), comma-separated (one run each; listed below; "
    "dataset: fitted on the model's training corpus); default: the method's "
    "configuration's (iba: the setting's - paper: reference, fair: paper; "
    "iba-faithful: baseline)",
    variants=True,
    metavar="PRIOR[,PRIOR]",
)
_option(
    "beta",
    _v.beta_value,
    "IBA's weight of the information term (Eq. 5), or 'auto' (Appendix A: 10 x "
    "L_task / L_IB per instance); default: the configuration's, 1e-05",
)
_option(
    "steps",
    _v.positive_int,
    "IBA's optimisation steps; default: the configuration's, 10",
)
_option(
    "n_samples",
    _v.positive_int,
    "IBA's noise samples per step; default: the configuration's (iba: 10, "
    "iba-faithful: 5)",
)
_option(
    "seed",
    _v.seed_int,
    "seed of the method's random draws (noise, samples); default 0",
)
_option(
    "precision",
    _precision,
    "IBA's precision: float32, bf16 (bfloat16 autocast: about half the time "
    "on a GPU or a CPU with native bfloat16 - AVX512-BF16, AMX -, scores "
    "close to, not equal to, float32; on other CPUs, e.g. AVX2 only, many "
    "times slower: measured once, float32 runs instead, with a warning; "
    "CAPTUM_IBA_CPU_BF16=on forces it) or auto (bf16 where the GPU or CPU "
    "has it natively, else float32); --bf16 is --precision bf16; default: "
    "auto for iba-deletion (measured as faithful in bf16), float32 for the "
    "others; results record the precision used",
    alias=("--bf16", "bf16"),
)
_option(
    "internal_batch_size",
    _v.positive_int,
    "rows per forward pass (IBA: instances x noise samples; IG: steps)",
    flag=None,
)
_option(
    "ig_steps",
    _v.positive_int,
    "integrated gradients' steps (default: the setting's, paper 10, fair 50)",
    kwarg="n_steps",
)
_option(
    "lime_samples",
    _v.positive_int,
    "LIME's samples (default: the setting's, paper 100, fair 500)",
    kwarg="n_samples",
)
_option(
    "lime_max_length",
    _v.positive_int,
    "paper-setting LIME pads perturbed texts to this length (default 512, the paper's)",
    kwarg="max_length",
    settings=("paper",),
)
_option(
    "shap_samples",
    _v.positive_int,
    "KernelSHAP's coalitions or Shapley sampling's permutations per instance "
    "(default 500 and 25)",
    kwarg="n_samples",
)
_option(
    "explainer_objective",
    _explainer_objective,
    "what iba-amortized's explainer is trained on: 'distil' (default: "
    "iba-deletion's masks distilled) or 'deletion' (iba-deletion's own "
    "objective across the corpus, budget 0.3, warm-started by distillation: "
    "more faithful on SST-2, less on RTE, AG News and IMDB; docs/amortized.rst)",
)

#: The options of IBA's noise configurations, of its deletion configuration,
#: and of every IBA method's run.
_IBA_RUN = ("layer", "steps", "precision", "internal_batch_size")
_IBA_NOISE = _IBA_RUN + ("prior", "beta", "n_samples", "seed")

_EV = "captum_iba.evaluation"
#: The shared resources a method may use besides its options.
RESOURCES = ("explainer",)
#: The kinds of model a method explains (its entry's ``models`` fact): a
#: sequence classifier (one class score per text) or a causal LM (the
#: log-probability of an answer to a prompt).
MODEL_KINDS = ("classifier", "causal-lm")


def _class_fact(cls: type, name: str, default: object) -> object:
    """A class attribute as the class (or a base) sets it, not a property."""
    for klass in cls.__mro__:
        if name in vars(klass):
            value = vars(klass)[name]
            return default if isinstance(value, property) else value
    return default


def method_facts(cls: type) -> tuple:
    """A user's scorer class as a method's summary and facts (what
    :func:`~captum_iba.evaluation.register_scorer` and the entry points of
    ``captum_iba.methods`` register): ``needs`` names the options it takes
    (declared in :data:`OPTIONS`) and the resources it uses; ``signed`` and
    ``word_reduction`` say what its scores are; ``models`` the kinds of model
    it explains (default ``("classifier",)``).

    Raises:
        ValueError: For a need that is neither a declared option nor a
            resource, or an unknown model kind.
    """
    needs = tuple(_class_fact(cls, "needs", ()))
    unknown = [n for n in needs if n not in OPTIONS and n not in RESOURCES]
    if unknown:
        raise ValueError(
            f"{cls.__name__}.needs names {unknown}, which are neither options "
            f"({', '.join(OPTIONS.names())}) nor resources ({', '.join(RESOURCES)})"
        )
    models = tuple(_class_fact(cls, "models", ("classifier",)))
    unknown = [m for m in models if m not in MODEL_KINDS]
    if unknown:
        raise ValueError(
            f"{cls.__name__}.models names {unknown}; the kinds are "
            f"{', '.join(MODEL_KINDS)}"
        )
    facts = dict(
        options=tuple(OPTIONS.entry(n).name for n in needs if n in OPTIONS),
        uses=tuple(n for n in needs if n in RESOURCES),
        signed=bool(_class_fact(cls, "signed", True)),
        reduction=str(_class_fact(cls, "word_reduction", "sum")),
        models=models,
    )
    return (cls.__doc__ or "").strip().split("\n")[0], facts


def _method(
    name: str,
    target: str,
    summary: str,
    options: tuple = (),
    signed: bool = True,
    reduction: str = "sum",
    uses: tuple = (),
    models: tuple = ("classifier",),
    **fixed: object,
) -> None:
    facts = dict(
        options=options, signed=signed, reduction=reduction, uses=uses, models=models
    )
    METHODS.add(name, f"{_EV}.{target}", summary, facts=facts, **fixed)


#: Attribution methods as per-token scorers
#: (:class:`~captum_iba.evaluation.TokenScorer` subclasses), by name; an
#: entry's ``defaults`` are the constructor arguments it fixes (those that are
#: also options are the method's defaults, which a given option replaces), its
#: facts those described in the module docstring.
METHODS = Registry("method", group="captum_iba.methods", adopt=method_facts)
_method(
    "random",
    "scorers:RandomScorer",
    "uniform random scores (floor)",
    ("seed",),
    signed=False,
    reduction="mean",
)
_method(
    "IG",
    "ig:IntegratedGradientsScorer",
    "integrated gradients",
    ("ig_steps", "internal_batch_size"),
)
_method(
    "LIME", "lime:CaptumLimeScorer", "LIME on tokens (Captum)", ("lime_samples", "seed")
)
_method(
    "LIME-text",
    "lime:LimeTextScorer",
    "LIME on words (lime package)",
    ("lime_samples", "lime_max_length", "seed"),
    reduction="mean",  # every piece carries its word's weight
)
_method(
    "IBA",
    "iba:IBAScorer",
    "IBA, the paper's configuration",
    _IBA_NOISE,
    signed=False,
    reduction="mean",
    config="paper",
)
_method(
    "iba-faithful",
    "iba:IBAScorer",
    "IBA with noise at an encoder layer, a true information bottleneck (how much "
    "of each token's signal passes): the most faithful of IBA's noise "
    "configurations (docs/faithfulness.rst)",
    _IBA_NOISE,
    signed=False,
    reduction="mean",
    config="faithful",
)
_method(
    "iba-amortized",
    "amortized:IBAAmortizedScorer",
    "amortized IBA: an explainer taught by iba-deletion once per model, then one "
    "forward pass per attribution (docs/amortized.rst)",
    ("layer", "explainer_objective"),
    signed=False,
    reduction="mean",
    uses=("explainer",),
    layer="embeddings",
)
_method(
    "iba-deletion",
    "iba:IBAScorer",
    "IBA's mask deleting tokens through the attention of every layer, with the "
    "complement term: no noise, so no information is measured, but the most "
    "faithful configuration measured (docs/faithfulness.rst)",
    _IBA_RUN,
    signed=False,
    reduction="mean",
    config="deletion",
    layer="embeddings",
)
_method("LOO", "loo:LeaveOneOutScorer", "leave-one-out (deletion)")
_method("occlusion", "captum_methods:OcclusionScorer", "occlusion by [PAD], masked")
_method("occlusion-mask", "captum_methods:OcclusionMaskScorer", "occlusion by [MASK]")
_method(
    "grad-x-act",
    "captum_methods:GradientXActivationScorer",
    "gradient x activation of the embeddings",
)
_method(
    "kernel-shap",
    "captum_methods:KernelShapScorer",
    "KernelSHAP on tokens",
    ("shap_samples", "seed"),
)
_method(
    "shapley",
    "captum_methods:ShapleySamplingScorer",
    "Shapley value sampling on tokens",
    ("shap_samples", "seed"),
)
_method(
    "AttnLRP",
    "attnlrp:AttnLRPScorer",
    "attention-aware LRP (needs lxt and transformers 4.x)",
)

# Methods for causal LMs (generative models): which prompt tokens the
# log-probability of an answer needs, per output token and for the whole
# answer (captum_iba.evaluation.llm_scorers; IBA on the batch route, Captum's
# methods through its LLMAttribution / LLMGradientAttribution).
_LLM = ("causal-lm",)
_llm = "llm_scorers:"
_method(
    "llm-iba",
    _llm + "LLMIBAScorer",
    "IBA for a causal LM, the paper's configuration (noise and readout as the "
    "paper's; at the token embeddings unless --layer)",
    _IBA_NOISE,
    signed=False,
    reduction="mean",
    models=_LLM,
    config="paper",
)
_method(
    "llm-iba-faithful",
    _llm + "LLMIBAScorer",
    "IBA for a causal LM, the faithful configuration (deletion-like prior) with "
    "one mask weight per token",
    _IBA_NOISE,
    signed=False,
    reduction="mean",
    models=_LLM,
    config="faithful",
    mask="token",
)
_method(
    "llm-iba-deletion",
    _llm + "LLMIBAScorer",
    "IBA for a causal LM, deletion through the causal attention from the token "
    "embeddings, with the complement term",
    _IBA_RUN,
    signed=False,
    reduction="mean",
    models=_LLM,
    config="deletion",
    layer="embeddings",
)
_method(
    "llm-random",
    _llm + "LLMRandomScorer",
    "uniform random scores of the prompt's tokens (floor)",
    ("seed",),
    signed=False,
    reduction="mean",
    models=_LLM,
)
_method(
    "llm-ablation",
    _llm + "CaptumLLMScorer",
    "feature ablation of each prompt token (Captum's LLMAttribution)",
    models=_LLM,
    captum="FeatureAblation",
)
_method(
    "llm-shapley",
    _llm + "CaptumLLMScorer",
    "Shapley value sampling on prompt tokens (Captum's LLMAttribution)",
    ("shap_samples", "seed"),
    models=_LLM,
    captum="ShapleyValueSampling",
)
_method(
    "llm-lime",
    _llm + "CaptumLLMScorer",
    "LIME on prompt tokens (Captum's LLMAttribution; the whole answer only)",
    ("lime_samples", "seed"),
    models=_LLM,
    captum="Lime",
)
_method(
    "llm-kernel-shap",
    _llm + "CaptumLLMScorer",
    "KernelSHAP on prompt tokens (Captum's LLMAttribution; the whole answer only)",
    ("shap_samples", "seed"),
    models=_LLM,
    captum="KernelShap",
)
_method(
    "llm-ig",
    _llm + "CaptumLLMScorer",
    "integrated gradients of the token embeddings (Captum's LLMGradientAttribution)",
    ("ig_steps", "internal_batch_size"),
    models=_LLM,
    captum="LayerIntegratedGradients",
)
_method(
    "llm-saliency",
    _llm + "CaptumLLMScorer",
    "the gradient at the token embeddings, summed over features (Captum's "
    "LLMGradientAttribution)",
    models=_LLM,
    captum="Saliency",
)
_method(
    "llm-attnlrp",
    "attnlrp:LLMAttnLRPScorer",
    "attention-aware LRP of the answer's logits (needs lxt and transformers 4.x)",
    models=_LLM,
)
_method(
    "llm-input-x-gradient",
    _llm + "CaptumLLMScorer",
    "input x gradient of the token embeddings (Captum's LLMGradientAttribution)",
    models=_LLM,
    captum="InputXGradient",
)

#: What ``explain`` and ``attribute`` run when no method is named: the most
#: faithful IBA measured (docs/faithfulness.rst, second round).
DEFAULT_METHOD = "iba-deletion"
#: What ``explain`` runs on a causal LM when no method is named (docs/llm.rst
#: says why).
DEFAULT_LLM_METHOD = "llm-iba-deletion"
#: What ``evaluate`` compares when no method is named.
DEFAULT_COMPARISON = ("iba-deletion", "iba-faithful", "IG", "LIME", "random")
#: What ``evaluate --model <causal LM>`` compares when no method is named.
DEFAULT_LLM_COMPARISON = (
    "llm-iba-deletion",
    "llm-iba-faithful",
    "llm-ig",
    "llm-ablation",
    "llm-random",
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
