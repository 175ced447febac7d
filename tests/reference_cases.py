"""Scores of every method and IBA path on tiny seeded models: the identity
check of refactors (``tests/test_reference_scores.py``).

``python -m tests.reference_cases`` writes ``tests/reference_scores.json``
with the current code; the test recomputes every case and compares. A change
that is a refactor keeps every case equal (bit for bit on the machine that
wrote the file; within float tolerance on another CPU).
"""

import json
import warnings
from pathlib import Path
from typing import Callable, Dict, List

import torch

from tests.helpers import bert_tokenizer, tiny_bert

FILE = Path(__file__).with_name("reference_scores.json")

WORDS = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "movie", "was", "great",
    "bad", "play", "##ing", "!", ",", ".", "i", "liked", "it", "not", "a",
]  # fmt: skip


def _setup():
    torch.manual_seed(0)
    tok = bert_tokenizer(WORDS)
    model = tiny_bert(len(WORDS), seed=3, pad_token_id=0)
    enc = tok(
        ["the movie was great!", "playing it", "not bad , i liked it ."],
        padding=True,
        return_tensors="pt",
    )
    pair = tok(
        ["the movie was great!", "playing it"],
        ["i liked it", "not bad"],
        padding=True,
        return_tensors="pt",
    )
    return model, tok, enc, pair


def _scorer_case(method: str, **kwargs) -> Callable[..., torch.Tensor]:
    def run(model, tok, enc, pair) -> torch.Tensor:
        from captum_iba.evaluation import make_scorers

        scorer = make_scorers(model, tok, "fair", methods=[method], **kwargs)[method]
        out = []
        for batch in (enc, pair):
            out.append(
                scorer.attribute(
                    batch["input_ids"],
                    target=torch.tensor([1, 0, 1][: batch["input_ids"].shape[0]]),
                    attention_mask=batch["attention_mask"],
                    token_type_ids=batch["token_type_ids"],
                ).flatten()
            )
        return torch.cat(out)

    return run


def _iba_case(layer: str, **kwargs) -> Callable[..., torch.Tensor]:
    def run(model, tok, enc, pair) -> torch.Tensor:
        from captum_iba import InformationBottleneckAttribution

        build = {
            k: kwargs.pop(k) for k in ("layer_stack", "cuts") if k in kwargs
        }  # constructor options
        module = (
            model.bert.embeddings
            if layer == "embeddings"
            else model.bert.encoder.layer[int(layer)]
        )
        iba = InformationBottleneckAttribution(
            model, module, special_token_ids=tok.all_special_ids, **build
        )
        attr = iba.attribute(
            enc["input_ids"],
            target=torch.tensor([1, 0, 1]),
            additional_forward_args=(enc["attention_mask"],),
            seed=0,
            **dict(kwargs),
        )
        return attr.sum(-1).flatten()

    return run


def _amortized_case(refine_steps: int, teacher: str) -> Callable[..., torch.Tensor]:
    def run(model, tok, enc, pair) -> torch.Tensor:
        from captum_iba.attr.amortized import AmortizedInformationBottleneckAttribution
        from captum_iba.evaluation.amortized import fit_amortized

        layer = (
            model.bert.embeddings
            if teacher == "deletion"
            else model.bert.encoder.layer[0]
        )
        data = [
            {
                "input_ids": enc["input_ids"],
                "attention_mask": enc["attention_mask"],
                "labels": torch.tensor([1, 0, 1]),
            }
        ]
        torch.manual_seed(0)
        explainer = fit_amortized(
            model, layer, data, tok, show_progress=False, hidden=8, teacher=teacher
        )
        aiba = AmortizedInformationBottleneckAttribution(model, layer, explainer)
        attr = aiba.attribute(
            enc["input_ids"],
            target=torch.tensor([1, 0, 1]),
            additional_forward_args=(enc["attention_mask"],),
            refine_steps=refine_steps,
            **({"n_samples": 2} if refine_steps else {}),  # refinement only
        )
        return attr.sum(-1).flatten()

    return run


def _llm_case() -> torch.Tensor:
    from transformers import GPT2Config, GPT2LMHeadModel

    from captum_iba import InformationBottleneckAttribution
    from captum_iba.attr.llm import CausalLMLogLikelihood, prompt_target_batch

    torch.manual_seed(4)
    model = GPT2LMHeadModel(
        GPT2Config(vocab_size=40, n_embd=16, n_layer=2, n_head=2, n_positions=32)
    ).eval()
    tok = bert_tokenizer(WORDS)  # any tokenizer with a pad id serves here
    batch = prompt_target_batch(tok, ["the movie was", "i liked"], ["great", "it"])
    ids, mask, labels = batch["input_ids"], batch["attention_mask"], batch["labels"]
    iba = InformationBottleneckAttribution(
        CausalLMLogLikelihood(model), model.transformer.h[0]
    )
    attr = iba.attribute(
        ids, additional_forward_args=(mask, labels), steps=3, n_samples=2, seed=0
    )
    return attr.sum(-1).flatten()


def _llm_scorer_case(method: str, kind: str) -> torch.Tensor:
    """One method's scores of a tiny causal LM's prompts, whole answer and per
    output token (where it gives them), through the evaluation's scorers."""
    from captum_iba.attr.llm_batch import prompt_batch
    from captum_iba.evaluation import Resources, build_scorers
    from captum_iba.request import check_request
    from tests.helpers import light_options, tiny_causal_lm, tiny_word_tokenizer

    model, tok = tiny_causal_lm(kind, seed=5), tiny_word_tokenizer()
    request = check_request(
        [method], light_options(method), None, model_kind="causal-lm"
    )
    scorer = build_scorers(request, Resources(model, tok))[method]
    batch = prompt_batch(
        tok, ["the cat sat on the mat", "a dog ran"], [" is big", " in park"]
    )
    found = scorer.attribute(batch, per_token=True)
    out = [found.answer.flatten()]
    if found.tokens is not None:
        out.append(found.tokens.flatten())
    return torch.cat(out)


#: The methods whose causal-LM scores are recorded (AttnLRP needs lxt, which
#: transformers 5 cannot import).
LLM_METHODS = (
    "random", "IBA", "iba-faithful", "iba-deletion", "IG", "LOO", "shapley",
    "LIME", "kernel-shap", "saliency", "input-x-gradient",
)  # fmt: skip


def cases() -> Dict[str, Callable[..., torch.Tensor]]:
    """Case name -> function of (model, tokenizer, batch, pair batch)."""
    quick = {"steps": 3, "n_samples": 2}
    out: Dict[str, Callable[..., torch.Tensor]] = {
        "scorer/random": _scorer_case("random"),
        "scorer/IG": _scorer_case("IG", method_options={"IG": {"n_steps": 8}}),
        "scorer/LIME": _scorer_case("LIME", method_options={"LIME": {"n_samples": 40}}),
        "scorer/LIME-text": _scorer_case(
            "LIME-text", method_options={"LIME-text": {"n_samples": 40}}
        ),
        "scorer/IBA": _scorer_case("IBA", layer=0, method_options={"IBA": quick}),
        "scorer/IBA-reference": _scorer_case(
            "IBA", layer=1, prior="reference", method_options={"IBA": quick}
        ),
        "scorer/iba-faithful": _scorer_case(
            "iba-faithful", layer=0, method_options={"iba-faithful": quick}
        ),
        "scorer/iba-deletion": _scorer_case(  # its default precision, "auto",
            # is bf16 on a CPU with native bf16: float32 here, as recorded
            "iba-deletion",
            method_options={"iba-deletion": {"steps": 3, "precision": "float32"}},
        ),
        "scorer/LOO": _scorer_case("LOO"),
        "scorer/occlusion": _scorer_case("occlusion"),
        "scorer/occlusion-mask": _scorer_case("occlusion-mask"),
        "scorer/grad-x-act": _scorer_case("grad-x-act"),
        "scorer/kernel-shap": _scorer_case(
            "kernel-shap", method_options={"kernel-shap": {"n_samples": 20}}
        ),
        "scorer/shapley": _scorer_case(
            "shapley", method_options={"shapley": {"n_samples": 2}}
        ),
        "scorer/saliency": _scorer_case("saliency"),
        "scorer/input-x-gradient": _scorer_case("input-x-gradient"),
        "iba/paper-stack": _iba_case("0", **quick),
        "iba/paper-hooks": _iba_case("0", layer_stack=False, **quick),
        "iba/paper-nocuts": _iba_case("1", cuts=False, **quick),
        "iba/paper-auto-beta": _iba_case("0", beta="auto", **quick),
        "iba/reference-input": _iba_case(
            "1", prior="paper", attribute_to_layer_input=True, **quick
        ),
        "iba/faithful": _iba_case("0", config="faithful", steps=3),
        "iba/faithful-chunked": _iba_case(
            "0", config="faithful", steps=3, internal_batch_size=5
        ),
        "iba/deletion": _iba_case("embeddings", config="deletion", steps=3),
        "iba/deletion-layer0": _iba_case("0", config="deletion", steps=3),
        "amortized/deletion": _amortized_case(0, "deletion"),
        "amortized/faithful-refined": _amortized_case(2, "faithful"),
    }
    return out


def compute() -> Dict[str, List[float]]:
    """Every case's scores, as lists of floats."""
    model, tok, enc, pair = _setup()
    results = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, case in cases().items():
            torch.manual_seed(0)
            results[name] = case(model, tok, enc, pair).double().tolist()
        torch.manual_seed(0)
        results["llm/gpt2"] = _llm_case().double().tolist()
        for kind in ("llama", "gpt2"):
            for method in LLM_METHODS:
                torch.manual_seed(0)
                found = _llm_scorer_case(method, kind)
                results[f"llm-scorer/{kind}/{method}"] = found.double().tolist()
    return results


if __name__ == "__main__":  # pragma: no cover
    torch.set_num_threads(1)
    FILE.write_text(json.dumps(compute(), indent=0) + "\n")
    print(f"wrote {FILE}")
