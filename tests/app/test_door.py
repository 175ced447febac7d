"""Issue 88, the door: a model of no kind the package explains (another
head: token classification, masked LM, question answering, multiple choice;
an encoder-decoder; a vision model; a module without a configuration) is
refused with one line naming what it is and what the package explains - from
the command line before any weights load (a folder with only its
configuration and tokenizer, and every loader failing the test if called),
from Python before any work (the model's forward failing the test if
called). A folder saved without ``architectures`` is judged by its
``model_type`` and, where that cannot tell, by the weights its head lacks."""

import json
import subprocess
import sys

import pytest

from captum_iba import explain
from captum_iba.app.cli import main
from captum_iba.app.llm_explanation import explain_answer
from captum_iba.attr.kinds import NotExplainedError
from tests.helpers import (
    OTHER_HEADS,
    PlainClassifier,
    forward_fails,
    other_head_config,
    other_head_model,
    tiny_word_tokenizer,
)

#: What every refusal says the package explains.
EXPLAINED = ("...ForSequenceClassification", "...ForCausalLM")


@pytest.fixture
def no_weights(monkeypatch):
    """Fails a test that loads any model's weights."""
    import transformers

    def refuse(*args, **kwargs):
        raise AssertionError("the weights were loaded")

    for auto in ("AutoModelForCausalLM", "AutoModelForSequenceClassification"):
        monkeypatch.setattr(getattr(transformers, auto), "from_pretrained", refuse)
    monkeypatch.setattr(transformers.PreTrainedModel, "from_pretrained", refuse)


def _config_folder(folder, name, architectures=True):
    """A folder with ``name``'s config.json and a tokenizer, and no weights."""
    config = other_head_config(name)
    if not architectures:
        config.architectures = None
    config.save_pretrained(folder)
    tiny_word_tokenizer().save_pretrained(folder)
    assert not list(folder.glob("*.safetensors")) and not list(folder.glob("*.bin"))
    return str(folder)


def _refused(argv, capsys):
    """The command's one line of error, with exit code 2."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2, err  # (a loaded weight: exit 1, AssertionError)
    assert len(err.strip().splitlines()) == 1, err
    return err


def _says(message, cls):
    assert cls in message, message
    assert all(e in message for e in EXPLAINED), message


@pytest.mark.parametrize("command", ["explain", "evaluate"])
@pytest.mark.parametrize("name", list(OTHER_HEADS))
def test_the_cli_refuses_another_head_before_any_weights(
    name, command, tmp_path, no_weights, capsys
):
    folder = _config_folder(tmp_path / name, name)
    argv = [command, "the cat sat"] if command == "explain" else [command]
    err = _refused(argv + ["--model", folder], capsys)
    _says(err, OTHER_HEADS[name][0])
    assert folder in err, err


@pytest.mark.parametrize(
    "name, said",
    [
        ("t5-encoder-decoder", "'t5', no architectures) is an encoder-decoder"),
        ("vit-image-classification", "model_type 'vit', no architectures"),
    ],
)  # fmt: skip
def test_the_cli_refuses_by_model_type_without_architectures(
    name, said, tmp_path, no_weights, capsys
):
    folder = _config_folder(tmp_path / name, name, architectures=False)
    err = _refused(["explain", "the cat", "--model", folder], capsys)
    assert said in err and all(e in err for e in EXPLAINED), err


def test_a_folder_without_a_configuration_is_refused(tmp_path, no_weights, capsys):
    """The command line's module without a configuration: a folder of
    weights alone."""
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"")
    err = _refused(["explain", "the cat", "--model", str(folder)], capsys)
    assert "has no config.json" in err, err


def test_a_token_classifier_without_architectures_is_refused_at_its_head(
    tmp_path, capsys
):
    """Without ``architectures`` a Llama folder is a causal LM by its
    ``model_type``; a token classifier's weights saved so lack the LM's head,
    which transformers would draw at random: refused, naming it (before,
    explained with exit 0 from that random head)."""
    folder = tmp_path / "llama-tok"
    model = other_head_model("llama-token-classification")
    model.save_pretrained(folder)
    tiny_word_tokenizer().save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    config.pop("architectures")
    (folder / "config.json").write_text(json.dumps(config))
    argv = ["explain", "the cat", "--model", str(folder), "--max-new-tokens", "2"]
    err = _refused(argv, capsys)
    assert "is no trained causal LM" in err and "lm_head.weight" in err, err


def test_the_common_refusals_need_no_torch(tmp_path):
    """The command line's parser refuses a token classifier's folder from
    its configuration before torch loads."""
    folder = _config_folder(tmp_path / "tok", "bert-token-classification")
    code = (
        "import sys\n"
        "from captum_iba.app.model_kind import kind_hint\n"
        "from captum_iba.attr.kinds import NotExplainedError\n"
        "try:\n"
        f"    kind_hint({folder!r})\n"
        "except NotExplainedError as err:\n"
        "    print(err)\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[-1] == "False", out
    _says(out[0], "BertForTokenClassification")


@pytest.mark.parametrize("name", list(OTHER_HEADS))
def test_python_refuses_a_loaded_model_of_another_head_before_any_work(name):
    model, tok = forward_fails(other_head_model(name)), tiny_word_tokenizer()
    cls = OTHER_HEADS[name][0]
    with pytest.raises(NotExplainedError) as err:
        explain("the cat sat", model=model, tokenizer=tok)
    _says(str(err.value), cls)
    with pytest.raises(NotExplainedError) as err:
        explain_answer("the cat sat", model, tokenizer=tok)
    _says(str(err.value), cls)


@pytest.mark.parametrize("name", ["llama-token-classification", "bert-masked-lm"])
def test_python_refuses_a_folder_of_another_head_by_name(name, tmp_path, no_weights):
    folder = _config_folder(tmp_path / name, name)
    for call in (explain, explain_answer):
        with pytest.raises(NotExplainedError) as err:
            call("the cat sat", folder)
        _says(str(err.value), OTHER_HEADS[name][0])


def test_python_refuses_a_plain_module_where_a_hugging_face_model_is_needed():
    model, tok = forward_fails(PlainClassifier()), tiny_word_tokenizer()
    for call in (explain, explain_answer):
        with pytest.raises(NotExplainedError) as err:
            call("the cat sat", model, tokenizer=tok)
        message = str(err.value)
        _says(message, "PlainClassifier")
        assert "no Hugging Face model" in message and "build_scorers" in message
        assert len(message.splitlines()) == 1
