"""The one corpus loop: a corpus cut into units, each unit scored by every
method (and degradation-tested), the units' results merged.

* :func:`work_units` - the corpus in its fixed order, cut into units of
  ``batch_size`` instances: a unit is one batch, so its numbers do not depend
  on which process computes it or on the rest of the corpus;
* :func:`unit_tensors` - a unit's tensors (:class:`UnitTensors`): the
  arguments of a scorer call (a
  :class:`~captum_iba.attr.batches.TokenBatch`: token ids, the explained
  class, mask, segment ids) and the original logits, computed once;
* :func:`score_unit` - one unit with every method: the scores and (when
  asked) the degradation test of the unit, each test given the unit's
  original logits; the one method loop of every task, what differs per task
  being :class:`CorpusJob`'s hooks (``unit_tensors``, ``batch_of``,
  ``unit_scores``, ``test``, ``instance_row``, ...), which a causal LM's
  :class:`~captum_iba.evaluation.llm_loop.PromptJob` and a context task's
  :class:`~captum_iba.evaluation.context_loop.ContextJob` override;
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

from captum_iba.evaluation.batches import TokenBatch
from captum_iba.evaluation.corpus import CorpusLike, corpus_order, encode_instances
from captum_iba.evaluation.presets import Preset, get_preset
from captum_iba.evaluation.scorers import TokenScorer
from captum_iba.metrics import (
    DegradationOptions,
    DegradationResult,
    degradation_test,
    original_logits_of,
)
from captum_iba.metrics.degradation import same_first_pass
from captum_iba.metrics.options import KnownInputs, with_progress

__all__ = [
    "TARGETS",
    "CorpusJob",
    "ScorerCall",
    "UnitScores",
    "UnitTensors",
    "merge_records",
    "result_settings",
    "run_units",
    "score_unit",
    "scorer_degradation",
    "degradation_options",
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

    def degradation_options(
        self, scorer: Optional[TokenScorer] = None
    ) -> DegradationOptions:
        """The degradation test's options: see :func:`degradation_options`."""
        return degradation_options(
            self.preset, self.tokenizer, scorer, self.test_kwargs
        )

    def unit_tensors(self, indices: Sequence[int]) -> Any:
        """A unit's tensors (:func:`unit_tensors`)."""
        return unit_tensors(self, indices)

    def score_unit(self, unit: Any, methods: Sequence[str]) -> List["UnitScores"]:
        """One unit scored by ``methods`` and tested (:func:`score_unit`)."""
        return score_unit(self, unit, methods)

    # The task's hooks: what the one loop (score_unit) asks of a unit.

    #: Where a row of the corpus engine records the unit's test.
    test_field = "degradation"

    @staticmethod
    def timer() -> float:
        """The clock a scorer's call is timed by: wall seconds."""
        return time.perf_counter()

    def batch_of(self, unit: Any, scorer: Any = None) -> Any:
        """The batch ``scorer`` explains for ``unit``: a classifier's
        :class:`~captum_iba.attr.batches.TokenBatch`, the same for
        every scorer."""
        return unit.call

    def unit_scores(self, found: Any) -> Tensor:
        """A scorer's answer for the unit as the per-token scores recorded
        and tested: a classifier's ``(B, L)`` scores as they are."""
        return found

    def test(
        self,
        unit: Any,
        name: str,
        scorer: TokenScorer,
        scores: Tensor,
        seconds: float,
    ) -> DegradationResult:
        """The degradation test of method ``name``'s ``scores`` of ``unit``
        (:func:`scorer_degradation`), given the unit's original logits when
        the method's test options run the same first pass (as they do but
        for a scorer with a pad id of its own); ``seconds`` (per instance)
        are not recorded in a unit's result (the merge records them)."""
        same = same_first_pass(self.degradation_options(scorer), unit.options)
        return scorer_degradation(
            self.model,
            name,
            scorer,
            scores,
            unit if same else unit.call,
            tokenizer=self.tokenizer,
            setting=self.preset,
            test_kwargs=self.test_kwargs,
        )

    def test_records(self, result: Any) -> Tuple[List[Any], Dict[str, Any]]:
        """A unit's test as per-instance records and the settings a merge
        needs (:func:`result_settings`)."""
        return result.instance_records(), result_settings(result)

    def merge_tests(
        self, records: Sequence[Any], settings: Dict[str, Any], seconds: float
    ) -> Any:
        """One method's test over the corpus from its per-instance records
        in corpus order (:func:`merge_records`)."""
        return merge_records(records, settings, seconds)

    def instance_row(self, unit: Any, j: int, scores: Tensor) -> Dict[str, Any]:
        """The record of the unit's ``j``-th instance for one method's
        ``scores``: the instance (``index``, ``text``, ``text_pair``,
        ``label``), the class explained and predicted, the tokens and their
        scores (padding left out)."""
        call = unit.call
        real = call.attention_mask[j].bool()
        ids = call.input_ids[j][real]
        probs = unit.original_logits[j].double().softmax(-1)
        row = self.instance_fields(unit.indices[j], int(call.target[j]), probs)
        row.update(
            tokens=self.tokenizer.convert_ids_to_tokens(ids.tolist()),
            input_ids=ids.tolist(),
            scores=scores[j][real].tolist(),
        )
        return row

    def instance_fields(self, index: int, target: int, probs: Tensor) -> Dict[str, Any]:
        """A row's first fields: the instance (``index``, ``text``,
        ``text_pair``, ``label``), the class explained, the class predicted
        and the target's probability (from the classes' ``probs``)."""
        row: Dict[str, Any] = {"index": index, "text": self.data.texts[index]}
        if self.data.text_pairs is not None:
            row["text_pair"] = self.data.text_pairs[index]
        row.update(
            label=int(self.data.labels[index]),
            target=target,
            predicted=int(probs.argmax()),
            target_probability=float(probs[target]),
        )
        return row

    def row_fields(self, fields: Dict[str, str]) -> Dict[str, str]:
        """What each field of :meth:`instance_row` holds, from the corpus
        engine's descriptions ``fields`` (a job that records more adds
        them)."""
        return fields


#: The arguments of one scorer call: a classifier's batch (the name of 0.3).
ScorerCall = TokenBatch


@dataclass(frozen=True)
class UnitTensors:
    """The tensors of one unit, computed once (:func:`unit_tensors`).

    Attributes:
        indices (list[int]): The instances, indices into the corpus, in the
            unit's order.
        call (ScorerCall): What every scorer is called with (and its test).
        original_logits (Tensor): ``(B, C)`` float64 logits of the instances,
            the degradation test's first pass (:func:`original_logits_of
            <captum_iba.metrics.original_logits_of>`).
        options (DegradationOptions): The test's options they were computed
            with.
    """

    indices: List[int]
    call: ScorerCall
    original_logits: Tensor
    options: DegradationOptions


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


def degradation_options(
    preset: Union[str, Preset],
    tokenizer: Any = None,
    scorer: Optional[TokenScorer] = None,
    test_kwargs: Optional[Mapping[str, Any]] = None,
) -> DegradationOptions:
    """The degradation test's options as the harness runs it: the preset's,
    with ``test_kwargs`` replacing fields, and the scorer's special and pad
    ids (else the tokenizer's).

    Args:
        preset (str or Preset): The preset.
        tokenizer (optional): For the special and pad ids.
        scorer (TokenScorer, optional): Whose ids win over the tokenizer's.
        test_kwargs (Mapping, optional): Overrides of the preset's fields.

    Returns:
        DegradationOptions: The options.
    """
    return get_preset(preset).test.with_tokenizer(
        tokenizer,
        special_token_ids=(scorer.special_token_ids or None) if scorer else None,
        pad_token_id=scorer.pad_token_id if scorer else None,
        **dict(test_kwargs or {}),
    )


def unit_tensors(job: CorpusJob, indices: Sequence[int]) -> UnitTensors:
    """A unit's tensors: its token ids, mask and segment ids, its original
    logits (the degradation test's first pass with the job's test options,
    computed once for the rows and every method's test) and the class each
    instance is explained for (the label, or the predicted class)."""
    enc = encode_instances(job.tokenizer, job.data, indices, job.max_length)
    ids, mask = enc["input_ids"], enc["attention_mask"]
    tt = enc.get("token_type_ids")
    options = job.degradation_options()
    logits = original_logits_of(job.model, ids, mask, tt, options=options)
    labels = torch.tensor([job.data.labels[i] for i in indices])
    target = labels if job.target == "label" else logits.argmax(-1)
    return UnitTensors(
        list(indices), ScorerCall(ids, target, mask, tt), logits, options
    )


def scorer_degradation(
    model: nn.Module,
    name: str,
    scorer: TokenScorer,
    scores: Tensor,
    call: Union[ScorerCall, UnitTensors, Tuple[Optional[Tensor], ...]],
    tokenizer: Any = None,
    setting: Union[str, Preset] = "fair",
    test_kwargs: Optional[Mapping[str, Any]] = None,
    seconds_per_instance: Optional[float] = None,
    show_progress: bool = False,
) -> DegradationResult:
    """The degradation test of one scorer's scores, as the harness runs it.

    The test's options are :func:`degradation_options`; the scorer's name, seed and
    settings are recorded.

    Args:
        model (nn.Module): The classifier (eval mode).
        name (str): The method's name in the result.
        scorer (TokenScorer): The scorer that produced ``scores``.
        scores (Tensor): ``(N, L)`` its scores.
        call (ScorerCall or UnitTensors): What the scorer was called with
            (also a tuple ``(input_ids, target, attention_mask,
            token_type_ids)``); ``target`` None tracks the predicted class.
            A :class:`UnitTensors` (:func:`unit_tensors`) also gives the
            test's first pass, computed once (its ``original_logits``, with
            options of the same first pass as this test's:
            :func:`~captum_iba.metrics.degradation.same_first_pass`).
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
    options = degradation_options(preset, tokenizer, scorer, test_kwargs)
    known = None
    if isinstance(call, UnitTensors):
        known = KnownInputs(original_logits=call.original_logits)
        call = call.call
    call = call if isinstance(call, ScorerCall) else ScorerCall(*call)
    record = dict(scorer.settings, seconds_per_instance=seconds_per_instance)
    return degradation_test(
        model,
        call.input_ids,
        scores,
        target=call.target,
        attention_mask=call.attention_mask,
        token_type_ids=call.token_type_ids,
        options=with_progress(options, show_progress),
        metadata=dict(
            method=name,
            seed=getattr(scorer, "seed", None),
            attribution=dict(record, setting=preset.name),
        ),
        known=known,
    )


def score_unit(job: CorpusJob, unit: Any, methods: Sequence[str]) -> List[UnitScores]:
    """Score one unit (from ``job.unit_tensors``) with each of ``methods``
    and, when ``job.degradation``, run the degradation test on it: the one
    method loop of every task. The scorer's call on the unit's batch
    (``job.batch_of``, its answer read by ``job.unit_scores``) is timed by
    ``job.timer``; the test is the task's (``job.test``)."""
    out = []
    for name in methods:
        scorer = job.scorers[name]
        start = job.timer()
        scores = job.unit_scores(scorer.attribute(job.batch_of(unit, scorer)))
        seconds = (job.timer() - start) / len(unit.indices)
        result = None
        if job.degradation:
            result = job.test(unit, name, scorer, scores, seconds)
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
    test_settings: Dict[str, Dict[str, Any]] = {}
    bar = tqdm(
        total=len(job.data), desc="instances", unit="inst", disable=not show_progress
    )
    for indices in work_units(job.data, job.batch_size):
        for done in job.score_unit(job.unit_tensors(indices), methods):
            assert done.result is not None
            records[done.method] += zip(indices, done.result.instance_records())
            seconds[done.method] += [done.seconds] * len(indices)
            test_settings.setdefault(done.method, result_settings(done.result))
        bar.update(len(indices))
    bar.close()
    return {
        m: merge_records(
            [r for _, r in sorted(records[m], key=lambda p: p[0])],
            test_settings[m],
            sum(seconds[m]) / len(seconds[m]),
        )
        for m in methods
    }
