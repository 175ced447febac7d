"""Our corpora as zero-shot prompt tasks for a causal LM (issue 28).

A :class:`PromptTask` turns one example of a corpus into a prompt - an
instruction around the content (the review, the article, the premise and
hypothesis) - and names the answer words, one per label. A task says
whether its prompts are a user turn of the chat template or plain
completions (:attr:`PromptTask.chat`; completions measured better, see
:data:`TASKS`).
:func:`task_examples` gives the prompts, where each one's content lies
(characters, for :func:`~captum_iba.evaluation.llm_degradation.content_mask`)
and the gold answers; :func:`answer_token_ids` checks that every answer word
is one token of the tokenizer (the model's choice between them is then one
next-token distribution).
"""

import random
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

__all__ = [
    "TASKS",
    "PromptTask",
    "TaskExamples",
    "answer_token_ids",
    "fit_prompt",
    "label_choice",
    "prompt_content",
    "task_examples",
]


@dataclass(frozen=True)
class PromptTask:
    """How one corpus becomes prompts.

    Attributes:
        corpus (str): The corpus (:func:`captum_iba.app.data.load_dataset`).
        template (str): The prompt, with ``{content}`` where the content goes.
        answers (tuple of str): The answer word of each label, in label order
            (scored after the template's end, e.g. ``" positive"``).
        pair_join (str): Joins a sentence pair into one content (RTE; the
            joining words are then part of the content).
        max_content_tokens (int, optional): Content longer than this many
            tokens is skipped (IMDB's long-prompt task keeps 256-512).
        min_content_tokens (int): Shorter content is skipped.
        chat (bool): Whether the prompt is a user turn of the tokenizer's
            chat template (else a plain completion, answered after the
            template's last word).
    """

    corpus: str
    template: str
    answers: Tuple[str, ...]
    pair_join: str = ""
    max_content_tokens: Optional[int] = None
    min_content_tokens: int = 1
    chat: bool = False

    def prompt(self, content: str) -> Tuple[str, Tuple[int, int]]:
        """The prompt around ``content`` and where the content lies in it."""
        head, tail = self.template.split("{content}")
        return head + content + tail, (len(head), len(head) + len(content))


_SENTIMENT = (
    "Classify the sentiment of the review as positive or negative.\n"
    "Review: {content}\nSentiment:"
)
#: The tasks, by name. Templates chosen on 48 train prompts each (the search
#: split) for SmolLM2-135M-Instruct's zero-shot choice among the answer
#: words, as completions: in its chat template it chose " negative" for all
#: 48 SST-2 prompts (accuracy .40; .75 as this completion, 13 / 35 negative /
#: positive), so its choice did not depend on the review at all. On AG News
#: and RTE every template tried was weak (AG News .25-.33, mostly " world";
#: RTE " no" for all 48, accuracy .58): the test then explains that answer.
TASKS: Dict[str, PromptTask] = {
    "sst2": PromptTask("sst2", _SENTIMENT, (" negative", " positive")),
    "imdb": PromptTask(
        "imdb",
        _SENTIMENT,
        (" negative", " positive"),
        max_content_tokens=512,
        min_content_tokens=256,
    ),
    "ag_news": PromptTask(
        "ag_news",
        "Article: {content}\nTopic (world, sports, business or science):",
        (" world", " sports", " business", " science"),
    ),
    "rte": PromptTask(
        "rte",
        "Does the first sentence imply the second? Answer yes or no.\n"
        "First sentence: {content}\nAnswer:",
        (" yes", " no"),
        pair_join="\nSecond sentence: ",
    ),
}


@dataclass
class TaskExamples:
    """Prompts of one task with their content and gold answers.

    Attributes:
        prompts (list of str): The prompts (before the chat template).
        spans (list of (int, int)): Where each one's content lies.
        gold (list of str): Each one's gold answer word.
        labels (list of int): Its label.
        indices (list of int): Its index in the corpus split.
    """

    prompts: List[str]
    spans: List[Tuple[int, int]]
    gold: List[str]
    labels: List[int]
    indices: List[int]


def answer_token_ids(task: PromptTask, tokenizer: Any) -> List[int]:
    """The one token id of each answer word.

    Raises:
        ValueError: Naming the words that are not one token (and what to do
            instead), or that are the tokenizer's unknown token.
    """
    ids = [tokenizer.encode(a, add_special_tokens=False) for a in task.answers]
    long = [
        f"{a!r} -> {len(i)} tokens" for a, i in zip(task.answers, ids) if len(i) != 1
    ]
    if long:
        raise ValueError(
            f"task {task.corpus!r}: answer word(s) {', '.join(long)} are not one "
            "token for this tokenizer; the test explains one next-token choice, "
            "so choose single-token answer words (or explain the model's own "
            "answer, whose tokens are scored together)"
        )
    from captum_iba.attr.llm_batch import unknown_words

    unknown = [a for a in task.answers if unknown_words(tokenizer, a)]
    if unknown:
        raise ValueError(
            f"task {task.corpus!r}: answer word(s) {', '.join(map(repr, unknown))} "
            "are the unknown token for this tokenizer (not in its vocabulary)"
        )
    return [i[0] for i in ids]


def task_examples(
    task: Union[str, PromptTask],
    split: str,
    tokenizer: Any,
    n: int,
    seed: int = 0,
    data_dir: Optional[str] = None,
) -> TaskExamples:
    """``n`` prompts of a task (a name in :data:`TASKS`, or a task) from a
    corpus split: a seeded sample, content outside the task's token bounds
    skipped.

    Raises:
        ValueError: For an unknown task, answer words that are not one token,
            or a split with fewer fitting examples than ``n``.
    """
    from captum_iba.app.data import load_dataset

    if isinstance(task, str):
        if task not in TASKS:
            raise ValueError(f"unknown task {task!r}; the tasks are {sorted(TASKS)}")
        task = TASKS[task]
    answer_token_ids(task, tokenizer)
    data = load_dataset(task.corpus, split, data_dir=data_dir)
    order = list(range(len(data.texts)))
    random.Random(seed).shuffle(order)
    out = TaskExamples([], [], [], [], [])
    for i in order:
        content = prompt_content(task, data, i)
        size = len(tokenizer.encode(content, add_special_tokens=False))
        if size < task.min_content_tokens or (
            task.max_content_tokens is not None and size > task.max_content_tokens
        ):
            continue
        prompt, span = task.prompt(content)
        out.prompts.append(prompt)
        out.spans.append(span)
        out.gold.append(task.answers[data.labels[i]])
        out.labels.append(int(data.labels[i]))
        out.indices.append(i)
        if len(out.prompts) == n:
            return out
    raise ValueError(
        f"task {task.corpus!r}: split {split!r} has only {len(out.prompts)} "
        f"examples that fit its bounds, fewer than n={n}"
    )


def prompt_content(task: PromptTask, data: Any, i: int) -> str:
    """The content of instance ``i`` of a corpus split ``data`` (its text,
    or its sentence pair joined by the task's ``pair_join``)."""
    text, pairs = data.texts[i], data.text_pairs
    if task.pair_join and pairs is not None:
        return f"{text}{task.pair_join}{pairs[i]}"
    return text


def fit_prompt(
    task: PromptTask, tokenizer: Any, content: str, limit: int
) -> Optional[Tuple[str, Tuple[int, int], int]]:
    """The task's prompt around ``content``, its content cut at a token's
    end (never the instruction) so that the prompt, as the batch encodes it
    (the task's chat template included), has at most ``limit`` tokens.

    Returns:
        (str, (int, int), int) or None: The prompt, where its content lies,
        and how many of the content's tokens were cut (0: none); None when
        even one content token leaves the prompt too long.
    """
    from captum_iba.attr.llm_batch import encode_prompt

    def length(text: str) -> int:
        return len(encode_prompt(tokenizer, task.prompt(text)[0], task.chat)[0])

    prompt, span = task.prompt(content)
    over = length(content) - limit
    if over <= 0:
        return prompt, span, 0
    ends = [end for _, end in _offsets(tokenizer, content)]
    keep = len(ends) - over
    while keep >= 1:
        text = content[: ends[keep - 1]]
        if length(text) <= limit:
            prompt, span = task.prompt(text)
            return prompt, span, len(ends) - keep
        keep -= 1
    return None


def _offsets(tokenizer: Any, text: str) -> List[Tuple[int, int]]:
    """Each token's characters in ``text`` (a fast tokenizer's offsets;
    else one token per space-separated word)."""
    if getattr(tokenizer, "is_fast", False):
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return [tuple(span) for span in enc["offset_mapping"] if span[1] > span[0]]
    import re

    return [m.span() for m in re.finditer(r"\S+", text)]


def label_choice(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    task: PromptTask,
    chat: Optional[bool] = None,
) -> List[int]:
    """The label whose answer word the model finds most probable as its
    first answer token, per prompt (its answer restricted to the task's
    words), in batches of 8; ``chat`` None: the task's own."""
    import torch

    from captum_iba._utils.common import model_device
    from captum_iba.attr.llm_batch import prompt_batch
    from captum_iba.attr.llm_choice import CausalLMChoice

    chat = task.chat if chat is None else chat
    choice = CausalLMChoice(model, answer_token_ids(task, tokenizer))
    device = model_device(model)
    out: List[int] = []
    for start in range(0, len(prompts), 8):
        part = list(prompts[start : start + 8])
        batch = prompt_batch(tokenizer, part, [task.answers[0]] * len(part), chat=chat)
        args = (batch.input_ids, batch.attention_mask, batch.answer_mask)
        with torch.no_grad():
            logp = choice(*(t.to(device) for t in args))
        out += logp.argmax(1).tolist()
    return out
