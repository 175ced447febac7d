"""What the wheel holds, checked from the source without building one.

setuptools puts into the wheel the modules of the packages ``find_packages``
finds (folders with an ``__init__.py``) and, of the other files, only those
``package_data`` names: ``setup.py``'s :data:`PACKAGE_DATA`. So every folder
of modules under ``captum_iba/`` is a package, every other file tracked there
is named in ``PACKAGE_DATA``, and a module that finds a file through its own
location (``__file__``, ``importlib.resources``, ``pkgutil.get_data``,
``pkg_resources``) is one of :data:`FILE_RELATIVE`, each saying why an
installed package needs no file of it. ``benchmarks/check_wheel.sh`` builds
the wheel, installs it in a fresh virtual environment and runs it.
"""

import ast
import fnmatch
import subprocess
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "captum_iba"

#: Modules that find a file relative to their own location -> why the wheel
#: needs no file for it.
FILE_RELATIVE = {
    "captum_iba/app/data/_local.py": "a development checkout's ../shared/data "
    "beside the repository; an installed package has none and skips it",
}


def package_data() -> Dict[str, List[str]]:
    """``setup.py``'s ``PACKAGE_DATA`` (read, not run: running it builds)."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    for node in tree.body:
        targets = getattr(node, "targets", [])
        if any(getattr(t, "id", None) == "PACKAGE_DATA" for t in targets):
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py assigns no PACKAGE_DATA")


def package_files() -> List[Path]:
    """The files under ``captum_iba/`` that git tracks (every file but
    bytecode where this is no git checkout)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "captum_iba"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        files = [ROOT / f for f in out.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
    if not files:
        files = [
            p
            for p in PACKAGE.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        ]
    assert files, f"no file found under {PACKAGE}"
    return files


def declared(path: Path, data: Dict[str, List[str]]) -> bool:
    """Whether ``package_data`` puts ``path`` into the wheel: a glob of one of
    the packages above it, relative to that package's folder."""
    for folder in path.relative_to(ROOT).parents:
        if folder == Path("."):
            break
        name = ".".join(folder.parts)
        rel = path.relative_to(ROOT / folder).as_posix()
        if any(_glob_matches(rel, glob) for glob in data.get(name, ())):
            return True
    return False


def _glob_matches(rel: str, glob: str) -> bool:
    """A glob as setuptools reads it: ``*`` within one folder, ``**`` any."""
    parts, pattern = rel.split("/"), glob.split("/")
    if "**" in pattern:
        return fnmatch.fnmatch(rel, glob.replace("**/", "*"))
    return len(parts) == len(pattern) and all(
        fnmatch.fnmatch(a, b) for a, b in zip(parts, pattern)
    )


def finds_files_by_its_location(source: str) -> bool:
    """Whether a module's source names ``__file__`` or imports a resource
    reader."""
    readers = ("importlib.resources", "importlib_resources", "pkg_resources")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name) and node.id == "__file__":
            return True
        if isinstance(node, ast.Import) and any(a.name in readers for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module in (*readers, "pkgutil"):
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "importlib":
            if any(a.name == "resources" for a in node.names):
                return True
        if isinstance(node, ast.Attribute) and node.attr == "get_data":
            return True
    return False


def test_every_folder_of_modules_is_a_package():
    folders = {p.parent for p in package_files() if p.suffix == ".py"}
    missing = sorted(
        f.relative_to(ROOT).as_posix()
        for f in folders
        if not (f / "__init__.py").is_file()
    )
    assert not missing, f"no __init__.py: the wheel leaves these out: {missing}"


def test_every_data_file_is_declared_in_package_data():
    data = package_data()
    files = [p for p in package_files() if p.suffix != ".py"]
    left_out = sorted(
        p.relative_to(ROOT).as_posix() for p in files if not declared(p, data)
    )
    assert not left_out, (
        f"files the wheel leaves out (name them in setup.py's PACKAGE_DATA): {left_out}"
    )
    for name, globs in data.items():  # each glob finds a file
        folder = ROOT.joinpath(*name.split("."))
        for glob in globs:
            assert list(folder.glob(glob)), f"PACKAGE_DATA[{name!r}]: {glob!r}"


def test_modules_that_find_files_by_their_location_are_known():
    found = {
        p.relative_to(ROOT).as_posix()
        for p in package_files()
        if p.suffix == ".py"
        and finds_files_by_its_location(p.read_text(encoding="utf-8"))
    }
    assert found == set(FILE_RELATIVE), (
        f"new: {sorted(found - set(FILE_RELATIVE))} (is each file it reads in "
        f"the wheel? name it in FILE_RELATIVE with why); gone: "
        f"{sorted(set(FILE_RELATIVE) - found)}"
    )


def test_the_checks_see_what_they_check(tmp_path):
    data = {"captum_iba": ["templates/*.html"], "captum_iba.app": ["*.json"]}
    assert declared(PACKAGE / "templates" / "page.html", data)
    assert declared(PACKAGE / "app" / "x.json", data)
    assert not declared(PACKAGE / "app" / "data" / "x.json", data)
    assert not declared(PACKAGE / "style.css", data)
    assert finds_files_by_its_location("from pathlib import Path\nPath(__file__)")
    assert finds_files_by_its_location("from importlib import resources")
    assert finds_files_by_its_location("import importlib.resources")
    assert not finds_files_by_its_location("import os\nos.path.join('a', 'b')")
