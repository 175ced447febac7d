"""The model's kind is decided once, by the object that stands for the model
(:mod:`captum_iba.attr.kinds`): the rest of the package asks that object and
never tests the kind itself.

Read from the source (no import): a *kind test* is the condition of an
``if``, a conditional expression, a ``while`` or a comprehension's filter
whose text names a kind of model - the pattern below, the one the project's
before-stop hook counts (``causal``, ``llm``, ``is_decoder``, ``PromptBatch``,
the word ``kind``, ...). At most :data:`MAX_TESTS` of them, in at most
:data:`MAX_MODULES` modules: where the kind is decided (the kind objects, the
decision from a name or configuration before torch loads, the registry's
check of a method against a kind).

A few conditions match the pattern without testing the model's kind; each is
listed in :data:`NOT_THE_MODEL` with what it tests instead, and must still
read as it says (a new test in such a module is counted).
"""

import ast
import re
from pathlib import Path
from typing import Dict, List, Tuple

PACKAGE = Path(__file__).resolve().parent.parent / "captum_iba"

#: The words that name a kind of model in a condition (the hook's pattern).
KIND = re.compile(
    r"causal|\bllm|is_decoder|PromptBatch|\bkind\b|encoder_decoder|ForCausalLM"
    r"|LMHeadModel"
)
MAX_TESTS = 12
MAX_MODULES = 3

#: Module -> (what its matching conditions test instead, a pattern every one
#: of them matches): conditions that name no kind of model.
NOT_THE_MODEL: Dict[str, Tuple[str, str]] = {
    "attr/_inputs.py": (
        "a Python parameter's kind (inspect.Parameter.kind) in a forward "
        "function's signature",
        r"\bp\.kind\b",
    ),
    "attr/text.py": (
        "whether the layer stack is a decoder's (causal attention: a causal "
        "LM, or a classifier on GPT-2): where IBA sits when no layer is named, "
        "and how messages name the layers",
        r"^is_decoder\(model\)$",
    ),
    "attr/_attention.py": (
        "whether an attention layer applies a causal mask (Hugging Face's "
        "is_causal on the module), which a decoder classifier has too",
        r"causal_length|\bcausal and hidden\b|\"is_causal\"",
    ),
}


def kind_tests(source: str) -> List[Tuple[int, str]]:
    """``(line, text)`` of each condition of ``source`` naming a kind."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.IfExp, ast.While)):
            tests = [node.test]
        elif isinstance(node, ast.comprehension):
            tests = list(node.ifs)
        else:
            continue
        for test in tests:
            text = ast.get_source_segment(source, test) or ""
            if KIND.search(text):
                found.append((test.lineno, text))
    return found


def _all() -> Dict[str, List[Tuple[int, str]]]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        found = kind_tests(path.read_text(encoding="utf-8"))
        if found:
            out[path.relative_to(PACKAGE).as_posix()] = found
    return out


def test_the_kind_is_tested_in_few_places():
    found = {m: t for m, t in _all().items() if m not in NOT_THE_MODEL}
    n = sum(len(t) for t in found.values())
    where = "\n".join(
        f"{m}:{line}: {text}" for m, t in found.items() for line, text in t
    )
    assert n <= MAX_TESTS and len(found) <= MAX_MODULES, (
        f"{n} tests of the model's kind in {len(found)} modules (at most "
        f"{MAX_TESTS} in {MAX_MODULES}): ask the model's kind object "
        f"(captum_iba.attr.kinds.ModelKind) instead:\n{where}"
    )


def test_the_listed_conditions_test_something_else():
    found = _all()
    for module, (_, pattern) in NOT_THE_MODEL.items():
        for line, text in found.get(module, []):
            assert re.search(pattern, text), (
                f"{module}:{line}: {text!r} names a kind of model: ask the "
                "model's kind object"
            )


def test_the_count_sees_a_kind_test():
    """The check itself can fail."""
    source = (
        "if scorer.kind == 'causal-lm':\n    pass\n"
        "x = 1 if is_causal_lm(model) else 2\n"
        "y = [b for b in batches if isinstance(b, PromptBatch)]\n"
        "if model_kind.generates:\n    pass\n"
    )
    assert [line for line, _ in kind_tests(source)] == [1, 3, 4]
