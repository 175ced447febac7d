"""One prediction explained by one or several methods, word by word.

:func:`explain` is the one-line entry for a notebook and the engine of
``captum-iba explain``::

    import captum_iba
    result = captum_iba.explain("A gripping, beautifully acted film.")
    result                      # in Jupyter: the page, one row per method
    result.top(5)               # [("beautifully", 0.41), ...]
    result.scores()             # one score per word, in text order

It loads the model (the default: MiniLM-L6 fine-tuned on SST-2, made once and
cached), predicts, resolves the methods by name through the one resolver of
the harness (:func:`~captum_iba.evaluation.build_scorers`; any registered
method works), scores the text's word pieces, and groups them into words (a
word's score is the sum of its pieces'). The :class:`Explanation` it returns
holds the pieces, the words and every method's scores, renders as the page of
:func:`~captum_iba.visualization.page.explanation_html` and as the terminal
listing of :func:`~captum_iba.app.explain_text.terminal_text`.
"""

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch

from captum_iba._utils.common import hf_call
from captum_iba._utils.io import atomic_write_text
from captum_iba.app.checks import class_index, class_names
from captum_iba.app.errors import CLIError
from captum_iba.registry import METHODS

__all__ = ["DEFAULT_METHOD", "Explanation", "MethodScores", "explain"]

#: The method :func:`explain` runs when none is named: the most faithful IBA.
DEFAULT_METHOD = "iba-deletion"


@dataclass
class MethodScores:
    """One method's scores of the text's word pieces.

    Attributes:
        method (str): The registered name (e.g. ``"iba-faithful"``).
        summary (str): The registry's one-line summary.
        scores (list[float]): One per word piece, special tokens included.
        signed (bool): Whether a score has a direction (+ for the class).
        meaning (str): What one score means.
        seconds (float): Time the method took.
        word_reduction (str): ``"sum"`` or ``"mean"``: how a word's score is
            made from its pieces' (the scorer's
            :attr:`~captum_iba.evaluation.TokenScorer.word_reduction`).
        layer (int, optional): The encoder layer it used, for IBA.
        settings (dict): The scorer's settings.
    """

    method: str
    summary: str
    scores: List[float]
    signed: bool
    meaning: str
    seconds: float
    word_reduction: str = "sum"
    layer: Optional[int] = None
    settings: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Explanation:
    """The result of :func:`explain`: the text, the prediction, each method's
    scores, and the words they are grouped into.

    Attributes:
        text (str): The text explained (and ``pair``, the second text).
        pair (str, optional): The second text of a pair.
        pieces (list[str]): The tokenizer's tokens, special tokens included.
        special (list[bool]): Per piece: a special token ([CLS], [SEP], ...).
        words (list[str]): The words, as written in the text.
        word_of_piece (list[int or None]): Per piece: its word's index (None
            for special tokens).
        segment (list[int]): Per word: 0 in ``text``, 1 in ``pair``.
        labels (list[str]): The model's class names by index.
        probabilities (list[float]): The predicted probability of each class.
        target (int): The class explained.
        model_name (str): What the model is, for the page.
        n_layers (int, optional): The model's encoder layers.
        methods (dict[str, MethodScores]): By name, in the order asked.
        skipped (dict[str, str]): Methods left out, and why (e.g. an optional
            package is missing).
    """

    text: str
    pair: Optional[str]
    pieces: List[str]
    special: List[bool]
    words: List[str]
    word_of_piece: List[Optional[int]]
    segment: List[int]
    labels: List[str]
    probabilities: List[float]
    target: int
    model_name: str = ""
    n_layers: Optional[int] = None
    methods: Dict[str, MethodScores] = field(default_factory=dict)
    skipped: Dict[str, str] = field(default_factory=dict)

    @property
    def predicted(self) -> int:
        """int: The predicted class."""
        return max(range(len(self.probabilities)), key=self.probabilities.__getitem__)

    def label(self, index: int) -> str:
        """The name of class ``index``."""
        return self.labels[index] if 0 <= index < len(self.labels) else str(index)

    def _method(self, method: Optional[str]) -> MethodScores:
        if method is None:
            return next(iter(self.methods.values()))
        for name, result in self.methods.items():
            if name.lower() == method.lower():
                return result
        raise ValueError(f"no scores of {method!r}; have {list(self.methods)}")

    def tokens(self, pieces: bool = False) -> List[str]:
        """The words (or, with ``pieces``, the word pieces) shown, special
        tokens left out, in text order."""
        if pieces:
            return [p for p, s in zip(self.pieces, self.special) if not s]
        return list(self.words)

    def scores(self, method: Optional[str] = None, pieces: bool = False) -> List[float]:
        """One method's scores of :meth:`tokens` (default: the first method).

        A word's score is the sum of its pieces' scores for additive methods
        (integrated gradients, occlusion, ...: the word's share of the
        total), their mean for the others (IBA: every piece keeps some
        signal, so a sum would rank words by their number of pieces); the
        method's :attr:`MethodScores.word_reduction` says which.
        """
        found = self._method(method)
        raw = found.scores
        if pieces:
            return [x for x, s in zip(raw, self.special) if not s]
        out = [0.0] * len(self.words)
        count = [0] * len(self.words)
        for x, w in zip(raw, self.word_of_piece):
            if w is not None:
                out[w] += x
                count[w] += 1
        if found.word_reduction == "mean":
            out = [x / max(c, 1) for x, c in zip(out, count)]
        return out

    def breaks(self, pieces: bool = False) -> List[int]:
        """Positions in :meth:`tokens` where the pair's second text starts."""
        if self.pair is None:
            return []
        if pieces:
            segs = [
                self.segment[w]
                for w, s in zip(self.word_of_piece, self.special)
                if not s and w is not None
            ]
        else:
            segs = list(self.segment)
        return [i for i in range(1, len(segs)) if segs[i] != segs[i - 1]]

    def top(
        self, k: int = 5, method: Optional[str] = None, pieces: bool = False
    ) -> List[Tuple[str, float]]:
        """The ``k`` highest-scoring words (or pieces) with their scores."""
        tokens, values = self.tokens(pieces), self.scores(method, pieces)
        order = sorted(range(len(tokens)), key=lambda i: -values[i])
        return [(tokens[i], values[i]) for i in order[:k]]

    def facts(self) -> List[Tuple[str, str]]:
        """What a reader needs beside the colours: the model, its prediction,
        the class explained."""
        pred = self.predicted
        target = f"{self.label(self.target)} (class {self.target}"
        target += ", the predicted class)" if self.target == pred else ")"
        facts = [
            ("Model", self.model_name or "(given)"),
            ("Prediction", f"{self.label(pred)} (p = {self.probabilities[pred]:.3f})"),
            ("Explained class", target),
        ]
        if self.pair is not None:
            facts.append(("Second text", self.pair))
        return facts

    def notes(self, pieces: bool = False) -> List[str]:
        """How the tokens shown were formed."""
        if pieces:
            shown = "Word pieces as the tokenizer cut the text."
        else:
            how = {"sum": "the sum", "mean": "the mean"}
            by = "; ".join(
                f"{name}: {how.get(m.word_reduction, m.word_reduction)}"
                for name, m in self.methods.items()
            )
            shown = f"A word's score is made from its word pieces' scores ({by})."
        notes = [f"{shown} Special tokens ([CLS], [SEP], ...) are left out."]
        notes += [f"{m} left out: {why}" for m, why in self.skipped.items()]
        return notes

    def details(self, method: str) -> str:
        """One line on how ``method`` ran (configuration, layer, time)."""
        m = self._method(method)
        parts = [m.summary] if m.summary else []
        if m.layer is not None:
            of = f" of 0..{self.n_layers - 1}" if self.n_layers else ""
            parts.append(f"after encoder layer {m.layer}{of}")
        parts.append(f"{m.seconds:.1f} s")
        return "; ".join(parts)

    def to_html(self, pieces: bool = False, full_page: bool = True) -> str:
        """The page: the facts, then one row per method (own scale each)."""
        from captum_iba.visualization.page import ScoreRow, explanation_html

        rows = [
            ScoreRow(
                method=name,
                words=self.tokens(pieces),
                scores=self.scores(name, pieces),
                signed=m.signed,
                meaning=m.meaning,
                details=self.details(name),
                breaks=self.breaks(pieces),
            )
            for name, m in self.methods.items()
        ]
        return explanation_html(
            rows,
            text=self.text,
            facts=self.facts(),
            notes=self.notes(pieces),
            full_page=full_page,
        )

    def _repr_html_(self) -> str:
        return self.to_html(full_page=False)

    def save_html(self, path: Union[str, Path], pieces: bool = False) -> Path:
        """Write the page to ``path`` (atomically); returns the path."""
        return atomic_write_text(Path(path), self.to_html(pieces))

    def to_text(self, top: int = 5, pieces: bool = False) -> str:
        """The terminal listing (see :mod:`~captum_iba.app.explain_text`)."""
        from captum_iba.app.explain_text import terminal_text

        return terminal_text(self, top, pieces)

    def __str__(self) -> str:
        return self.to_text()


def _grouping(
    enc: Any, tokenizer: Any, texts: Sequence[str]
) -> Tuple[List[bool], List[str], List[Optional[int]], List[int]]:
    """Special tokens, words, each piece's word and each word's segment.

    A fast tokenizer says which word and which text each piece comes from
    (words are written as in the text, from its character offsets); a slow
    one is grouped by its ``"##"`` continuation marker.
    """
    ids = enc["input_ids"][0].tolist()
    pieces = tokenizer.convert_ids_to_tokens(ids)
    if getattr(enc, "is_fast", False) and "offset_mapping" in enc:
        seq, word_ids = enc.sequence_ids(0), enc.word_ids(0)
        spans = enc["offset_mapping"][0].tolist()
        special = [s is None for s in seq]
        keys = [None if s is None else (s, w) for s, w in zip(seq, word_ids)]
    else:
        unk = tokenizer.unk_token_id
        special_ids = set(tokenizer.all_special_ids) - {unk}
        special = [i in special_ids for i in ids]
        types = enc.get("token_type_ids")
        segs = [0] * len(ids) if types is None else types[0].tolist()
        keys, word = [], -1
        for p, s, g in zip(pieces, special, segs):
            if not s and not (p.startswith("##") and word >= 0):
                word += 1
            keys.append(None if s else (g, word))
        spans = None
    words: List[str] = []
    segment: List[int] = []
    of_piece: List[Optional[int]] = []
    last = None
    for i, key in enumerate(keys):
        if key is None:
            of_piece.append(None)
            continue
        if key != last:
            words.append("")
            segment.append(key[0])
            start = None if spans is None else spans[i][0]
        last = key
        of_piece.append(len(words) - 1)
        if spans is None:
            words[-1] += pieces[i][2:] if pieces[i].startswith("##") else pieces[i]
        else:
            words[-1] = texts[key[0]][start : spans[i][1]]
    return special, words, of_piece, segment


def _encode(tokenizer: Any, model: Any, text: str, pair: Optional[str]) -> Any:
    """The text encoded (cut to the model's positions), with checks."""
    if not text.strip() or (pair is not None and not pair.strip()):
        raise CLIError("the text to explain is empty")
    limit = min(512, getattr(model.config, "max_position_embeddings", 512) or 512)
    fast = bool(getattr(tokenizer, "is_fast", False))
    enc = tokenizer(
        text,
        pair,
        truncation=True,
        max_length=limit,
        return_tensors="pt",
        return_offsets_mapping=fast,
    )
    full = len(tokenizer(text, pair)["input_ids"])
    if full > limit:
        print(f"note: the text has {full} word pieces; only the first {limit} are used")
    ids = enc["input_ids"][0].tolist()
    special = set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}
    words = [i for i in ids if i not in special]
    unk = tokenizer.unk_token_id
    if words and unk is not None and set(words) == {unk}:
        raise CLIError(
            "the tokenizer maps every word to its unknown token "
            f"({tokenizer.unk_token}): its vocabulary files are missing or damaged"
        )
    return enc


def _load(model: Any, tokenizer: Any) -> Tuple[Any, Any, str]:
    """The model and tokenizer (loaded when given by name), and a description."""
    from captum_iba.app.models import load_classifier

    if model is None:
        from captum_iba.app.finetune import get_finetuned_model

        path = get_finetuned_model("sst2")
        model, tokenizer = load_classifier(path)
        return model, tokenizer, f"MiniLM-L6 fine-tuned on SST-2 ({path})"
    if isinstance(model, (str, Path)):
        name = str(model)
        model, tokenizer = load_classifier(model)
        return model, tokenizer, name
    if tokenizer is None:
        raise ValueError("a model given as an object needs its tokenizer=")
    name = getattr(getattr(model, "config", None), "name_or_path", "") or ""
    return model, tokenizer, name or type(model).__name__


def _build(
    methods: Sequence[str], resources: Any, options: Mapping[str, Any]
) -> Tuple[Dict[str, Any], Dict[str, str]]:
    """The scorers by registered name; with several methods, one that cannot
    be imported (an optional package) is left out, with the reason."""
    from captum_iba.evaluation import build_scorers

    scorers: Dict[str, Any] = {}
    skipped: Dict[str, str] = {}
    for name in methods:
        try:
            built = build_scorers([name], resources, "fair", options)
        except ImportError as err:
            if len(methods) == 1:
                raise
            first = str(err).splitlines()[0]
            skipped[METHODS.entry(name).name] = first.split(". ")[0].rstrip(".") + "."
            continue
        scorers.update(built)
    return scorers, skipped


def explain(
    text: str,
    model: Any = None,
    method: Union[str, Sequence[str]] = DEFAULT_METHOD,
    *,
    tokenizer: Any = None,
    pair: Optional[str] = None,
    target: Union[None, int, str] = None,
    layer: Optional[int] = None,
    seed: int = 0,
    method_options: Optional[Mapping[str, Mapping[str, Any]]] = None,
    model_name: Optional[str] = None,
    explainer: Any = None,
) -> Explanation:
    """Explain one prediction, word by word, by one method or several.

    Args:
        text (str): The text to classify and explain.
        model (str, Path or nn.Module, optional): A fine-tuned classifier: a
            folder, a Hugging Face hub id, or a loaded model (then pass
            ``tokenizer``). Default: MiniLM-L6 fine-tuned on SST-2, made once
            on first use and cached.
        method (str or Sequence[str]): A registered method name
            (:data:`captum_iba.registry.METHODS`, any case), or several to
            compare. Default ``"iba-deletion"``, the most faithful IBA
            measured (docs/faithfulness.rst).
        tokenizer (optional): The tokenizer of a model given as an object.
        pair (str, optional): The second text of a sentence pair.
        target (int or str, optional): The class to explain, by index or by
            name (``"positive"``). Default: the predicted class.
        layer (int, optional): The encoder layer of IBA's bottleneck.
            Default: :func:`~captum_iba.attr.text.default_layer_index`.
        seed (int): Seed of every seeded method. Default 0.
        method_options (Mapping, optional): Method name -> more arguments of
            its scorer (e.g. ``{"iba-faithful": {"beta": 1e-4}}``).
        model_name (str, optional): How the page names the model.
        explainer (optional): ``iba-amortized``'s fitted explainer (see
            :func:`captum_iba.app.amortized.cached_explainer`), or a function
            of the layer module returning one.

    Returns:
        Explanation: The scores of every method, by word piece and by word;
        it shows as a page in Jupyter.

    Raises:
        ValueError: For an unknown method or layer.
        ~captum_iba.app.errors.CLIError: For an unknown class, an empty text,
            or a tokenizer without its vocabulary.
        ImportError: When the only method asked for needs a package that is
            not installed (with several, it is left out and named in
            :attr:`Explanation.skipped`).
    """
    from captum_iba.attr.text import encoder_layers
    from captum_iba.evaluation import Resources

    names = [method] if isinstance(method, str) else list(method)
    if not names:
        raise ValueError("name at least one method")
    names = [METHODS.entry(m).name for m in names]
    model, tokenizer, described = _load(model, tokenizer)
    enc = _encode(tokenizer, model, text, pair)
    ids, mask = enc["input_ids"], enc["attention_mask"]
    types = enc.get("token_type_ids")
    with torch.no_grad():
        probs = hf_call(model, ids, mask, types).softmax(-1)[0]
    labels = class_names(model.config)[: probs.numel()]
    labels += [str(i) for i in range(len(labels), probs.numel())]
    index = int(probs.argmax()) if target is None else class_index(target, labels)
    resources = Resources(model, tokenizer, layer=layer, seed=seed, explainer=explainer)
    scorers, skipped = _build(names, resources, method_options or {})
    texts = [text] if pair is None else [text, pair]
    special, words, of_piece, segment = _grouping(enc, tokenizer, texts)
    result = Explanation(
        text=text,
        pair=pair,
        pieces=tokenizer.convert_ids_to_tokens(ids[0].tolist()),
        special=special,
        words=words,
        word_of_piece=of_piece,
        segment=segment,
        labels=labels,
        probabilities=probs.tolist(),
        target=index,
        model_name=model_name or described,
        n_layers=_n_layers(model, encoder_layers),
        skipped=skipped,
    )
    for name, scorer in scorers.items():
        start = time.perf_counter()
        scores = scorer.attribute(
            ids, target=torch.tensor([index]), attention_mask=mask, token_type_ids=types
        )
        result.methods[name] = MethodScores(
            method=name,
            summary=METHODS.entry(name).summary if name in METHODS else "",
            scores=scores[0].tolist(),
            signed=bool(scorer.signed),
            meaning=scorer.score_meaning,
            seconds=time.perf_counter() - start,
            word_reduction=getattr(scorer, "word_reduction", "sum"),
            layer=scorer.settings.get("layer_index"),
            settings=dict(scorer.settings),
        )
    return result


def _n_layers(model: Any, encoder_layers: Any) -> Optional[int]:
    try:
        return len(encoder_layers(model))
    except (ValueError, TypeError, AttributeError):
        return None
