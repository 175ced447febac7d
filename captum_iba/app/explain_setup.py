"""The model and the methods of an explanation (:func:`captum_iba.explain`):
the model loaded (and its tokenizer, the one given or its own; a model in
training mode said so), and every method built once by the harness's
resolver, one that cannot be imported left out of a comparison; why a
method's scores rank no word."""

import warnings
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import torch

from captum_iba._utils.ranking import flat_reason
from captum_iba.app.data.corpora import DEFAULT_CORPUS
from captum_iba.app.models import check_request_layers
from captum_iba.request import MethodRequest

__all__ = ["build", "load", "n_layers", "no_ranking", "warn_if_training"]


def load(model: Any, tokenizer: Any, request: MethodRequest) -> Tuple[Any, Any, str]:
    """The model and tokenizer (loaded when given by name, after the
    request's layers are checked against its configuration), and a
    description."""
    from captum_iba.app.command_parts import config_and_record
    from captum_iba.app.models import load_classifier

    if model is None or isinstance(model, (str, Path)):
        path = None if model is None else str(model)
        config, _ = config_and_record(path, DEFAULT_CORPUS)
        check_request_layers(request, config, cli=False)
    if model is None:
        if tokenizer is not None:
            raise ValueError(
                "tokenizer= given without model=: the default model comes with its "
                "own tokenizer; give the model this tokenizer belongs to"
            )
        from captum_iba.app.finetune import get_finetuned_model

        path = get_finetuned_model(DEFAULT_CORPUS)
        model, tokenizer = load_classifier(path)
        return model, tokenizer, f"MiniLM-L6 fine-tuned on SST-2 ({path})"
    if isinstance(model, (str, Path)):
        name = str(model)
        model, own = load_classifier(model)
        if tokenizer is None:
            return model, own, name
        _check_fits(tokenizer, model)
        return model, tokenizer, name
    if tokenizer is None:
        raise ValueError("a model given as an object needs its tokenizer=")
    _check_fits(tokenizer, model)
    name = getattr(getattr(model, "config", None), "name_or_path", "") or ""
    return model, tokenizer, name or type(model).__name__


def _check_fits(tokenizer: Any, model: Any) -> None:
    """Refuses a tokenizer whose ids the model's vocabulary cannot hold."""
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    size = len(tokenizer) if hasattr(tokenizer, "__len__") else None
    if isinstance(vocab, int) and isinstance(size, int) and size > vocab:
        raise ValueError(
            f"tokenizer= has {size} tokens but the model's vocabulary has {vocab}: "
            "it is not this model's tokenizer"
        )


def build(
    request: MethodRequest, resources: Any
) -> Tuple[Dict[str, Any], Dict[str, str]]:
    """The scorers by name, each method's class for a classifier; with
    several methods, one that cannot be imported (an optional package) is
    left out, with the reason."""
    from captum_iba.evaluation import build_scorers

    scorers: Dict[str, Any] = {}
    skipped: Dict[str, str] = {}
    for name in request.methods:
        one = _only(request, name)
        try:
            built = build_scorers(one, resources, "fair", kind="classifier")
        except ImportError as err:
            if len(request.methods) == 1:
                raise
            first = str(err).splitlines()[0]
            skipped[name] = first.split(". ")[0].rstrip(".") + "."
            continue
        scorers.update(built)
    return scorers, skipped


def _only(request: MethodRequest, method: str) -> MethodRequest:
    """The part of a request that concerns one of its methods."""
    from captum_iba.request import options_of

    return MethodRequest(
        (method,),
        {k: v for k, v in request.options.items() if k in options_of(method)},
        {k: v for k, v in request.method_options.items() if k == method},
        {k: v for k, v in request.passthrough.items() if k == method},
    )


def warn_if_training(model: Any) -> None:
    """Warns that a model in training mode is explained in eval mode."""
    if isinstance(model, torch.nn.Module) and model.training:
        warnings.warn(
            "the model is in training mode (dropout on, which would make the "
            "prediction and the scores random): it is explained in eval mode, and "
            "its flags are put back afterwards; call model.eval() to silence this",
            UserWarning,
            stacklevel=3,
        )


def n_layers(model: Any, encoder_layers: Any) -> Optional[int]:
    """The number of encoder layers ``encoder_layers(model)`` finds, None
    where it finds none."""
    try:
        return len(encoder_layers(model))
    except (ValueError, TypeError, AttributeError):
        return None


def no_ranking(result: Any, name: str, scorer: Any) -> str:
    """Why a method's scores of a classifier's text rank no word: its own
    finding (IBA after a layer whose first token alone is read, which IBA
    warned), or flat scores of its pieces or words
    (:func:`~captum_iba._utils.ranking.flat_reason`, special tokens left
    out; warned here unless the method warned itself); "" when they rank.

    Args:
        result (Explanation): The explanation, with ``name``'s scores.
        name (str): The method.
        scorer (TokenScorer): Its scorer, just run.

    Returns:
        str: The reason, or "".
    """
    method = result.methods[name]
    reason = str(method.settings.get("no_ranking", ""))
    if reason:
        return reason
    # the pieces (a word of several pieces sums them, for an additive method)
    # or the words shown (a mean of the pieces)
    flat = flat_reason(result.scores(name, pieces=True), result.scores(name))
    if not flat:
        return ""
    where = result.subject.where(method)
    reason = (
        f"{flat}: the method found nothing in this text that changes "
        "the prediction. For IBA this happens after a layer the prediction barely "
        f"reads{f' (here {where})' if where else ''}: try an earlier layer, or "
        "iba-deletion"
    )
    # IBA warns itself of a flat instance (its last_run says so)
    runs = getattr(getattr(scorer, "iba", None), "last_run", None) or []
    if not any(run.get("flat_instances") for run in runs):
        warnings.warn(f"{name}: no ranking: {reason}", UserWarning, stacklevel=4)
    return reason
