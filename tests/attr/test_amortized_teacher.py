"""Amortized IBA's per-sample teachers: named configurations, ``iba-deletion``
at the embeddings, and the teacher paid once per fit (not once per epoch)."""

import warnings
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from captum.testing.helpers.basic import BaseTest

from captum_iba.attr.amortized import (
    AmortizedExplainer,
    AmortizedInformationBottleneckAttribution,
)
from captum_iba.attr.explainer import OBJECTIVE_OPTIONS, ExplainerSettings
from captum_iba.attr.iba import InformationBottleneckAttribution
from captum_iba.attr.options import DELETION, FAITHFUL, IBAOptions
from captum_iba.attr.priors import PaperPrior
from captum_iba.evaluation.amortized import (
    IBAAmortizedScorer,
    faithful_teacher,
    fit_amortized,
    teacher_options,
    trained_on,
)
from captum_iba.registry import PRIORS
from tests.attr.test_amortized import loader, quick_fit, signal_model
from tests.helpers import no_hooks, tiny_hf_model

CLS, SEP, LENGTH = 1, 2, 8

#: An explainer's settings as version 0.2 recorded them (flat), and its
#: teachers' keywords (``teacher_options`` of 0.2: a hand-picked key list).
V02_RECORD = {
    "hidden": 16, "beta": 1e-05, "keep": None, "keep_weight": 10.0,
    "distil": 0.0, "distil_only": False, "complement": 0.0, "teacher": None,
    "epochs": 1, "lr": 0.001, "n_samples": 2, "target": "label",
    "prior": "baseline", "pad_token_id": 0, "special_token_ids": [],
    "readout": ["layers.0", "layers.1"], "seed": 0,
}  # fmt: skip
V02_FAITHFUL = {
    "prior": "baseline", "beta": 1e-05, "steps": 10, "n_samples": 5, "lr": 3.0,
    "init_alpha": 0.0, "optimizer": "normalized_gd", "readout": "mask_mean",
}  # fmt: skip
V02_DELETION = {
    "steps": 10, "n_samples": 1, "lr": 3.0, "init_alpha": 0.0,
    "optimizer": "normalized_gd", "readout": "mask_mean", "removal": "attention",
    "complement": 1.0,
}  # fmt: skip


class _DataPrior(PaperPrior):
    """A prior fitted on data (as the dataset prior)."""

    name = "fitted"
    needs_data = True


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


def _bert_signal_loader(batches: int = 8):
    gen = torch.Generator().manual_seed(1)
    data = []
    for _ in range(batches):
        b_ids, b_mask, b_labels, _ = bert_signal_data(16, gen)
        data.append({"input_ids": b_ids, "attention_mask": b_mask, "labels": b_labels})
    return data


def _signal_hits(aiba, ids, mask, labels, pos) -> float:
    """How often the known token ranks first among the inner tokens of the
    class-1 instances (random: 1 in 6)."""
    scores = aiba.attribute(ids, target=labels, additional_forward_args=(mask,))
    scores = scores.sum(-1)
    scores[:, 0] = scores[:, -1] = -1.0  # rank the inner tokens
    signal = labels == 1
    return (scores.argmax(-1) == pos)[signal].float().mean().item()


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
    def test_named_teachers_are_their_configuration(self) -> None:
        faithful = teacher_options("faithful")
        self.assertEqual(faithful.record(), faithful_teacher().record())
        self.assertEqual(faithful.record(), FAITHFUL.record())
        self.assertEqual(teacher_options("deletion").record(), DELETION.record())
        mine = IBAOptions(prior="paper", steps=3)
        self.assertIs(teacher_options(mine), mine)
        with self.assertRaisesRegex(ValueError, "nope"):
            teacher_options("nope")

    def test_every_option_reaches_the_teacher(self) -> None:
        """The teacher is the IBAOptions itself: a field IBAOptions gains
        (here a subclass's) reaches the per-sample run with no edit; only the
        readout is the teacher's and the seed, when None, the explainer's."""
        from captum_iba.attr._amortized_pass import Batch
        from captum_iba.attr.amortized_fit import make_teacher

        @dataclass(frozen=True)
        class WithKnob(IBAOptions):
            knob: int = 0

        teacher = WithKnob(prior="baseline", steps=2, internal_batch_size=40, knob=7)
        settings = ExplainerSettings(distil=1.0, teacher=teacher, hidden=8)
        self.assertEqual(settings.to_dict()["teacher"]["knob"], 7)
        seen = []
        original = InformationBottleneckAttribution.attribute

        def spy(self, *args, **kwargs):
            seen.append(kwargs["config"])
            return original(self, *args, **kwargs)

        model = signal_model()
        ids, mask, labels = loader(1)[0]
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(InformationBottleneckAttribution, "attribute", spy)
            make_teacher(model, model.layers[0], settings)(
                Batch(ids, (mask,), mask.bool(), labels), labels
            )
        want = teacher.replace(readout="mask_mean", seed=settings.options.seed)
        self.assertEqual(seen[0].record(), want.record())
        self.assertEqual(seen[0].knob, 7)

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

    def test_distilled_fit_runs_the_model_once_per_batch(self) -> None:
        """A fit on the teacher alone memoises the clean passes: 3 epochs over
        2 batches run the model's clean pass twice (6 times with the memo
        off), and the network is the same either way."""
        from captum_iba.attr import amortized_fit
        from captum_iba.attr._amortized_pass import Passes

        model = signal_model()
        calls = []
        original = Passes.clean

        def counted(self, batch):
            calls.append(1)
            return original(self, batch)

        fits = []
        for budget in (amortized_fit.CLEAN_MEMO_BYTES, 0):
            calls.clear()
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(Passes, "clean", counted)
                mp.setattr(amortized_fit, "CLEAN_MEMO_BYTES", budget)
                fits.append(quick_fit(
                    model, data=loader(2), epochs=3, keep=None, distil=1.0,
                    distil_only=True, teacher=faithful_teacher(),
                ))  # fmt: skip
            self.assertEqual(len(calls), 2 if budget else 6)
        first, second = (f.network.state_dict() for f in fits)
        for name, value in first.items():
            self.assertTrue(torch.equal(value, second[name]), name)


class TestVersion02Settings(BaseTest):
    """Settings recorded by version 0.2 (flat beta, prior, complement, lr,
    n_samples, seed; the teacher as a dict of keywords) load as today's."""

    def test_flat_record_is_migrated(self) -> None:
        for teacher, config in ((V02_FAITHFUL, FAITHFUL), (V02_DELETION, DELETION)):
            record = dict(V02_RECORD, teacher=teacher, distil=1.0, distil_only=True)
            settings = ExplainerSettings.from_dict(record)
            # 0.2's schedule; its teachers kept the complement term at every
            # step (a record without complement_skip reads as 0)
            schedule = {"steps": teacher["steps"], "lr": teacher["lr"]}
            schedule["complement_skip"] = 0
            self.assertEqual(
                settings.teacher.record(), config.replace(**schedule).record()
            )
            self.assertEqual(settings.network_lr, 1e-3)
            self.assertEqual(settings.options.record(), OBJECTIVE_OPTIONS.record())
            again = ExplainerSettings.from_dict(settings.to_dict())
            self.assertEqual(again, settings)
        flat = dict(V02_RECORD, beta=0.1, complement=0.5, prior="paper", seed=3)
        options = ExplainerSettings.from_dict(flat).options
        self.assertEqual(
            (options.beta, options.complement, options.seed), (0.1, 0.5, 3)
        )
        self.assertEqual(options.prior.name, "paper")

    def test_flat_keywords_still_fit(self) -> None:
        explainer = quick_fit(signal_model(), beta=1e-3, n_samples=1, lr=5e-3)
        settings = explainer.settings
        self.assertEqual((settings.options.beta, settings.options.n_samples), (1e-3, 1))
        self.assertEqual(settings.network_lr, 5e-3)

    def test_priors_are_plug_ins_and_data_priors_refused(self) -> None:
        model = signal_model()
        ids, mask, labels = loader(1, seed=4)[0]
        for name in PRIORS.names():
            if PRIORS.load(name).needs_data:
                with self.assertRaisesRegex(ValueError, "needs data|fitted on data"):
                    ExplainerSettings(options=OBJECTIVE_OPTIONS.replace(prior=name))
            else:  # fits and refines with no edit for the prior
                explainer = quick_fit(model, data=loader(1), prior=name)
                self.assertEqual(explainer.settings.options.prior.name, name)
                aiba = AmortizedInformationBottleneckAttribution(
                    model, model.layers[0], explainer
                )
                attr = aiba.attribute(ids, labels, (mask,), refine_steps=1)
                self.assertTrue(bool(torch.isfinite(attr).all()))
        with self.assertRaisesRegex(ValueError, "fitted on data"):
            ExplainerSettings(options=OBJECTIVE_OPTIONS.replace(prior=_DataPrior()))
        with self.assertRaisesRegex(ValueError, "needs a budget, keep="):
            ExplainerSettings(options=DELETION.replace(seed=0))
        with self.assertRaisesRegex(ValueError, "attribute_to_layer_input=False"):
            ExplainerSettings(options=IBAOptions(seed=0, attribute_to_layer_input=True))
        kept = ExplainerSettings(options=DELETION.replace(seed=0), keep=0.3)
        self.assertIn("removal", str(kept.to_dict()["options"]))
        with self.assertRaisesRegex(ValueError, "seed must be an int"):
            ExplainerSettings(options=IBAOptions())


def _teacher_masks(model, layer, ids, mask, labels) -> torch.Tensor:
    """The per-sample ``iba-deletion`` teacher's masks, ``(B, L)``."""
    iba = InformationBottleneckAttribution(
        model, layer, pad_token_id=0, special_token_ids=[CLS, SEP]
    )
    config = DELETION.replace(seed=0, readout="mask_mean")
    attr = iba.attribute(ids, target=labels, additional_forward_args=(mask,),
                         token_mask=mask, config=config)  # fmt: skip
    return attr.reshape(attr.shape[0], attr.shape[1], -1).mean(-1)


def test_deletion_teacher_at_the_embeddings_finds_the_signal_token() -> None:
    """``iba-deletion`` distilled at the embeddings (its bottleneck): the
    explainer, given the tokenizer's special ids, ranks the known relevant
    token first on unseen instances far more often than random (1 in 6) -
    or, where its teacher does not, follows its teacher (correlated with its
    masks, ranking the token first as rarely) - warns of no missing special
    ids and leaves no hook.

    Whether the per-sample teacher itself finds the token depends on the
    model: on the tiny BERTs of 15 training seeds it ranked it first on 65-100
    % of the class-1 instances for 10 and on 0-15 % for 5 (removing the token
    through the attention needs a bias below -6 to -25 nats on these
    saturated models, so its gradient at the start is ~0), and which of the
    two a model lands in follows the rounding of its 200 training steps:
    "assert hit > 0.6" failed with hit 0.0114 on AVX-512 kernels (issue 53,
    item 9). The explainer follows its teacher either way (Pearson 0.52-0.79
    per instance on those seeds)."""
    model = bert_signal_model()
    ids, mask, labels, pos = bert_signal_data(200, torch.Generator().manual_seed(9))
    with torch.no_grad():
        acc = (model(ids, mask).logits.argmax(-1) == labels).float().mean()
    assert acc > 0.95
    data = _bert_signal_loader()
    layer = model.bert.embeddings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. "No special token ids known"
        explainer = fit_amortized(
            model, layer, data, show_progress=False, teacher="deletion",
            epochs=4, lr=1e-2, hidden=32, pad_token_id=0,
            special_token_ids=[CLS, SEP],
        )  # fmt: skip
    assert explainer.settings.teacher.removal == "attention"
    assert explainer.settings.distil_only
    # below the stack, the explainer also reads the last block (the context)
    assert explainer.settings.readout == ("bert.embeddings", "bert.encoder.layer.1")
    aiba = AmortizedInformationBottleneckAttribution(model, layer, explainer)
    hit = _signal_hits(aiba, ids, mask, labels, pos)
    if hit <= 0.6:  # then it must be its teacher that does not find the token
        teacher = _teacher_masks(model, layer, ids, mask, labels)
        teacher[:, 0] = teacher[:, -1] = -1.0  # rank the inner tokens
        signal = labels == 1
        teacher_hit = (teacher.argmax(-1) == pos)[signal].float().mean().item()
        assert teacher_hit < 0.6 and abs(hit - teacher_hit) < 0.25, (hit, teacher_hit)
        scores = aiba.attribute(ids, target=labels, additional_forward_args=(mask,))
        pair = torch.stack([scores.sum(-1)[:, 1:-1], teacher[:, 1:-1]], 1)
        pearson = torch.stack([torch.corrcoef(p)[0, 1] for p in pair]).nanmean()
        assert pearson > 0.4, pearson  # random scores: 0
    with pytest.raises(ValueError, match="n_samples: this explainer learned deletion"):
        aiba.attribute(ids[:2], labels[:2], (mask[:2],), refine_steps=1, n_samples=2)
    # refined by iba-deletion's steps from its mask: the mask moves, specials kept
    once = aiba.attribute(ids[:4], labels[:4], (mask[:4],))
    refined = aiba.attribute(ids[:4], labels[:4], (mask[:4],), refine_steps=2)
    assert refined.shape == once.shape and not torch.allclose(refined, once)
    assert aiba.last_run["refine_steps"] == 2
    assert no_hooks(model)
    # the scorer refuses it where an explainer of iba-deletion's objective is
    # asked for (the command line's --explainer-objective deletion)
    assert trained_on(explainer) == "distil"
    with pytest.raises(ValueError, match="trained on 'distil'"):
        IBAAmortizedScorer(model, layer, explainer, explainer_objective="deletion")
    IBAAmortizedScorer(model, layer, explainer, explainer_objective="distil")


def test_deletion_objective_at_the_embeddings_finds_the_signal_token(
    tmp_path,
) -> None:
    """The explainer trained on ``iba-deletion``'s own objective (the kept
    tokens' loss, the complement term, the budget; no teacher): it ranks the
    known relevant token first on unseen class-1 instances far more often
    than random (1 in 6), its mean mask near the budget, no hook left; saved,
    it is refused where one trained on the noise objective is expected."""
    model = bert_signal_model()
    ids, mask, labels, pos = bert_signal_data(200, torch.Generator().manual_seed(9))
    layer = model.bert.embeddings
    explainer = fit_amortized(
        model, layer, _bert_signal_loader(), folder=tmp_path, show_progress=False,
        options=DELETION.replace(seed=0), keep=0.3, distil=0.0, epochs=4,
        lr=1e-2, hidden=32, pad_token_id=0, special_token_ids=[CLS, SEP],
    )  # fmt: skip
    settings = explainer.settings
    assert settings.options.removal == "attention" and settings.teacher is None
    assert not settings.distil_only and settings.options.complement == 1.0
    assert abs(explainer.stats["mean_lambda"] - 0.3) < 0.15
    aiba = AmortizedInformationBottleneckAttribution(model, layer, explainer)
    hit = _signal_hits(aiba, ids, mask, labels, pos)
    assert hit > 0.6, hit
    assert no_hooks(model)
    assert trained_on(explainer) == "deletion"
    with pytest.raises(ValueError, match="explainer_objective='distil'.*'deletion'"):
        IBAAmortizedScorer(model, layer, explainer, explainer_objective="distil")
    with pytest.raises(ValueError, match="must be one of 'distil', 'deletion'"):
        IBAAmortizedScorer(model, layer, explainer, explainer_objective="noise")
    IBAAmortizedScorer(model, layer, explainer, explainer_objective="deletion")
    saved = {k: v for k, v in explainer.settings.to_dict().items() if k != "options"}
    noise = ExplainerSettings.from_dict(saved)  # the same, on the noise objective
    with pytest.raises(ValueError, match="other settings.*options"):
        AmortizedExplainer.load(tmp_path, model, layer, noise)


def test_deletion_objective_loss_is_its_terms() -> None:
    """deletion_loss by hand: with alpha = 50 at every removable token (all
    kept) the kept term is the clean cross-entropy, and the inverted rows
    (alpha = -50) are the model whose attention towards every removable
    token carries Eq. (R2)'s bias ln sigmoid(-50) = -50 nats, given here as
    an additive attention mask (no hook).

    Not "the model with every removable token deleted": that is the limit
    lambda -> 0 (tests/attr/test_deletion_options.py), and -50 nats is not
    that limit for this model, whose attention logits on the emptied input
    can span more than 50 nats. How far they span depends on the rounding
    of its 200 training steps: the inverted rows' probability differed from
    the deleted model's by 0.9975 for the model of seed 6 here (0 for seeds
    0-5, 7-12) and by 0.995 for seed 0 on AVX-512 kernels (issue 53, item 9);
    the bias by hand holds for every model."""
    from captum_iba.attr._amortized_pass import Passes, unpack
    from captum_iba.attr.amortized_fit import deletion_loss
    from captum_iba.attr.objectives import resolve_objective

    model = bert_signal_model()
    ids, mask, labels = _bert_signal_loader(1)[0].values()
    settings = ExplainerSettings(
        options=DELETION.replace(seed=0), keep=0.5, keep_weight=2.0, hidden=8,
        special_token_ids=(CLS, SEP),
    )  # fmt: skip
    layer = model.bert.embeddings
    passes = Passes(model, layer, [layer])
    batch = unpack({"input_ids": ids, "attention_mask": mask, "labels": labels}, "cpu")
    clean = passes.clean(batch)
    removable = (ids != CLS) & (ids != SEP)
    bottleneck = passes.layer_of(batch, clean, settings.options.prior, settings)
    bottleneck = type(bottleneck)(bottleneck.x, bottleneck.mean, bottleneck.std,
                                  bottleneck.mask, removable)  # fmt: skip
    alpha = torch.full(ids.shape, 50.0)
    objective = resolve_objective("cross_entropy")
    # Eq. (R2) for the inverted rows: ln(lambda) = ln sigmoid(-50) towards
    # every removable token, 0 towards the special ones
    bias = torch.where(removable, F.logsigmoid(-alpha), 0.0)[:, None, None, :]
    with torch.no_grad():
        got = deletion_loss(passes, batch, clean, bottleneck, alpha, labels,
                            objective, settings)  # fmt: skip
        logits = model(ids, mask).logits
        inverted = model(ids, attention_mask=bias).logits
    ce = F.cross_entropy(logits, labels, reduction="none")
    p_inverted = inverted.softmax(-1)[torch.arange(len(labels)), labels]
    budget = 2.0 * (1.0 - 0.5) ** 2
    # float32 (eps 1.2e-7): the same sums in another order (hooks vs the
    # mask) differ by a few ulps of terms of order 1; 1e-5 is ~100 ulps
    torch.testing.assert_close(got, ce + p_inverted + budget, rtol=1e-5, atol=1e-5)
