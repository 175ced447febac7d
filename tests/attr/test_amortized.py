"""Amortized IBA: fit, masks on a task with a known relevant token, the store."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from captum.testing.helpers.basic import BaseTest, assertTensorAlmostEqual

from captum_iba.attr.amortized import (
    AmortizedExplainer,
    AmortizedInformationBottleneckAttribution,
)
from captum_iba.attr.amortized_store import CHECKPOINT_RECORD, RECORD, WEIGHTS
from captum_iba.attr.explainer import ExplainerSettings
from tests.helpers import MeanPoolModel, no_hooks, tiny_hf_model

ROOT = Path(__file__).resolve().parents[2]
LENGTH = 8


def signal_data(n: int, gen: torch.Generator):
    """Random filler tokens (3..29) with one signal token at a random position:
    token 1 means class 0, token 2 class 1; nothing else carries the label."""
    ids = torch.randint(3, 30, (n, LENGTH), generator=gen)
    pos = torch.randint(0, LENGTH, (n,), generator=gen)
    labels = torch.randint(0, 2, (n,), generator=gen)
    ids[torch.arange(n), pos] = 1 + labels
    return ids, torch.ones_like(ids), labels, pos


def signal_model(seed: int = 0) -> MeanPoolModel:
    """A small classifier trained on :func:`signal_data` until it is right."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = MeanPoolModel(vocab=30, dim=8, classes=2)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(200):
        ids, mask, labels, _ = signal_data(64, gen)
        loss = torch.nn.functional.cross_entropy(model(ids, mask), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.zero_grad(set_to_none=True)
    return model.eval()


def loader(n_batches: int, seed: int = 1):
    gen = torch.Generator().manual_seed(seed)
    return [signal_data(16, gen)[:3] for _ in range(n_batches)]


def quick_fit(model, folder=None, data=None, every=60.0, **options):
    options = {"epochs": 1, "lr": 1e-2, "hidden": 16, **options}
    return AmortizedExplainer.fit(
        model, model.layers[0], data if data is not None else loader(4),
        folder=folder, show_progress=False, checkpoint_seconds=every, **options,
    )  # fmt: skip


class TestAmortizedMasks(BaseTest):
    def test_masks_find_the_relevant_token_far_above_random(self) -> None:
        model = signal_model()
        ids, mask, labels, pos = signal_data(300, torch.Generator().manual_seed(7))
        self.assertEqual((model(ids, mask).argmax(-1) == labels).float().mean(), 1.0)
        explainer = quick_fit(model, data=loader(12), epochs=3)
        aiba = AmortizedInformationBottleneckAttribution(
            model, model.layers[0], explainer
        )
        attr = aiba.attribute(ids, target=labels, additional_forward_args=(mask,))
        self.assertEqual(tuple(attr.shape), (300, LENGTH, 8))
        top = attr.sum(-1).argmax(-1)
        # random scores put the signal token first 1 time in 8
        self.assertGreater((top == pos).float().mean().item(), 0.5)

    def test_budget_and_complement_terms_act(self) -> None:
        """The keep budget pulls the mean mask to its target; the complement
        term (the class's probability with the mask inverted) trains too."""
        model = signal_model()
        data = loader(8)
        kept = quick_fit(model, data=data, epochs=3, keep=0.25, keep_weight=50.0)
        self.assertLess(abs(kept.stats["mean_lambda"] - 0.25), 0.1)
        both = quick_fit(model, data=data, keep=0.25, complement=1.0)
        self.assertEqual(both.settings.options.complement, 1.0)
        self.assertIn("complement=1", both.settings.budget())
        self.assertNotEqual(both.key["settings"], kept.key["settings"])

    def test_distillation_follows_the_teacher(self) -> None:
        """Distilled alone, the explainer's masks rank tokens as the per-sample
        teacher's do (iba-faithful's options) on instances it was not fit on."""
        from captum_iba.attr.amortized_fit import make_teacher
        from captum_iba.evaluation.amortized import faithful_teacher

        model = signal_model()
        teacher = faithful_teacher()
        explainer = quick_fit(
            model, data=loader(12), epochs=6, keep=None, distil=1.0,
            distil_only=True, teacher=teacher,
        )  # fmt: skip
        ids, mask, labels, _ = signal_data(40, torch.Generator().manual_seed(5))
        aiba = AmortizedInformationBottleneckAttribution(
            model, model.layers[0], explainer
        )
        student = aiba.attribute(ids, labels, (mask,)).mean(-1)
        from captum_iba.attr._amortized_pass import Batch

        goal = make_teacher(model, model.layers[0], explainer.settings)(
            Batch(ids, (mask,), mask.bool(), labels), labels
        )
        same_top = (student.argmax(-1) == goal.argmax(-1)).float().mean().item()
        self.assertGreater(same_top, 0.5)  # random agreement: 1 in 8

    def test_refinement_runs_from_the_amortized_mask(self) -> None:
        model = signal_model()
        explainer = quick_fit(model)
        aiba = AmortizedInformationBottleneckAttribution(
            model, model.layers[0], explainer
        )
        ids, mask, labels, _ = signal_data(4, torch.Generator().manual_seed(3))
        mask[0, -2:] = 0
        extra = (mask,)
        plain = aiba.attribute(ids, labels, extra)
        refined = aiba.attribute(ids, labels, extra, refine_steps=2, seed=0)
        again = aiba.attribute(ids, labels, extra, refine_steps=2, seed=0)
        assertTensorAlmostEqual(self, refined, again)
        self.assertFalse(torch.allclose(plain, refined))
        self.assertEqual(aiba.last_run["refine_steps"], 2)
        for attr in (plain, refined):
            self.assertTrue(bool((attr[0, -2:] == 0).all()))
            self.assertTrue(bool(((attr[0, :-2] > 0) & (attr[0, :-2] < 1)).all()))

    def test_refinement_options_without_refinement_are_refused(self) -> None:
        """Issue 31, item 6: beta, n_samples, seed, lr were ignored with
        refine_steps=0."""
        model = signal_model()
        aiba = AmortizedInformationBottleneckAttribution(
            model, model.layers[0], quick_fit(model)
        )
        ids, mask, labels, _ = signal_data(2, torch.Generator().manual_seed(3))
        for given in ({"beta": 0.1}, {"n_samples": 3}, {"seed": 1}, {"lr": 0.5},
                      {"baselines": ids}):  # fmt: skip
            with self.subTest(**{k: str(v)[:8] for k, v in given.items()}):
                with self.assertRaisesRegex(
                    ValueError,
                    f"{next(iter(given))}: the refinement's options act "
                    "only with refine_steps > 0",
                ):
                    aiba.attribute(ids, labels, (mask,), **given)
        plain = aiba.attribute(ids, labels, (mask,))
        one = aiba.attribute(ids, labels, (mask,), refine_steps=1, beta=0.1, lr=0.5)
        other = aiba.attribute(ids, labels, (mask,), refine_steps=1)
        self.assertFalse(torch.allclose(one, other))  # they act when refining
        self.assertFalse(torch.allclose(plain, other))

    def test_model_unchanged_and_no_hook_left(self) -> None:
        model = signal_model()
        model.train()
        before = {k: v.clone() for k, v in model.state_dict().items()}
        explainer = quick_fit(model)
        aiba = AmortizedInformationBottleneckAttribution(
            model, model.layers[0], explainer
        )
        ids, mask, labels, _ = signal_data(3, torch.Generator().manual_seed(2))
        aiba.attribute(ids, labels, (mask,), refine_steps=1)
        self.assertTrue(model.training)
        self.assertTrue(no_hooks(model))
        for name, p in model.named_parameters():
            self.assertIsNone(p.grad, name)
            self.assertTrue(p.requires_grad, name)
        for key, value in model.state_dict().items():
            assertTensorAlmostEqual(self, value, before[key], delta=0.0)


class TestAmortizedStore(BaseTest):
    def setUp(self) -> None:
        self.model = signal_model()
        self.ids, self.mask, self.labels, _ = signal_data(
            5, torch.Generator().manual_seed(9)
        )

    def _attr(self, explainer, model=None):
        model = model or self.model
        aiba = AmortizedInformationBottleneckAttribution(
            model, model.layers[0], explainer
        )
        return aiba.attribute(self.ids, self.labels, (self.mask,))

    def test_save_load_round_trip(self) -> None:
        with self.subTest(), _tmp() as tmp:
            explainer = quick_fit(self.model, folder=tmp)
            record = json.loads((tmp / RECORD).read_text())
            self.assertEqual(
                record["files"][WEIGHTS]["size"], (tmp / WEIGHTS).stat().st_size
            )
            self.assertEqual(len(record["files"][WEIGHTS]["sha256"]), 64)
            loaded = AmortizedExplainer.load(tmp, self.model, self.model.layers[0])
            assertTensorAlmostEqual(self, self._attr(loaded), self._attr(explainer))
            self.assertEqual(loaded.settings, explainer.settings)
            # a second fit with the same key loads instead of fitting
            again = quick_fit(self.model, folder=tmp, data=[])
            assertTensorAlmostEqual(self, self._attr(again), self._attr(explainer))

    def test_explainer_saved_by_version_0_2_loads(self) -> None:
        """A folder as version 0.2 wrote it (flat settings in the key, in the
        record and the weights' metadata) loads, also when the caller's
        settings are given and when a fit finds it."""
        from captum_iba.attr import amortized_store as store

        explainer = quick_fit(self.model)
        settings = explainer.settings
        flat = {
            "hidden": 16, "beta": 1e-05, "keep": None, "keep_weight": 10.0,
            "distil": 0.0, "distil_only": False, "complement": 0.0,
            "teacher": None, "epochs": 1, "lr": 0.01, "n_samples": 2,
            "target": "label", "prior": "baseline", "pad_token_id": 0,
            "special_token_ids": [], "readout": list(settings.readout), "seed": 0,
        }  # fmt: skip
        key = dict(explainer.key, settings=flat)
        shape = {"widths": [8, 8], "n_classes": 2}
        state = explainer.network.state_dict()
        with _tmp() as tmp:
            store.write_explainer(tmp, state, key, shape, explainer.stats)
            layer = self.model.layers[0]
            loaded = AmortizedExplainer.load(tmp, self.model, layer, settings)
            self.assertEqual(loaded.settings, settings)
            assertTensorAlmostEqual(self, self._attr(loaded), self._attr(explainer))
            again = quick_fit(self.model, folder=tmp, data=[])  # found, not fitted
            self.assertEqual(again.settings, settings)

    def test_stale_explainer_refused(self) -> None:
        with _tmp() as tmp:
            quick_fit(self.model, folder=tmp)
            other = signal_model()
            with torch.no_grad():
                other.head.bias.add_(1e-3)
            with self.assertRaisesRegex(ValueError, "other model weights"):
                AmortizedExplainer.load(tmp, other, other.layers[0])
            with self.assertRaisesRegex(ValueError, "layers.0.*not.*layers.1"):
                AmortizedExplainer.load(tmp, self.model, self.model.layers[1])
            settings = ExplainerSettings(epochs=2, network_lr=1e-2, hidden=16)
            with self.assertRaisesRegex(ValueError, "other settings.*epochs"):
                AmortizedExplainer.load(tmp, self.model, self.model.layers[0], settings)
            with self.assertRaisesRegex(ValueError, "other settings"):
                quick_fit(self.model, folder=tmp, epochs=2)
            explainer = AmortizedExplainer.load(tmp, self.model, self.model.layers[0])
            with self.assertRaisesRegex(ValueError, "other model weights"):
                AmortizedInformationBottleneckAttribution(
                    other, other.layers[0], explainer
                )

    def test_damaged_or_truncated_files_are_named(self) -> None:
        with _tmp() as tmp:
            quick_fit(self.model, folder=tmp)
            weights = tmp / WEIGHTS
            data = weights.read_bytes()
            weights.write_bytes(data[:-7])
            with self.assertRaisesRegex(ValueError, f"{WEIGHTS}.*bytes.*truncated"):
                AmortizedExplainer.load(tmp, self.model, self.model.layers[0])
            weights.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
            with self.assertRaisesRegex(ValueError, f"{WEIGHTS}.*SHA-256"):
                AmortizedExplainer.load(tmp, self.model, self.model.layers[0])
            weights.write_bytes(data)
            (tmp / RECORD).write_text("{not json")
            with self.assertRaisesRegex(ValueError, f"{RECORD}.*damaged"):
                AmortizedExplainer.load(tmp, self.model, self.model.layers[0])
            (tmp / RECORD).unlink()
            with self.assertRaisesRegex(FileNotFoundError, "no fitted explainer"):
                AmortizedExplainer.load(tmp, self.model, self.model.layers[0])

    def test_ctrl_c_leaves_a_checkpoint_not_an_explainer_then_resumes(self) -> None:
        data = loader(4)

        def interrupted():
            for i, batch in enumerate(data):
                if i == 3:
                    raise KeyboardInterrupt
                yield batch

        with _tmp() as tmp:
            with self.assertRaises(KeyboardInterrupt):
                quick_fit(self.model, folder=tmp, data=_Sized(interrupted, 4))
            self.assertFalse((tmp / RECORD).exists())
            self.assertTrue((tmp / CHECKPOINT_RECORD).exists())
            with self.assertRaisesRegex(FileNotFoundError, "unfinished fit"):
                AmortizedExplainer.load(tmp, self.model, self.model.layers[0])
            resumed = quick_fit(self.model, folder=tmp, data=data)
            self.assertEqual(resumed.stats["steps"], 4)
            self.assertEqual(resumed.stats["instances"], 16)  # one batch left
            self.assertFalse((tmp / CHECKPOINT_RECORD).exists())
            fresh = quick_fit(self.model, data=data)
            assertTensorAlmostEqual(self, self._attr(resumed), self._attr(fresh))

    def test_kill_9_leaves_nothing_taken_for_an_explainer(self) -> None:
        with _tmp() as tmp:
            script = _KILLED_FIT.format(root=str(ROOT), folder=str(tmp))
            proc = subprocess.run([sys.executable, "-c", script], timeout=300)
            self.assertEqual(proc.returncode, -9)
            self.assertFalse((tmp / RECORD).exists())
            with self.assertRaises(FileNotFoundError):
                AmortizedExplainer.load(tmp, self.model, self.model.layers[0])
            finished = quick_fit(self.model, folder=tmp)  # resumes or restarts
            self.assertTrue((tmp / RECORD).exists())
            self.assertEqual(finished.stats["steps"], 4)


class TestAmortizedInputs(BaseTest):
    def test_bad_settings_and_data(self) -> None:
        with self.assertRaisesRegex(ValueError, "keep must be in"):
            ExplainerSettings(keep=1.5)
        with self.assertRaisesRegex(ValueError, "needs teacher"):
            ExplainerSettings(distil=1.0)
        with self.assertRaisesRegex(ValueError, "epochs must be an int"):
            ExplainerSettings(epochs=0)
        model = signal_model()
        with self.assertRaisesRegex(ValueError, "no batch"):
            quick_fit(model, data=[])
        ids = torch.zeros(2, 4, dtype=torch.long)
        with self.assertRaisesRegex(ValueError, "attention_mask"):
            quick_fit(model, data=[{"input_ids": ids}])
        with self.assertRaisesRegex(ValueError, "not a module of the model"):
            AmortizedExplainer.fit(model, torch.nn.Linear(2, 2), loader(1))

    def test_hf_bert_fit_attribute_and_scorer(self) -> None:
        from captum_iba.evaluation import IBAAmortizedScorer, scorer_class

        model = tiny_hf_model("bert", layers=2)
        layer = model.bert.encoder.layer[0]
        gen = torch.Generator().manual_seed(0)
        ids = torch.randint(5, 60, (6, 7), generator=gen)
        ids[:, 0], ids[:, -1] = 1, 2
        mask = torch.ones_like(ids)
        mask[0, 4:] = 0
        ids[0, 4:] = 0
        batches = [{"input_ids": ids, "attention_mask": mask, "labels": ids[:, 1] % 2}]
        explainer = AmortizedExplainer.fit(
            model, layer, batches, hidden=8, epochs=2, show_progress=False,
            pad_token_id=0, special_token_ids=[1, 2],
        )  # fmt: skip
        self.assertEqual(
            explainer.settings.readout, ("bert.encoder.layer.0", "bert.encoder.layer.1")
        )
        aiba = AmortizedInformationBottleneckAttribution(model, layer, explainer)
        attr = aiba.attribute(ids, additional_forward_args=(mask,), refine_steps=1)
        self.assertEqual(tuple(attr.shape), (6, 7, 16))
        self.assertTrue(bool((attr[0, 4:] == 0).all()))
        self.assertEqual(aiba.last_run["path"][0], "stack")
        self.assertIs(scorer_class("iba-amortized"), IBAAmortizedScorer)
        scorer = IBAAmortizedScorer(model, layer, explainer, pad_token_id=0)
        scores = scorer.attribute(ids, attention_mask=mask)
        self.assertEqual(tuple(scores.shape), (6, 7))
        self.assertTrue(bool((scores[0, 4:] == 0).all()))
        self.assertTrue(no_hooks(model))


class _Sized:
    """An iterable with a length (a loader) built from a generator function."""

    def __init__(self, make, n):
        self.make, self.n = make, n

    def __len__(self):
        return self.n

    def __iter__(self):
        return self.make()


class _tmp:
    """A temporary folder as a Path (context manager)."""

    def __enter__(self) -> Path:
        import tempfile

        self._dir = tempfile.TemporaryDirectory()
        return Path(self._dir.name)

    def __exit__(self, *exc) -> None:
        self._dir.cleanup()


_KILLED_FIT = """
import os, signal, sys
sys.path.insert(0, {root!r})
import torch
from tests.attr.test_amortized import loader, quick_fit, signal_model
import captum_iba.attr.amortized_store as store

model = signal_model()
write = store.write_checkpoint
def killed(*args, **kwargs):
    write(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)   # right after the first checkpoint
store.write_checkpoint = killed
import captum_iba.attr.amortized_fit as fit
fit.store.write_checkpoint = killed
quick_fit(model, folder={folder!r}, data=loader(4), every=0.0)
"""


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_fit_keeps_checkpoints_out_of_a_finished_folder(tmp_path) -> None:
    model = signal_model()
    quick_fit(model, folder=tmp_path)
    assert sorted(os.listdir(tmp_path)) == [RECORD, WEIGHTS]
