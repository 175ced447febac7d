"""A comparison setting is its preset's data (issue 50, item 7): no code
branches on a setting's name; what differs between settings - LIME-text's
mode, the methods of the paper's Table 1, whose prior IBA takes there - is
read from the preset."""

import re
from pathlib import Path

import pytest

from captum_iba.evaluation.lime import LimeTextScorer
from captum_iba.evaluation.presets import FAIR, PAPER
from captum_iba.registry import SETTINGS
from tests.helpers import bert_tokenizer, tiny_bert

PACKAGE = Path(__file__).resolve().parents[2] / "captum_iba"


def test_no_code_compares_a_setting_s_name():
    found = []
    for name in SETTINGS.names():
        branch = re.compile(rf'[=!]= "{name}"|"{name}" if |in \("{name}"')
        for path in PACKAGE.rglob("*.py"):
            for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
                # the test's length convention "paper" is no setting
                if branch.search(line) and "convention" not in line:
                    found.append(f"{path.relative_to(PACKAGE)}:{number}: {line}")
    assert not found, "\n".join(found)


def test_what_a_setting_changes_is_its_preset_s_data():
    assert PAPER.scorer_arguments("LIME-text")["mode"] == "released"
    assert FAIR.scorer_arguments("LIME-text")["mode"] == "words"
    assert PAPER.table1 == ("random", "IG", "LIME-text") and not PAPER.own_prior
    assert FAIR.table1 == ("random", "IG", "LIME") and FAIR.own_prior
    assert PAPER.scorer_arguments("IBA") == {"prior": "reference"}
    # a causal LM's methods take no classifier's arguments from a preset
    assert PAPER.scorer_arguments("IG", "causal-lm") == {}


@pytest.mark.parametrize(
    "mode, read", [("released", "released"), ("words", "words"), ("paper", "released")]
)
def test_lime_text_s_modes_are_behaviours_not_settings(mode, read):
    tok = bert_tokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"])
    scorer = LimeTextScorer(tiny_bert(7), tok, mode=mode, setting="custom")
    assert scorer.mode == read and scorer.settings["setting"] == "custom"
    assert scorer.use_attention_mask == (read == "words")
    with pytest.raises(ValueError, match="mode must be 'released' or 'words'"):
        LimeTextScorer(tiny_bert(7), tok, mode="fast")
