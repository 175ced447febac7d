"""Our corpora as context-attribution tasks: which source did the answer use.

Each example is a context of several sources (passages), a query, and the
index of the source that holds what the query asks (the *key*), laid out as
ContextCite lays out its prompts (:func:`context_prompt`: ``"Context:
{sources}\\n\\nQuery: {query}"``, the sources joined by blank lines; a chat
model reads it as its user turn). Two tasks, from AG News (the only corpus
of passages the shared data holds), with the usual two splits: ``search``
(AG News's train part, where configurations are chosen) and ``report`` (its
held-out part, run once):

* ``context-facts`` - a planted fact among distractor articles: one of
  :data:`FACTS`' templates filled at random (a name's city, a pet's colour,
  a person's job, ...), placed at a random position among 2-19 AG News
  articles; the query asks for the fact;
* ``context-topics`` - one article of each of AG News's four topics, in a
  random order; the query asks what the article on one topic reports, so
  the answer needs that one real passage.

The examples are seeded (the same ``seed`` gives the same contexts) and the
model is not consulted: whether its answer uses the key is what a study
measures.
"""

import functools
import random
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

__all__ = [
    "CONTEXT_TASKS",
    "FACTS",
    "ContextExample",
    "FactTemplate",
    "clean_passage",
    "clip_words",
    "context_examples",
    "context_prompt",
    "fact_examples",
    "layout_prompt",
    "prompt_layout",
    "topic_examples",
]

#: ContextCite's prompt layout (its ``ContextCiter`` default).
LAYOUT = "Context: {context}\n\nQuery: {query}"
#: What joins two sources of a context.
JOIN = "\n\n"
#: What a model without a chat template (a base model) reads after the
#: query, so that it answers rather than goes on with the context.
BASE_SUFFIX = "\nAnswer:"


@dataclass(frozen=True)
class FactTemplate:
    """A fact to plant: a statement and its query, with ``{slot}`` fields
    filled from ``values``; ``answer`` names the slot the query asks for.

    Attributes:
        statement (str): E.g. ``"{name} moved to {city} last spring."``.
        query (str): E.g. ``"Where did {name} move to last spring?"``.
        values (dict): Slot -> the values it may take.
        answer (str): The slot the query asks for.
    """

    statement: str
    query: str
    values: Dict[str, Tuple[str, ...]]
    answer: str

    def fill(self, rng: random.Random) -> Tuple[str, str, str]:
        """A filled statement, its query and the answer."""
        slots = {k: rng.choice(v) for k, v in self.values.items()}
        return (
            self.statement.format(**slots),
            self.query.format(**slots),
            slots[self.answer],
        )


_NAMES = ("Lars", "Amina", "Tomasz", "Keiko", "Rafael", "Ingrid", "Omar", "Lucia")
#: The facts planted by ``context-facts``.
FACTS: Tuple[FactTemplate, ...] = (
    FactTemplate(
        "{name} moved to {city} last spring.",
        "Where did {name} move to last spring?",
        {
            "name": _NAMES,
            "city": ("Lisbon", "Oslo", "Nairobi", "Lima", "Hanoi", "Quebec"),
        },
        "city",
    ),
    FactTemplate(
        "{name} works as a {job} in a small town.",
        "What does {name} work as?",
        {"name": _NAMES, "job": ("baker", "nurse", "pilot", "carpenter", "librarian")},
        "job",
    ),
    FactTemplate(
        "The cat that {name} adopted is called {pet}.",
        "What is the name of the cat that {name} adopted?",
        {"name": _NAMES, "pet": ("Biscuit", "Pepper", "Mango", "Ziggy", "Olive")},
        "pet",
    ),
    FactTemplate(
        "{name}'s favourite colour is {colour}.",
        "What is {name}'s favourite colour?",
        {"name": _NAMES, "colour": ("green", "purple", "orange", "teal", "yellow")},
        "colour",
    ),
)

#: AG News's topics as a query names them (its classes in order).
TOPICS = ("world politics", "sports", "business", "science and technology")


@dataclass(frozen=True)
class ContextExample:
    """One context-attribution example.

    Attributes:
        sources (tuple of str): The context's passages, in order.
        query (str): The question.
        key (int): The source that holds what the query asks.
        answer (str): The answer the key gives (a planted fact's value; for
            a topic, the key's title), for reading a model's answer.
        task (str): The task it comes from.
    """

    sources: Tuple[str, ...]
    query: str
    key: int
    answer: str
    task: str

    def prompt(self) -> Tuple[str, List[Tuple[int, int]]]:
        """The prompt (:func:`context_prompt`) and its sources' spans."""
        return context_prompt(self.sources, self.query)


def layout_prompt(
    sources: Sequence[str], query: str, suffix: str = ""
) -> Tuple[str, List[Tuple[int, int]]]:
    """ContextCite's layout (:data:`LAYOUT`, the sources joined by
    :data:`JOIN`) around any number of ``sources`` (an ablated context keeps
    some, or none) and ``query``, ``suffix`` after it (a base model's
    :data:`BASE_SUFFIX`), and where each source lies in it (characters):
    the layout of :class:`~captum_iba.evaluation.context_loop.ContextData`
    (:func:`prompt_layout`)."""
    head = LAYOUT.split("{context}")[0]
    spans, pos = [], len(head)
    for i, source in enumerate(sources):
        pos += len(JOIN) if i else 0
        spans.append((pos, pos + len(source)))
        pos += len(source)
    return LAYOUT.format(context=JOIN.join(sources), query=query) + suffix, spans


def prompt_layout(chat: bool) -> Callable[..., Tuple[str, List[Tuple[int, int]]]]:
    """The layout of a model's prompts: :func:`layout_prompt` as a user turn
    of its chat template (``chat``), else as text ending in
    :data:`BASE_SUFFIX` (a base model then answers the query rather than
    goes on with the context)."""
    return (
        layout_prompt if chat else functools.partial(layout_prompt, suffix=BASE_SUFFIX)
    )


def context_prompt(
    sources: Sequence[str], query: str
) -> Tuple[str, List[Tuple[int, int]]]:
    """ContextCite's layout around ``sources`` and ``query``, and where each
    source lies in it (characters): :func:`layout_prompt`, checked.

    Raises:
        ValueError: For fewer than two sources, an empty source or query.
    """
    if len(sources) < 2:
        raise ValueError(f"a context needs at least two sources; got {len(sources)}")
    if not query.strip() or any(not s.strip() for s in sources):
        raise ValueError("the query and every source must hold text")
    return layout_prompt(sources, query)


def clean_passage(text: str) -> str:
    """An AG News text as a reader sees it: its escaped characters (``"It
    #39;s"``, ``" #36;10"``) written out, runs of spaces made one."""
    text = re.sub(r"(?<=\w) #39;(?=\w)", "'", text)  # a contraction
    text = re.sub(r" ?#(\d+);", lambda m: chr(int(m.group(1))), text)
    return re.sub(r"\s+", " ", text).strip()


def clip_words(text: str, words: Optional[int]) -> str:
    """``text``'s first ``words`` words (all of it for None)."""
    return text if words is None else " ".join(text.split()[:words])


def _passages(
    texts: Sequence[str], rng: random.Random, n: int, words: Optional[int] = None
) -> List[str]:
    picked = rng.sample(range(len(texts)), n)
    return [clip_words(clean_passage(texts[i]), words) for i in picked]


def fact_examples(
    texts: Sequence[str],
    n: int,
    seed: int = 0,
    sources: Tuple[int, int] = (3, 20),
    words: Optional[int] = None,
) -> List[ContextExample]:
    """``n`` planted facts among distractor passages ``texts``: per example
    a template of :data:`FACTS`, a number of sources drawn from ``sources``
    (inclusive) and the fact's position, at random. ``words`` clips each
    distractor to its first so many words (many short chunks, as a retriever
    returns them; None: whole articles); the draws do not depend on it.

    Raises:
        ValueError: For too few passages, a bad range or ``words`` below 1.
    """
    if words is not None and (isinstance(words, bool) or int(words) < 1):
        raise ValueError(f"words must be None or >= 1; got {words!r}")
    low, high = sources
    if not 2 <= low <= high or len(texts) < high:
        raise ValueError(
            f"sources must be a range (low, high) with 2 <= low <= high <= "
            f"{len(texts)} passages; got {sources}"
        )
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        template = FACTS[rng.randrange(len(FACTS))]
        statement, query, answer = template.fill(rng)
        count = rng.randint(low, high)
        context = _passages(texts, rng, count - 1, words)
        key = rng.randrange(count)
        context.insert(key, statement)
        out.append(ContextExample(tuple(context), query, key, answer, "context-facts"))
    return out


def topic_examples(
    texts: Sequence[str], labels: Sequence[int], n: int, seed: int = 0
) -> List[ContextExample]:
    """``n`` contexts of one AG News article per topic (:data:`TOPICS`, by
    label), in a random order; the query asks about one topic's article.

    Raises:
        ValueError: When a topic has no article.
    """
    by_topic: List[List[int]] = [[] for _ in TOPICS]
    for i, label in enumerate(labels):
        by_topic[int(label)].append(i)
    empty = [TOPICS[t] for t, rows in enumerate(by_topic) if not rows]
    if empty:
        raise ValueError(f"no article on {', '.join(empty)}")
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        picked = [rng.choice(rows) for rows in by_topic]
        order = list(range(len(TOPICS)))
        rng.shuffle(order)
        topic = rng.randrange(len(TOPICS))
        context = tuple(clean_passage(texts[picked[t]]) for t in order)
        query = f"In one sentence, what does the {TOPICS[topic]} article report?"
        title = context[order.index(topic)].split(". ")[0]
        out.append(
            ContextExample(context, query, order.index(topic), title, "context-topics")
        )
    return out


#: The tasks, by name.
CONTEXT_TASKS = ("context-facts", "context-topics")


def context_examples(
    task: str,
    split: str,
    n: int,
    seed: int = 0,
    data_dir: Optional[str] = None,
    **options: Any,
) -> List[ContextExample]:
    """``n`` examples of a context task from AG News's ``split``
    (``"search"``: its train part; ``"report"``: its held-out part).

    Args:
        task (str): A name of :data:`CONTEXT_TASKS`.
        split (str): ``"search"`` or ``"report"``.
        n (int): Examples.
        seed (int): Their seed. Default 0.
        data_dir (str, optional): The corpora's folder (default: as
            :func:`captum_iba.app.data.load_dataset`).
        **options: ``sources=(low, high)`` and ``words`` (the distractors
            clipped) for ``context-facts``.

    Raises:
        ValueError: For an unknown task or split.
    """
    from captum_iba.app.data import load_dataset

    if task not in CONTEXT_TASKS:
        raise ValueError(
            f"unknown task {task!r}; the context tasks are {CONTEXT_TASKS}"
        )
    splits = {"search": "train", "report": "heldout"}
    if split not in splits:
        raise ValueError(f"split must be 'search' or 'report'; got {split!r}")
    data = load_dataset("ag_news", splits[split], data_dir=data_dir)
    if task == "context-facts":
        return fact_examples(data.texts, n, seed, **options)
    return topic_examples(data.texts, data.labels, n, seed)
