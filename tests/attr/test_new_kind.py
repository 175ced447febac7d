"""A kind of model the package does not ship - a regression head, whose one
output is a score - added as docs/extending.rst adds it: one kind class and
its rows, no method touched. The methods explain it through their one hook,
``_scores(rows)``; the expectations are analytical where the method allows
(integrated gradients' completeness, a random draw's independence of the
kind)."""

import dataclasses
from typing import Any, Callable

import pytest
import torch

from captum_iba.attr import kinds
from captum_iba.attr.batches import TokenBatch
from captum_iba.attr.class_rows import ClassRows
from captum_iba.attr.rows import Read
from captum_iba.evaluation.captum_methods import SaliencyScorer
from captum_iba.evaluation.iba import IBAScorer
from captum_iba.evaluation.ig import IntegratedGradientsScorer
from captum_iba.evaluation.random_scorer import RandomScorer
from tests.helpers import bert_tokenizer, tiny_bert

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "good", "bad", "film"]


# --- the new kind: the one place that knows what a regression head is -------
@dataclasses.dataclass(frozen=True)
class ScoreRows(ClassRows):
    """A regression head's rows: the forward's one output is explained (no
    class); IBA keeps it high (its "score" objective)."""

    @classmethod
    def _target_of(cls, scorer: Any, given: Any, ids: Any, mask: Any, tt: Any) -> None:
        return None

    def read(self) -> Read:
        return dataclasses.replace(super().read(), objective="score")

    def forward(self, model: Any = None, **_: Any) -> Callable[..., torch.Tensor]:
        logits = super().forward(model)
        return lambda *args: logits(*args)[:, 0]


class Regressor(kinds.ModelKind):
    name = "regressor"
    article = "a regression head"
    plural = "regression heads"

    @property
    def batch_type(self) -> type:
        return TokenBatch

    @property
    def rows_type(self) -> type:
        return ScoreRows

    def score_meaning(self, scorer: Any) -> str:
        return "+ for a higher score"

    def iba_arguments(self, precision: str, options: Any, pad: int, special: Any):
        return kinds.CLASSIFIER.iba_arguments(precision, options, pad, special)

    def iba_settings(self, layer: Any, options: Any, precision: str):
        return kinds.CLASSIFIER.iba_settings(layer, options, precision)


REGRESSOR = Regressor()
# ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def setup():
    tok = bert_tokenizer(WORDS)
    model = tiny_bert(len(WORDS), seed=4, pad_token_id=0, num_labels=1).eval()
    enc = tok(["a good film", "bad film"], padding=True, return_tensors="pt")
    return model, tok, TokenBatch(enc["input_ids"], None, enc["attention_mask"])


def _built(cls: type, model: Any, tok: Any, **kwargs: Any) -> Any:
    return cls(model, tokenizer=tok, model_kind=REGRESSOR, **kwargs)


def test_integrated_gradients_add_up_to_the_score_s_change(setup):
    """Completeness: the token scores sum to the score minus the baseline's
    (every token but the special ones replaced by [PAD]), within the
    Riemann error of 200 steps."""
    model, tok, batch = setup
    ig = _built(IntegratedGradientsScorer, model, tok, n_steps=200)
    scores = ig.attribute(batch)
    removable = ig._removable(batch.input_ids, batch.attention_mask)
    base = batch.input_ids.masked_fill(removable, tok.pad_token_id)
    with torch.no_grad():
        full = model(batch.input_ids, batch.attention_mask).logits[:, 0]
        empty = model(base, batch.attention_mask).logits[:, 0]
    torch.testing.assert_close(scores.sum(1), full - empty, atol=2e-3, rtol=1e-2)
    assert (scores[batch.attention_mask == 0] == 0).all()


def test_random_gets_the_same_draw_as_on_a_classifier(setup):
    model, tok, batch = setup
    mine = _built(RandomScorer, model, tok).attribute(batch)
    theirs = RandomScorer(model, tokenizer=tok).attribute(batch)
    assert torch.equal(mine, theirs)


@pytest.mark.parametrize("method", [SaliencyScorer, IBAScorer])
def test_other_methods_explain_it_untouched(setup, method):
    """Saliency and IBA (deletion through the attention) run on the new kind
    with no change to their classes: finite scores, zero at padding, and
    the model and its hooks as they were."""
    model, tok, batch = setup
    iba = {"config": "deletion", "steps": 2, "layer": "embeddings"}
    extra = iba if method is IBAScorer else {}
    before = [p.detach().clone() for p in model.parameters()]
    scores = _built(method, model, tok, **extra).attribute(batch)
    assert scores.shape == batch.input_ids.shape and torch.isfinite(scores).all()
    assert (scores[batch.attention_mask == 0] == 0).all()
    assert scores[batch.attention_mask == 1].abs().sum() > 0
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


def test_a_method_defines_no_hook_of_a_kind():
    """Every built-in method's class implements the one hook only."""
    from captum_iba.evaluation.scorers import TokenScorer, scorer_class, scorer_names

    for name in scorer_names():
        cls = scorer_class(name)
        assert cls._scores is not TokenScorer._scores, name
        assert not hasattr(cls, "_prompt_scores"), name
        assert not hasattr(cls, "_explains_prompts"), name
