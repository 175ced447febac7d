"""DegradationResult files: written atomically, read back with errors that
name the file, the format checked, levels checked against probs (P12, P16)."""

import json

import pytest

from captum_iba.metrics import DegradationResult
from tests.metrics.test_result import handmade_result


def test_round_trip_and_no_temporary_left(tmp_path):
    path = tmp_path / "r.json"
    handmade_result().to_json(path)
    back = DegradationResult.from_json(path)
    assert back.levels == [0.5, 1.0] and back.aopc == handmade_result().aopc
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def _write(tmp_path, data):
    path = tmp_path / "r.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def _good():
    return handmade_result().to_dict()


@pytest.mark.parametrize(
    "change, says",
    [
        (lambda d: d.update(format="something/else"), "format is 'something/else'"),
        (lambda d: d.pop("format"), "format is None"),
        (lambda d: d.update(levels=[0.5]), r"probs has shape \(2, 2\), expected"),
        (lambda d: d.update(levels=[0.25, 0.5, 1.0]), "expected"),
        (lambda d: d.pop("probs"), "missing field"),
        (lambda d: d.update(probs=[["a", "b"], ["c", "d"]]), "not numeric"),
        (lambda d: d.update(original_probs=[0.9]), "original_probs has 1 values"),
    ],
)
def test_bad_content_names_the_file(tmp_path, change, says):
    data = _good()
    change(data)
    path = _write(tmp_path, data)
    with pytest.raises(ValueError, match=says) as err:
        DegradationResult.from_json(path)
    assert str(path) in str(err.value)


def test_truncated_or_missing_file_is_named(tmp_path):
    text = json.dumps(_good())
    path = _write(tmp_path, text[: len(text) // 2])
    with pytest.raises(ValueError, match=f"{path}: not a DegradationResult"):
        DegradationResult.from_json(path)
    with pytest.raises(FileNotFoundError, match="nope.json"):
        DegradationResult.from_json(tmp_path / "nope.json")
    with pytest.raises(ValueError, match="JSON text"):
        DegradationResult.from_json('{"format": 1}')


def test_a_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    handmade_result().to_json(path)
    before = path.read_text()
    import captum_iba._utils.io as io

    def broken(fd, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(io.os, "fsync", broken)
    with pytest.raises(KeyboardInterrupt):
        handmade_result().to_json(path)
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
