"""DatasetPrior saved and loaded through safetensors, no pickle, validated (P15)."""

import pickle

import pytest
import torch

from captum_iba import DatasetPrior


def _prior() -> DatasetPrior:
    return DatasetPrior(
        torch.tensor([0.5, -1.0, 2.0]), torch.tensor([1.0, 0.5, 3.0]), 7
    )


def test_round_trip_is_exact(tmp_path):
    path = tmp_path / "prior.safetensors"
    _prior().save(path)
    back = DatasetPrior.load(path)
    assert torch.equal(back.mean, _prior().mean)
    assert torch.equal(back.std, _prior().std)
    assert back.count == 7
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_file_holds_no_pickle(tmp_path):
    path = tmp_path / "prior.safetensors"
    _prior().save(path)
    raw = path.read_bytes()
    assert b"captum_iba.DatasetPrior/1" in raw
    with pytest.raises(pickle.UnpicklingError):
        pickle.loads(raw)


@pytest.mark.parametrize(
    "mean, std, says",
    [
        ([float("nan"), 0.0], [1.0, 1.0], "finite"),
        ([0.0, 0.0], [1.0, float("inf")], "finite"),
        ([0.0, 0.0], [1.0, 0.0], "std > 0"),
    ],
)
def test_non_finite_statistics_are_refused(mean, std, says, tmp_path):
    with pytest.raises(ValueError, match=says):
        DatasetPrior(torch.tensor(mean), torch.tensor(std))
    # a file holding such statistics is refused when loaded, naming the file
    from safetensors.torch import save_file

    path = tmp_path / "bad.safetensors"
    save_file(
        {"mean": torch.tensor(mean), "std": torch.tensor(std)},
        str(path),
        metadata={"format": "captum_iba.DatasetPrior/1", "count": "1"},
    )
    with pytest.raises(ValueError, match=f"{path}.*{says}"):
        DatasetPrior.load(path)


def test_damaged_or_foreign_files_are_named(tmp_path):
    path = tmp_path / "prior.safetensors"
    _prior().save(path)
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match=str(path)):
        DatasetPrior.load(path)
    torch.save({"mean": torch.zeros(2)}, path)  # a pickle: refused, never loaded
    with pytest.raises(ValueError, match=str(path)):
        DatasetPrior.load(path)
    from safetensors.torch import save_file

    save_file({"weight": torch.zeros(2)}, str(path))
    with pytest.raises(ValueError, match="not a DatasetPrior"):
        DatasetPrior.load(path)
    with pytest.raises(FileNotFoundError, match="missing"):
        DatasetPrior.load(tmp_path / "missing.safetensors")
