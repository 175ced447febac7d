"""A causal LM's answer to a prompt: the route of
:data:`~captum_iba.app.explain_request.ANSWER` through the one pipeline
(:func:`~captum_iba.app.explain_pipeline.explained`); the sources of an
answer (:mod:`~captum_iba.app.sources_route`) take it with their own parts.

* prepare (:class:`Answer`) - the inputs checked before
  anything loads (a method that scores a context's sources, parts of the
  answer, an empty prompt or target), the model's configuration checked
  against the methods and its tokenizer loaded, a given answer encoded and
  checked, the answer's room among the model's positions, then the weights,
  the batch (the given answer, or the greedy one) and how much the model
  wanted the answer (one forward pass);
* score - every method built once (with ``iba-amortized`` 's explainer when
  supplied) and run on the prompt's own tokens for the whole answer (and,
  with ``per_token``, each output token), checked finite; why they rank no
  word;
* present - a :class:`~captum_iba.app.subjects.PromptSubject` (the prompt,
  the answer, its probability) over the prompt's scored pieces and words;
  the methods whose ranking is nearly flat warned.
"""

import time
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List, Tuple

from captum_iba._utils.common import user_stacklevel
from captum_iba._utils.ranking import check_finite, flat_reason, is_flat, spread_said
from captum_iba.app.answer_spans import check_answer_span
from captum_iba.app.explain_pipeline import Prepared
from captum_iba.app.llm_odds import answer_odds
from captum_iba.app.page import Explanation, MethodScores
from captum_iba.app.subjects import PromptSubject
from captum_iba.app.words import blank, prompt_words, token_labels
from captum_iba.registry import METHODS
from captum_iba.request import MethodRequest

__all__ = ["Answer", "methods_with"]

_FLAT = (
    "most prompt words have the same score (within 0.1 % of the median), so "
    "their order is noise"
)
#: What to try when a method ranks nothing (docs/llm.rst says why).
_TRY = (
    "the method found nothing in this prompt that changes the answer (a "
    "sampling method with too few samples, or a configuration the model "
    "barely reads: docs/llm.rst; try iba-deletion)"
)


class Answer(Prepared):
    """A causal LM's answer to the request's prompt, prepared: the checks
    that need no model, then those of the configuration and the tokenizer,
    then the weights, the batch and the answer's probability.

    The sources of an answer (:class:`~captum_iba.app.sources_route.Sources`)
    replace the parts that differ: :meth:`check`, :meth:`before_weights`,
    :meth:`explained_rows`, :meth:`subject`, :meth:`score`.

    Attributes:
        request (ExplainRequest): The request.
        tokenizer: The model's tokenizer.
        chat (bool): Whether the prompt is a user turn of the chat template.
        model: The loaded model.
        batch (PromptBatch): The prompt and the answer explained.
        odds (AnswerProbability): How much the model wanted the answer.
    """

    def __init__(self, request: Any, explainer: Any = None) -> None:
        from captum_iba.attr.llm_batch import prompt_batch, uses_chat

        self.request, self.explainer = request, explainer
        prompt, target = request.text, request.target
        self.check()
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError(
                f"the prompt is empty ({prompt!r}): give the text to explain"
            )
        if target == "":
            raise ValueError(
                "target '' has no token: give the answer to explain, or leave it "
                "out for the model's own"
            )
        tokenizer, weights, self.described, config = _load(
            request, explainer is not None
        )
        self.tokenizer = tokenizer
        self.chat = uses_chat(tokenizer, request.chat)
        given = None  # a given answer, encoded and checked before the weights
        if target is not None:
            given = prompt_batch(tokenizer, [prompt], [target], chat=self.chat)
        budget = self._budget(config, given)
        self.before_weights()
        if given is not None:
            self.check_answer(given)
        self.model = weights()  # the weights, only now
        batch = given
        if given is None:  # a greedy answer, known only now
            batch = prompt_batch(
                tokenizer, [prompt], None, model=self.model, chat=self.chat,
                max_new_tokens=budget,
            )  # fmt: skip
            self.check_answer(batch)
        self.batch = self.explained_rows(batch)
        # one forward pass, before any method
        self.odds = answer_odds(self.model, tokenizer, self.batch)
        check_finite(self.odds.log_probs, "the model's log-probabilities")

    def check(self) -> None:
        """The checks of the methods and ``answer_span`` before anything
        loads: a method that scores a context's sources (its registry
        entry's ``sources`` fact: ``iba-sources``, ``loso``, ``at2``, ...)
        and parts of the answer need a context."""
        request = self.request
        for name in methods_with(request.methods, "sources"):
            raise ValueError(
                f"{name} scores the sources of a context: give one (context= in "
                "Python, --context and --query on the command line)"
            )
        option = request.labels[1]
        if check_answer_span(request.answer_span, option) is not None:
            raise ValueError(
                f"{option} attributes parts of the answer to the sources of a "
                "context: give one (context= in Python, --context and --query on "
                "the command line)"
            )

    def _budget(self, config: Any, given: Any) -> int:
        """The longest greedy answer the model's positions leave room for
        (:func:`~captum_iba.app.llm_checks.answer_budget`)."""
        from captum_iba._utils.common import max_positions
        from captum_iba.app.llm_checks import answer_budget, prompt_lengths

        request = self.request
        return answer_budget(
            prompt_lengths(self.tokenizer, [request.text], self.chat),
            max_positions(SimpleNamespace(config=config)),
            request.max_new_tokens,
            None if given is None else int(given.answer_mask.sum()),
            option=request.labels[0],
        )

    def before_weights(self) -> None:
        """What is said of the inputs before the weights load (nothing
        here)."""

    def check_answer(self, batch: Any) -> None:
        """The answer checked once known (given: before the weights;
        greedy: once generated): :func:`_check_answer_text`."""
        _check_answer_text(self.request.methods, self.tokenizer, batch)

    def explained_rows(self, batch: Any) -> Any:
        """The batch every method scores (here: the prompt's own tokens)."""
        return batch

    def build(self) -> Tuple[Dict[str, Any], Dict[str, str]]:
        """Every method built once, through
        :func:`~captum_iba.evaluation.build_scorers` (none left out)."""
        from captum_iba.evaluation import Resources, build_scorers

        explainer, tok = self.explainer, self.tokenizer
        fitted = None if explainer is None else explainer(self.model, tok, self.chat)
        resources = Resources(self.model, tok, explainer=fitted)
        return build_scorers(
            self.request.methods, resources, kind=self.request.kind.name
        ), {}

    def subject(self, facts: Dict[str, Any]) -> PromptSubject:
        """What was explained: the prompt and its answer."""
        return PromptSubject(**facts)

    def result(self, skipped: Dict[str, str]) -> Explanation:
        """The answer and the words of the prompt's tokens the batch scores
        (a context's: its sources'), before any method's scores."""
        from captum_iba.attr.llm_batch import encode_prompt

        batch, tokenizer, prompt = self.batch, self.tokenizer, self.request.text
        ids, _, spans = encode_prompt(tokenizer, prompt, self.chat)
        start = int(batch.attention_mask[0].nonzero()[0])
        own = batch.scored[0, start : start + len(ids)].tolist()
        pieces = [p for p, o in zip(tokenizer.convert_ids_to_tokens(ids), own) if o]
        kept = [s for s, o in zip(spans, own) if o]
        words, of_piece = prompt_words(prompt, kept, pieces)
        scored = [i for i, o in zip(ids, own) if o]
        unknown = {
            of_piece[k] for k, i in enumerate(scored) if i == tokenizer.unk_token_id
        }
        for w in unknown:  # the model read its unknown token there
            words[w] += f" (unknown: {tokenizer.unk_token})"
        answer = batch.answer_ids(0)
        subject = self.subject(
            dict(
                prompt=prompt,
                chat=self.chat,
                answer=tokenizer.decode(answer),
                output_tokens=token_labels(tokenizer, answer),
                generated=self.request.target is None,
            )
        )
        subject.odds = self.odds
        subject.per_token = self.request.per_token
        return Explanation(
            subject=subject,
            pieces=pieces,
            special=[False] * len(pieces),
            words=words,
            word_of_piece=of_piece,
            model_name=self.request.model_name or self.described,
            skipped=skipped,
        )

    def score(self, result: Explanation, name: str, scorer: Any) -> None:
        """One method's scores of the prompt (:func:`_scored`; the
        question's own, :meth:`more_scores`), and why they rank no word
        (:func:`_say_no_ranking`)."""
        scores, found = _scored(name, scorer, self.batch, self.request.per_token)
        self.more_scores(scores, found, scorer)
        result.methods[name] = scores
        # IBA's own finding that most tokens tie with the median
        _say_no_ranking(result, name, bool(found.flat is not None and found.flat[0]))

    def more_scores(self, scores: MethodScores, found: Any, scorer: Any) -> None:
        """The question's own scores beside the tokens' (none here)."""

    def finish(self, result: Explanation) -> None:
        """A warning for each method whose ranking is nearly flat."""
        for name in result.near_flat_methods():
            warnings.warn(
                f"{name}: {result.near_flat(name)}", UserWarning, user_stacklevel()
            )


def _load(request: Any, explainer: bool) -> Tuple[Any, Any, str, Any]:
    """The causal LM's configuration checked against the request's methods
    (:func:`~captum_iba.app.llm_checks.check_lm_request`), then its
    tokenizer, and a function that loads the model (the weights come last:
    what the tokenizer alone decides is checked before them); its name and
    configuration.

    Raises:
        ValueError: For a model given as an object without its tokenizer.
    """
    from captum_iba.app.llm_checks import check_lm_request

    model, tokenizer = request.model, request.tokenizer
    if isinstance(model, (str, Path)):
        from captum_iba.app.causal_lm import load_causal_lm, load_lm_tokenizer
        from captum_iba.app.llm_checks import lm_config

        name = str(model)
        config = lm_config(name)
        check_lm_request(request.methods, config, cli=False, explainer=explainer)
        if tokenizer is None:  # (the kind was decided: not judged again)
            tokenizer = load_lm_tokenizer(name, checked=True)
        tok = tokenizer
        return tok, lambda: load_causal_lm(name, tok)[0], name, config
    if tokenizer is None:
        raise ValueError("a model given as an object needs its tokenizer=")
    check_lm_request(request.methods, model.config, cli=False, explainer=explainer)
    name = getattr(getattr(model, "config", None), "name_or_path", "") or ""
    return tokenizer, lambda: model, name or type(model).__name__, model.config


def methods_with(request: MethodRequest, fact: str, has: bool = True) -> List[str]:
    """The request's methods whose registry entry has (or, with ``has``
    False, lacks) the ``fact``, in the request's order."""
    return [
        name
        for name in request.methods
        if bool(METHODS.entry(name, warn=False).facts.get(fact)) == has
    ]


def _check_answer_text(request: MethodRequest, tokenizer: Any, batch: Any) -> None:
    """Refuses an answer of only whitespace (``'\\n\\n'``) for a method that
    re-reads the answer as text (its registry entry's ``reads_answer`` fact:
    AT2, ContextCite), which would re-encode it as other tokens - before the
    method's work."""
    answer = tokenizer.decode(batch.answer_ids(0))
    if not blank(answer):
        return
    for name in methods_with(request, "reads_answer"):
        raise ValueError(
            f"{name} cannot explain the answer {answer!r}: it holds only "
            "whitespace, which the method re-reads as text and so as other "
            "tokens; give an answer with words (target= in Python, --target "
            "on the command line), or use another method"
        )


def _scored(
    name: str, scorer: Any, batch: Any, per_token: bool
) -> Tuple[MethodScores, Any]:
    """One method's scores of the batch's one prompt (its own tokens), checked
    finite, and what the method found (its
    :class:`~captum_iba.attr.batches.AnswerScores`)."""
    start = time.process_time()
    found = scorer.attribute(batch.with_each_token(per_token))
    keep = batch.scored[0]
    check_finite(found.answer[0][keep], f"{name}'s scores")
    per = None if found.tokens is None else found.tokens[0][:, keep]
    if per is not None:
        check_finite(per, f"{name}'s per-token scores")
    scores = MethodScores(
        method=name,
        summary=METHODS.entry(scorer.method_name, warn=False).summary,
        scores=found.answer[0][keep].tolist(),
        per_token=None if per is None else per.tolist(),
        signed=bool(scorer.signed),
        meaning=scorer.score_meaning,
        seconds=time.process_time() - start,
        word_reduction=scorer.word_reduction,
        settings=dict(scorer.settings),
        per_token_note=getattr(scorer, "per_token_note", "") if per_token else "",
        unit=found.unit,
    )
    return scores, found


def _say_no_ranking(result: Explanation, name: str, tied: bool) -> None:
    """Sets why a method's scores rank no word: the one check of every method
    (:func:`~captum_iba._utils.ranking.flat_reason`), or IBA's own finding
    that most tokens tie with the median (``tied``, which IBA warned).

    A method that scores each source as such (``by_source``: its words tie
    within a source, so a word-level verdict would contradict its source
    ranking) is judged by its sources' scores alone."""
    found = result.methods[name]
    if found.by_source:
        values = found.sources or []
        if is_flat(values):
            found.no_ranking = (
                f"{spread_said('source')} ({min(values):.4g} to "
                f"{max(values):.4g}), so none ranks above another: {_TRY}"
            )
            warnings.warn(
                f"{name}: no ranking: {found.no_ranking}",
                UserWarning,
                user_stacklevel(),
            )
        return
    flat = flat_reason(result.scores(name, pieces=True), result.scores(name))
    if flat:
        found.no_ranking = f"{flat}: {_TRY}"
        warnings.warn(
            f"{name}: no ranking: {found.no_ranking}", UserWarning, user_stacklevel()
        )
    elif tied:
        found.no_ranking = f"{_FLAT}: {_TRY}"
