"""The size report for a reviewer: modules over 500 lines, functions and
methods over 80 lines, public signatures over 10 parameters, each named with
its size, largest first (the report ``tests/test_sizes.py`` prints at the end
of a test session, counted the same way: see that module).

    python benchmarks/size_report.py [--lines 500] [--function-lines 80]
                                     [--parameters 10]

The soft sizes are a prompt to look, not a rule: an outlier is fine where
the module is cohesive and the signature readable. The test fails only past
its hard ceilings (1,000 lines, 16 parameters); this script says whether any
code is past them and exits 1 then, 0 otherwise. Reads the source only (no
import of the package, no torch).
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import test_sizes as sizes  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=sizes.MAX_LINES)
    parser.add_argument("--function-lines", type=int, default=sizes.MAX_FUNCTION_LINES)
    parser.add_argument("--parameters", type=int, default=sizes.MAX_PARAMETERS)
    args = parser.parse_args()
    modules, functions = sizes.module_sizes(), sizes.function_sizes()
    signatures = sizes.signature_sizes()
    limits = (args.lines, args.function_lines, args.parameters)
    print(f"size report of {sizes.PACKAGE} (soft sizes: a look, not a rule)")
    print("\n".join(sizes.report_lines(modules, functions, signatures, limits)))
    past = [
        f"  {n:5d}  {name}"
        for found in (
            sizes.over_limit(modules, sizes.HARD_LINES),
            sizes.over_limit(signatures, sizes.HARD_PARAMETERS),
        )
        for name, n in found
    ]
    print(
        f"past the hard ceilings ({sizes.HARD_LINES} lines, "
        f"{sizes.HARD_PARAMETERS} parameters; tests/test_sizes.py fails): "
        f"{len(past)}"
    )
    for line in past:
        print(line)
    return 1 if past else 0


if __name__ == "__main__":
    sys.exit(main())
