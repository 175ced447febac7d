"""Which source did the answer use (issue 51): context attribution measured
the field's way, ContextCite's metrics, against ContextCite itself.

For each example of a context task (:mod:`captum_iba.app.context_tasks`) the
model answers the prompt (ContextCite's layout as a user turn of the chat
template, greedy, at most 24 new tokens, stopped at the end-of-text token);
each method scores the sources for that response:

* ``contextcite-<A>`` - ContextCite's package, ``A`` ablations, our sources
  as its partitioner and our response given to it
  (:func:`~captum_iba.evaluation.context_cite.context_cite_scores`, which
  checks the package reads the same response ids);
* ``at2-<n>`` - AT2's package with its head weights trained on ``n``
  examples (``experiments/train_at2.py``; the file
  :func:`~captum_iba_lab.at2.at2_weights_path` names under
  ``--at2-dir``, trained on ``--at2-task``) as the method ``at2``
  (:class:`~captum_iba_lab.at2.AT2Scorer`, its own source scores);
  ``at2-iba-[<task>-]<n>`` the same with head weights taught on ``n``
  contexts by one ``iba-deletion`` step instead of ablations (``iba-heads``'
  scorer; ``experiments/teach_at2.py``,
  :mod:`~captum_iba_lab.at2_taught`);
  its CPU-s are the scoring alone (the training is paid once per model);
* ``iba-amortized-from-<task>`` - ``iba-amortized`` with the explainer
  the command line fitted on the prompt task's training prompts (a
  transfer: issue 52), its token scores pooled as a token method's;
* ``iba-amortized-ctx-[<task>-]<n>`` - ``iba-amortized`` with an explainer
  fitted on ``n`` search contexts of ``task`` (default ``--explainer-task``) by
  ``experiments/fit_context_explainer.py`` (under ``--explainer-dir``;
  ``--explainer-objective`` and ``--teacher-steps`` name which), against
  AT2 trained on the same contexts: issue 52;
* ``iba-surrogate-<k>[-log-odds]`` - ``iba-surrogate`` with ``k`` ablations
  a context (:mod:`~captum_iba.evaluation.surrogate`; ``iba-surrogate``
  alone: 16), fitted to the outcomes' ranks, or to their log-odds;
* a registered token method (``iba-deletion``, ``ablation``, ``random``,
  ``ig``, ...) on the prompt and response as a
  :class:`~captum_iba.attr.llm_batch.PromptBatch`, its token scores pooled to
  the sources by sum, mean and max
  (:func:`~captum_iba.evaluation.sources.pool_sources`), or its own source
  scores for a method that scores sources as such (``iba-sources``). The
  batch holds the sources (:func:`~captum_iba.evaluation.sources.with_sources`):
  every method scores and removes the sources' tokens only.

The procedure is ``captum-iba evaluate --task``'s
(:mod:`captum_iba.evaluation.context_loop`: the same responses, sources,
held-out ablations and metrics); this script adds ContextCite's package and
the tables with intervals.

Then :func:`~captum_iba.metrics.context.context_test`: the LDS over 32
held-out ablations (keep probability 0.5, drawn by torch with seed
:data:`~captum_iba.evaluation.context_loop.HELDOUT_SEED` + the example's
index, never ContextCite's NumPy seeds
0..A-1) shared by all methods, the top-k log-probability drops (k = 1, 3, 5),
and whether the key source (the one the query asks about) is ranked first.
CPU-seconds are the method's alone (one torch thread, ``time.process_time``).

Results are cached under ``--out``: per task and split, the responses and
held-out ablations (``_examples.json``) and one record per method, each a
list of per-example rows, written after every example (a run resumes; a
method can be added later)::

    python experiments/context_study.py run --task context-facts --split search \\
        --n 12 --methods contextcite-32,iba-deletion,ablation,random
    python experiments/context_study.py tables --task context-facts --split search

Tables use the classifier study's statistics (means, 95 % bootstrap
intervals, paired differences against ContextCite on the same examples).
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "lab"))  # the lab: captum_iba_lab
from context_tables import AT2_PREFIX, CONTEXTCITE, tables  # noqa: E402
from study_lm import TOKENIZER_HELP, study_lm  # noqa: E402

from captum_iba._utils.io import atomic_write_text  # noqa: E402
from captum_iba.app.context_corpus import parse_passages  # noqa: E402
from captum_iba.app.context_tasks import (  # noqa: E402
    CONTEXT_TASKS,
    ContextExample,
    context_examples,
    prompt_layout,
)
from captum_iba.app.model_kind import SMOLLM2_HUB_ID  # noqa: E402
from captum_iba.attr.llm import CausalLMLogLikelihood  # noqa: E402
from captum_iba.attr.llm_batch import _pad_id, uses_chat  # noqa: E402
from captum_iba.evaluation import Resources, build_scorers  # noqa: E402
from captum_iba.evaluation.context_loop import (  # noqa: E402
    MAX_NEW_TOKENS,
    OWN,
    ContextData,
    context_unit,
    example_metrics,
    method_source_scores,
)
from captum_iba.metrics.context import TOP_K  # noqa: E402
from captum_iba.registry import METHODS, SURROGATE_OUTCOMES  # noqa: E402

#: The ablations per training example of the AT2 weights the study reads.
AT2_ABLATIONS = 32
#: ``at2-iba-<n>``: AT2's head weights taught by IBA (``teach_at2.py``).
AT2_TAUGHT = "iba-"
#: The prefix of ``iba-amortized`` with the explainer the command line fitted
#: on a prompt task's training prompts (``iba-amortized-from-sst2``): a
#: transfer to the context task (issue 52).
AMORTIZED = "iba-amortized-from-"
#: The prefix of ``iba-amortized`` with an explainer fitted on a context
#: task's search contexts (``iba-amortized-ctx-64``: 64 of them;
#: ``iba-amortized-ctx-context-topics-64``: of that task).
CTX_AMORTIZED = "iba-amortized-ctx-"
#: The methods ``--iba-steps`` runs with another number of deletion steps.
STEPPED = ("iba-deletion", "iba-sources")
#: ``iba-surrogate-<k>``: ``iba-surrogate`` with k ablations a context.
SURROGATE = "iba-surrogate-"
#: The methods named by a prefix, not registered names.
ANCHORS = (CONTEXTCITE, AT2_PREFIX, CTX_AMORTIZED, AMORTIZED, SURROGATE)


def method_scores(
    method: str, scorer: Any, model: Any, tok: Any, example: ContextExample, batch: Any
) -> Dict[str, torch.Tensor]:
    """One method's source scores: ``{"-": scores}`` for ContextCite (and a
    method scoring sources as such), one per pooling for a token method
    (:func:`~captum_iba.evaluation.context_loop.method_source_scores` on the
    batch with its sources)."""
    if method.startswith(CONTEXTCITE):
        from captum_iba.evaluation.context_cite import context_cite_scores

        found = context_cite_scores(
            model, tok, batch.prompts[0], batch.spans[0], batch.answer_ids(0),
            num_ablations=int(method[len(CONTEXTCITE):]),
            chat=uses_chat(tok, None),
        )  # fmt: skip
        return {OWN: found}
    pooled = method_source_scores(
        scorer.attribute(batch), batch, scorer.source_poolings
    )
    return {p: s[0] for p, s in pooled.items()}


def study_examples(args: argparse.Namespace) -> List[ContextExample]:
    """The examples of a run's ``--task``, ``--split``, ``--n``, ``--seed``
    and (``context-facts``) ``--passages`` (LOW-HIGH, checked)."""
    passages = parse_passages(args.passages)
    extra = (
        {"sources": passages, "words": getattr(args, "passage_words", None)}
        if args.task == "context-facts"
        else {}
    )
    return context_examples(args.task, args.split, args.n, seed=args.seed, **extra)


def example_unit(
    model: Any,
    tok: Any,
    example: ContextExample,
    number: int = 0,
    max_new_tokens: int = MAX_NEW_TOKENS,
) -> Any:
    """One example's unit as the study makes it: its greedy response and its
    held-out ablations (seed ``HELDOUT_SEED`` + ``number``), in a chat
    model's user turn or a base model's text."""
    chat = uses_chat(tok, None)
    data = ContextData((example,), prompt_layout(chat), (number,))
    return context_unit(model, tok, data, [0], chat, max_new_tokens=max_new_tokens)


def study_example(
    model: Any,
    tok: Any,
    example: ContextExample,
    scorers: Dict[str, Any],
    number: int = 0,
    max_new_tokens: int = MAX_NEW_TOKENS,
) -> Dict[str, Dict[str, Any]]:
    """Every method's row for one example: its response, each method's
    source scores and metrics (per pooling), its CPU-seconds - the procedure
    of ``captum-iba evaluate --task`` (its unit and metrics:
    :func:`~captum_iba.evaluation.context_loop.context_unit`,
    :func:`~captum_iba.evaluation.context_loop.example_metrics`).

    Args:
        model: The causal LM.
        tok: Its tokenizer (a chat template, a fast one).
        example (ContextExample): The example.
        scorers (dict): Method -> a scorer (``attribute(batch)``), or None
            for ``contextcite-<A>``.
        number (int): The example's number (its held-out ablations' seed:
            ``HELDOUT_SEED`` + it).
        max_new_tokens (int): The longest response.

    Returns:
        dict: Method -> its row.
    """
    unit = example_unit(model, tok, example, number, max_new_tokens)
    ll = CausalLMLogLikelihood(model)
    rows = {}
    for method, scorer in scorers.items():
        began = time.process_time()
        found = method_scores(method, scorer, model, tok, example, unit.batch)
        seconds = time.process_time() - began
        print(f"  {method}: {seconds:.1f} CPU-s", file=sys.stderr, flush=True)
        metrics = example_metrics(ll, unit, 0, found, example.key, _pad_id(tok), TOP_K)
        rows[method] = dict(
            metrics,
            cpu_seconds=seconds,
            n_sources=len(example.sources),
            key=example.key,
            response=tok.decode(unit.batch.answer_ids(0)),
        )
    return rows


def _record(out: Path, method: str) -> List[Dict[str, Any]]:
    path = out / f"{method}.json"
    return json.loads(path.read_text()) if path.exists() else []


def at2_scorers(
    args: argparse.Namespace, methods: Sequence[str]
) -> Dict[str, Callable[..., Any]]:
    """Each ``at2-<n>`` (and ``at2-iba-[<task>-]<n>``: taught by IBA, on
    ``--at2-task`` 's contexts unless the name gives the task) method's
    scorer, made once the model is loaded (``model, tok -> AT2Scorer``); its
    weights file is checked here, before the model loads (the message names
    the training command)."""
    from captum_iba_lab.at2 import AT2Scorer, at2_weights_path
    from captum_iba_lab.at2_taught import TEACHER, TaughtHeadsScorer

    makers = {}
    for m in (m for m in methods if m.startswith(AT2_PREFIX)):
        rest = m[len(AT2_PREFIX) :]
        taught = rest.startswith(AT2_TAUGHT)
        named, _, budget = rest[len(AT2_TAUGHT) if taught else 0 :].rpartition("-")
        task = named or args.at2_task
        if not budget.isdigit() or named and (not taught or named not in CONTEXT_TASKS):
            raise SystemExit(
                f"{m}: AT2's methods are at2-<n> and at2-{AT2_TAUGHT}[<task>-]<n>, "
                f"n its training examples, task one of {', '.join(CONTEXT_TASKS)}"
            )
        path = at2_weights_path(
            args.model, task, int(budget), AT2_ABLATIONS, args.at2_dir,
            TEACHER if taught else None,
        )  # fmt: skip
        if not path.is_file():
            script, how = (
                ("teach_at2.py", "") if taught
                else ("train_at2.py", f" --ablations {AT2_ABLATIONS}")
            )  # fmt: skip
            raise SystemExit(
                f"{m}: no AT2 weights at {path}; train them with python "
                f"experiments/{script} --model {args.model} --task "
                f"{task} --n {budget}{how}"
                + (f" --out {args.at2_dir}" if args.at2_dir else "")
            )
        if taught:  # iba-heads' scorer: it checks the weights' teacher
            makers[m] = lambda model, tok, m=m, path=path: TaughtHeadsScorer(
                model, heads=path, tokenizer=tok, method_name="iba-heads", name=m
            )
        else:
            makers[m] = lambda model, tok, m=m, path=path: AT2Scorer(
                model, weights=path, tokenizer=tok, method_name="at2", name=m
            )
    return makers


def amortized_scorers(methods: Sequence[str]) -> Dict[str, Callable[..., Any]]:
    """Each ``iba-amortized-from-<task>`` method's scorer, made once the
    model is loaded (``model, tok -> AmortizedLMScorer``): the explainer
    cached for the model on the task's training prompts (the lab's
    :func:`~captum_iba_lab.amortized_lm.lm_explainer`; refused, naming the
    command that fits it, when there is none)."""
    from captum_iba_lab.amortized_lm import (
        LLM_OBJECTIVE,
        AmortizedLMScorer,
        lm_explainer,
    )

    from captum_iba.app.llm_tasks import TASKS
    from captum_iba.attr.text import resolve_layer

    makers = {}
    for m in (m for m in methods if m.startswith(AMORTIZED)):
        task = m[len(AMORTIZED) :]
        if task not in TASKS:
            raise SystemExit(f"{m}: {task!r} is not a prompt task ({', '.join(TASKS)})")

        def make(model: Any, tok: Any, task: str = task) -> Any:
            ref = resolve_layer(model, "embeddings")
            found = lm_explainer(model, tok, ref, task, False, LLM_OBJECTIVE)
            return AmortizedLMScorer(model, explainer=found, tokenizer=tok)

        makers[m] = make
    return makers


def context_explainer_scorers(
    args: argparse.Namespace, methods: Sequence[str]
) -> Dict[str, Callable[..., Any]]:
    """Each ``iba-amortized-ctx-<n>`` method's scorer, made once the model is
    loaded: the explainer ``experiments/fit_context_explainer.py`` fitted on
    ``n`` search contexts (its folder checked here, before the model loads;
    the message names the fitting command)."""
    from fit_context_explainer import explainer_path

    makers = {}
    for m in (m for m in methods if m.startswith(CTX_AMORTIZED)):
        task, _, n = m[len(CTX_AMORTIZED) :].rpartition("-")
        task = task or args.explainer_task
        if not n.isdigit() or task not in CONTEXT_TASKS:
            raise SystemExit(
                f"{m}: the methods are {CTX_AMORTIZED}[<task>-]<n>, n its contexts, "
                f"task one of {', '.join(CONTEXT_TASKS)} (default --explainer-task)"
            )
        folder = explainer_path(
            args.model, task, int(n), args.explainer_objective, args.teacher_steps,
            args.explainer_dir,
        )  # fmt: skip
        if not (folder / "explainer.json").is_file():
            raise SystemExit(
                f"{m}: no explainer at {folder}; fit it with python "
                f"experiments/fit_context_explainer.py --model {args.model} --task "
                f"{task} --n {n} --objective "
                f"{args.explainer_objective} --teacher-steps {args.teacher_steps}"
                + (f" --out {args.explainer_dir}" if args.explainer_dir else "")
            )
        makers[m] = lambda model, tok, folder=folder: _loaded_scorer(model, tok, folder)
    return makers


def _loaded_scorer(model: Any, tok: Any, folder: Path) -> Any:
    """``iba-amortized`` (the lab's, on a causal LM) with the explainer
    saved in ``folder``."""
    from captum_iba_lab.amortized_lm import AmortizedLMScorer

    from captum_iba.attr.amortized import AmortizedExplainer
    from captum_iba.attr.text import resolve_layer

    layer = resolve_layer(model, "embeddings").module
    explainer = AmortizedExplainer.load(
        folder, CausalLMLogLikelihood(model), layer, tokenizer=tok
    )
    return AmortizedLMScorer(model, explainer=explainer, tokenizer=tok)


def _stepped(method: str, steps: Optional[int]) -> str:
    """The record of ``method`` run with ``steps`` deletion steps
    (``iba-sources-steps1``); the method's own for any other method."""
    return f"{method}-steps{steps}" if steps and method in STEPPED else method


def _with_options(method: str, options: Dict[str, Any]) -> Callable[..., Any]:
    """``model, tok -> scorer``: the registered ``method`` with ``options``."""
    return lambda model, tok: build_scorers(
        [method], Resources(model, tok), method_options={method: options},
        kind="causal-lm",
    )[method]  # fmt: skip


def stepped_scorers(
    methods: Sequence[str], steps: Optional[int]
) -> Dict[str, Callable[..., Any]]:
    """With ``--iba-steps K``: each deletion method of :data:`STEPPED` as a
    scorer with K steps (``model, tok -> scorer``), under its record's name."""
    return {
        _stepped(m, steps): _with_options(m, {"steps": steps})
        for m in methods
        if steps and m in STEPPED
    }


def surrogate_scorers(methods: Sequence[str]) -> Dict[str, Callable[..., Any]]:
    """Each ``iba-surrogate-<k>[-log-odds][-focused|-sparse][-p<penalty>][-t<shrink>]``
    method's scorer (``model, tok -> scorer``): ``iba-surrogate`` with k ablations a
    context, fitted to the outcomes' ranks (its default) or to their log-odds,
    its design the factorial one over every source (what the records without
    ``-focused`` ran: ``iba-surrogate`` 's default before issue 77's long
    contexts), ``focused`` on the prior's top sources (its default since;
    the two are the same below 16 sources at 16 ablations) or ``sparse``
    (every source at random, kept with probability 0.3: the lab's
    :class:`~captum_iba_lab.sparse_surrogate.SparseSurrogateScorer`), the prior's
    weight ``penalty`` (default 1), the weights soft-thresholded at ``shrink``
    times their spread (default 0: not). The variants of
    one run share their ablations and prior where they are the same
    (:class:`studylib.shared_ablations.Shared`)."""
    from studylib.shared_ablations import Shared

    shared = Shared()
    makers: Dict[str, Callable[..., Any]] = {}
    for m in (m for m in methods if m.startswith(SURROGATE)):
        k, *parts = m[len(SURROGATE) :].replace("log-odds", "log_odds").split("-")
        options: Dict[str, Any] = {
            "outcome": SURROGATE_OUTCOMES[0],
            "design": "factorial",  # the records' name without -focused
        }
        for part in parts:
            if part == "log_odds":
                options["outcome"] = "log-odds"
            elif part in ("focused", "sparse"):
                options["design"] = part
            elif part[:1] == "p" and part[1:].replace(".", "", 1).isdigit():
                options["penalty"] = float(part[1:])
            elif part[:1] == "t" and part[1:].replace(".", "", 1).isdigit():
                options["shrink"] = float(part[1:])
            else:
                k = ""  # refused below
        if not k.isdigit() or int(k) < 2:
            raise SystemExit(
                f"{m}: the methods are {SURROGATE}<k>[-log-odds][-focused|-sparse]"
                "[-p<penalty>][-t<shrink>], k >= 2 ablations"
            )
        makers[m] = lambda model, tok, k=int(k), options=options: shared.attach(
            _surrogate(model, tok, k, dict(options))
        )
    return makers


def _surrogate(model: Any, tok: Any, k: int, options: Dict[str, Any]) -> Any:
    """``iba-surrogate`` with ``k`` ablations and ``options``; ``shrink``
    (``-t<k>``) put after its fit (``studylib.shrunk_fit``)."""
    from studylib.shrunk_fit import shrunk

    from captum_iba.evaluation.surrogate import IBASurrogateScorer

    shrink = options.pop("shrink", 0.0)
    if options.get("design") == "sparse":  # a variant that lost: the lab's
        from captum_iba_lab.sparse_surrogate import SparseSurrogateScorer

        del options["design"]
        scorer = SparseSurrogateScorer(model, n_ablations=k, tokenizer=tok, **options)
    else:
        scorer = IBASurrogateScorer(model, n_ablations=k, tokenizer=tok, **options)
    return shrunk(scorer, shrink) if shrink else scorer


def run(args: argparse.Namespace) -> None:
    """Score and test every method on every example not yet cached."""
    os.environ.setdefault("TQDM_DISABLE", "1")  # ContextCite's progress bars
    torch.set_num_threads(1)
    methods = [  # a registered method by its name now (ablation -> LOO)
        m if m.startswith(ANCHORS) else METHODS.entry(m).name
        for m in args.methods.split(",")
    ]
    made = dict(at2_scorers(args, methods), **amortized_scorers(methods))
    made.update(context_explainer_scorers(args, methods))
    made.update(stepped_scorers(methods, args.iba_steps))
    made.update(surrogate_scorers(methods))
    methods = [_stepped(m, args.iba_steps) for m in methods]
    out = Path(args.out) / args.task / args.split
    out.mkdir(parents=True, exist_ok=True)
    examples = study_examples(args)
    if any(m.startswith(CONTEXTCITE) for m in methods):
        from captum_iba.evaluation.context_cite import import_context_cite

        import_context_cite()  # its slow import (spaCy, NLTK) is not ContextCite's cost
    model, tok = study_lm(args.model, args.tokenizer)
    built: Dict[str, Any] = {m: {m: make(model, tok)} for m, make in made.items()}

    def score(i: int, example: ContextExample, todo: List[str]) -> Dict[str, Any]:
        for m in todo:
            if m not in built and not m.startswith(CONTEXTCITE):
                built[m] = build_scorers([m], Resources(model, tok), kind="causal-lm")
        scorers = {m: built[m][m] if m in built else None for m in todo}
        return study_example(model, tok, example, scorers, i)

    run_examples(out, methods, examples, score, args.start)


def run_examples(
    out: Path,
    methods: Sequence[str],
    examples: Sequence[ContextExample],
    score: Callable[[int, ContextExample, List[str]], Dict[str, Any]],
    start: int = 0,
) -> None:
    """Each example's methods that its records in ``out`` do not hold yet,
    scored by ``score(index, example, methods) -> {method: row}``, each row
    written as it comes (a run resumes, by index). ``start``: the first
    example's index (a second process on the later examples, into a folder
    of its own)."""
    for i, example in enumerate(examples):
        if i < start:
            continue
        todo = [m for m in methods if i not in {r["index"] for r in _record(out, m)}]
        if not todo:
            continue
        rows = score(i, example, todo)
        for m, row in rows.items():
            record = _record(out, m) + [dict(row, index=i)]
            atomic_write_text(out / f"{m}.json", json.dumps(record))
            best = max(row["pooled"].values(), key=lambda r: r["lds"] or -1.0)
            print(f"{i} {m}: S {row['n_sources']} LDS {best['lds']:.3f} "
                  f"CPU-s {row['cpu_seconds']:.1f} {row['response']!r}",
                  flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "tables"):
        p = sub.add_parser(name)
        p.add_argument("--task", choices=CONTEXT_TASKS, required=True)
        p.add_argument("--split", choices=("search", "report"), default="search")
        p.add_argument("--out", default="results/context")
    sub.choices["tables"].add_argument(
        "--docs", help="also write the tables under this docs folder"
    )
    sub.choices["tables"].help = (
        "--out may name several folders (commas): their runs pooled, the "
        "methods all hold on the contexts each run's methods all hold"
    )
    sub.choices["tables"].add_argument(
        "--first",
        type=int,
        help="only the first N contexts (those every method has run)",
    )
    sub.choices["tables"].add_argument(
        "--tag", default="", help="names the docs files and titles (e.g. the model)"
    )
    sub.choices["tables"].add_argument(
        "--anchor", action="append",
        help="also pair every row against this one, e.g. 'iba-deletion (max)' "
        "(repeatable)",
    )  # fmt: skip
    run_p = sub.choices["run"]
    run_p.add_argument("--n", type=int, default=12)
    run_p.add_argument("--seed", type=int, default=0, help="the examples' seed")
    run_p.add_argument(
        "--start",
        type=int,
        default=0,
        help="the first example's index (a second process on the later examples, "
        "into another --out; merge the records after)",
    )
    run_p.add_argument("--methods", default="contextcite-32,iba-deletion,random")
    run_p.add_argument("--model", default=SMOLLM2_HUB_ID)
    run_p.add_argument("--tokenizer", help=TOKENIZER_HELP)
    run_p.add_argument(
        "--at2-dir",
        help="AT2's weights folder (default: ~/.cache/captum_iba/at2)",
    )
    run_p.add_argument(
        "--at2-task", default="context-facts", help="the task AT2 was trained on"
    )
    run_p.add_argument(
        "--explainer-dir",
        help="iba-amortized-ctx-<n>'s explainers (default: the cache's)",
    )
    run_p.add_argument(
        "--explainer-task", default="context-facts",
        help="the task iba-amortized-ctx-<n>'s explainer was fitted on",
    )  # fmt: skip
    run_p.add_argument(
        "--explainer-objective", default="distil", choices=("distil", "deletion")
    )
    run_p.add_argument(
        "--teacher-steps", type=int, default=1,
        help="the deletion steps of iba-amortized-ctx-<n>'s teacher",
    )  # fmt: skip
    run_p.add_argument(
        "--iba-steps", type=int,
        help="iba-deletion and iba-sources with this many steps (default: theirs, "
        "7), recorded as <method>-steps<K>",
    )  # fmt: skip
    run_p.add_argument(
        "--passages", default="3-20",
        help="context-facts: the passages per context, LOW-HIGH (the fact one of them)",
    )  # fmt: skip
    run_p.add_argument(
        "--passage-words", type=int,
        help="context-facts: the distractor passages clipped to their first N "
        "words (many short chunks; default: whole articles)",
    )  # fmt: skip
    args = parser.parse_args()
    {"run": run, "tables": tables}[args.command](args)


if __name__ == "__main__":
    main()
