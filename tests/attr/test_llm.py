"""Generative LLMs through Captum's own LLM API, and batched prompts padded
left or right (issue #10, point 2), on tiny GPT-2 and Llama built from configs."""

import torch
from captum.attr import LLMAttributionResult, TextTokenInput
from captum.testing.helpers.basic import BaseTest, assertTensorAlmostEqual

from captum_iba import InformationBottleneckAttribution
from captum_iba.attr.llm import (
    CausalLMLogLikelihood,
    LLMInformationBottleneckAttribution,
    explain_answers,
    prompt_target_batch,
)
from captum_iba.attr.llm_batch import prompt_batch
from tests.helpers import (
    causal_lm_layers,
    no_hooks,
    tiny_causal_lm,
    tiny_word_tokenizer,
)

FAST = dict(steps=2, n_samples=2, seed=0)
KINDS = ("gpt2", "llama")


class TestCaptumLLMAPI(BaseTest):
    def setUp(self) -> None:
        super().setUp()
        self.tok = tiny_word_tokenizer()

    def test_result_per_output_token(self) -> None:
        for kind in KINDS:
            with self.subTest(kind):
                model = tiny_causal_lm(kind)
                modules = list(model.modules())
                iba = InformationBottleneckAttribution(
                    model, causal_lm_layers(model)[1]
                )
                llm = LLMInformationBottleneckAttribution(iba, self.tok)
                inp = TextTokenInput("the cat sat on the", self.tok)
                res = llm.attribute(inp, target="mat a dog", **FAST)
                self.assertIsInstance(res, LLMAttributionResult)
                self.assertEqual(res.output_tokens, ["mat", "a", "dog"])
                self.assertEqual(tuple(res.token_attr.shape), (3, 5))
                assertTensorAlmostEqual(self, res.seq_attr, res.token_attr.sum(0))
                self.assertTrue((res.token_attr > 0).all())
                self.assertEqual(
                    llm.attr_method.last_run[0]["objective"], "log_probability"
                )
                self.assertEqual(llm.attr_method.last_run[0]["path"], "stack")
                # Captum's plots work on the result
                fig, _ = res.plot_token_attr(show=False)
                fig2, _ = res.plot_seq_attr(show=False)
                import matplotlib.pyplot as plt

                plt.close(fig)
                plt.close(fig2)
                self.assertTrue(no_hooks(model))
                self.assertEqual(list(model.modules()), modules)
                self.assertTrue(all(p.grad is None for p in model.parameters()))

    def test_each_token_matches_iba_on_its_log_probability(self) -> None:
        """token_attr[k] is IBA of log p(target_k | prompt, target_<k) at the
        prompt's positions, summed over features, with the answer so far
        given as it is (not bottlenecked, as Captum's LLMAttribution perturbs
        only the prompt)."""
        model = tiny_causal_lm("gpt2")
        layer = causal_lm_layers(model)[1]
        llm = LLMInformationBottleneckAttribution(
            InformationBottleneckAttribution(model, layer), self.tok
        )
        inp = TextTokenInput("the cat sat", self.tok)
        res = llm.attribute(inp, target="on the", **FAST)
        prompt = self.tok.encode("the cat sat", return_tensors="pt")
        target = self.tok.encode("on the", add_special_tokens=False)
        for k in range(2):
            ids = torch.cat([prompt, torch.tensor([target[:k]], dtype=torch.long)], 1)
            given = torch.zeros_like(ids)
            given[:, :3] = 1  # the prompt is explained; target[:k] is given

            def log_p(x, k=k):
                logits = model(x).logits[:, -1]
                return torch.log_softmax(logits, dim=-1)[:, target[k]]

            attr = InformationBottleneckAttribution(
                log_p, layer, layer_stack=model.transformer.h
            ).attribute(ids, objective="log_probability", token_mask=given, **FAST)
            expected = attr[0, :3].sum(-1)
            assertTensorAlmostEqual(self, res.token_attr[k], expected, 1e-4, "max")

    def test_generated_target_and_skip_tokens(self) -> None:
        model = tiny_causal_lm("llama")
        iba = InformationBottleneckAttribution(model, causal_lm_layers(model)[0])
        llm = LLMInformationBottleneckAttribution(iba, self.tok)
        inp = TextTokenInput("the big dog ran", self.tok, skip_tokens=["the"])
        res = llm.attribute(
            inp, gen_args={"max_new_tokens": 2, "do_sample": False}, **FAST
        )
        self.assertEqual(len(res.output_tokens), 2)
        self.assertEqual(tuple(res.token_attr.shape), (2, 3))  # "the" skipped

    def test_captum_route_equals_the_batch_route(self) -> None:
        # one prompt, one and three output tokens: Captum's API gives what
        # explain_answers gives per output token on the same batch
        model = tiny_causal_lm("llama")
        iba = InformationBottleneckAttribution(model, causal_lm_layers(model)[1])
        llm = LLMInformationBottleneckAttribution(iba, self.tok)
        batch_iba = InformationBottleneckAttribution(
            CausalLMLogLikelihood(model), causal_lm_layers(model)[1]
        )
        for target in ("ran", "ran in the"):
            with self.subTest(target=target):
                res = llm.attribute(TextTokenInput("a dog", self.tok), target, **FAST)
                batch = prompt_batch(self.tok, ["a dog"], [target])
                found = explain_answers(batch_iba, batch, per_token=True, **FAST)
                n = len(target.split())
                self.assertEqual(tuple(res.token_attr.shape), (n, 2))
                assertTensorAlmostEqual(
                    self, res.token_attr, found.tokens[0, :, :2], 1e-3, "max"
                )
                # the answer is never scored
                self.assertEqual(found.tokens[0, :, 2:].abs().sum().item(), 0.0)
                self.assertEqual(found.answer[0, 2:].abs().sum().item(), 0.0)

    def test_the_faithful_configuration_is_the_same_on_both_routes(self) -> None:
        """config="faithful" through Captum's LLM API uses one mask weight per
        token, as llm-iba-faithful does on the batch route (issue 53, item 5:
        the API kept the per-feature mask, which gave SmolLM2 no ranking):
        the same scores on both routes; an explicit mask is kept."""
        from captum_iba.evaluation.iba import IBAScorer

        model = tiny_causal_lm("llama")
        layer = causal_lm_layers(model)[1]
        llm = LLMInformationBottleneckAttribution(
            InformationBottleneckAttribution(model, layer), self.tok
        )
        inp = TextTokenInput("the cat sat on the", self.tok)
        res = llm.attribute(inp, target="mat a", config="faithful", **FAST)
        # what llm-iba-faithful ran before: the mask named
        scorer = IBAScorer(
            model, 1, "faithful", tokenizer=self.tok, mask="token", **FAST
        )
        found = scorer.attribute(
            prompt_batch(self.tok, ["the cat sat on the"], ["mat a"]), per_token=True
        )
        assertTensorAlmostEqual(
            self, res.token_attr, found.tokens[0, :, :5], 1e-4, "max"
        )
        named = IBAScorer(model, 1, "faithful", tokenizer=self.tok, **FAST)
        self.assertEqual(named.options, scorer.options)
        feature = llm.attribute(
            inp, target="mat a", config="faithful", mask="feature", **FAST
        )
        self.assertGreater((feature.token_attr - res.token_attr).abs().max(), 1e-2)

    def test_bad_input(self) -> None:
        model = tiny_causal_lm("gpt2")
        layer = causal_lm_layers(model)[1]
        with self.assertRaisesRegex(TypeError, "causal LM itself"):
            LLMInformationBottleneckAttribution(
                InformationBottleneckAttribution(lambda x: model(x).logits, layer),
                self.tok,
            )
        with self.assertRaisesRegex(TypeError, "attr_method"):
            LLMInformationBottleneckAttribution(object(), self.tok)
        llm = LLMInformationBottleneckAttribution(
            InformationBottleneckAttribution(model, layer), self.tok
        )
        with self.assertRaisesRegex(ValueError, "token_mask"):
            llm.attribute(
                TextTokenInput("a dog", self.tok), target="ran", token_mask=None
            )


class TestBatchedPrompts(BaseTest):
    def setUp(self) -> None:
        super().setUp()
        self.tok = tiny_word_tokenizer()
        self.prompts = ["the cat sat on the", "a dog", "big red"]
        self.targets = ["mat", "ran in the park", "dog is very small"]

    def test_batch(self) -> None:
        b = prompt_target_batch(self.tok, ["a dog"], ["ran in"], padding_side="right")
        ids = self.tok.convert_tokens_to_ids(["a", "dog", "ran", "in"])
        self.assertEqual(b["input_ids"].tolist(), [ids])
        self.assertEqual(b["labels"].tolist(), [[-100, -100, ids[2], ids[3]]])
        with self.assertRaisesRegex(ValueError, "padding_side"):
            prompt_target_batch(self.tok, ["a"], ["b"], padding_side="middle")
        with self.assertRaisesRegex(ValueError, "equal length"):
            prompt_target_batch(self.tok, ["a", "b"], ["c"])
        with self.assertRaisesRegex(TypeError, "sequences"):
            prompt_target_batch(self.tok, "a", "b")

    def test_log_likelihood_is_padding_invariant(self) -> None:
        for kind in KINDS:
            model = tiny_causal_lm(kind)
            wrapped = CausalLMLogLikelihood(model)
            scores = []
            for side in ("left", "right"):
                b = prompt_target_batch(self.tok, self.prompts, self.targets, side)
                scores.append(wrapped(**b))
            alone = torch.cat(
                [
                    wrapped(**prompt_target_batch(self.tok, [p], [t]))
                    for p, t in zip(self.prompts, self.targets)
                ]
            )
            for s in scores:
                assertTensorAlmostEqual(self, s, alone, 1e-4, "max")
            self.assertTrue((alone < 0).all())

    def test_iba_batch_invariant_left_and_right(self) -> None:
        for kind in KINDS:
            model = tiny_causal_lm(kind)
            layer = causal_lm_layers(model)[1]
            iba = InformationBottleneckAttribution(CausalLMLogLikelihood(model), layer)
            alone = []
            for p, t in zip(self.prompts, self.targets):
                b = prompt_target_batch(self.tok, [p], [t])
                alone.append(
                    iba.attribute(
                        b["input_ids"],
                        additional_forward_args=(b["attention_mask"], b["labels"]),
                        **FAST,
                    )[0]
                )
            for side in ("left", "right"):
                with self.subTest(kind=kind, side=side):
                    b = prompt_target_batch(self.tok, self.prompts, self.targets, side)
                    attr = iba.attribute(
                        b["input_ids"],
                        additional_forward_args=(b["attention_mask"], b["labels"]),
                        **FAST,
                    )
                    self.assertEqual(iba.last_run[0]["objective"], "score")
                    real = b["attention_mask"].bool()
                    self.assertEqual(attr[~real].abs().sum().item(), 0.0)
                    for i, ref in enumerate(alone):
                        assertTensorAlmostEqual(
                            self, attr[i][real[i]], ref, 1e-4, "max"
                        )


class TestDegenerateTargets(BaseTest):
    """Issue 20, item 8: an empty continuation, ids outside the vocabulary
    and a prompt with continuation past the model's positions are refused
    with one line naming them; the model is left as it was."""

    def test_each_is_refused_before_any_forward(self) -> None:
        tok = tiny_word_tokenizer()
        cases = [
            ("", ValueError, "target '' has no token"),
            ("   ", ValueError, "has no token"),
            (torch.tensor([], dtype=torch.long), ValueError, "holds no token id"),
            (torch.tensor([3, 500]), ValueError, "token id 500, outside .* 0..19"),
            (torch.tensor([-1]), ValueError, "token id -1, outside"),
            (torch.tensor([[3, 4]]), TypeError, r"1-D integer Tensor, got shape"),
            (torch.tensor([3.0]), TypeError, "1-D integer Tensor"),
            (" ".join(["cat"] * 40), ValueError, "need 44 positions, more than .* 32"),
        ]
        for kind in KINDS:
            model = tiny_causal_lm(kind)
            modules = list(model.modules())
            llm = LLMInformationBottleneckAttribution(
                InformationBottleneckAttribution(model, causal_lm_layers(model)[1]),
                tok,
            )
            inp = TextTokenInput("the cat sat on the", tok)
            for target, error, says in cases:
                with self.subTest(kind=kind, target=target):
                    with self.assertRaisesRegex(error, says):
                        llm.attribute(inp, target=target, **FAST)
            long = TextTokenInput(" ".join(["cat"] * 40), tok)
            with self.assertRaisesRegex(ValueError, "prompt \\(40 tokens\\)"):
                llm.attribute(long, target="mat", **FAST)
            self.assertTrue(no_hooks(model))
            self.assertEqual(list(model.modules()), modules)
            # at the limit: 30 + 3 - 1 positions run, 30 + 4 - 1 do not
            edge = TextTokenInput(" ".join(["cat"] * 30), tok)
            with self.assertRaisesRegex(ValueError, "need 33 positions"):
                llm.attribute(edge, target="the cat sat on", **FAST)
            res = llm.attribute(edge, target="the cat sat", **FAST)
            self.assertEqual(tuple(res.token_attr.shape), (3, 30))


def test_a_mask_readout_is_in_the_classifiers_range() -> None:
    """llm-iba-deletion and llm-iba-faithful read a token's mask as the
    classifiers' scorers do - its mean over the features, in [0, 1] - where
    the batch route summed it over the hidden size (SmolLM2: hundreds); the
    paper's capacity stays summed, in nats."""
    from captum_iba.evaluation.iba import IBAScorer

    model, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    batch = prompt_batch(tok, ["the cat sat on the", "a dog"], [" mat", " ran in"])
    for config, layer in (("deletion", "embeddings"), ("faithful", None)):
        scorer = IBAScorer(model, layer, config, tokenizer=tok, steps=3)
        found = scorer.attribute(batch, per_token=True)
        assert found.unit == "signal" and found.tokens is not None
        for values in (found.answer[batch.scored], found.tokens[:, 0][batch.scored]):
            assert ((values >= 0) & (values <= 1)).all(), (config, values)
        assert (found.answer[batch.scored] > 0.05).any()  # not all zero
    paper = IBAScorer(model, 1, "paper", tokenizer=tok, steps=3)
    assert paper.attribute(batch).unit == "nats"
    assert no_hooks(model)


def test_the_deletion_configuration_keeps_its_complement_on_a_causal_lm() -> None:
    """A causal LM's "deletion" keeps the complement term at every step (the
    classifiers' default leaves it out at the last step, measured on SST-2
    only); a call that sets complement_skip, and "faithful"'s token mask,
    are as before."""
    from captum_iba.attr.llm import llm_options
    from captum_iba.attr.options import CONFIGS

    assert CONFIGS.load("deletion").complement_skip == 1
    assert llm_options({"config": "deletion"})["complement_skip"] == 0
    assert llm_options({"config": "Deletion", "complement_skip": 2}) == {
        "config": "Deletion",
        "complement_skip": 2,
    }
    assert llm_options({"config": "faithful"})["mask"] == "token"
    assert llm_options({"config": "faithful", "mask": "feature"})["mask"] == "feature"
