"""Re-measure the paper's experiments: a thin wrapper of ``captum-iba reproduce``.

The code lives in the package (:mod:`captum_iba.app.reproduce`); this script
takes the same options as the command::

    python experiments/reproduce.py --profile cpu --out results/reproduce
"""

import sys

from captum_iba.app.cli import main

if __name__ == "__main__":
    sys.exit(main(["reproduce", *sys.argv[1:]]))
