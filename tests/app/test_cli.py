import subprocess
import sys
import unittest

import pytest
from captum.testing.helpers.basic import BaseTest

from captum_iba.app.cli import main


def test_explain_prints_tokens_and_writes_html(tiny_model_dir, tmp_path, capsys):
    html = tmp_path / "out.html"
    code = main(
        [
            "explain",
            "a <b>fine</b> film",
            "--model",
            tiny_model_dir,
            "--html",
            str(html),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "prediction:" in out and "fine" in out and "iba-deletion" in out
    page = html.read_text()
    assert "&lt;" in page and "<b>fine" not in page


def test_explain_pair_and_target(tiny_model_dir, capsys):
    code = main(
        ["explain", "a man sleeps", "--pair", "a person rests", "--target", "1"]
        + ["--model", tiny_model_dir, "--layer", "0"]
    )
    assert code == 0
    assert "explaining class 'positive' (index 1" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["explain", "   "], "empty"),
        (["explain", "x", "--model", "/no/such/folder"], "not found"),
        (["evaluate", "--dataset", "cifar"], "unknown dataset"),
        (["evaluate", "--methods", "iba,shap"], "unknown method"),
        (["evaluate", "--priors", "uniform"], "unknown prior"),
        (["evaluate", "--n", "0"], "--n"),
        (["reproduce", "--datasets", "sst2,mnli"], "unknown dataset"),
        (["reproduce", "--parts", "table,figure9"], "unknown part"),
        (["reproduce", "--parts", ","], "unknown part"),
        (["reproduce", "--settings", "fast"], "unknown setting"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_layer_out_of_range(tiny_model_dir, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["explain", "x", "--model", tiny_model_dir, "--layer", "5"])
    assert exc.value.code == 2
    assert "out of range" in capsys.readouterr().err


class TestModuleEntryPoint(BaseTest):
    @unittest.skipIf(sys.platform == "win32", "posix only")
    def test_python_dash_m(self) -> None:
        proc = subprocess.run(
            [sys.executable, "-m", "captum_iba", "evaluate", "--dataset", "nope"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        self.assertEqual(proc.returncode, 2)
        self.assertIn("unknown dataset", proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
