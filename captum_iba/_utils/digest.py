"""Fingerprints of what a cached result depends on: a model's weights, a file.

Shared by the application's corpus runs (which refuse to mix rows of two
models) and the attribution layer's amortized explainers (which refuse to be
used with a model they were not fitted for), so that both speak of the same
digest.
"""

import hashlib
import json
import os
from typing import Any, Dict, Union

import torch

__all__ = ["file_record", "file_sha256", "tokenizer_digest", "weights_digest"]


def weights_digest(model: Any) -> str:
    """A hash of the bytes of every parameter and buffer of ``model`` (its
    weights as they are: two processes that loaded a head initialised at random
    get different digests).

    Args:
        model (Any): A ``torch.nn.Module``.

    Returns:
        str: 24 hexadecimal digits (BLAKE2b, 12 bytes).
    """
    digest = hashlib.blake2b(digest_size=12)
    for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
        digest.update(name.encode())
        digest.update(
            tensor.detach()
            .cpu()
            .contiguous()
            .view(-1)
            .view(torch.uint8)
            .numpy()
            .tobytes()
        )
    return digest.hexdigest()


def tokenizer_digest(tokenizer: Any) -> str:
    """A hash of what a tokenizer maps text to: its class, vocabulary, special
    tokens and chat template (two tokenizers with the same digest give the
    same ids).

    Args:
        tokenizer (Any): A Hugging Face tokenizer.

    Returns:
        str: 24 hexadecimal digits (BLAKE2b, 12 bytes).
    """
    vocab = getattr(tokenizer, "get_vocab", dict)()
    facts = {
        "class": type(tokenizer).__name__,
        "vocab": sorted(vocab.items(), key=lambda kv: kv[1]),
        "special": sorted(map(str, getattr(tokenizer, "all_special_tokens", []))),
        "chat_template": str(getattr(tokenizer, "chat_template", None)),
    }
    text = json.dumps(facts, sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def file_sha256(path: Union[str, "os.PathLike[str]"]) -> str:
    """The SHA-256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def file_record(path: Union[str, "os.PathLike[str]"]) -> Dict[str, Any]:
    """``{"size": bytes, "sha256": hex}`` of a file, as the caches record it."""
    return {"size": os.path.getsize(path), "sha256": file_sha256(path)}
