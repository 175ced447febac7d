"""The documentation builds without a single warning (``sphinx-build -W``)."""

import os
import re
import subprocess
import sys
import tempfile
import unittest

from captum.testing.helpers.basic import BaseTest

import captum_iba

try:
    import sphinx  # noqa: F401
except ImportError:  # pragma: no cover - docs extras not installed
    sphinx = None

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")


class TestDocs(BaseTest):
    @unittest.skipIf(sphinx is None, "sphinx not installed (pip install .[docs])")
    def test_build_without_warnings(self) -> None:
        with tempfile.TemporaryDirectory() as out:
            proc = subprocess.run(
                [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", DOCS, out],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=600,
            )
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            for page in ("index", "method", "metrics", "api", "api/attr", "api/app"):
                self.assertTrue(os.path.exists(os.path.join(out, page + ".html")))
            # The maths renders offline: MathJax is served from the site itself.
            with open(os.path.join(out, "method.html"), encoding="utf-8") as fh:
                page = fh.read()
            self.assertIn("_static/mathjax/tex-chtml.js", page)
            self.assertNotIn("cdn.jsdelivr.net", page)
            self.assertTrue(
                os.path.exists(os.path.join(out, "_static", "mathjax", "tex-chtml.js"))
            )

    def test_api_page_lists_every_exported_name(self) -> None:
        with open(os.path.join(DOCS, "api.rst"), encoding="utf-8") as fh:
            text = fh.read()
        listed = set(re.findall(r"``(\w+)``", text))
        missing = sorted(set(captum_iba.__all__) - listed)
        self.assertEqual(missing, [], "add these names to docs/api.rst")

    def test_every_public_module_has_an_api_page(self) -> None:
        """Every public module of every layer is documented by some API page."""
        pages = ""
        for name in os.listdir(os.path.join(DOCS, "api")):
            with open(os.path.join(DOCS, "api", name), encoding="utf-8") as fh:
                pages += fh.read()
        documented = set(re.findall(r"automodule:: ([\w.]+)", pages))
        package = os.path.join(ROOT, "captum_iba")
        modules = []
        for layer in ("attr", "metrics", "evaluation", "visualization", "app"):
            for folder, _, files in os.walk(os.path.join(package, layer)):
                rel = os.path.relpath(folder, ROOT).replace(os.sep, ".")
                if any(part.startswith("_") for part in rel.split(".")[1:]):
                    continue
                modules.append(rel)  # the subpackage itself
                modules += [
                    f"{rel}.{f[:-3]}"
                    for f in files
                    if f.endswith(".py") and not f.startswith("_")
                ]
        self.assertTrue(modules)
        missing = sorted(set(modules) - documented)
        self.assertEqual(
            missing,
            [],
            "add these modules to a docs/api page: an '.. automodule:: <module>' "
            "line in docs/api/<layer>.rst (docs/extending.rst: a new module needs "
            "it, and its line on docs/contributing.rst's layout)",
        )


#: Runs docs/extending.rst's method for both kinds on tests/helpers.py's tiny
#: models, in its own process (``register_scorer`` adds the name for good).
_EXTENDING_EXAMPLE = r"""
import ast, re, sys
sys.path.insert(0, "tests")
from helpers import bert_tokenizer, tiny_bert, tiny_causal_lm, tiny_word_tokenizer

page = open("docs/extending.rst", encoding="utf-8").read()
section = page.split("Adding a method for both kinds")[1].split("Register a method")[0]
blocks = [re.sub(r"^    ", "", b, flags=re.M)
          for b in re.findall(r"::\n\n((?:    .*\n|\n)+)", section)]
assert len(blocks) == 2, len(blocks)
words = "[PAD] [UNK] [CLS] [SEP] [MASK] a good film dull".split()
lm_words = "<pad> <eos> <unk> The capital of France is Paris".split()
scope = dict(
    tok=bert_tokenizer(words), classifier=tiny_bert(len(words)),
    lm_tok=tiny_word_tokenizer(lm_words), causal_lm=tiny_causal_lm("llama"),
)
exec(blocks[0], scope)
values = []
for node in ast.parse(blocks[1]).body:
    if isinstance(node, ast.Expr):
        values.append(eval(compile(ast.Expression(node.value), "doc", "eval"), scope))
    else:
        exec(compile(ast.Module([node], []), "doc", "exec"), scope)
sentence, answer, tokens, prompts = values
assert len(sentence.scores("embedding-norm")) == 3
assert len(answer.scores("embedding-norm")) == 5
assert tuple(tokens.shape) == (2, 5)
assert prompts.answer.shape[0] == 1 and prompts.unit == "norm"
print("ran")
"""


def test_the_extending_page_s_method_for_both_kinds_runs() -> None:
    """docs/extending.rst's example, one class for a classifier and a causal
    LM, runs as written: by name through ``explain`` and through the contract
    ``attribute(batch)`` with each kind's batch."""
    proc = subprocess.run(
        [sys.executable, "-c", _EXTENDING_EXAMPLE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and "ran" in proc.stdout, proc.stdout + proc.stderr
