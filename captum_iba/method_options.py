"""The options the methods take, each declared once (:data:`OPTIONS`),
importable without torch; :mod:`captum_iba.registry` re-exports it beside
the methods that take them.

An option's entry holds the check of a value (a string from the command
line, or a Python value) and its facts: the scorer's constructor keyword it
sets, its command-line flag, the help line. A method's registry entry names
the options it takes (its ``options`` fact).
"""

from typing import Any, Dict

from captum_iba._utils import values as _v
from captum_iba._utils.registry import Registry

__all__ = [
    "EXPLAINER_OBJECTIVES",
    "OPTIONS",
    "SURROGATE_DESIGNS",
    "SURROGATE_OUTCOMES",
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


#: What ``iba-amortized``'s explainer can be trained on, and the fit settings
#: of each beside :data:`~captum_iba.evaluation.amortized.AMORTIZED_SETTINGS`
#: (their one home; torch-free, so the option is checked before torch loads).
#: ``"deletion"``: Eq. (amortized-deletion-loss) of docs/method.rst, budget
#: 0.3 of weight 10, complement weight 1, warm-started by distilling the
#: teacher's masks (issue 30's study, docs/amortized.rst).
EXPLAINER_OBJECTIVES: Dict[str, Dict[str, Any]] = {
    "distil": {},
    "deletion": dict(
        options={"config": "deletion", "seed": 0},
        keep=0.3,
        keep_weight=10.0,
        distil=1.0,
        distil_only=False,
    ),
}


def _one_of(names: Any) -> Any:
    """The check of a value that must be one of ``names``."""

    def check(value: object) -> str:
        if value not in names:
            listed = ", ".join(map(repr, names))
            raise _v.BadValue(f"must be one of {listed}, got {value!r}")
        return str(value)

    return check


#: What ``iba-surrogate``'s linear surrogate can be fitted to, the default
#: first: the ablation outcomes' ranks or their log-odds per response token
#: (:mod:`captum_iba.evaluation.surrogate`).
SURROGATE_OUTCOMES = ("ranks", "log-odds")
#: How ``iba-surrogate`` draws its ablations, the default first: where the
#: sources outnumber what a factorial design separates, the design over the
#: prior's top sources (:func:`captum_iba.evaluation.surrogate.focused_masks`;
#: the factorial design below that), or a factorial design over every source
#: where one fits, at random where none does (0.3.0's draws).
SURROGATE_DESIGNS = ("focused", "factorial")


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
    "model; iba-deletion, iba-amortized and IBA on a causal LM: the token embeddings)",
    variants=True,
)
_option(
    "prior",
    "captum_iba.registry:prior_names",  # the priors' names live there
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
    "rest_share",
    _v.share_value,
    "iba-fast: the share of the prompt's tokens its first step ranks highest "
    "that its second step deletes, to find which of the rest still carry the "
    "answer (default 0.25; 0: one step only)",
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
    "ablations",
    lambda value: _v.int_in(value, 2),
    "iba-surrogate's ablations an input: a two-level fractional factorial "
    "design where one fits, none twice (default: 16 for a context's sources; "
    "for n words the smallest power of two above n, 16 to 64; at least 2; at "
    "most 2^S for S sources or words: then every subset once)",
    kwarg="n_ablations",
)
_option(
    "surrogate_outcome",
    _one_of(SURROGATE_OUTCOMES),
    "what iba-surrogate's linear surrogate is fitted to: 'ranks' (default: the "
    "ablation outcomes' ranks, what the LDS compares) or 'log-odds' (the "
    "response's log-odds per token, as ContextCite; docs/context.rst)",
    kwarg="outcome",
)
_option(
    "surrogate_design",
    _one_of(SURROGATE_DESIGNS),
    "how iba-surrogate draws its ablations: 'focused' (default: a fractional "
    "factorial design over every source where one fits, else over the sources "
    "one deletion step ranks highest, the others at random), 'factorial' (the "
    "design where one fits, else every source at random: 0.3.0's draws); "
    "docs/context.rst",
    kwarg="design",
)
_option(
    "explainer_objective",
    _one_of(EXPLAINER_OBJECTIVES),
    "what iba-amortized's explainer is trained on: 'distil' (default: "
    "iba-deletion's masks distilled) or 'deletion' (iba-deletion's own "
    "objective across the corpus, budget 0.3, warm-started by distillation; "
    "docs/amortized.rst)",
)
