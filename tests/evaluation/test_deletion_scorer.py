"""``iba-deletion`` (issue #19's second round) built from the registry: the
configuration "deletion" after the model's embeddings."""

from typing import Any

import torch

from captum_iba.evaluation import make_scorers
from tests.helpers import no_hooks


def test_registered_method_scores_tokens(model: Any, tokenizer: Any, batch) -> None:
    scorer = make_scorers(model, tokenizer, "fair", methods=["iba-deletion"])
    scorer = scorer["iba-deletion"]
    ids, mask, _ = batch
    scores = scorer.attribute(ids, torch.tensor([1, 0, 1]), mask)
    assert scores.shape == ids.shape
    special = torch.isin(ids, torch.tensor(tokenizer.all_special_ids)) & mask.bool()
    # the mask's mean over the features (issue 31, item 16): 0.5 where nothing
    # moves it (the special tokens), every score in [0, 1]
    assert torch.allclose(scores[special], torch.full_like(scores[special], 0.5))
    assert bool(((scores >= 0) & (scores <= 1)).all())
    assert "averaged over the steps and over the token's features" in (
        scorer.score_meaning
    )
    assert scorer.settings["removal"] == "attention"
    assert scorer.settings["layer"] == type(model.base_model.embeddings).__name__
    assert no_hooks(model)
