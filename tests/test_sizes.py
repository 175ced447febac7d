"""The sizes of the package's modules, functions and public signatures: a
report that names the outliers, and two hard ceilings.

The soft sizes - a module of at most 500 lines, a function of at most 80, a
public signature of at most 10 parameters - prompt a reviewer's look; they
are not rules to pass. Code past one is named in the size report, printed at
the end of the test session whenever this module runs (pytest's summary, the
section "report", through the ``session_report`` fixture of
``tests/conftest.py``) and by ``python benchmarks/size_report.py``. Nothing
fails for it. A cohesive module of 600 lines stays whole, and a signature of
12 parameters stays readable: splitting a module or pushing parameters into
``**options`` only to pass a count makes the code worse (issue 76, part 4:
the limits had become targets, 20 modules at 450-499 lines and 20 signatures
at exactly 10).

The test fails only past the hard ceilings, clearly beyond any cohesive
module or usable signature: :data:`HARD_LINES` (1,000 lines) and
:data:`HARD_PARAMETERS` (16 parameters). They are a backstop, not a target:
code near them needs a reason, not a move.

A parameter is each name a caller can pass: positional-only, ordinary and
keyword-only parameters, ``*args`` as one and ``**kwargs`` as one; a method's
first parameter (``self``, ``cls``) is not counted, a static method's is.
Public: a function or method whose name does not start with ``_`` (dunder
methods such as ``__init__`` are public), defined at the top of a module, or
in a class whose name does not start with ``_``, of a module none of whose
dotted parts starts with ``_`` (``__init__.py`` is its package's module).
A function's lines run from its ``def`` to its last line (decorators left
out; docstring, comments and blank lines in), for every function and method
at the top of a module or a class (a nested function counts in its
parent's). Everything is read from the source, with no import.
"""

import ast
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "captum_iba"

#: Soft sizes: past one, the code is named in the report (no failure).
MAX_LINES = 500
MAX_FUNCTION_LINES = 80
MAX_PARAMETERS = 10
#: Hard ceilings: past one, the test fails.
HARD_LINES = 1000
HARD_PARAMETERS = 16


def parameter_count(node: ast.AST, method: bool) -> int:
    """The parameters of a ``def`` a caller can pass (see the module)."""
    args = node.args  # type: ignore[attr-defined]
    n = len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs)
    n += (args.vararg is not None) + (args.kwarg is not None)
    static = any(
        isinstance(d, ast.Name) and d.id == "staticmethod"
        for d in node.decorator_list  # type: ignore[attr-defined]
    )
    return n - 1 if method and not static and n else n


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def public_callables(tree: ast.Module) -> Iterator[Tuple[str, int]]:
    """``(qualified name, parameter count)`` of each public function and
    method of a module's tree."""

    def walk(body, prefix: str, in_class: bool) -> Iterator[Tuple[str, int]]:
        for node in body:
            if isinstance(node, ast.ClassDef) and not _private(node.name):
                yield from walk(node.body, f"{prefix}{node.name}.", True)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if not _private(node.name):
                    yield prefix + node.name, parameter_count(node, in_class)

    return walk(tree.body, "", False)


def function_lengths(tree: ast.Module) -> Iterator[Tuple[str, int]]:
    """``(qualified name, lines)`` of each function and method, public or
    not, at the top of a module or a class (see the module)."""

    def walk(body, prefix: str) -> Iterator[Tuple[str, int]]:
        for node in body:
            if isinstance(node, ast.ClassDef):
                yield from walk(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield prefix + node.name, node.end_lineno - node.lineno + 1

    return walk(tree.body, "")


def _public_module(path: Path) -> bool:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return not any(_private(p) for p in parts)


def _modules() -> Iterator[Path]:
    files = sorted(PACKAGE.rglob("*.py"))
    assert files, f"no module found in {PACKAGE}"
    return iter(files)


def _rel(path: Path) -> str:
    return path.relative_to(PACKAGE.parent).as_posix()


def module_sizes() -> Dict[str, int]:
    """Path -> line count of every module."""
    return {
        _rel(p): len(p.read_text(encoding="utf-8").splitlines()) for p in _modules()
    }


def function_sizes() -> Dict[str, int]:
    """``"path::name"`` -> lines of every function and method."""
    found = {}
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, n in function_lengths(tree):
            found[f"{_rel(path)}::{name}"] = n
    return found


def signature_sizes() -> Dict[str, int]:
    """``"path::name"`` -> parameter count of every public callable."""
    found = {}
    for path in _modules():
        if not _public_module(path):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, n in public_callables(tree):
            found[f"{_rel(path)}::{name}"] = n
    return found


def over_limit(sizes: Dict[str, int], limit: int) -> List[Tuple[str, int]]:
    """The entries over ``limit``, largest first."""
    return sorted(
        ((k, n) for k, n in sizes.items() if n > limit), key=lambda kv: (-kv[1], kv[0])
    )


def report_lines(
    modules: Dict[str, int],
    functions: Dict[str, int],
    signatures: Dict[str, int],
    limits: Tuple[int, int, int] = (MAX_LINES, MAX_FUNCTION_LINES, MAX_PARAMETERS),
) -> List[str]:
    """The size report: each kind of size, its soft limit, how many are
    measured and the largest, then every outlier, largest first."""
    kinds = [
        ("modules", "lines", modules, limits[0]),
        ("functions and methods", "lines", functions, limits[1]),
        ("public signatures", "parameters", signatures, limits[2]),
    ]
    lines = []
    for what, unit, sizes, limit in kinds:
        over = over_limit(sizes, limit)
        largest = max(sizes.values(), default=0)
        lines.append(
            f"{what} over {limit} {unit}: {len(over)} of {len(sizes)} "
            f"(the largest: {largest})"
        )
        lines += [f"  {n:5d}  {name}" for name, n in over]
    return lines


def size_report(
    limits: Tuple[int, int, int] = (MAX_LINES, MAX_FUNCTION_LINES, MAX_PARAMETERS),
) -> List[str]:
    """The report of the package as it is now (``benchmarks/size_report.py``
    prints it)."""
    return report_lines(module_sizes(), function_sizes(), signature_sizes(), limits)


def test_size_report_names_the_outliers(session_report):
    """The report (printed in the session's summary): every module, function
    and signature past a soft size named, with its size; never a failure."""
    modules, functions = module_sizes(), function_sizes()
    signatures = signature_sizes()
    lines = report_lines(modules, functions, signatures)
    session_report.extend(["size report (soft sizes: a look, not a rule)", *lines])
    for sizes, limit in (
        (modules, MAX_LINES),
        (functions, MAX_FUNCTION_LINES),
        (signatures, MAX_PARAMETERS),
    ):
        for name, n in over_limit(sizes, limit):
            assert f"  {n:5d}  {name}" in lines


def test_no_module_past_the_hard_ceiling():
    found = dict(over_limit(module_sizes(), HARD_LINES))
    assert not found, (
        f"modules over {HARD_LINES} lines, past any cohesive module: split each "
        f"along a seam of its own (not only to pass this count): {found}"
    )


def test_no_public_signature_past_the_hard_ceiling():
    found = dict(over_limit(signature_sizes(), HARD_PARAMETERS))
    assert not found, (
        f"public signatures over {HARD_PARAMETERS} parameters: group the ones "
        f"that belong together in a typed options object (not **options): {found}"
    )


def test_the_report_names_outliers_largest_first():
    lines = report_lines(
        {"a.py": 20, "b.py": 700, "c.py": 501},
        {"a.py::f": 81, "a.py::g": 80},
        {"a.py::f": 3},
    )
    assert lines == [
        "modules over 500 lines: 2 of 3 (the largest: 700)",
        "    700  b.py",
        "    501  c.py",
        "functions and methods over 80 lines: 1 of 2 (the largest: 81)",
        "     81  a.py::f",
        "public signatures over 10 parameters: 0 of 1 (the largest: 3)",
    ]


@pytest.mark.parametrize(
    "source, expected",
    [
        ("def f(a, b=1, *args, c, **kw): pass", {"f": 5}),
        ("def f(a, /, b): pass\ndef _g(a): pass", {"f": 2}),
        (
            "class A:\n    def m(self, a): pass\n    @staticmethod\n"
            "    def s(a, b): pass\n    def _p(self): pass\n"
            "    def __init__(self, x): pass\n"
            "class _B:\n    def m(self, a): pass",
            {"A.m": 1, "A.s": 2, "A.__init__": 1},
        ),
    ],
)
def test_the_count(source, expected):
    """The check itself: what it counts, and what it leaves out."""
    assert dict(public_callables(ast.parse(source))) == expected
    assert not _public_module(PACKAGE / "metrics" / "_compat.py")
    assert _public_module(PACKAGE / "metrics" / "__init__.py")


def test_the_function_length_count():
    source = (
        "@decorator\ndef f(a):\n    '''doc'''\n\n    def inner():\n"
        "        pass\n    return a\n"
        "class _C:\n    def m(self):\n        pass\n"
    )
    assert dict(function_lengths(ast.parse(source))) == {"f": 6, "_C.m": 2}
