"""Sphinx configuration for captum-iba.

Build with ``sphinx-build -W -b html docs docs/_build/html`` from the repository
root. The package is imported from this checkout (not from an installed copy).
"""

import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

import captum_iba  # noqa: E402

project = "captum-iba"
author = "the captum-iba authors"
copyright = "2020-2026, the captum-iba authors"
release = captum_iba.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    # MathJax served from the built site (_static/mathjax), not a CDN: the
    # maths renders offline. From the docs extra (pip install -e ".[docs]").
    "sphinx-mathjax-offline",
    "sphinx.ext.viewcode",
]

# Google-style docstrings (Captum's style), no NumPy style.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": True, "show-inheritance": True}
# Nothing is mocked: the package's dependencies (torch, captum, transformers,
# matplotlib) are needed to import it and are installed with it.
autodoc_mock_imports: list = ["inseq"]  # optional extra (captum_iba.attr.inseq_method)

templates_path: list = []
html_static_path: list = ["_static"]
html_theme = "alabaster"
html_theme_options = {"description": "Information Bottleneck Attribution for Captum"}
exclude_patterns = ["_build", "_generated", "Thumbs.db", ".DS_Store"]

# ---------------------------------------------------------------------------
# Docstrings write shapes the Python way, "(B, L, *features)". In reST a lone
# "*" opens emphasis (a warning, an error under -W), so such a star, outside
# inline literals and roles, is escaped. Runs after Napoleon (priority 600),
# which has already escaped "*args" in parameter lists.
# ---------------------------------------------------------------------------
_CODE = re.compile(r"(``.+?``|`[^`]*`)")
_LONE_STAR = re.compile(r"(?<=[\s(\[,])\*(?=[A-Za-z_])(?![^*]*\*)")


def _escape_lone_stars(app, what, name, obj, options, lines):
    block_indent = None  # indentation of the "::" paragraph of a literal block
    for i, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        if block_indent is not None:
            if not line.strip() or indent > block_indent:
                continue  # inside a literal block: leave it verbatim
            block_indent = None
        if line.rstrip().endswith("::"):
            block_indent = indent
        if "*" not in line or line.lstrip().startswith((">>>", "...", "..")):
            continue
        parts = _CODE.split(line)
        for j in range(0, len(parts), 2):  # even parts are outside literals
            parts[j] = _LONE_STAR.sub(r"\\*", parts[j])
        lines[i] = "".join(parts)


def setup(app):
    app.connect("autodoc-process-docstring", _escape_lone_stars, priority=600)
