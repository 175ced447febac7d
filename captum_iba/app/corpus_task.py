"""The corpus jobs of ``evaluate`` and ``attribute`` behind one interface.

A corpus run answers one of three questions - a classifier's corpus
(:class:`~captum_iba.app.classifier_corpus.ClassifierCorpus`), a causal LM's
prompt task (:class:`~captum_iba.app.llm_corpus.PromptTask`), a context task
(:class:`~captum_iba.app.context_corpus.ContextTask`) - each a
:class:`CorpusTask`: what it checks and resolves at the entry, the methods it
runs when none is named, its split, what it makes and checks before any
weights load, its job on the corpus engine and its report. The task is
chosen once, at the entry (:func:`~captum_iba.app.cli_checks.corpus_task`,
from the model's kind and whether ``--task`` was given), held by the
request, and asked; nothing after the entry branches on the kind or on
``--task``.

Torch-free at import, as the command line's checks are; the tasks import
what their job needs when it runs.
"""

from typing import Any, Dict, List, Optional, Tuple

from captum_iba.app.data.corpora import DEFAULT_CORPUS, HELDOUT_SPLIT, canonical_split
from captum_iba.app.errors import CLIError
from captum_iba.attr.kinds import ModelKind

__all__ = [
    "CORPUS_BATCH",
    "DATASETS",
    "CorpusTask",
    "DatasetTask",
    "corpus_methods",
    "on_device",
]

#: Corpora ``evaluate`` accepts (each on its held-out split, see the loaders).
DATASETS = tuple(HELDOUT_SPLIT)
#: ``--batch-size`` of a corpus when not given.
CORPUS_BATCH = 16

#: What a task's ``prepare`` gives: what its job needs, and a warning (None:
#: none).
Prepared = Tuple[Any, Optional[str]]


class CorpusTask:
    """One kind of corpus job, as the steps that differ between them.

    A subclass says what it checks at the entry (:meth:`check`), its
    default methods, its split and its title, what it makes before the
    weights (:meth:`prepare`), its job (:meth:`job`) and its report
    (:meth:`report`).

    Attributes:
        not_recorded (tuple of str): The options of other tasks, left out of
            the settings its runs record (and a re-run compares).
    """

    not_recorded: Tuple[str, ...] = ()

    def check(self, args: Any) -> Dict[str, Any]:
        """Its arguments checked before anything loads; returns the values
        it resolves at the entry (defaults given their value).

        Raises:
            ~captum_iba.app.errors.CLIError: Naming the argument.
        """
        raise NotImplementedError

    def default_methods(self, command: str, kind: ModelKind) -> List[str]:
        """What ``command`` runs on a model of ``kind`` when no method is
        named."""
        raise NotImplementedError

    def split(self, args: Any) -> str:
        """The split the run reads."""
        raise NotImplementedError

    def title(self, args: Any) -> str:
        """What the run reads, as its first line names it."""
        raise NotImplementedError

    def prepare(self, args: Any, split: str) -> Prepared:
        """What is made and checked before any weights load: what the job
        needs, and a warning or None."""
        raise NotImplementedError

    def note(self, prepared: Any) -> str:
        """A line said before the job runs ("" for none)."""
        return ""

    def job(
        self, args: Any, world: Any, split: str, prepared: Any, settings: Dict
    ) -> Any:
        """The :class:`~captum_iba.app.engine.CorpusJob` on this rank's
        device (``settings``: what defines the run, recorded with it)."""
        raise NotImplementedError

    def report(
        self, args: Any, merged: Any, prepared: Any, warning: Optional[str]
    ) -> int:
        """``evaluate`` 's summary of the merged run, written and printed;
        the exit code."""
        raise NotImplementedError


def on_device(job: Any, world: Any) -> Any:
    """``job`` with its model on this rank's device."""
    job.model.to(world.device)
    return job


def corpus_methods(command: str, kind: ModelKind) -> List[str]:
    """What ``command`` runs on a corpus when no method is named: ``evaluate``
    the kind's comparison, ``attribute`` its default method."""
    chosen = (
        kind.default_comparison if command == "evaluate" else (kind.default_method,)
    )
    return [m.lower() for m in chosen]


class DatasetTask(CorpusTask):
    """A corpus of :data:`DATASETS` (a classifier's,
    or a causal LM's as zero-shot prompts): its held-out split, the degradation
    test's report."""

    not_recorded = ("task", "passages", "examples_seed")  # (a context task's)

    def check(self, args: Any) -> Dict[str, Any]:
        given = (("--passages", getattr(args, "passages", None)),)
        if args.command == "evaluate":
            given += (("--split", args.split),)
        for flag, value in given:
            if value is not None:
                raise CLIError(
                    f"{flag} {value}: it applies to a context task only (--task "
                    "context-facts or context-topics)"
                )
        dataset = (args.dataset or DEFAULT_CORPUS).lower()
        if dataset not in DATASETS:
            raise CLIError(f"unknown dataset {dataset!r}; choose from {DATASETS}")
        return {"dataset": dataset, "batch_size": args.batch_size or CORPUS_BATCH}

    def default_methods(self, command: str, kind: ModelKind) -> List[str]:
        return corpus_methods(command, kind)

    def split(self, args: Any) -> str:
        given = getattr(args, "split", None)  # (attribute's; evaluate's refused)
        return canonical_split(args.dataset, given or HELDOUT_SPLIT[args.dataset])

    def title(self, args: Any) -> str:
        return str(args.dataset)

    def report(
        self, args: Any, merged: Any, prepared: Any, warning: Optional[str]
    ) -> int:
        from captum_iba.app.corpus_report import degradation_report

        return degradation_report(args, merged, warning)
