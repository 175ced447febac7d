"""Amortized IBA's per-sample teachers: named configurations, ``iba-deletion``
at the embeddings, and the teacher paid once per fit (not once per epoch)."""

import warnings

import pytest
import torch
from captum.testing.helpers.basic import BaseTest

from captum_iba.attr.amortized import AmortizedInformationBottleneckAttribution
from captum_iba.attr.iba import InformationBottleneckAttribution
from captum_iba.evaluation.amortized import (
    faithful_teacher,
    fit_amortized,
    teacher_options,
)
from tests.attr.test_amortized import loader, quick_fit, signal_model
from tests.helpers import no_hooks, tiny_hf_model

CLS, SEP, LENGTH = 1, 2, 8


def bert_signal_data(n: int, gen: torch.Generator):
    """[CLS] fillers (5..59) [SEP]; class 1 puts the signal token 3 at a random
    inner position, class 0 has none. Deleting the signal token flips class 1,
    so on class 1 the deletion teacher has a known token to find."""
    ids = torch.randint(5, 60, (n, LENGTH), generator=gen)
    ids[:, 0], ids[:, -1] = CLS, SEP
    pos = torch.randint(1, LENGTH - 1, (n,), generator=gen)
    labels = torch.randint(0, 2, (n,), generator=gen)
    rows = labels == 1
    ids[torch.arange(n)[rows], pos[rows]] = 3
    return ids, torch.ones_like(ids), labels, pos


def bert_signal_model():
    """A tiny BERT trained on :func:`bert_signal_data` until it is right."""
    torch.manual_seed(0)
    model = tiny_hf_model("bert", layers=2).train()
    gen = torch.Generator().manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(200):
        ids, mask, labels, _ = bert_signal_data(64, gen)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.zero_grad(set_to_none=True)
    return model.eval()


class TestTeachers(BaseTest):
    def test_named_teachers_hold_the_knobs_of_their_configuration(self) -> None:
        faithful = teacher_options("faithful")
        self.assertEqual(faithful, faithful_teacher())
        self.assertEqual(faithful["prior"], "baseline")
        self.assertNotIn("removal", faithful)  # the cached explainers' keys stay
        deletion = teacher_options("deletion")
        self.assertEqual(deletion["removal"], "attention")
        self.assertEqual(deletion["complement"], 1.0)
        self.assertNotIn("prior", deletion)  # no noise, hence no prior or beta
        self.assertNotIn("beta", deletion)
        with self.assertRaisesRegex(ValueError, "nope"):
            teacher_options("nope")

    def test_teacher_runs_once_per_batch_not_once_per_epoch(self) -> None:
        """The seeded teacher's masks are memoised by batch content: 2 epochs
        over 3 batches run the per-sample IBA 3 times; memoising is sound
        because two teachers give the same masks for the same batch."""
        from captum_iba.attr._amortized_pass import Batch
        from captum_iba.attr.amortized_fit import make_teacher

        model = signal_model()
        calls = []
        original = InformationBottleneckAttribution.attribute

        def counted(self, *args, **kwargs):
            calls.append(1)
            return original(self, *args, **kwargs)

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(InformationBottleneckAttribution, "attribute", counted)
            explainer = quick_fit(
                model, data=loader(3), epochs=2, keep=None, distil=1.0,
                distil_only=True, teacher=faithful_teacher(),
            )  # fmt: skip
        self.assertEqual(len(calls), 3)
        self.assertEqual(explainer.stats["steps"], 6)
        ids, mask, labels = loader(1)[0]
        batch = Batch(ids, (mask,), mask.bool(), labels)
        first = make_teacher(model, model.layers[0], explainer.settings)(batch, labels)
        second = make_teacher(model, model.layers[0], explainer.settings)(batch, labels)
        self.assertTrue(torch.equal(first, second))


def test_deletion_teacher_at_the_embeddings_finds_the_signal_token() -> None:
    """``iba-deletion`` distilled at the embeddings (its bottleneck): the
    explainer, given the tokenizer's special ids, ranks the known relevant
    token first far more often than random (1 in 6), on unseen instances,
    warns of no missing special ids and leaves no hook."""
    model = bert_signal_model()
    ids, mask, labels, pos = bert_signal_data(200, torch.Generator().manual_seed(9))
    with torch.no_grad():
        acc = (model(ids, mask).logits.argmax(-1) == labels).float().mean()
    assert acc > 0.95
    gen = torch.Generator().manual_seed(1)
    data = []
    for _ in range(8):
        b_ids, b_mask, b_labels, _ = bert_signal_data(16, gen)
        data.append({"input_ids": b_ids, "attention_mask": b_mask, "labels": b_labels})
    layer = model.bert.embeddings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. "No special token ids known"
        explainer = fit_amortized(
            model, layer, data, show_progress=False, teacher="deletion",
            epochs=4, lr=1e-2, hidden=32, pad_token_id=0,
            special_token_ids=[CLS, SEP],
        )  # fmt: skip
    assert explainer.settings.teacher["removal"] == "attention"
    assert explainer.settings.distil_only
    # below the stack, the explainer also reads the last block (the context)
    assert explainer.settings.readout == ("bert.embeddings", "bert.encoder.layer.1")
    aiba = AmortizedInformationBottleneckAttribution(model, layer, explainer)
    scores = aiba.attribute(ids, target=labels, additional_forward_args=(mask,))
    scores = scores.sum(-1)
    scores[:, 0] = scores[:, -1] = -1.0  # rank the inner tokens
    signal = labels == 1
    hit = (scores.argmax(-1) == pos)[signal].float().mean().item()
    assert hit > 0.6, hit
    with pytest.raises(ValueError, match="refine_steps.*removal='attention'"):
        aiba.attribute(ids[:2], labels[:2], (mask[:2],), refine_steps=1)
    assert no_hooks(model)
