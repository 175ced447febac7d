"""A tiny Llama trained to copy a fact from one passage (issue 51): on held-out
contexts the methods that measure what the answer needs rank that passage
first, random does not.

The model (one layer, tied embeddings, a word tokenizer and a chat template
of known words) is trained here, seeded, on the CPU (about 10 CPU-s): each
context holds 3-5 passages of five words, one of them ``key X`` among
fillers (``X`` one of eight values, the only value in the context), the
query ``what is the key ?``, the answer ``X``. Every passage has five words,
so a source's sum of random token scores does not favour the key.

Each method is run as ``captum-iba evaluate --task`` runs it
(:class:`~captum_iba.evaluation.context_loop.ContextJob`: the greedy
response, the sources, 32 held-out ablations shared by the methods).
ContextCite (its own package, skipped without it) is given the same
response. Measured on training seeds 0-3 (12 held-out contexts, chance
about 3 of 12; the test's seed is 0, seeds 1-3 run with ``-m slow``):

* the paper's ``IBA`` (noise at the embeddings), max or mean pooling: the
  key first on 12 of 12 every seed, mean LDS .55-.70 (random's .27-.37);
* ContextCite with 32 ablations: 12, 12, 11, 12 of 12;
* ``random``: 3-4 of 12;
* ``iba-deletion`` (max: 8, 3, 9, 10; mean: 3, 3, 6, 8) and ``iba-sources``
  (7, 3, 7, 10) are not asserted: their deletion is relaxed through the
  attention, which this model focuses on the value so sharply that the
  attention's renormalisation hides the key (in a probe of one such model,
  weighting the key passage down to 0.01 in the attention cost its answer
  0.05-1.5 nats; from 0.5 up to 1 it lowered the answer's log-probability
  a little), while leaving the passage out of the prompt changes the answer.
"""

import random

import pytest
import torch
import transformers as tf
from tokenizers import Tokenizer, models, pre_tokenizers

from captum_iba.app.context_tasks import ContextExample, layout_prompt
from captum_iba.attr.llm_batch import encode_prompt, prompt_batch
from captum_iba.evaluation import Resources, build_scorers
from captum_iba.evaluation.context_loop import ContextData, ContextJob

VALUES = "alpha beta gamma delta omega sigma kappa theta".split()
FILLER = "the cat sat on mat a dog ran in park big small red blue".split()
WORDS = ["<pad>", "<eos>", "<unk>", "Context", ":", "Query", "?", "user", "answer",
         "key", "what", "is", *VALUES, *FILLER]  # fmt: skip
#: The user's turn, then the reply's opener (a space after it: ContextCite
#: re-reads the response from the prompt's text followed by it).
TEMPLATE = (
    "{% for m in messages %}user {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}answer {% endif %}"
)
QUERY = "what is the key ?"
#: Held-out contexts the methods explain.
N_HELDOUT = 12


def copy_tokenizer():
    vocab = {w: i for i, w in enumerate(dict.fromkeys(WORDS))}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = tf.PreTrainedTokenizerFast(
        tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    tok.chat_template = TEMPLATE
    return tok


def copy_examples(n, seed):
    """``n`` contexts of 3-5 five-word passages, the key one ``key X``."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        count, value = rng.randint(3, 5), rng.choice(VALUES)
        sources = [" ".join(rng.sample(FILLER, 5)) for _ in range(count - 1)]
        words = rng.sample(FILLER, 3)
        at = rng.randint(0, 3)
        key = rng.randrange(count)
        sources.insert(key, " ".join(words[:at] + ["key", value] + words[at:]))
        out.append(ContextExample(tuple(sources), QUERY, key, value, "copy"))
    return out


def _batch(tok, examples):
    rows = []
    for ex in examples:
        prompt = encode_prompt(tok, layout_prompt(ex.sources, ex.query)[0], True)[0]
        rows.append((prompt, [tok.convert_tokens_to_ids(ex.answer), tok.eos_token_id]))
    width = max(len(p) + len(a) for p, a in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    mask, labels = torch.zeros_like(ids), torch.full_like(ids, -100)
    for i, (p, a) in enumerate(rows):
        ids[i, : len(p) + len(a)] = torch.tensor(p + a)
        mask[i, : len(p) + len(a)] = 1
        labels[i, len(p) : len(p) + len(a)] = torch.tensor(a)
    return dict(input_ids=ids, attention_mask=mask, labels=labels)


def train_copy_model(seed, steps=100, batch=32):
    """The copy model, trained from ``seed`` (its examples' seed apart from
    the held-out ones'); loss on the answer and the end-of-text token."""
    tok = copy_tokenizer()
    torch.manual_seed(seed)
    config = tf.LlamaConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64,
        num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=4,
        max_position_embeddings=128, tie_word_embeddings=True, pad_token_id=0,
        eos_token_id=1, bos_token_id=1,
    )  # fmt: skip
    model = tf.LlamaForCausalLM(config)
    data = copy_examples(steps * batch, seed + 1000)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    model.train()
    for step in range(steps):
        loss = model(**_batch(tok, data[step * batch : (step + 1) * batch])).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval(), tok


def _hits(model, tok, methods):
    """Per method and pooling, on how many held-out contexts it ranks the
    key passage first, and its LDS's mean; the responses."""
    data = ContextData(tuple(copy_examples(N_HELDOUT, 999)), layout_prompt)
    scorers = build_scorers(methods, Resources(model, tok), kind="causal-lm")
    job = ContextJob(model=model, tokenizer=tok, data=data, scorers=scorers)
    hits, lds, responses = {}, {}, []
    for i in range(len(data)):
        unit = job.unit_tensors([i])
        responses.append(tok.decode(unit.batch.answer_ids(0)).strip())
        for done in job.score_unit(unit, methods):
            for pooling, found in done.result[0]["pooled"].items():
                name = f"{done.method} ({pooling})"
                hits[name] = hits.get(name, 0) + found["top1"]
                lds.setdefault(name, []).append(found["lds"] or 0.0)
    return hits, {m: sum(v) / len(v) for m, v in lds.items()}, responses, data


def _check_iba_finds_it_random_does_not(model, tok):
    hits, lds, responses, data = _hits(model, tok, ["IBA", "random"])
    answers = [ex.answer for ex in data.examples]
    assert sum(r == a for r, a in zip(responses, answers)) >= N_HELDOUT - 3
    chance = sum(1 / len(ex.sources) for ex in data.examples)  # about 3 of 12
    for pooling in ("max", "mean"):
        assert hits[f"IBA ({pooling})"] >= N_HELDOUT - 2, hits
        assert hits[f"random ({pooling})"] <= chance + 3, hits
        assert lds[f"IBA ({pooling})"] > lds[f"random ({pooling})"], lds


@pytest.fixture(scope="module")
def copy_model():
    return train_copy_model(0)


def test_iba_finds_the_copied_passage_and_random_does_not(copy_model):
    _check_iba_finds_it_random_does_not(*copy_model)


def test_context_cite_finds_the_copied_passage(copy_model):
    pytest.importorskip("context_cite")
    from captum_iba.evaluation.context_cite import context_cite_scores

    model, tok = copy_model
    found = 0
    for ex in copy_examples(N_HELDOUT, 999):
        batch = prompt_batch(
            tok, [layout_prompt(ex.sources, ex.query)[0]], model=model, chat=True,
            max_new_tokens=3,
        )  # fmt: skip
        scores = context_cite_scores(
            model, tok, ex.sources, ex.query, batch.answer_ids(0), num_ablations=32
        )
        found += int(scores.argmax()) == ex.key
    assert found >= N_HELDOUT - 1


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_iba_finds_it_whatever_the_training_seed(seed):
    _check_iba_finds_it_random_does_not(*train_copy_model(seed))
