"""Our corpora as zero-shot prompt tasks (captum_iba.app.llm_tasks): the
content's place in each prompt, single-token answer words, the token bounds,
the constrained choice on a tiny Llama."""

import pytest
import torch

from captum_iba.app.llm_tasks import (
    TASKS,
    PromptTask,
    answer_token_ids,
    label_choice,
    task_examples,
)
from tests.helpers import tiny_causal_lm, tiny_word_tokenizer


def _data_or_skip():
    from captum_iba.app.data import default_data_dir

    try:
        default_data_dir()
    except FileNotFoundError as err:
        pytest.skip(f"reads the shared corpora: {err}")


def test_the_content_lies_at_its_span():
    for task in TASKS.values():
        prompt, (a, b) = task.prompt("the cat sat")
        assert prompt[a:b] == "the cat sat"
        assert prompt.startswith(task.template.split("{content}")[0])


def test_an_answer_word_of_two_tokens_is_named():
    task = PromptTask("sst2", "{content}?", (" big dog", " cat"))
    with pytest.raises(ValueError, match=r"' big dog' -> 2 tokens.*one next-token"):
        answer_token_ids(task, tiny_word_tokenizer())
    assert answer_token_ids(PromptTask("sst2", "{content}", (" big", " cat")),
                            tiny_word_tokenizer()) == [13, 4]  # fmt: skip


@pytest.mark.parametrize("name", sorted(TASKS))
def test_examples_of_every_task(name):
    _data_or_skip()
    tok = tiny_word_tokenizer()
    split = {"sst2": "dev", "imdb": "test", "ag_news": "heldout", "rte": "validation"}
    task = TASKS[name]
    words = (" big", " small", " red", " blue")[: len(task.answers)]
    task = PromptTask(  # the tiny tokenizer's words as answers
        task.corpus, task.template, words, task.pair_join,
        task.max_content_tokens, task.min_content_tokens,
    )  # fmt: skip
    ex = task_examples(task, split[name], tok, 3)
    assert len(ex.prompts) == len(ex.spans) == len(ex.gold) == 3
    for prompt, (a, b), y, gold in zip(ex.prompts, ex.spans, ex.labels, ex.gold):
        assert prompt[a:b].strip() and gold == task.answers[y]
        n = len(tok.encode(prompt[a:b], add_special_tokens=False))
        assert n >= task.min_content_tokens
        assert task.max_content_tokens is None or n <= task.max_content_tokens
    if name == "rte":
        assert "Second sentence: " in ex.prompts[0]


def test_unknown_task_and_too_few_examples():
    _data_or_skip()
    with pytest.raises(ValueError, match="unknown task 'mnli'"):
        task_examples("mnli", "dev", tiny_word_tokenizer(), 2)
    huge = PromptTask(
        "sst2", "{content}", (" big", " small"), min_content_tokens=10_000
    )
    with pytest.raises(ValueError, match="only 0 examples that fit"):
        task_examples(huge, "dev", tiny_word_tokenizer(), 2)


def test_the_choice_is_the_most_probable_answer_word():
    model, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    task = PromptTask("sst2", "{content} is", (" big", " small", " red"))
    contents = ["the cat sat", "a dog ran in park", "mat"]
    prompts = [task.prompt(c)[0] for c in contents]  # padded left: lengths differ
    choice = label_choice(model, tok, prompts, task, chat=False)
    ids = answer_token_ids(task, tok)
    for prompt, c in zip(prompts, choice):  # one prompt at a time, no padding
        row = torch.tensor([tok.encode(prompt)])
        with torch.no_grad():
            logits = model(input_ids=row).logits[0, -1]
        assert c == int(logits[ids].argmax())
