"""A classifier's prediction of a text: the route of
:data:`~captum_iba.app.explain_request.PREDICTION` through the one pipeline
(:func:`~captum_iba.app.explain_pipeline.explained`).

* prepare (:func:`prepare`) - the model and tokenizer loaded (by name,
  after the request's layers are checked against the configuration; or
  given), in eval mode while the explain runs (a warning when it was in
  training mode; its flags put back after), the text encoded and
  predicted, the class explained chosen;
* score - each method built (:func:`build`: one that needs a missing
  optional package left out, with several) and run on the text's pieces
  for the class, its scores checked finite; why they rank no word
  (:func:`no_ranking`);
* present - a :class:`~captum_iba.app.subjects.ClassifierSubject` (the
  prediction, the class explained) over the text's pieces and words.
"""

import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Tuple

import torch

from captum_iba._utils.common import hf_call, user_stacklevel
from captum_iba._utils.hooks import evaluation_mode
from captum_iba._utils.ranking import check_finite, flat_reason
from captum_iba.app.checks import class_index, class_names
from captum_iba.app.data.corpora import DEFAULT_CORPUS
from captum_iba.app.explain_pipeline import Prepared, Supplied
from captum_iba.app.models import check_request_layers
from captum_iba.app.page import Explanation, MethodScores
from captum_iba.app.subjects import ClassifierSubject
from captum_iba.app.words import encode, grouping
from captum_iba.registry import METHODS
from captum_iba.request import MethodRequest

__all__ = ["build", "load", "no_ranking", "prepare", "warn_if_training"]


@contextmanager
def prepare(request: Any, supplied: Supplied) -> Iterator["Prediction"]:
    """A classifier's request prepared: the model loaded (or the one
    supplied), in eval mode until the explain ends, the text predicted.

    Args:
        request (ExplainRequest): The checked request (its question
            :data:`~captum_iba.app.explain_request.PREDICTION`).
        supplied (Supplied): The model and tokenizer when loaded already,
            the methods' shared resources.

    Yields:
        Prediction: The prepared prediction.
    """
    if supplied.loaded is None:
        model, tokenizer, described = load(
            request.model, request.tokenizer, request.methods
        )
    else:
        (model, tokenizer), described = supplied.loaded, ""
    warn_if_training(model)
    with evaluation_mode(model, []):  # dropout off; every flag put back after
        yield Prediction(request, model, tokenizer, described, supplied)


class Prediction(Prepared):
    """A classifier's prediction of the request's text (and pair): encoded,
    predicted, the class explained chosen (the predicted one, or the
    request's target)."""

    def __init__(
        self,
        request: Any,
        model: Any,
        tokenizer: Any,
        described: str,
        supplied: Supplied,
    ) -> None:
        self.request, self.model, self.tokenizer = request, model, tokenizer
        self.described, self.supplied = described, supplied
        text, pair = request.prompt, request.pair
        self.enc = encode(tokenizer, model, text, pair)
        ids, mask = self.enc["input_ids"], self.enc["attention_mask"]
        types = self.enc.get("token_type_ids")
        with torch.no_grad():
            logits = hf_call(model, ids, mask, types)
        check_finite(logits, "the model's logits")
        self.probs = logits.softmax(-1)[0]
        labels = class_names(model.config)[: self.probs.numel()]
        labels += [str(i) for i in range(len(labels), self.probs.numel())]
        self.labels = labels
        target = request.target
        self.index = (
            int(self.probs.argmax()) if target is None else class_index(target, labels)
        )

    def build(self) -> Tuple[Dict[str, Any], Dict[str, str]]:
        """:func:`build` with the model's shared resources."""
        from captum_iba.evaluation import Resources

        given = self.supplied
        resources = Resources(
            self.model,
            self.tokenizer,
            explainer=given.explainer,
            prior_data=given.prior_data,
        )
        return build(self.request.methods, resources)

    def result(self, skipped: Dict[str, str]) -> Explanation:
        """The prediction (a :class:`ClassifierSubject`) over the text's
        pieces and words."""
        from captum_iba.attr.text import encoder_layers

        text, pair = self.request.prompt, self.request.pair
        texts = [text] if pair is None else [text, pair]
        special, words, of_piece, segment = grouping(self.enc, self.tokenizer, texts)
        subject = ClassifierSubject(
            text=text,
            pair=pair,
            segment=segment,
            labels=self.labels,
            probabilities=self.probs.tolist(),
            target=self.index,
            n_layers=n_layers(self.model, encoder_layers),
        )
        ids = self.enc["input_ids"][0].tolist()
        return Explanation(
            subject=subject,
            pieces=self.tokenizer.convert_ids_to_tokens(ids),
            special=special,
            words=words,
            word_of_piece=of_piece,
            model_name=self.request.model_name or self.described,
            skipped=skipped,
        )

    def score(self, result: Explanation, name: str, scorer: Any) -> None:
        """One method's scores of the text's pieces for the class."""
        enc = self.enc
        start = time.perf_counter()
        scores = scorer.attribute(
            enc["input_ids"],
            target=torch.tensor([self.index]),
            attention_mask=enc["attention_mask"],
            token_type_ids=enc.get("token_type_ids"),
        )
        check_finite(scores, f"{name}'s scores")
        result.methods[name] = MethodScores(
            method=name,
            summary=METHODS.entry(scorer.method_name, warn=False).summary,
            scores=scores[0].tolist(),
            signed=bool(scorer.signed),
            meaning=scorer.score_meaning,
            seconds=time.perf_counter() - start,
            word_reduction=getattr(scorer, "word_reduction", "sum"),
            layer=scorer.settings.get("layer_index"),
            settings=dict(scorer.settings),
        )
        result.methods[name].no_ranking = no_ranking(result, name, scorer)


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
            built = build_scorers(one, resources, "fair")
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
        kind=request.kind,
    )


def warn_if_training(model: Any) -> None:
    """Warns that a model in training mode is explained in eval mode."""
    if isinstance(model, torch.nn.Module) and model.training:
        warnings.warn(
            "the model is in training mode (dropout on, which would make the "
            "prediction and the scores random): it is explained in eval mode, and "
            "its flags are put back afterwards; call model.eval() to silence this",
            UserWarning,
            user_stacklevel(),
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
        warnings.warn(f"{name}: no ranking: {reason}", UserWarning, user_stacklevel())
    return reason
