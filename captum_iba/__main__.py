"""``python -m captum_iba``: the command line."""

from captum_iba.cli import main

raise SystemExit(main())
