"""The names the package knows, one registry per kind, importable without torch.

* :data:`OPTIONS` - the options a method may take (``beta``, ``layer``,
  ``ig_steps``, ...), each declared once: its check, its constructor keyword,
  its command-line flag and its help line (declared in
  :mod:`captum_iba.method_options`, re-exported here);
* :data:`METHODS` - attribution methods as per-token scorers (the evaluation
  harness, ``captum-iba evaluate --methods``, ``explain --method``), one name
  per method for a classifier and a causal LM alike; each entry's facts say
  which options it takes (``options``), which shared resources it uses
  (``uses``), whether its scores are ``signed``, how a word's score is made
  from its pieces' (``reduction``), the kinds of model it explains
  (``models``: ``"classifier"``, ``"causal-lm"``, see :data:`MODEL_KINDS`),
  whether it scores a context's sources, so needs them (``sources``: a
  prompt without a context is refused before anything loads), whether it
  explains a part of a causal LM's answer (``spans``: ``answer_span=``,
  ``--answer-sentences``; refused before anything loads where not), the optional
  package it needs (``package``: its module and install command, checked
  before the weights load) and its one class, which explains every kind of
  ``models`` through the one contract ``scorer.attribute(batch)`` - stated
  once, here, and read by the help texts, the pages, the resolver and the
  scorers' own ``signed``, ``word_reduction`` and ``needs_sources``.
  :func:`method_entry` gives a name's entry for a kind of model, refusing
  a kind the method does not explain before anything loads; the ``llm-*``
  names (added after 0.2.0, deprecated since 0.3, removed in 0.4) are
  deprecated other names (:data:`LLM_NAMES`);
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
checking a request's options happen before torch loads. The registry holds
facts and import paths only: it imports no method (the layer above imports
it, never the reverse). Adding a method (for one kind of model or both) or a
prior is one entry here plus its class; user code adds its own with
:func:`captum_iba.evaluation.register_scorer`, ``METHODS.add(name, cls, ...)``
or a package's entry point in the group ``captum_iba.methods``
(docs/extending.rst).

Why an entry names one class and no argument per kind: a method is one
class for every kind it explains (``_method(name, "module:Class", ...,
models=MODEL_KINDS)``), whose ``attribute(batch)`` takes either kind of
batch; what differs per kind (IBA's causal-LM wrapper and precision, the
Captum class that Captum's LLM API runs) is decided in the class, once, from
the model's kind (``TokenScorer.kind``), so the kinds are stated once, here,
and a fixed argument (``config``, ``layer``) is the same whatever the model.
``tests/app/test_method_names.py`` checks that each built-in class
implements the hook of every kind its entry declares.
"""

from dataclasses import replace
from types import MappingProxyType
from typing import Any, Dict, Optional, Tuple

from captum_iba._utils import values as _v
from captum_iba._utils.registry import Entry, Registry
from captum_iba.method_options import (
    EXPLAINER_OBJECTIVES,
    OPTIONS,
    SURROGATE_DESIGNS,
    SURROGATE_OUTCOMES,
)

__all__ = [
    "DEFAULT_COMPARISON",
    "DEFAULT_LLM_COMPARISON",
    "DEFAULT_CONTEXT_METHOD",
    "DEFAULT_LLM_METHOD",
    "DEFAULT_METHOD",
    "EXPLAINER_OBJECTIVES",
    "LLM_NAMES",
    "METHODS",
    "MODEL_KINDS",
    "OPTIONS",
    "PRIORS",
    "SETTINGS",
    "SURROGATE_DESIGNS",
    "SURROGATE_OUTCOMES",
    "Entry",
    "Registry",
    "explains",
    "method_entry",
    "method_kinds",
]

#: The options of IBA's noise configurations, of its deletion configuration,
#: and of every IBA method's run.
_IBA_RUN = ("layer", "steps", "precision", "internal_batch_size")
_IBA_NOISE = _IBA_RUN + ("prior", "beta", "n_samples", "seed")

_EV = "captum_iba.evaluation"
#: The install command of the context methods' optional package
#: (ContextCite's: the ``context`` extra).
_CONTEXT_EXTRA = "pip install {} (or pip install captum-iba[context])"
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
    it explains (default ``("classifier",)``; the class explains each);
    ``package`` (optional) the module and install command of the optional
    package it needs, checked before the weights load.

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
        sources=bool(_class_fact(cls, "needs_sources", False)),
        reads_answer=bool(_class_fact(cls, "reads_answer_text", False)),
        spans=bool(_class_fact(cls, "explains_spans", False)),
    )
    package = _class_fact(cls, "package", None)
    if package is not None:
        facts["package"] = tuple(package)
    return (cls.__doc__ or "").strip().split("\n")[0], facts


def _method(
    name: str,
    target: str,
    summary: str,
    options: tuple = (),
    signed: bool = True,
    reduction: str = "sum",
    uses: tuple = (),
    also: tuple = (),
    models: tuple = ("classifier",),
    sources: bool = False,
    package: Optional[Tuple[str, str]] = None,
    reads_answer: bool = False,
    spans: bool = True,
    **fixed: object,
) -> None:
    """Register a method: ``target`` is its one class (``"module:Class"`` in
    :mod:`captum_iba.evaluation`), which explains each kind of model of
    ``models``; ``fixed`` are the arguments it always gets, whatever the
    kind; ``also`` its other names. The rest are the method's facts, the
    same for every kind (``sources``: it scores a context's sources;
    ``package``: the module and install command of the optional package it
    needs; ``reads_answer``: it re-reads a causal LM's answer as text, as
    AT2's and ContextCite's packages do; ``spans``: it explains a part of a
    causal LM's answer - the log-probability of some of its tokens, those
    before read as given - as it explains the whole, through the batch's
    explained tokens, :attr:`~captum_iba.attr.batches.PromptBatch.explained`;
    a method fitted for the whole answer, or whose package reads only the
    whole, does not)."""
    facts = dict(
        options=options, signed=signed, reduction=reduction, uses=uses,
        models=models, sources=sources, reads_answer=reads_answer, spans=spans,
    )  # fmt: skip
    if package is not None:
        facts["package"] = package
    entry = METHODS.add(name, f"{_EV}.{target}", summary, facts=facts, **fixed)
    for other in also:
        METHODS.alias(other, entry)
    _BUILT_IN.update({n.lower(): entry for n in (name,) + also})


#: Attribution methods as per-token scorers, by name (any case): one name and
#: one class (a :class:`~captum_iba.evaluation.TokenScorer` subclass) per
#: method, for a classifier and a causal LM alike. An entry's ``target`` is
#: the class, its ``defaults`` the constructor arguments it always gets, its
#: ``models`` fact the kinds of model it explains (:func:`method_entry`
#: refuses the others). Its other facts are described in the module
#: docstring.
METHODS = Registry("method", group="captum_iba.methods", adopt=method_facts)
_BUILT_IN: Dict[str, Entry] = {}  # (read below without the entry points)
_method(
    "random",
    "random_scorer:RandomScorer",
    "uniform random scores (floor)",
    ("seed",),
    signed=False,
    reduction="mean",
    models=MODEL_KINDS,
)
_method(
    "IG",
    "ig:IntegratedGradientsScorer",
    "integrated gradients (a causal LM: of the token embeddings, Captum's "
    "LLMGradientAttribution)",
    ("ig_steps", "internal_batch_size"),
    models=MODEL_KINDS,
)
_method(
    "LIME",
    "lime:CaptumLimeScorer",
    "LIME on tokens (Captum; a causal LM: its LLMAttribution, the whole answer only)",
    ("lime_samples", "seed"),
    models=MODEL_KINDS,
)
_method(
    "LIME-text",
    "lime:LimeTextScorer",
    "LIME on words (lime package)",
    ("lime_samples", "lime_max_length", "seed"),
    reduction="mean",  # every piece carries its word's weight
)
_IBA = "iba:IBAScorer"
#: The share of the prompt's tokens ``iba-fast``'s second step deletes
#: (docs/studies/llm_default.rst: chosen on the IMDB search split).
REST_SHARE = 0.25
_method(
    "IBA",
    _IBA,
    "IBA, the paper's configuration (a causal LM: at the token embeddings unless "
    "--layer)",
    _IBA_NOISE,
    signed=False,
    reduction="mean",
    config="paper",
    models=MODEL_KINDS,
)
_method(
    "iba-faithful",
    _IBA,  # a causal LM: one mask weight per token (attr.llm.LLM_MASKS)
    "IBA with noise at a layer, a true information bottleneck (how much of each "
    "token's signal passes): the most faithful of IBA's noise configurations "
    "measured (a causal LM: one mask weight per token)",
    _IBA_NOISE,
    signed=False,
    reduction="mean",
    config="faithful",
    models=MODEL_KINDS,
)
_method(
    "iba-amortized",
    "amortized:IBAAmortizedScorer",
    "amortized IBA: an explainer taught by iba-deletion once per model, then one "
    "forward pass per attribution",
    ("layer", "explainer_objective"),
    signed=False,
    reduction="mean",
    uses=("explainer",),
    layer="embeddings",
)
_method(
    "iba-deletion",
    _IBA,
    "IBA's mask that deletes tokens through the attention of every layer, "
    "fitted so that the tokens it keeps suffice for the output explained (a "
    "class, an answer) and those it deletes, alone, do not: a token's score is "
    "the share of it the output needs (0 to 1), not information in nats, as no "
    "noise is added; the most faithful configuration measured",
    _IBA_RUN,
    signed=False,
    reduction="mean",
    config="deletion",
    layer="embeddings",
    models=MODEL_KINDS,
)
_method(
    "iba-fast",
    _IBA,
    "iba-deletion in two steps, for a budget: one step from every token half "
    "kept, then one more on the prompt with the tokens that step ranks highest "
    "deleted for real, which finds the tokens that still carry the answer "
    "without them (on prompts of 128 scored tokens or more; docs/llm.rst)",
    _IBA_RUN + ("rest_share",),
    signed=False,
    reduction="mean",
    config="deletion",
    layer="embeddings",
    steps=1,
    rest_share=REST_SHARE,
    models=("causal-lm",),
)
_method(
    "iba-sources",
    _IBA,
    "iba-deletion with one mask weight per source of a context (a sentence, "
    "a passage, a chat turn), shared by its tokens: which sources the answer "
    "needs (a prompt with sources)",
    _IBA_RUN,
    signed=False,
    reduction="mean",
    config="deletion",
    layer="embeddings",
    mask="source",
    models=("causal-lm",),
    sources=True,
)
_method(
    "loso",
    "source_methods:LeaveOneSourceOutScorer",
    "leave one source out: how much the response's log-probability falls when "
    "one source of the context alone is left out of the prompt (a prompt with "
    "sources; on a prompt task its content's words)",
    ("internal_batch_size",),
    reduction="mean",
    models=("causal-lm",),
    sources=True,
)
_method(
    "shapley-sources",
    "source_methods:ShapleySourcesScorer",
    "Shapley value sampling over the sources of a context (Captum's "
    "LLMAttribution, one template slot per source; a prompt with sources)",
    ("shap_samples", "seed"),
    reduction="mean",
    models=("causal-lm",),
    sources=True,
)
_method(
    "iba-surrogate",
    "surrogate:IBASurrogateScorer",
    "ContextCite's linear surrogate of the output's log-odds over ablations "
    "(drawn as --surrogate-design says), its weights shrunk toward one "
    "iba-deletion step's scores instead of toward 0: IBA as the surrogate's "
    "prior, fitted to the outcomes' ranks; of a context's sources where the "
    "prompt has them (16 ablations), else of the words (a class, an answer: "
    "the degradation test's deletion, 16 to 64 ablations by the words' number)",
    (
        "ablations",
        "surrogate_outcome",
        "surrogate_design",
        "seed",
        "internal_batch_size",
    ),
    reduction="mean",
    models=MODEL_KINDS,
)
for _ablations in (32, 256):
    _method(
        f"contextcite-{_ablations}",
        "context_cite:ContextCiteScorer",
        f"ContextCite with {_ablations} ablations, from its own package (pip "
        "install context-cite): a sparse linear surrogate of the response's "
        "logit-probability over the sources (a prompt with sources; on a "
        "prompt task its content's words)",
        ("seed",),
        reduction="mean",
        models=("causal-lm",),
        sources=True,
        package=("context_cite", _CONTEXT_EXTRA.format("context-cite")),
        reads_answer=True,
        num_ablations=_ablations,
    )
_method(
    "LOO",
    "loo:LeaveOneOutScorer",
    "leave-one-out: how much the output explained falls when one token alone is "
    "removed (a classifier: deleted; a causal LM: Captum's FeatureAblation, the "
    "token replaced by the pad token)",
    also=("ablation",),
    models=MODEL_KINDS,
)
_method(
    "occlusion",
    "captum_methods:OcclusionScorer",
    "occlusion by [PAD], masked",
)
_method(
    "occlusion-mask",
    "captum_methods:OcclusionMaskScorer",
    "occlusion by [MASK]",
)
_method(
    "grad-x-act",
    "captum_methods:GradientXActivationScorer",
    "gradient x activation of the embeddings",
)
_method(
    "kernel-shap",
    "captum_methods:KernelShapScorer",
    "KernelSHAP on tokens (a causal LM: Captum's LLMAttribution, the whole answer "
    "only)",
    ("shap_samples", "seed"),
    models=MODEL_KINDS,
)
_method(
    "shapley",
    "captum_methods:ShapleySamplingScorer",
    "Shapley value sampling on tokens (a causal LM: Captum's LLMAttribution)",
    ("shap_samples", "seed"),
    models=MODEL_KINDS,
)
_method(
    "saliency",
    "captum_methods:SaliencyScorer",
    "the gradient at the embeddings the first layer reads, summed over features "
    "(Captum's LayerGradientXActivation without the inputs)",
    models=MODEL_KINDS,
)
_method(
    "input-x-gradient",
    "captum_methods:InputXGradientScorer",
    "input x gradient of the token embeddings, summed over features",
    models=MODEL_KINDS,
)
_method(
    "AttnLRP",
    "attnlrp:AttnLRPScorer",
    "attention-aware LRP (a causal LM: of the answer's logits; needs lxt and "
    "transformers 4.x)",
    models=MODEL_KINDS,
)


def method_entry(name: str, kind: Any = "classifier") -> Entry:
    """Method ``name``'s entry, checked to explain models of ``kind``: its
    class, its fixed arguments and its facts (a deprecated name gives its
    entry without a warning: its request warned).

    Raises:
        ValueError: For an unknown name, or a kind the method does not
            explain (naming the kinds it does).
    """
    return _for_kind(METHODS.entry(name, warn=False), kind)


def method_kinds(entry: Entry) -> Tuple[str, ...]:
    """The kinds of model a method's entry explains (its ``models`` fact;
    a classifier's when it says none)."""
    return tuple(entry.facts.get("models", ("classifier",)))


def explains(method: str, kind: Any) -> bool:
    """Whether the registered ``method`` explains models of ``kind`` (a
    :class:`~captum_iba.attr.kinds.ModelKind` or a name of
    :data:`MODEL_KINDS`), by its entry's ``models`` fact."""
    kind = getattr(kind, "name", kind)
    return kind in method_kinds(METHODS.entry(method, warn=False))


def _for_kind(entry: Entry, kind: Any) -> Entry:
    kind = getattr(kind, "name", kind)  # a ModelKind, or its name
    if kind not in method_kinds(entry):
        raise ValueError(
            f"{entry.name} explains {' and '.join(method_kinds(entry))} models, "
            f"not {kind!r}"
        )
    return entry


#: The ``llm-*`` names of the methods for causal LMs (added after 0.2.0,
#: deprecated since 0.3) -> the name to write now: the
#: same method, class and arguments on a causal LM (shown under the old name,
#: so that records keep it). They work until 0.4, with a
#: ``DeprecationWarning``.
LLM_NAMES = {
    "llm-iba": "iba",
    "llm-iba-faithful": "iba-faithful",
    "llm-iba-deletion": "iba-deletion",
    "llm-random": "random",
    "llm-ablation": "ablation",
    "llm-shapley": "shapley",
    "llm-lime": "lime",
    "llm-kernel-shap": "kernel-shap",
    "llm-ig": "ig",
    "llm-saliency": "saliency",
    "llm-attnlrp": "attnlrp",
    "llm-input-x-gradient": "input-x-gradient",
}
for _old, _new in LLM_NAMES.items():
    _kind = _for_kind(_BUILT_IN[_new], "causal-lm")
    _facts = dict(_kind.facts, models=("causal-lm",), renamed=_kind.name)
    METHODS.alias(
        _old,
        replace(_kind, name=_old, facts=MappingProxyType(_facts)),
        deprecated=f"the method name {_old!r} is deprecated since 0.3; removed in 0.4: "
        f"write {_new!r}, the same method for a classifier or a causal LM",
    )

#: What ``explain`` and ``attribute`` run when no method is named, on a
#: classifier or a causal LM: the most faithful IBA measured
#: (docs/studies/faithfulness_round2.rst; docs/llm.rst).
DEFAULT_METHOD = "iba-deletion"
#: The same (earlier releases had a name per kind).
DEFAULT_LLM_METHOD = DEFAULT_METHOD
#: What ``explain`` runs for a causal LM's answer to a query about a context
#: when no method is named: ContextCite's surrogate with one deletion step as
#: its prior, 16 ablations - level with ContextCite-32's LDS and top-1 on
#: contexts the project never saw, at about 0.6x its CPU time
#: (docs/studies/context_surrogate_fresh.rst); ``iba-deletion`` cost 18x as
#: much there for a lower LDS.
DEFAULT_CONTEXT_METHOD = "iba-surrogate"
#: What ``evaluate`` compares when no method is named.
DEFAULT_COMPARISON = ("iba-deletion", "iba-faithful", "IG", "LIME", "random")
#: What ``evaluate --model <causal LM>`` compares when no method is named.
DEFAULT_LLM_COMPARISON = ("iba-deletion", "iba-faithful", "IG", "ablation", "random")


def prior_names(value: object) -> list:
    """Prior names (registered, any case) or prior objects, as a list (the
    check of the option ``prior``)."""
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
