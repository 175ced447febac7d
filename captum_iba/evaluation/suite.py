"""The evaluation harness: build the compared methods, score a corpus, test them.

* :func:`make_scorers` - registered methods by name, in a preset (``"paper"``
  or ``"fair"``, :mod:`~captum_iba.evaluation.presets`), through the one
  resolver :func:`~captum_iba.evaluation.resolve.build_scorers`;
* :func:`run_degradation_suite` - score token ids with every method and run
  :func:`~captum_iba.metrics.degradation_test` on each;
* :func:`run_corpus` - the same on a corpus split, with the one corpus loop
  (:mod:`~captum_iba.evaluation.loop`), as the corpus engine runs it;
* :func:`evaluate_corpus` - the entry point that takes names (methods,
  priors, a layer index) and resolves them once.
"""

import time
import warnings
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

import torch
from captum.log import log_usage
from torch import Tensor, nn

from captum_iba.evaluation.corpus import CorpusLike
from captum_iba.evaluation.loop import (
    CorpusJob,
    ScorerCall,
    run_units,
    scorer_degradation,
)
from captum_iba.evaluation.presets import Preset, get_preset
from captum_iba.evaluation.resolve import Resources, build_scorers
from captum_iba.evaluation.scorers import TokenScorer
from captum_iba.metrics import DegradationResult

__all__ = [
    "evaluate_corpus",
    "make_scorers",
    "run_corpus",
    "run_degradation_suite",
    "scorer_degradation",
]

#: Arguments of earlier releases -> the option they are now.
_LEGACY = {
    "iba_layer": "layer",
    "layer_index": "layer",
    "iba_prior": "prior",
    "priors": "prior",
}
#: Earlier releases' arguments holding more arguments.
_NESTED = ("iba_options", "scorer_options")


def _legacy(
    kwargs: Dict[str, Any], method_options: Optional[Mapping[str, Mapping[str, Any]]]
) -> Tuple[Dict[str, Any], Dict[str, Dict[str, Any]]]:
    """Resources and method options from the keyword arguments, the names of
    earlier releases converted (with a DeprecationWarning naming the new way)."""
    options = {k: dict(v) for k, v in (method_options or {}).items()}
    old = sorted(k for k in kwargs if k in _LEGACY or k in _NESTED)
    if old:
        warnings.warn(
            f"{', '.join(old)}: deprecated since 0.2; removed in 0.4: use the options "
            "layer=, prior= and "
            "method_options={name: {option: value}} instead (see make_scorers).",
            DeprecationWarning,
            stacklevel=3,
        )
    kwargs.update(kwargs.pop("scorer_options", None) or {})
    iba = kwargs.pop("iba_options", None)
    if iba:
        options.setdefault("IBA", {}).update(iba)
    for key in [k for k in kwargs if k in _LEGACY]:
        value = kwargs.pop(key)
        if value is not None:
            kwargs[_LEGACY[key]] = value
    return kwargs, options


def make_scorers(
    model: nn.Module,
    tokenizer: Any = None,
    setting: Union[str, Preset] = "fair",
    methods: Sequence[str] = ("random", "IG", "LIME", "LIME-text", "IBA"),
    method_options: Optional[Mapping[str, Mapping[str, Any]]] = None,
    **resources: Any,
) -> Dict[str, TokenScorer]:
    """Build the compared methods in the ``"paper"`` or the ``"fair"`` setting.

    Each method is looked up once in the registry
    (:data:`captum_iba.registry.METHODS`, any case) and built by
    :func:`~captum_iba.evaluation.resolve.build_scorers` with, in increasing
    priority: the preset's arguments for it
    (:mod:`~captum_iba.evaluation.presets`), the ``resources`` it needs, its
    registry entry's own arguments, and ``method_options[name]``. ``"LIME"``
    is Captum's Lime, ``"LIME-text"`` the lime package (the paper's method).

    Args:
        model (nn.Module): HF sequence classifier (in eval mode), or a
            forward function read as a classifier's (see
            :func:`~captum_iba.evaluation.build_scorers`); a Hugging Face
            model of another head is refused before anything is built.
        tokenizer: Its tokenizer (special ids; needed for ``"LIME-text"``).
        setting (str or Preset): ``"paper"`` or ``"fair"``. Default ``"fair"``.
        methods (Sequence[str]): Which methods. Default random, IG, both
            LIMEs and IBA.
        method_options (Mapping, optional): Method name -> more constructor
            arguments of its scorer, e.g. ``{"IG": {"n_steps": 20}}``.
        **resources: Fields of :class:`~captum_iba.evaluation.Resources`:
            ``layer`` (IBA's layer: an index, a module or a ``LayerRef``;
            default :func:`~captum_iba.attr.default_layer_index`), ``prior``
            (default the preset's: ``"reference"`` paper, ``"paper"`` fair),
            ``seed`` (default 0), ``internal_batch_size``, ``precision``,
            ``special_token_ids``, ``pad_token_id``. The arguments of earlier
            releases (``iba_layer``, ``iba_prior``, ``ig_steps``,
            ``lime_samples``, ``lime_max_length``, ``iba_options``) still work,
            with a DeprecationWarning.

    Returns:
        dict[str, TokenScorer]: Name -> scorer, keyed by the registered names.
    """
    resources, options = _legacy(resources, method_options)
    res = Resources.from_keywords(model, tokenizer, **resources)
    return build_scorers(methods, res, setting, options)


def _score_all(
    scorer: TokenScorer, call: ScorerCall, batch_size: int, show_progress: bool
) -> Tuple[Tensor, float]:
    """Scores of every instance, batch by batch, and the seconds it took."""
    starts = range(0, call.input_ids.shape[0], batch_size)
    if show_progress:
        from tqdm.auto import tqdm

        starts = tqdm(starts, desc=scorer.name)
    chunks = []
    t0 = time.perf_counter()
    for s in starts:
        chunks.append(call.part(slice(s, s + batch_size)).scores(scorer))
    return torch.cat(chunks), time.perf_counter() - t0


@log_usage()
def run_degradation_suite(
    model: nn.Module,
    scorers: Mapping[str, TokenScorer],
    input_ids: Tensor,
    target: Any,
    attention_mask: Optional[Tensor] = None,
    token_type_ids: Optional[Tensor] = None,
    tokenizer: Any = None,
    setting: Union[str, Preset] = "fair",
    batch_size: int = 8,
    **test_options: Any,
) -> Dict[str, DegradationResult]:
    """Score a data set with every method and run the degradation test on each.

    The test's target is always ``target`` (the gold labels, as in the paper), even
    for methods that explain another class (the paper setting's IG and LIME).

    Args:
        model (nn.Module): The classifier (eval mode).
        scorers (Mapping[str, TokenScorer]): From :func:`make_scorers`.
        input_ids (Tensor): ``(N, L)``.
        target (Tensor or sequence): ``(N,)`` labels.
        attention_mask (Tensor, optional): ``(N, L)``.
        token_type_ids (Tensor, optional): ``(N, L)``.
        tokenizer (optional): For the test's special ids.
        setting (str or Preset): Chooses the test's options (``PAPER.test`` or
            ``FAIR.test`` of :mod:`~captum_iba.evaluation.presets`).
            Default ``"fair"``.
        batch_size (int): Instances per scorer call and per test forward. Default 8.
        **test_options: Fields of the preset's
            :class:`~captum_iba.metrics.DegradationOptions` to replace, e.g.
            ``levels=[1, 2], level_unit="count"``; ``show_progress=True``
            also shows the scoring's progress bars. Default
            ``max_examples_per_batch=4 * batch_size``. (``test_kwargs={...}``,
            the mapping of earlier releases, still works, with a
            DeprecationWarning.)

    Returns:
        dict[str, DegradationResult]: Name -> result, each recording the scorer's
        settings (``settings["attribution"]``) and its seconds per instance.

    Raises:
        ValueError: Naming an option that is not a field of
            :class:`~captum_iba.metrics.DegradationOptions`, or a bad value.
    """
    preset = get_preset(setting)
    test_kwargs = _test_options(test_options)
    test_kwargs.setdefault("max_examples_per_batch", batch_size * 4)
    show_progress = bool(test_kwargs.get("show_progress", False))
    tgt = torch.as_tensor(target).reshape(-1)
    n = input_ids.shape[0]
    results: Dict[str, DegradationResult] = {}
    call = ScorerCall(input_ids, tgt, attention_mask, token_type_ids)
    for name, scorer in scorers.items():
        scores, seconds = _score_all(scorer, call, batch_size, show_progress)
        results[name] = scorer_degradation(
            model,
            name,
            scorer,
            scores,
            call,
            tokenizer=tokenizer,
            setting=preset,
            test_kwargs=test_kwargs,
            seconds_per_instance=seconds / max(n, 1),
        )
    return results


def _test_options(options: Dict[str, Any]) -> Dict[str, Any]:
    """The test's options given as keywords, with ``test_kwargs`` (the
    mapping of earlier releases) merged in, with a DeprecationWarning."""
    old = options.pop("test_kwargs", None)
    if old is None:
        return options
    warnings.warn(
        "run_degradation_suite's test_kwargs= is deprecated since 0.3; removed in "
        "0.4: pass the "
        "DegradationOptions fields as keywords, e.g. "
        "run_degradation_suite(..., levels=[1, 2], level_unit='count')",
        DeprecationWarning,
        stacklevel=4,  # the caller of log_usage's wrapper
    )
    return dict(old, **options)


def run_corpus(
    model: nn.Module,
    tokenizer: Any,
    data: CorpusLike,
    scorers: Mapping[str, TokenScorer],
    setting: Union[str, Preset] = "fair",
    max_length: int = 128,
    batch_size: int = 16,
    show_progress: bool = True,
) -> Dict[str, DegradationResult]:
    """Degradation test of ready-built scorers on one corpus split.

    Runs the one corpus loop (:func:`~captum_iba.evaluation.loop.run_units`):
    the corpus in its fixed order (shortest first), cut into units of
    ``batch_size`` instances, each unit scored and tested as one batch - as
    ``captum-iba evaluate`` does on any number of processes, so the numbers
    are the same.

    Args:
        model (nn.Module): A fine-tuned classifier in eval mode.
        tokenizer (Any): Its tokenizer.
        data (CorpusLike): The instances (texts, pairs, labels).
        scorers (Mapping[str, TokenScorer]): E.g. from :func:`make_scorers`.
        setting (str or Preset): The preset of the test. Default ``"fair"``.
        max_length (int): Truncation length. Default 128.
        batch_size (int): Instances per unit. Default 16.
        show_progress (bool): A tqdm bar. Default True.

    Returns:
        dict[str, DegradationResult]: Method name -> result (with settings).
    """
    job = CorpusJob(
        model,
        tokenizer,
        data,
        scorers,
        preset=get_preset(setting),
        max_length=max_length,
        batch_size=batch_size,
        degradation=True,
    )
    return run_units(job, show_progress=show_progress)


def evaluate_corpus(
    model: nn.Module,
    tokenizer: Any,
    data: CorpusLike,
    methods: Sequence[str] = ("random", "IG", "LIME", "IBA"),
    setting: str = "fair",
    method_options: Optional[Mapping[str, Mapping[str, Any]]] = None,
    max_length: int = 128,
    batch_size: int = 16,
    show_progress: bool = True,
    **resources: Any,
) -> Dict[str, DegradationResult]:
    """Degradation test of several methods on one corpus split, by name.

    Resolves the names once - the methods (registry), the layer index, the
    priors (fitting those that need data on ``prior_data``) - with
    :func:`~captum_iba.evaluation.resolve.build_scorers`, then runs
    :func:`run_corpus`.

    Args:
        model (torch.nn.Module): A fine-tuned classifier in eval mode.
        tokenizer (Any): Its tokenizer.
        data (CorpusLike): The instances (texts, pairs, labels).
        methods (Sequence[str]): Registered method names (any case).
        setting (str): ``"fair"`` or ``"paper"`` (see
            :mod:`~captum_iba.evaluation.presets`).
        method_options (Mapping, optional): Method name -> more constructor
            arguments (e.g. ``{"IBA": {"beta": 1e-4}}``).
        max_length (int): Truncation length. Default 128.
        batch_size (int): Instances per unit. Default 16.
        show_progress (bool): A tqdm bar. Default True.
        **resources: Fields of :class:`~captum_iba.evaluation.Resources`:
            ``layer`` (an encoder layer index; default
            :func:`~captum_iba.attr.text.default_layer_index`), ``prior``
            (names or priors; several make one IBA run each, named
            ``"IBA (prior)"``), ``prior_data`` (a corpus to fit the
            ``"dataset"`` prior on), ``seed`` (default 0), ... The names of
            earlier releases (``priors``, ``layer_index``, ``iba_options``,
            ``scorer_options``) still work, with a DeprecationWarning.

    Returns:
        dict[str, DegradationResult]: Method name -> result (with settings).
    """
    resources, options = _legacy(resources, method_options)
    resources.setdefault("max_length", max_length)
    res = Resources.from_keywords(model, tokenizer, **resources)
    scorers = build_scorers(methods, res, setting, options)
    return run_corpus(
        model, tokenizer, data, scorers, setting, max_length, batch_size, show_progress
    )
