"""Every method x every command-line option: the option is used (it reaches
the method's constructor as the keyword it declares), or refused before any
model loads with the option, the methods chosen and those that take it
named. Options for one method of a comparison (``--set``) likewise."""

from types import SimpleNamespace

import pytest

from captum_iba.app import cli, cli_checks, command_parts
from captum_iba.app.errors import CLIError
from captum_iba.attr.kinds import CLASSIFIER
from captum_iba.attr.priors import NoisePrior
from captum_iba.attr.text import LayerRef
from captum_iba.registry import METHODS, OPTIONS, explains
from captum_iba.request import options_of, takers

#: A valid command-line value of each option, and what it becomes.
VALUES = {
    "layer": ("0", 0),
    "prior": ("reference", ["reference"]),
    "beta": ("0.001", 0.001),
    "steps": ("3", 3),
    "rest_share": ("0.5", 0.5),
    "n_samples": ("2", 2),
    "seed": ("7", 7),
    "precision": ("bf16", "bf16"),
    "ig_steps": ("4", 4),
    "lime_samples": ("20", 20),
    "lime_max_length": ("24", 24),
    "shap_samples": ("5", 5),
    "ablations": ("6", 6),
    "surrogate_outcome": ("log-odds", "log-odds"),
    "surrogate_design": ("factorial", "factorial"),
    "explainer_objective": ("deletion", "deletion"),
}
FLAGGED = [n for n in OPTIONS.names() if OPTIONS.entry(n).facts.get("flag")]
CASES = [(m, o) for m in METHODS.names() for o in FLAGGED]


def _argv(option, setting="paper"):
    flag = OPTIONS.entry(option).facts["flag"]
    text, _ = VALUES[option]
    given = [flag] if text is None else [flag, text]
    return given, setting


def _checked(command, methods, extra, setting="fair"):
    argv = [command]
    if command == "explain":
        argv += ["some text", "--compare", ",".join(methods)]
    else:
        argv += ["--methods", ",".join(methods), "--setting", setting]
        if not all(explains(m, CLASSIFIER) for m in methods):
            # a causal LM's methods: a model whose name says it is one (the
            # kind is decided, and the methods checked for it, at the entry)
            argv += ["--model", "model.gguf"]
    args = cli._parser().parse_args(argv + extra)
    checked = cli_checks.CHECKS[command](args)
    # the checked methods and options: an explain's, or a corpus run's
    methods = checked.methods if command == "explain" else checked.request
    return SimpleNamespace(request=methods)


def test_every_flagged_option_has_a_value_here():
    assert sorted(VALUES) == sorted(FLAGGED)


@pytest.mark.parametrize("method, option", CASES)
def test_each_method_and_option_is_used_or_refused_with_the_takers(method, option):
    extra, setting = _argv(option)
    flag = OPTIONS.entry(option).facts["flag"]
    if option in options_of(method):
        args = _checked("evaluate", [method], extra, setting)
        assert args.request.values(method)[option] == VALUES[option][1]
        assert not args.request.notes
        return
    with pytest.raises(CLIError) as err:
        _checked("evaluate", [method], extra, setting)
    message = str(err.value)
    assert message.startswith(f"{flag}: none of the chosen methods ({method})")
    assert f"it applies to {', '.join(takers(option))}" in message


@pytest.fixture
def spy_builds(monkeypatch):
    """Records the keywords every method's constructor gets (and builds it)."""
    from captum_iba._utils.registry import Entry

    calls = {}
    original = Entry.build

    def build(self, *args, **kwargs):
        calls[self.name] = dict(self.defaults, **kwargs)
        if self.name in ("iba-amortized", "AttnLRP") or self.name.startswith(
            "contextcite"
        ):
            return None  # a fitted explainer / lxt / context-cite: keywords only
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Entry, "build", build)
    return calls


def _resolved(option, value):
    if option == "layer":
        return isinstance(value, LayerRef) and value.index == 0
    if option == "prior":
        return isinstance(value, NoisePrior) and value.name == "reference"
    return value == VALUES[option][1]


@pytest.mark.parametrize(
    "method, option", [(m, o) for m, o in CASES if o in options_of(m)]
)
def test_a_taken_option_reaches_the_constructor_as_its_keyword(
    method, option, spy_builds
):
    from captum_iba.evaluation import Resources, build_scorers
    from tests.helpers import bert_tokenizer, tiny_bert

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "film"]
    model, tok = tiny_bert(len(words), pad_token_id=0), bert_tokenizer(words)
    extra, setting = _argv(option)
    args = _checked("evaluate", [method], extra, setting)
    build_scorers(args.request, Resources(model, tok), setting)
    keyword = OPTIONS.entry(option).facts["kwarg"]
    assert _resolved(option, spy_builds[METHODS.entry(method).name][keyword])


def test_refused_before_any_model_loads(monkeypatch, capsys, tmp_path):
    def forbidden(*args, **kwargs):
        raise AssertionError("a model was loaded before the options were checked")

    monkeypatch.setattr(command_parts, "model_and_tokenizer", forbidden)
    monkeypatch.setattr(command_parts, "load_classifier", forbidden)
    for argv in (
        ["explain", "x", "--beta", "1e-3"],  # iba-deletion takes no beta
        ["explain", "x", "--compare", "ig,lime", "--layer", "1"],
        ["evaluate", "--methods", "ig", "--bf16", "--out", str(tmp_path / "o")],
        ["evaluate", "--methods", "iba", "--lime-samples", "9"],
        ["attribute", "--out", str(tmp_path / "a"), "--prior", "paper"],
        ["evaluate", "--methods", "lime-text", "--lime-max-length", "9"],  # fair
    ):
        with pytest.raises(SystemExit) as exc:
            cli.main(argv)
        err = capsys.readouterr().err
        assert exc.value.code == 2, argv
        assert "none of the chosen methods" in err and "applies to" in err, err
        assert len(err.strip().splitlines()) == 1


def test_an_option_some_methods_take_applies_to_those_with_a_note():
    args = _checked("explain", ["iba", "iba-deletion", "ig"], ["--steps", "3"])
    assert args.request.values("IBA")["steps"] == 3
    assert args.request.values("iba-deletion")["steps"] == 3
    assert "steps" not in args.request.values("IG")
    assert args.request.notes == ("--steps applies to IBA, iba-deletion (not to IG)",)


def test_priors_make_variants_of_every_method_that_takes_a_prior():
    args = _checked(
        "evaluate",
        ["iba", "iba-faithful", "iba-deletion"],
        ["--priors", "paper,reference"],
    )
    assert args.request.values("iba-faithful")["prior"] == ["paper", "reference"]
    assert "prior" not in args.request.values("iba-deletion")
    assert "not to iba-deletion" in args.request.notes[0]


def test_set_gives_an_option_to_one_method_of_a_comparison():
    args = _checked(
        "explain",
        ["iba", "iba-faithful", "ig"],
        ["--beta", "1e-4", "--set", "iba:beta=1e-3", "--set", "IG:n_steps=12"],
    )
    assert args.request.values("IBA")["beta"] == 1e-3
    assert args.request.values("iba-faithful")["beta"] == 1e-4
    assert args.request.values("IG")["ig_steps"] == 12


@pytest.mark.parametrize(
    "given, says",
    [
        (["--set", "ig:beta=1"], "IG takes no option 'beta'"),
        (["--set", "iba:beta=1"], "options given for 'IBA', which is not among"),
        (["--set", "iba-faithful"], "expected METHOD:OPTION=VALUE"),
        (["--set", "nothing:beta=1"], "unknown method 'nothing'"),
        (["--set", "iba-faithful:beta=-1"], "beta: must be a finite number >= 0"),
    ],
)
def test_set_is_checked(given, says):
    methods = ["ig", "iba-faithful"] if "iba:" not in given[-1] else ["ig"]
    with pytest.raises(CLIError, match=says):
        _checked("explain", methods, given)


def test_bad_values_are_refused_by_the_parser(capsys):
    for argv in (
        ["explain", "x", "--steps", "0"],
        ["explain", "x", "--layer", "top"],
        ["explain", "x", "--compare", "iba", "--prior", "nowhere"],
        ["explain", "x", "--compare", "iba", "--beta", "-3"],
    ):
        with pytest.raises(SystemExit) as exc:
            cli.main(argv)
        assert exc.value.code == 2
        assert argv[-2] in capsys.readouterr().err


def test_a_flag_and_its_alias_that_disagree_are_refused(monkeypatch, capsys):
    """``--precision float32 --bf16`` ran in bf16 (issue 79 item 7)."""

    def forbidden(*args, **kwargs):
        raise AssertionError("a model was loaded before the options were checked")

    monkeypatch.setattr(command_parts, "model_and_tokenizer", forbidden)
    monkeypatch.setattr(command_parts, "load_classifier", forbidden)
    for given, says in (
        (["--precision", "float32", "--bf16"], "--precision float32 and --bf16"),
        (["--bf16", "--precision", "auto"], "--bf16 and --precision auto"),
    ):
        with pytest.raises(SystemExit) as exc:
            cli.main(["explain", "x", "--method", "iba-deletion", *given])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and says + " contradict each other" in err, err
        assert len(err.strip().splitlines()) == 1
    agree = ["explain", "x", "--bf16", "--precision", "bf16"]
    assert cli._parser().parse_args(agree).precision == "bf16"


def test_help_says_which_methods_take_each_option():
    text = " ".join(cli._parser().format_help().split())
    sub = [a for a in cli._parser()._actions if a.dest == "command"][0]
    helptext = " ".join(sub.choices["evaluate"].format_help().split())
    assert "captum-iba" in text
    for option in FLAGGED:
        names = ", ".join(m.lower() for m in takers(option))
        assert f"[taken by: {names}]" in helptext, option
