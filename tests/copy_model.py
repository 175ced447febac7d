"""A tiny Llama trained to copy a value from its prompt, shared by the tests
whose attribution must find one known token (issues 51 and 52).

The model (one layer, tied embeddings, a word tokenizer and a chat template
of known words) is trained here, seeded, on the CPU (about 10 CPU-s): each
context holds 3-5 passages of five words, one of them ``key X`` among
fillers (``X`` one of eight values, the only value in the context), the
query ``what is the key ?``, the answer ``X``.
"""

import random

import torch
import transformers as tf
from tokenizers import Tokenizer, models, pre_tokenizers

from captum_iba.app.context_tasks import ContextExample, layout_prompt
from captum_iba.attr.llm_batch import encode_prompt

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


def copy_tokenizer(words=WORDS):
    vocab = {w: i for i, w in enumerate(dict.fromkeys(words))}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = tf.PreTrainedTokenizerFast(
        tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    tok.chat_template = TEMPLATE
    return tok


def copy_examples(n, seed, passages=(3, 5)):
    """``n`` contexts of 3-5 (``passages``) five-word passages, the key one
    ``key X``."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        count, value = rng.randint(*passages), rng.choice(VALUES)
        sources = [" ".join(rng.sample(FILLER, 5)) for _ in range(count - 1)]
        words = rng.sample(FILLER, 3)
        at = rng.randint(0, 3)
        key = rng.randrange(count)
        sources.insert(key, " ".join(words[:at] + ["key", value] + words[at:]))
        out.append(ContextExample(tuple(sources), QUERY, key, value, "copy"))
    return out


def _batch(tok, examples, answer_ids=None):
    rows = []
    for ex in examples:
        prompt = encode_prompt(tok, layout_prompt(ex.sources, ex.query)[0], True)[0]
        own = (
            [tok.convert_tokens_to_ids(ex.answer)]
            if answer_ids is None
            else list(answer_ids(ex))
        )
        rows.append((prompt, own + [tok.eos_token_id]))
    width = max(len(p) + len(a) for p, a in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    mask, labels = torch.zeros_like(ids), torch.full_like(ids, -100)
    for i, (p, a) in enumerate(rows):
        ids[i, : len(p) + len(a)] = torch.tensor(p + a)
        mask[i, : len(p) + len(a)] = 1
        labels[i, len(p) : len(p) + len(a)] = torch.tensor(a)
    return dict(input_ids=ids, attention_mask=mask, labels=labels)


def _trained(tok, seed, data, batch, tied, answer_ids=None):
    """A one-layer Llama over ``tok``'s words (its weights drawn from
    ``seed``, its output embeddings ``tied`` to its input's or not), trained
    on ``data`` in batches of ``batch``; loss on the answer (``answer_ids``
    of an example; default: its one answer word) and the end-of-text token."""
    torch.manual_seed(seed)
    config = tf.LlamaConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64,
        num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=4,
        max_position_embeddings=128, tie_word_embeddings=tied, pad_token_id=0,
        eos_token_id=1, bos_token_id=1,
    )  # fmt: skip
    model = tf.LlamaForCausalLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    model.train()
    for step in range(len(data) // batch):
        part = data[step * batch : (step + 1) * batch]
        loss = model(**_batch(tok, part, answer_ids)).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval(), tok


def train_copy_model(seed, steps=100, batch=32):
    """The copy model, trained from ``seed`` (its examples' seed apart from
    the held-out ones'); loss on the answer and the end-of-text token."""
    data = copy_examples(steps * batch, seed + 1000)
    return _trained(copy_tokenizer(), seed, data, batch, tied=True)


# Two facts copied into two sentences (issue 77, item 3: citations per
# sentence): a context of 3-5 passages, one holding ``key X`` (X one of
# KEYS), another ``door Y`` (Y one of DOORS), the query ``what is the key
# and door ?``, the answer ``key X . door Y .``: its first sentence copies
# from the key's passage, its second from the door's. Its own vocabulary
# (the one-fact model's words then three more), so the one-fact model and
# its measurements stay as they are.
KEYS, DOORS = VALUES[:4], VALUES[4:]
TWO_WORDS = WORDS + ["door", "and", "."]
TWO_QUERY = "what is the key and door ?"


def two_fact_tokenizer():
    return copy_tokenizer(TWO_WORDS)


def two_fact_examples(n, seed, passages=(3, 5), absent=0.0):
    """``n`` contexts of 3-5 five-word passages, one with ``key X``, another
    with ``door Y``, each with the door's passage beside it
    (``ContextExample.key`` is the key's). With ``absent`` (training only),
    each fact is left out of the context with that probability, its value
    in the answer kept: a value the context does not hold is a guess among
    four, so the model learns no confident default (trained without, it
    answered ``delta`` with no key in the context, so the key's passage did
    not matter to a ``delta`` answer)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        count = rng.randint(*passages)
        key, door = rng.sample(range(count), 2)
        x, y = rng.choice(KEYS), rng.choice(DOORS)
        shown = {i for i in (key, door) if not rng.random() < absent}
        sources = []
        for i in range(count):
            words = rng.sample(FILLER, 3 if i in shown else 5)
            if i in shown:
                at = rng.randint(0, 3)
                fact = ["key", x] if i == key else ["door", y]
                words = words[:at] + fact + words[at:]
            sources.append(" ".join(words))
        answer = f"key {x} . door {y} ."
        example = ContextExample(tuple(sources), TWO_QUERY, key, answer, "copy")
        out.append((example, door))
    return out


def train_two_fact_model(seed, steps=300, batch=64):
    """The two-fact copy model, trained from ``seed`` as
    :func:`train_copy_model` trains the one-fact one (about 12 CPU-s); loss
    on the answer's tokens and the end-of-text token. Its output embeddings
    are its own (untied: tied to the input's, it sat at copying either
    value, half the probability each, for over 600 steps) and its batches
    of 64 (of 32, some seeds stayed at chance for 500 steps); measured on
    seeds 0-2, it answers all 12 held-out contexts right."""
    tok = two_fact_tokenizer()
    data = [ex for ex, _ in two_fact_examples(steps * batch, seed + 1000, absent=0.1)]
    return _trained(
        tok,
        seed,
        data,
        batch,
        tied=False,
        answer_ids=lambda ex: tok(ex.answer).input_ids,
    )
