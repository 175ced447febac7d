"""``captum-iba evaluate --task context-facts|context-topics``: which source
of a context did a causal LM's answer use, every method measured with
ContextCite's metrics (:class:`~captum_iba.evaluation.context_loop.ContextJob`)
on the corpus engine (resumable, many processes), as the other tasks are.

The arguments are checked before anything loads (:meth:`ContextTask.check`:
with ``--dataset``, ``--passages`` for a task without it, ...; a context task
on a classifier is refused by the classifier's corpus,
:func:`on_classifier`), the examples made and fitted to the model's positions
before its weights load (:func:`prepare_contexts`: an example whose prompt
and longest response do not fit is skipped, counted and said), and the
summary (:func:`context_summary`) is one row per method and pooling: mean
LDS, top-1 hit rate, top-k drops and CPU-seconds per example.
"""

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from captum_iba.app.corpus_task import CorpusTask, Prepared, on_device
from captum_iba.app.errors import CLIError

__all__ = [
    "CONTEXT_METHODS",
    "CONTEXT_TASK",
    "ContextTask",
    "PreparedContexts",
    "context_columns",
    "context_job",
    "context_summary",
    "on_classifier",
    "parse_passages",
    "prepare_contexts",
]

#: What ``evaluate --task`` compares when no method is named.
CONTEXT_METHODS = ("iba-surrogate", "loso", "random")
#: The split a context task reads when none is given.
DEFAULT_SPLIT = "report"
#: Examples a unit holds when ``--batch-size`` is not given (each has its own
#: response and ablations; one a unit keeps a method's CPU-s its own).
CONTEXT_BATCH = 1


def parse_passages(text: str) -> Tuple[int, int]:
    """``--passages MIN-MAX`` (or ``N``) as ``(MIN, MAX)``, 2 <= MIN <= MAX.

    Raises:
        ~captum_iba.app.errors.CLIError: Naming the option.
    """
    low, dash, high = str(text).partition("-")
    try:  # "3-" is a bound left out, not 3-3: int("") refuses it
        got = (int(low), int(high if dash else low))
    except ValueError:
        got = (0, -1)
    if not 2 <= got[0] <= got[1]:
        raise CLIError(
            f"--passages {text}: give MIN-MAX (or N), whole numbers with "
            "2 <= MIN <= MAX, e.g. 3-20"
        )
    return got


def on_classifier(args: Any) -> Exception:
    """The error (:class:`~captum_iba.app.errors.CLIError`) of a context
    task on a classifier."""
    what = "the default model" if args.model is None else f"--model {args.model}"
    return CLIError(
        f"--task {args.task}: a context task explains a causal LM's answer, but "
        f"{what} is a classifier; give --model <causal LM> (a folder, a GGUF "
        "file or a hub id)"
    )


@dataclass
class PreparedContexts:
    """A context task's examples, made and fitted before the weights load.

    Attributes:
        data: The examples kept (a
            :class:`~captum_iba.evaluation.context_loop.ContextData`).
        tokenizer: The model's tokenizer.
        chat (bool): Whether the prompts are user turns of its chat template.
        made (int): Examples made.
        skipped (list of str): Why each skipped example was (its number and
            its tokens).
        positions (int, optional): The model's positions.
    """

    data: Any
    tokenizer: Any
    chat: bool
    made: int
    skipped: List[str]
    positions: Optional[int]

    def skipped_line(self) -> str:
        """One line on the examples skipped ("" for none)."""
        if not self.skipped:
            return ""
        limit = f"the model's {self.positions} positions"
        return (
            f"skipped {len(self.skipped)} of {self.made} examples: their prompt and "
            f"longest response need more than {limit} "
            f"({'; '.join(self.skipped[:4])}"
            + ("; ...)" if len(self.skipped) > 4 else ")")
        )


def prepare_contexts(args: Any) -> PreparedContexts:
    """The task's examples (seeded by ``--examples-seed``; ``--passages`` for
    context-facts), each fitted to the model's positions with its longest
    response (those that do not fit are skipped and counted), the request
    checked against the model's configuration - all before its weights.

    Raises:
        ~captum_iba.app.errors.CLIError: When no example fits, or for a
            tokenizer without offsets.
    """
    from captum_iba._utils.common import max_positions
    from captum_iba.app.causal_lm import load_lm_tokenizer
    from captum_iba.app.context_tasks import context_examples, prompt_layout
    from captum_iba.app.llm_checks import check_lm_request, lm_config
    from captum_iba.attr.llm_batch import uses_chat
    from captum_iba.evaluation.context_loop import ContextData, too_long

    config = lm_config(args.model)
    check_lm_request(args.request, config)
    positions = max_positions(argparse.Namespace(config=config))
    tok = load_lm_tokenizer(args.model, checked=True)  # (the request's kind)
    if not getattr(tok, "is_fast", False):
        raise CLIError(
            f"--model {args.model}: its tokenizer gives no character offsets (not "
            "a fast one), so the sources cannot be found among its tokens"
        )
    options = {"sources": args.passages} if args.passages else {}
    try:
        examples = context_examples(
            args.task, args.split, args.n, seed=args.examples_seed,
            data_dir=args.data_dir, **options,
        )  # fmt: skip
    except ValueError as err:
        raise CLIError(f"--task {args.task}: {err}") from None
    chat = uses_chat(tok, None)  # a chat model's user turn; a base model's text
    layout = prompt_layout(chat)
    kept, numbers, skipped = [], [], []
    data = ContextData(tuple(examples), layout)
    prepared = PreparedContexts(None, tok, chat, len(examples), skipped, positions)
    for i, example in enumerate(examples):
        length = too_long(tok, data, i, chat, prepared.positions)
        if length is not None:
            skipped.append(f"example {i}: {length} tokens")
            continue
        kept.append(example)
        numbers.append(i)
    if not kept:
        raise CLIError(f"--task {args.task}: {prepared.skipped_line()}; none is left")
    prepared.data = ContextData(tuple(kept), layout, tuple(numbers))
    return prepared


def context_job(args: Any, prepared: PreparedContexts, settings: Dict[str, Any]) -> Any:
    """The :class:`~captum_iba.evaluation.context_loop.ContextJob` of the
    run: the model loaded, the methods built."""
    from captum_iba.app.causal_lm import load_causal_lm
    from captum_iba.app.engine.records import weights_digest
    from captum_iba.evaluation import Resources, build_scorers, get_preset
    from captum_iba.evaluation.context_loop import ContextJob

    tok = prepared.tokenizer
    model, _ = load_causal_lm(args.model, tok)
    resources = Resources(model, tok)
    return ContextJob(
        model=model,
        tokenizer=tok,
        data=prepared.data,
        scorers=build_scorers(args.request, resources, kind=args.kind),
        settings=dict(
            settings,
            weights=weights_digest(model),
            examples=list(prepared.data.numbers),
            chat=prepared.chat,
        ),
        preset=get_preset(args.setting),
        batch_size=args.batch_size,
        degradation=True,
        chat=prepared.chat,
    )


def context_columns(rows: Sequence[Dict[str, Any]]) -> Dict[str, Dict[str, list]]:
    """Per method and pooling (``"iba-deletion (max)"``; a method's own
    per-source scores: its name alone), its per-example lists: ``lds``,
    ``top1`` (0 or 1), ``drop<k>`` and ``cpu_seconds``, from rows holding
    ``method``, ``cpu_seconds`` and ``pooled`` (the engine's test records,
    the context study's rows).
    """
    table: Dict[str, Dict[str, list]] = {}
    for row in rows:
        for pooling, found in row["pooled"].items():
            name = row["method"] if pooling == "-" else f"{row['method']} ({pooling})"
            column = table.setdefault(name, {"lds": [], "top1": [], "cpu_seconds": []})
            column["lds"].append(found["lds"])
            column["top1"].append(float(found["top1"]))
            column["cpu_seconds"].append(row["cpu_seconds"])
            for k, drop in found["drops"].items():
                column.setdefault(f"drop{k}", []).append(drop)
    return table


def _mean(values: Sequence[float]) -> str:
    import math

    kept = [v for v in values if v is not None and math.isfinite(v)]
    if not kept:
        return "n/a"
    n = f" (n {len(kept)})" if len(kept) < len(values) else ""
    return f"{sum(kept) / len(kept):.3f}{n}"


def context_summary(columns: Dict[str, Dict[str, list]]) -> str:
    """Markdown: per method and pooling, the mean LDS, top-1 hit rate, top-k
    drops (nats) and CPU-seconds per example, the best LDS first (means
    over the examples where a value is defined; ``n`` said where fewer)."""
    ks = sorted(
        {c[4:] for col in columns.values() for c in col if c.startswith("drop")},
        key=int,
    )
    head = "| method | n | LDS | top-1 hit | " + " | ".join(f"top-{k} drop" for k in ks)
    lines = [head + " | CPU-s |", "|" + "---|" * (len(ks) + 5)]

    def lds(name: str) -> float:
        found = _mean(columns[name]["lds"]).split()[0]
        return -float(found) if found != "n/a" else 2.0

    for name in sorted(columns, key=lds):
        col = columns[name]
        cells = [_mean(col["lds"]), _mean(col["top1"])]
        cells += [_mean(col.get(f"drop{k}", [])) for k in ks]
        cells.append(f"{sum(col['cpu_seconds']) / len(col['cpu_seconds']):.2f}")
        lines.append(f"| {name} | {len(col['lds'])} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_context_report(
    args: Any, merged: Any, prepared: PreparedContexts
) -> Tuple[str, List[str]]:
    """The summary table (``<task>_<split>.md``, the skipped examples said
    under it) and each method's per-example metrics
    (``<task>_<split>_<method>.json``); returns the table and the names."""
    from captum_iba._utils.io import atomic_write_text
    from captum_iba.app.command_parts import slug

    out, stem = Path(args.out), f"{args.task}_{args.split}".replace("-", "_")
    rows = [
        dict(record, method=method)
        for method, result in merged.results.items()
        for record in result["records"]
    ]
    table = context_summary(context_columns(rows))
    notes = [prepared.skipped_line()] if prepared.skipped_line() else []
    notes += merged.left_out_notes()
    atomic_write_text(
        out / f"{stem}.md", table + "\n" + "".join(f"\n{n}\n" for n in notes)
    )
    written = [f"{stem}.md"]
    for method, result in merged.results.items():
        name = f"{stem}_{slug(method)}"
        atomic_write_text(out / f"{name}.json", json.dumps(result, indent=1) + "\n")
        written.append(f"{name}.json")
    return table, written


class ContextTask(CorpusTask):
    """A context task's run: which source of a context a causal LM's answer
    used, every method measured with ContextCite's metrics."""

    def check(self, args: Any) -> Dict[str, Any]:
        """The task's arguments; resolves ``split``, ``batch_size`` and
        ``passages``.

        Raises:
            ~captum_iba.app.errors.CLIError: Naming the argument: ``--task``
                with ``--dataset`` or ``--max-length``, ``--passages`` for a
                task without it.
        """
        task = args.task
        if args.dataset is not None:
            raise CLIError(
                f"--task {task} and --dataset {args.dataset}: a context task reads "
                "its own passages (AG News); give one of them"
            )
        if args.max_length is not None:
            raise CLIError(
                f"--max-length {args.max_length}: a context task's prompts are not "
                "cut (an example past the model's positions is skipped, counted)"
            )
        if args.passages is not None:
            if task != "context-facts":
                raise CLIError(
                    f"--passages {args.passages}: {task} has one passage per topic; "
                    "--passages applies to context-facts"
                )
        resolved: Dict[str, Any] = {
            "split": args.split or DEFAULT_SPLIT,
            "batch_size": args.batch_size or CONTEXT_BATCH,
        }
        if args.passages is not None:
            resolved["passages"] = parse_passages(args.passages)
        return resolved

    def default_methods(self, command: str, kind: Any) -> List[str]:
        return list(CONTEXT_METHODS)

    def split(self, args: Any) -> str:
        return str(args.split)

    def title(self, args: Any) -> str:
        return str(args.task)

    def prepare(self, args: Any, split: str) -> Prepared:
        """The examples made and fitted (:func:`prepare_contexts`)."""
        return prepare_contexts(args), None

    def note(self, prepared: Any) -> str:
        """The examples skipped, in one line ("" for none)."""
        return prepared.skipped_line()

    def job(
        self, args: Any, world: Any, split: str, prepared: Any, settings: Dict
    ) -> Any:
        return on_device(context_job(args, prepared, settings), world)

    def report(
        self, args: Any, merged: Any, prepared: Any, warning: Optional[str]
    ) -> int:
        """The summary (:func:`write_context_report`), printed."""
        from captum_iba._utils.io import write_marker
        from captum_iba.app.command_parts import MARKER
        from captum_iba.app.corpus_report import ENGINE_FILES, wrap

        table, written = write_context_report(args, merged, prepared)
        n = len({row["index"] for row in merged.rows})
        write_marker(
            Path(args.out), MARKER, files=ENGINE_FILES + written,
            command="evaluate", n=n,
        )  # fmt: skip
        print(f"\n{args.task} {args.split} (n={n}), {args.model}")
        print(table)
        print(
            wrap(
                "Columns: LDS (Spearman over the held-out ablations; higher = more "
                "faithful), top-1 hit (the key source ranked first), top-k drop (the "
                "response's log-probability fall, nats, removing the k sources "
                "ranked first), CPU-s per example; a method's rows by pooling of its "
                "token scores (sum, mean, max) or its own source scores (its name "
                "alone)"
            )
        )
        note = prepared.skipped_line()
        if note:
            print(wrap(f"note: {note}"))
        for refused in merged.left_out_notes():
            print(wrap(refused))
        print(
            f"done: {merged.run_line(n, len(merged.results))}; results in {args.out}/"
        )
        return 0


#: The context task (:func:`~captum_iba.app.cli_checks.corpus_task`).
CONTEXT_TASK = ContextTask()
