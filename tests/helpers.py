"""Small models and data shared by the tests (no downloads)."""

import importlib.util
import random
import sys
import types
from pathlib import Path
from typing import Callable, Optional, Sequence

import torch
from torch import Tensor, nn


def experiment(name: str) -> types.ModuleType:
    """The script ``experiments/<name>.py`` imported as a module."""
    path = Path(__file__).resolve().parents[1] / "experiments" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def study_module(name: str) -> types.ModuleType:
    """The studies' module ``experiments/studylib/<name>.py``, imported as the
    scripts import it (``studylib.<name>``, their folder on ``sys.path``)."""
    folder = str(Path(__file__).resolve().parents[1] / "experiments")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(f"studylib.{name}")


def no_hooks(model: nn.Module) -> bool:
    """True when no forward (pre-)hook is registered on any module of ``model``."""
    return all(
        not m._forward_hooks and not m._forward_pre_hooks for m in model.modules()
    )


class OneTokenModel(nn.Module):
    """A per-token stack whose classifier reads only token ``signal_pos``.

    Tokens other than ``signal_pos`` cannot change the output, so IBA must
    rank ``signal_pos`` first.
    """

    def __init__(self, dim: int = 8, signal_pos: int = 2) -> None:
        super().__init__()
        self.signal_pos = signal_pos
        self.layers = nn.ModuleList([nn.Linear(dim, dim) for _ in range(3)])
        self.head = nn.Linear(dim, 2)

    def forward(self, x: Tensor, attention_mask: Optional[Tensor] = None) -> Tensor:
        h = x
        for layer in self.layers:
            h = torch.tanh(layer(h)) + h
        return self.head(h[:, self.signal_pos])


class MeanPoolModel(nn.Module):
    """Token embeddings -> per-token stack -> masked mean -> linear head."""

    def __init__(self, vocab: int = 30, dim: int = 8, classes: int = 3) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList([nn.Linear(dim, dim) for _ in range(2)])
        self.head = nn.Linear(dim, classes)

    def forward(self, input_ids: Tensor, attention_mask: Optional[Tensor] = None):
        h = self.embed(input_ids)
        for layer in self.layers:
            h = torch.relu(layer(h)) + h
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        m = attention_mask.unsqueeze(-1).to(h.dtype)
        return self.head((h * m).sum(1) / m.sum(1))


class TupleLayer(nn.Module):
    """A transformers-4.x-style layer: returns (hidden, None)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.linear = nn.Linear(dim, dim)

    def forward(self, h: Tensor):
        return (torch.tanh(self.linear(h)) + h, None)


class TupleStackModel(nn.Module):
    def __init__(self, vocab: int = 30, dim: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList([TupleLayer(dim) for _ in range(3)])
        self.head = nn.Linear(dim, 2)

    def forward(self, input_ids: Tensor, attention_mask: Optional[Tensor] = None):
        h = self.embed(input_ids)
        for layer in self.layers:
            h = layer(h)[0]
        return self.head(h.mean(1))


class ReusedLayerModel(nn.Module):
    """Runs the same module twice in one forward."""

    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.shared = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.shared(self.shared(x)).mean(1))


class RaisingModel(nn.Module):
    """Raises after the watched layer has run."""

    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.layer = nn.Linear(dim, dim)
        self.calls = 0

    def forward(self, x: Tensor) -> Tensor:
        self.layer(x)
        raise RuntimeError("boom")


def tiny_hf_model(kind: str, num_labels: int = 2, layers: int = 3):
    """A tiny random Hugging Face classifier built from its config."""
    import transformers as tf

    common = dict(vocab_size=60, num_labels=num_labels)
    if kind == "bert":
        return tiny_bert(
            60,
            seed=None,
            hidden_size=16,
            num_hidden_layers=layers,
            intermediate_size=32,
            num_labels=num_labels,
        )
    if kind == "roberta":
        cfg = tf.RobertaConfig(
            hidden_size=16,
            num_hidden_layers=layers,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=40,
            pad_token_id=1,
            **common,
        )
        return tf.RobertaForSequenceClassification(cfg).eval()
    if kind == "distilbert":
        cfg = tf.DistilBertConfig(
            dim=16, n_layers=layers, n_heads=2, hidden_dim=32, **common
        )
        return tf.DistilBertForSequenceClassification(cfg).eval()
    raise ValueError(kind)


def tiny_bert(vocab_size: int, seed: Optional[int] = 0, **config):
    """A tiny random BERT classifier (2 layers, hidden 32, 2 labels), in eval mode.

    Args:
        vocab_size (int): Its vocabulary size.
        seed (int, optional): ``torch.manual_seed`` before the weights are
            drawn; None draws from the current state.
        **config: Other :class:`transformers.BertConfig` fields, or replacements
            of these defaults.
    """
    from transformers import BertConfig, BertForSequenceClassification

    if seed is not None:
        torch.manual_seed(seed)
    sizes = dict(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=2,
    )
    cfg = BertConfig(vocab_size=vocab_size, **{**sizes, **config})
    return BertForSequenceClassification(cfg).eval()


def bert_tokenizer(words: Sequence[str]):
    """A lower-casing WordPiece tokenizer over exactly ``words`` (ids in order).

    The vocabulary is given as a dict: transformers 5 ignores a ``vocab_file=``
    path there (every word would become ``[UNK]``).
    """
    from transformers import BertTokenizerFast

    return BertTokenizerFast(
        vocab={w: i for i, w in enumerate(words)}, do_lower_case=True
    )


#: The words of :func:`synthetic_sentiment`, by label.
SENTIMENT_WORDS = {
    1: ["good", "great", "fine", "nice", "superb", "lovely"],
    0: ["bad", "awful", "poor", "dull", "boring", "weak"],
}
SENTIMENT_FILLER = "the movie film was a plot really quite story".split()


def synthetic_sentiment(n: int, seed: int, name: str = "toy"):
    """``n`` five-word reviews, labels alternating, one sentiment word each."""
    from captum_iba.app.data import TextClassificationData

    rng = random.Random(seed)
    texts, labels = [], []
    for i in range(n):
        y = i % 2
        words = rng.sample(SENTIMENT_FILLER, 4) + [rng.choice(SENTIMENT_WORDS[y])]
        rng.shuffle(words)
        texts.append(" ".join(words))
        labels.append(y)
    return TextClassificationData(
        texts, None, labels, ["negative", "positive"], name, "train", "synthetic"
    )


#: The words of :func:`tiny_word_tokenizer` (ids in this order).
TINY_WORDS = (
    "<pad> <eos> <unk> the cat sat on mat a dog ran in park big small red blue "
    "is was very"
).split()


#: The words of a tiny causal LM that answers the SST-2 prompt task
#: (``tiny_llm_dir`` of tests/app/conftest.py).
SST2_TASK_WORDS = (
    "<pad> <eos> <unk> Classify the sentiment of review as positive or negative . "
    "Review : Sentiment good bad film number 0 1 2 3"
).split()


def tiny_word_tokenizer(words=None):
    """A word-level Hugging Face tokenizer over ``words`` (default
    :data:`TINY_WORDS`; ``<pad>``, ``<eos>`` and ``<unk>`` among them; no
    download)."""
    import transformers as tf
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {w: i for i, w in enumerate(TINY_WORDS if words is None else words)}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    return tf.PreTrainedTokenizerFast(
        tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )


def tiny_causal_lm(
    kind: str, layers: int = 3, seed: int = 0, positions: int = 32, kv_heads: int = 2
):
    """A tiny random GPT-2 or Llama causal LM over :data:`TINY_WORDS`, with
    ``positions`` positions (a Llama's 2 query heads share ``kv_heads`` key
    and value heads)."""
    import transformers as tf

    torch.manual_seed(seed)
    ids = dict(
        vocab_size=len(TINY_WORDS), pad_token_id=0, eos_token_id=1, bos_token_id=1
    )
    if kind == "gpt2":
        cfg = tf.GPT2Config(
            n_positions=positions, n_embd=16, n_layer=layers, n_head=2, **ids
        )
        return tf.GPT2LMHeadModel(cfg).eval()
    if kind == "llama":
        cfg = tf.LlamaConfig(
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=layers,
            num_attention_heads=2,
            num_key_value_heads=kv_heads,
            max_position_embeddings=positions,
            **ids,
        )
        return tf.LlamaForCausalLM(cfg).eval()
    raise ValueError(kind)


def saved_lm(folder, model: nn.Module, tokenizer) -> str:
    """``model`` and ``tokenizer`` saved in ``folder`` as a causal LM's
    folder (its ``config.json`` naming the model's class); the folder's path."""
    model.config.architectures = [type(model).__name__]
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def causal_lm_layers(model):
    """The decoder blocks of a tiny GPT-2 or Llama."""
    return model.transformer.h if hasattr(model, "transformer") else model.model.layers


def install_fake_lxt(monkeypatch, monkey_patch: Callable) -> None:
    """Make ``import lxt.efficient`` find a fake lxt whose ``monkey_patch`` is
    the given function (lxt itself cannot be imported under transformers 5);
    ``monkeypatch`` removes it after the test."""
    fake = types.ModuleType("lxt.efficient")
    fake.monkey_patch = monkey_patch
    monkeypatch.setitem(sys.modules, "lxt", types.ModuleType("lxt"))
    monkeypatch.setitem(sys.modules, "lxt.efficient", fake)
    models = types.ModuleType("lxt.efficient.models")
    monkeypatch.setitem(sys.modules, "lxt.efficient.models", models)


class _NoLxt:
    """A finder that says lxt is not installed, as Python does."""

    def find_spec(self, name, path=None, target=None):
        if name == "lxt" or name.startswith("lxt."):
            raise ModuleNotFoundError("No module named 'lxt'", name="lxt")
        return None


def hide_lxt(monkeypatch) -> None:
    """Make ``import lxt`` fail as where it is not installed (whether it is
    or not); ``monkeypatch`` undoes it after the test."""
    for name in [m for m in sys.modules if m == "lxt" or m.startswith("lxt.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_NoLxt(), *sys.meta_path])


#: Light options of the methods, for tests (the defaults are for real use).
LIGHT_OPTIONS = {
    "steps": 2,
    "n_samples": 2,
    "ig_steps": 3,
    "shap_samples": 2,
    "lime_samples": 6,
}


def light_options(method: str) -> dict:
    """The light options (:data:`LIGHT_OPTIONS`) that ``method`` takes."""
    from captum_iba.registry import METHODS

    taken = METHODS.entry(method, warn=False).facts.get("options", ())
    return {k: v for k, v in LIGHT_OPTIONS.items() if k in taken}


def byte_level_tokenizer(text: str = "the cat sat"):
    """A byte-level BPE tokenizer (GPT-2's kind: an emoji or a CJK character
    is several byte pieces) trained on ``text``, with ``<pad>`` and ``<eos>``
    (no download)."""
    import transformers as tf
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<pad>", "<eos>"],
    )
    tk.train_from_iterator([text], trainer)
    return tf.PreTrainedTokenizerFast(
        tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>"
    )


#: Tiny models of no kind the package explains (issue 88's door), by what
#: they are: their transformers class and configuration class.
OTHER_HEADS = {
    "llama-token-classification": ("LlamaForTokenClassification", "LlamaConfig"),
    "gpt2-token-classification": ("GPT2ForTokenClassification", "GPT2Config"),
    "bert-token-classification": ("BertForTokenClassification", "BertConfig"),
    "bert-masked-lm": ("BertForMaskedLM", "BertConfig"),
    "llama-question-answering": ("LlamaForQuestionAnswering", "LlamaConfig"),
    "bert-multiple-choice": ("BertForMultipleChoice", "BertConfig"),
    "t5-encoder-decoder": ("T5ForConditionalGeneration", "T5Config"),
    "vit-image-classification": ("ViTForImageClassification", "ViTConfig"),
}
_OTHER_SIZES = {
    "LlamaConfig": dict(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=32,
    ),
    "GPT2Config": dict(
        n_positions=32, n_embd=16, n_layer=2, n_head=2, bos_token_id=1, eos_token_id=1
    ),
    "BertConfig": dict(
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
    ),
    "T5Config": dict(d_model=16, d_ff=32, d_kv=8, num_layers=2, num_heads=2),
    "ViTConfig": dict(
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        image_size=8,
        patch_size=4,
    ),
}


def other_head_config(name: str):
    """The configuration of :data:`OTHER_HEADS`' model ``name`` over
    :data:`TINY_WORDS`, its ``architectures`` naming its class."""
    import transformers as tf

    cls, config = OTHER_HEADS[name]
    cfg = getattr(tf, config)(
        vocab_size=len(TINY_WORDS), pad_token_id=0, **_OTHER_SIZES[config]
    )
    cfg.architectures = [cls]
    return cfg


def other_head_model(name: str) -> nn.Module:
    """:data:`OTHER_HEADS`' model ``name``, tiny and random, in eval mode."""
    import transformers as tf

    torch.manual_seed(0)
    return getattr(tf, OTHER_HEADS[name][0])(other_head_config(name)).eval()


def forward_fails(model: nn.Module) -> nn.Module:
    """``model``, whose forward fails the test when called (a refusal
    before any work)."""

    def fail(*args, **kwargs):
        raise AssertionError("the model ran")

    model.register_forward_pre_hook(fail)
    return model


class PlainClassifier(nn.Module):
    """A plain ``nn.Module`` (no Hugging Face configuration): token ids ->
    two classes' logits (the mean of their embeddings)."""

    def __init__(self, vocab_size: int = 20) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embeddings = nn.Embedding(vocab_size, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, input_ids: Tensor, attention_mask: Optional[Tensor] = None):
        return self.head(self.embeddings(input_ids).mean(1))
