"""The evaluation harness: build the compared methods, score a corpus, test them.

* :func:`make_scorers` - the registered methods in a preset (``"paper"`` or
  ``"fair"``, :mod:`~captum_iba.evaluation.presets`);
* :func:`run_degradation_suite` - score token ids with every method and run
  :func:`~captum_iba.metrics.degradation_test` on each;
* :func:`corpus_scorers` / :func:`run_corpus` - the same on a corpus split
  (texts and labels), with one IBA run per noise prior;
* :func:`evaluate_corpus` - the convenience entry point that takes names
  (methods, priors, a layer index) and resolves them once.
"""

import time
from typing import (
    Any,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

import torch
from captum.log import log_usage
from torch import Tensor, nn

from captum_iba.attr.priors import PRIOR_NAMES, DatasetPrior, NoisePrior, resolve_prior
from captum_iba.attr.text import default_layer_index, resolve_layer
from captum_iba.evaluation.corpus import (
    CorpusLike,
    corpus_order,
    encode,
    encode_instances,
    fit_dataset_prior,
)
from captum_iba.evaluation.iba import IBAScorer
from captum_iba.evaluation.presets import Preset, get_preset
from captum_iba.evaluation.scorers import TokenScorer, scorer_class, scorer_names
from captum_iba.metrics import DegradationResult, degradation_test

__all__ = [
    "METHODS",
    "PRIOR_NAMES",
    "corpus_order",
    "corpus_scorers",
    "default_layer_index",
    "encode",
    "evaluate_corpus",
    "fit_dataset_prior",
    "make_scorers",
    "resolve_priors",
    "run_corpus",
    "run_degradation_suite",
    "scorer_degradation",
]

#: The method names registered when the package loads (the registry itself is
#: :data:`~captum_iba.evaluation.scorers.SCORERS`).
METHODS: Tuple[str, ...] = tuple(scorer_names())


def make_scorers(
    model: nn.Module,
    tokenizer: Any = None,
    setting: Union[str, Preset] = "fair",
    iba_layer: Optional[nn.Module] = None,
    iba_prior: Any = None,
    methods: Sequence[str] = ("random", "IG", "LIME", "LIME-text", "IBA"),
    seed: int = 0,
    ig_steps: Optional[int] = None,
    lime_samples: Optional[int] = None,
    lime_max_length: int = 512,
    special_token_ids: Optional[Sequence[int]] = None,
    pad_token_id: Optional[int] = None,
    internal_batch_size: Optional[int] = None,
    iba_options: Optional[Mapping[str, Any]] = None,
    method_options: Optional[Mapping[str, Mapping[str, Any]]] = None,
) -> Dict[str, TokenScorer]:
    """Build the compared methods in the ``"paper"`` or the ``"fair"`` setting.

    Each method is looked up once in the scorer registry
    (:func:`~captum_iba.evaluation.scorers.scorer_class`, any case) and built
    with, in increasing priority: the preset's arguments for it
    (:mod:`~captum_iba.evaluation.presets`), the suite-level options below that
    it declares, and ``method_options[name]``. ``"LIME"`` is Captum's Lime,
    ``"LIME-text"`` the lime package (the paper's method). A method whose
    required arguments are missing (IBA without ``iba_layer``) is skipped.

    Args:
        model (nn.Module): HF sequence classifier (in eval mode).
        tokenizer: Its tokenizer (special ids; needed for ``"LIME-text"``).
        setting (str or Preset): ``"paper"`` or ``"fair"``. Default ``"fair"``.
        iba_layer (nn.Module, optional): Needed for ``"IBA"`` (skipped when None).
        iba_prior (optional): Default ``"reference"`` (paper) / ``"paper"`` (fair).
        methods (Sequence[str]): Which methods. Default all five.
        seed (int): Seed of random, LIME and IBA. Default 0.
        ig_steps (int, optional): Default 10 (paper) / 50 (fair).
        lime_samples (int, optional): Default 100 (paper) / 500 (fair).
        lime_max_length (int): Paper LIME's padding length. Default 512.
        special_token_ids (Sequence[int], optional): Default the tokenizer's.
        pad_token_id (int, optional): Default the tokenizer's.
        internal_batch_size (int, optional): For IG and IBA.
        iba_options (Mapping, optional): More IBA options (beta, steps, ...).
        method_options (Mapping, optional): Method name -> more constructor
            arguments of its scorer.

    Returns:
        dict[str, TokenScorer]: Name -> scorer, keyed by the registered names.
    """
    preset = get_preset(setting)
    given = dict(
        seed=seed,
        ig_steps=ig_steps,
        lime_samples=lime_samples,
        lime_max_length=lime_max_length,
        internal_batch_size=internal_batch_size,
        iba_prior=iba_prior,
        iba_layer=iba_layer,
    )
    extra = {k: dict(v) for k, v in (method_options or {}).items()}
    if iba_options:
        extra.setdefault(IBAScorer.name, {}).update(iba_options)
    common = dict(
        tokenizer=tokenizer,
        special_token_ids=special_token_ids,
        pad_token_id=pad_token_id,
        setting=preset.name,
    )
    out: Dict[str, TokenScorer] = {}
    for method in methods:
        cls = scorer_class(method)
        kwargs = preset.scorer_arguments(cls.name)
        for option, argument in cls.suite_options.items():
            if given.get(option) is not None:
                kwargs[argument] = given[option]
        kwargs.update(extra.get(cls.name, {}))
        if any(kwargs.get(arg) is None for arg in cls.required):
            continue
        out[cls.name] = cls(model, **kwargs, **common)
    return out


def _score_all(
    scorer: TokenScorer,
    tensors: Tuple[Tensor, Tensor, Optional[Tensor], Optional[Tensor]],
    batch_size: int,
    show_progress: bool,
) -> Tuple[Tensor, float]:
    """Scores of every instance, batch by batch, and the seconds it took."""
    input_ids, target, mask, tt = tensors
    starts = range(0, input_ids.shape[0], batch_size)
    if show_progress:
        from tqdm.auto import tqdm

        starts = tqdm(starts, desc=scorer.name)
    chunks = []
    t0 = time.perf_counter()
    for s in starts:
        sl = slice(s, s + batch_size)
        chunks.append(
            scorer.attribute(
                input_ids[sl],
                target=target[sl],
                attention_mask=None if mask is None else mask[sl],
                token_type_ids=None if tt is None else tt[sl],
            )
        )
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
    test_kwargs: Optional[Mapping[str, Any]] = None,
    show_progress: bool = False,
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
        test_kwargs (Mapping, optional): Overrides of the preset's
            :class:`~captum_iba.metrics.DegradationOptions` fields.
        show_progress (bool): Progress bars. Default False.

    Returns:
        dict[str, DegradationResult]: Name -> result, each recording the scorer's
        settings (``settings["attribution"]``) and its seconds per instance.
    """
    preset = get_preset(setting)
    test_kwargs = dict(test_kwargs or {})
    test_kwargs.setdefault("max_examples_per_batch", batch_size * 4)
    tgt = torch.as_tensor(target).reshape(-1)
    n = input_ids.shape[0]
    results: Dict[str, DegradationResult] = {}
    for name, scorer in scorers.items():
        tensors = (input_ids, tgt, attention_mask, token_type_ids)
        scores, seconds = _score_all(scorer, tensors, batch_size, show_progress)
        results[name] = scorer_degradation(
            model,
            name,
            scorer,
            scores,
            tensors,
            tokenizer=tokenizer,
            setting=preset,
            test_kwargs=test_kwargs,
            seconds_per_instance=seconds / max(n, 1),
            show_progress=show_progress,
        )
    return results


def scorer_degradation(
    model: nn.Module,
    name: str,
    scorer: TokenScorer,
    scores: Tensor,
    tensors: Tuple[Tensor, Optional[Tensor], Optional[Tensor], Optional[Tensor]],
    tokenizer: Any = None,
    setting: Union[str, Preset] = "fair",
    test_kwargs: Optional[Mapping[str, Any]] = None,
    seconds_per_instance: Optional[float] = None,
    show_progress: bool = False,
) -> DegradationResult:
    """The degradation test of one scorer's scores, as the suite runs it.

    The test's options are the preset's, with ``test_kwargs`` replacing fields
    and the scorer's special and pad ids (else the tokenizer's); the scorer's
    name, seed and settings are recorded.

    Args:
        model (nn.Module): The classifier (eval mode).
        name (str): The method's name in the result.
        scorer (TokenScorer): The scorer that produced ``scores``.
        scores (Tensor): ``(N, L)`` its scores.
        tensors (tuple): ``(input_ids, target, attention_mask,
            token_type_ids)``; ``target`` None tracks the predicted class.
        tokenizer (optional): For the test's special ids.
        setting (str or Preset): The preset. Default ``"fair"``.
        test_kwargs (Mapping, optional): Overrides of the preset's
            :class:`~captum_iba.metrics.DegradationOptions` fields.
        seconds_per_instance (float, optional): Recorded in the settings.
        show_progress (bool): Progress bars. Default False.

    Returns:
        DegradationResult: The result.
    """
    preset = get_preset(setting)
    options = preset.test.with_tokenizer(
        tokenizer,
        special_token_ids=scorer.special_token_ids or None,
        pad_token_id=scorer.pad_token_id,
        **dict(test_kwargs or {}),
    )
    input_ids, target, attention_mask, token_type_ids = tensors
    record = dict(scorer.settings, seconds_per_instance=seconds_per_instance)
    return degradation_test(
        model,
        input_ids,
        scores,
        target=target,
        attention_mask=attention_mask,
        token_type_ids=token_type_ids,
        options=options,
        metadata=dict(
            method=name,
            seed=getattr(scorer, "seed", None),
            attribution=dict(record, setting=preset.name),
        ),
        show_progress=show_progress,
    )


def resolve_priors(
    priors: Sequence[Union[str, NoisePrior]],
    model: nn.Module,
    tokenizer: Any,
    layer: nn.Module,
    prior_data: Optional[CorpusLike] = None,
    max_length: int = 128,
) -> List[NoisePrior]:
    """Prior names (or objects) as objects; ``"dataset"`` is fitted on
    ``prior_data`` with :func:`fit_dataset_prior`.

    Raises:
        ValueError: For an unknown name, or ``"dataset"`` without ``prior_data``.
    """

    def fit() -> DatasetPrior:
        if prior_data is None:
            raise ValueError("The 'dataset' prior needs prior_data.")
        return fit_dataset_prior(model, tokenizer, layer, prior_data, max_length)

    return [resolve_prior(p, fit=fit) for p in priors]


def corpus_scorers(
    model: nn.Module,
    tokenizer: Any,
    methods: Sequence[str],
    layer: Tuple[int, nn.Module],
    priors: Sequence[NoisePrior],
    setting: Union[str, Preset] = "fair",
    seed: int = 0,
    iba_options: Optional[Mapping[str, Any]] = None,
    scorer_options: Optional[Mapping[str, Any]] = None,
) -> Dict[str, TokenScorer]:
    """The methods of :func:`make_scorers`, with one IBA per prior.

    IBA runs are named ``"IBA"``, or ``"IBA (prior)"`` when there are several,
    and record the layer index in their settings.

    Args:
        model (nn.Module): The classifier.
        tokenizer (Any): Its tokenizer.
        methods (Sequence[str]): Registered method names (any case).
        layer (tuple): ``(index, module)`` of the bottleneck, from
            :func:`~captum_iba.attr.text.resolve_layer`.
        priors (Sequence[NoisePrior]): IBA's priors, resolved.
        setting (str or Preset): The preset. Default ``"fair"``.
        seed (int): Seed of random, LIME and IBA. Default 0.
        iba_options (Mapping, optional): More IBA options (beta, steps, ...).
        scorer_options (Mapping, optional): More arguments of
            :func:`make_scorers` (``ig_steps``, ``lime_samples``, ...).

    Returns:
        dict[str, TokenScorer]: Name -> scorer.
    """
    classes = [scorer_class(m) for m in methods]
    others = [c.name for c in classes if c is not IBAScorer]
    scorers = make_scorers(
        model,
        tokenizer,
        setting=setting,
        methods=others,
        seed=seed,
        iba_layer=layer[1],
        **dict(scorer_options or {}),
    )
    for scorer in scorers.values():
        if isinstance(scorer, IBAScorer):  # iba-faithful: the layer index too
            scorer.settings["layer_index"] = layer[0]
    if IBAScorer in classes:
        for prior in priors:
            name = "IBA" if len(priors) == 1 else f"IBA ({prior.name})"
            scorers[name] = IBAScorer(
                model,
                layer[1],
                prior=prior,
                seed=seed,
                tokenizer=tokenizer,
                setting=get_preset(setting).name,
                name=name,
                **dict(iba_options or {}),
            )
            scorers[name].settings["layer_index"] = layer[0]
    return scorers


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

    Instances are sorted by length (shortest first) so that batches carry
    little padding; the aggregates do not depend on the order.

    Args:
        model (nn.Module): A fine-tuned classifier in eval mode.
        tokenizer (Any): Its tokenizer.
        data (CorpusLike): The instances (texts, pairs, labels).
        scorers (Mapping[str, TokenScorer]): E.g. from :func:`corpus_scorers`.
        setting (str or Preset): The preset of the test. Default ``"fair"``.
        max_length (int): Truncation length. Default 128.
        batch_size (int): Instances per attribution call. Default 16.
        show_progress (bool): tqdm bars. Default True.

    Returns:
        dict[str, DegradationResult]: Method name -> result (with settings).
    """
    order = corpus_order(data)
    enc = encode_instances(tokenizer, data, order, max_length)
    return run_degradation_suite(
        model,
        scorers,
        enc["input_ids"],
        torch.tensor([data.labels[i] for i in order]),
        attention_mask=enc["attention_mask"],
        token_type_ids=enc.get("token_type_ids"),
        tokenizer=tokenizer,
        setting=setting,
        batch_size=batch_size,
        show_progress=show_progress,
    )


def evaluate_corpus(
    model: nn.Module,
    tokenizer: Any,
    data: CorpusLike,
    methods: Sequence[str] = ("random", "IG", "LIME", "IBA"),
    setting: str = "fair",
    priors: Sequence[Union[str, NoisePrior]] = ("paper",),
    layer_index: Optional[int] = None,
    prior_data: Optional[CorpusLike] = None,
    max_length: int = 128,
    batch_size: int = 16,
    seed: int = 0,
    iba_options: Optional[Mapping[str, Any]] = None,
    scorer_options: Optional[Mapping[str, Any]] = None,
    show_progress: bool = True,
) -> Dict[str, DegradationResult]:
    """Degradation test of several methods on one corpus split, by name.

    Resolves the names once - the methods (registry), the layer index
    (:func:`~captum_iba.attr.text.resolve_layer`), the priors
    (:func:`resolve_priors`) - then runs :func:`run_corpus`.

    Args:
        model (torch.nn.Module): A fine-tuned classifier in eval mode.
        tokenizer (Any): Its tokenizer.
        data (CorpusLike): The instances (texts, pairs, labels).
        methods (Sequence[str]): Registered method names (any case).
        setting (str): ``"fair"`` or ``"paper"`` (see
            :mod:`~captum_iba.evaluation.presets`).
        priors (Sequence): IBA's priors: names in :data:`PRIOR_NAMES` or
            :class:`~captum_iba.NoisePrior` objects; one IBA run per prior,
            named ``"IBA (prior)"`` when there are several.
        layer_index (int, optional): Encoder layer after which the bottleneck
            goes. Default: :func:`~captum_iba.attr.text.default_layer_index`.
        prior_data (CorpusLike, optional): Texts to fit the ``"dataset"``
            prior on (e.g. a training subset).
        max_length (int): Truncation length. Default 128.
        batch_size (int): Instances per attribution call. Default 16.
        seed (int): Seed of random, LIME and IBA. Default 0.
        iba_options (Mapping, optional): More IBA options (beta, steps, ...).
        scorer_options (Mapping, optional): More arguments of
            :func:`make_scorers` (``ig_steps``, ``lime_samples``,
            ``lime_max_length``, ...).
        show_progress (bool): tqdm bars. Default True.

    Returns:
        dict[str, DegradationResult]: Method name -> result (with settings).
    """
    for method in methods:
        scorer_class(method)  # an unknown name fails before any work
    layer = resolve_layer(model, layer_index)
    needs_iba = any(scorer_class(m) is IBAScorer for m in methods)
    resolved = (
        resolve_priors(priors, model, tokenizer, layer[1], prior_data, max_length)
        if needs_iba
        else []
    )
    scorers = corpus_scorers(
        model, tokenizer, methods, layer, resolved, setting, seed, iba_options,
        scorer_options,
    )  # fmt: skip
    return run_corpus(
        model, tokenizer, data, scorers, setting, max_length, batch_size, show_progress
    )
