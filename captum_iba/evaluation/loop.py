"""The one corpus loop: a corpus cut into units, each unit scored by every
method (and degradation-tested), the units' results merged.

* :func:`work_units` - the corpus in its fixed order, cut into units of
  ``batch_size`` instances: a unit is one batch, so its numbers do not depend
  on which process computes it or on the rest of the corpus;
* :func:`score_unit` - one unit with every method: token ids, the explained
  class, the scores, and (when asked) the degradation test of the unit;
* :func:`merge_records` - a method's results over several units, from their
  per-instance records ("concatenate the states, compute the aggregates");
* :func:`run_units` - every unit in this process, merged in memory.

:func:`~captum_iba.evaluation.evaluate_corpus` (and ``captum-iba reproduce``)
run :func:`run_units`; the corpus engine of ``captum-iba evaluate`` /
``attribute`` (:mod:`captum_iba.app.engine`) deals the same units to many
processes, calls :func:`score_unit` on each and merges with
:func:`merge_records`, so both give the same numbers.
"""

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor, nn

from captum_iba._utils.common import hf_call, model_device
from captum_iba.evaluation.corpus import CorpusLike, corpus_order, encode_instances
from captum_iba.evaluation.presets import Preset, get_preset
from captum_iba.evaluation.scorers import TokenScorer
from captum_iba.metrics import DegradationResult, degradation_test

__all__ = [
    "TARGETS",
    "CorpusJob",
    "UnitScores",
    "merge_records",
    "result_settings",
    "run_units",
    "score_unit",
    "scorer_degradation",
    "unit_tensors",
    "work_units",
]

#: Which class each instance is explained for.
TARGETS = ("label", "predicted")


@dataclass
class CorpusJob:
    """Everything a corpus run needs, resolved.

    Attributes:
        model (nn.Module): The classifier, on its device, eval mode.
        tokenizer (Any): Its tokenizer.
        data (CorpusLike): The corpus.
        scorers (Mapping[str, TokenScorer]): Method name -> scorer.
        settings (dict): What defines the run (recorded; the corpus engine
            compares them on a re-run).
        preset (Preset): The degradation test's preset. Default ``"fair"``.
        max_length (int): Truncation length. Default 128.
        batch_size (int): Instances per unit. Default 16.
        target (str): Explain the gold ``"label"`` or the ``"predicted"``
            class. Default ``"label"``.
        degradation (bool): Also run the degradation test. Default False.
        test_kwargs (Mapping): Overrides of the preset's
            :class:`~captum_iba.metrics.DegradationOptions` fields.
    """

    model: nn.Module
    tokenizer: Any
    data: CorpusLike
    scorers: Mapping[str, TokenScorer]
    settings: Dict[str, Any] = field(default_factory=dict)
    preset: Preset = field(default_factory=lambda: get_preset("fair"))
    max_length: int = 128
    batch_size: int = 16
    target: str = "label"
    degradation: bool = False
    test_kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise ValueError(f"target must be one of {TARGETS}; got {self.target!r}")


@dataclass
class UnitScores:
    """One method's work on one unit.

    Attributes:
        method (str): The method's name.
        scores (Tensor): ``(B, L)`` per-token scores.
        seconds (float): The scorer's seconds per instance.
        result (DegradationResult, optional): The unit's degradation test.
    """

    method: str
    scores: Tensor
    seconds: float
    result: Optional[DegradationResult] = None


def work_units(data: CorpusLike, batch_size: int) -> List[List[int]]:
    """The units: lists of instance indices, ``batch_size`` each (the last
    one may be shorter), in the corpus' fixed order
    (:func:`~captum_iba.evaluation.corpus_order`).

    Args:
        data (CorpusLike): The corpus.
        batch_size (int): Instances per unit, >= 1.

    Returns:
        list[list[int]]: The units.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    order = corpus_order(data)
    return [order[s : s + batch_size] for s in range(0, len(order), batch_size)]


def unit_tensors(job: CorpusJob, indices: Sequence[int]) -> Dict[str, Any]:
    """Token ids, mask, segment ids, logits and the explained class of a unit."""
    enc = encode_instances(job.tokenizer, job.data, indices, job.max_length)
    ids, mask = enc["input_ids"], enc["attention_mask"]
    tt = enc.get("token_type_ids")
    device = model_device(job.model)
    with torch.no_grad():
        logits = hf_call(
            job.model,
            ids.to(device),
            mask.to(device),
            None if tt is None else tt.to(device),
        )
    logits = logits.float().cpu()
    labels = torch.tensor([job.data.labels[i] for i in indices])
    target = labels if job.target == "label" else logits.argmax(-1)
    return dict(ids=ids, mask=mask, tt=tt, target=target, logits=logits)


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
    """The degradation test of one scorer's scores, as the harness runs it.

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


def score_unit(
    job: CorpusJob, tensors: Dict[str, Any], methods: Sequence[str]
) -> List[UnitScores]:
    """Score one unit (from :func:`unit_tensors`) with each of ``methods`` and,
    when ``job.degradation``, run the degradation test on it."""
    t = tensors
    out = []
    for name in methods:
        scorer = job.scorers[name]
        start = time.perf_counter()
        scores = scorer.attribute(t["ids"], t["target"], t["mask"], t["tt"])
        seconds = (time.perf_counter() - start) / t["ids"].shape[0]
        result = None
        if job.degradation:
            result = scorer_degradation(
                job.model,
                name,
                scorer,
                scores,
                (t["ids"], t["target"], t["mask"], t["tt"]),
                tokenizer=job.tokenizer,
                setting=job.preset,
                test_kwargs=job.test_kwargs,
            )
        out.append(UnitScores(name, scores, seconds, result))
    return out


def merge_records(
    records: Sequence[Mapping[str, Any]],
    test_settings: Mapping[str, Any],
    seconds_per_instance: float,
) -> DegradationResult:
    """One method's test over several units, from the per-instance records
    (:meth:`~captum_iba.metrics.DegradationResult.instance_records`) in
    corpus order and a unit's ``test_settings`` (its result's settings with
    its ``levels``)."""
    settings = dict(test_settings)
    levels = settings.pop("levels")
    settings["attribution"] = dict(
        settings.get("attribution") or {}, seconds_per_instance=seconds_per_instance
    )
    return DegradationResult.from_instance_records(records, levels, settings)


def result_settings(result: DegradationResult) -> Dict[str, Any]:
    """A unit result's settings with its levels (what :func:`merge_records`
    takes)."""
    return dict(result.settings, levels=list(result.levels))


def run_units(
    job: CorpusJob, show_progress: bool = False
) -> Dict[str, DegradationResult]:
    """Every unit of ``job`` in this process, each method's tests merged.

    Args:
        job (CorpusJob): The run (``degradation`` is taken as True).
        show_progress (bool): A tqdm bar over the instances. Default False.

    Returns:
        dict[str, DegradationResult]: Method name -> result over the corpus.
    """
    from tqdm.auto import tqdm

    methods = list(job.scorers)
    job.degradation = True
    records: Dict[str, List[Tuple[int, Dict[str, Any]]]] = {m: [] for m in methods}
    seconds: Dict[str, List[float]] = {m: [] for m in methods}
    settings: Dict[str, Dict[str, Any]] = {}
    bar = tqdm(
        total=len(job.data), desc="instances", unit="inst", disable=not show_progress
    )
    for indices in work_units(job.data, job.batch_size):
        done = score_unit(job, unit_tensors(job, indices), methods)
        for unit in done:
            assert unit.result is not None
            records[unit.method] += zip(indices, unit.result.instance_records())
            seconds[unit.method] += [unit.seconds] * len(indices)
            settings.setdefault(unit.method, result_settings(unit.result))
        bar.update(len(indices))
    bar.close()
    return {
        m: merge_records(
            [r for _, r in sorted(records[m], key=lambda p: p[0])],
            settings[m],
            sum(seconds[m]) / len(seconds[m]),
        )
        for m in methods
    }
