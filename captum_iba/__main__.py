"""``python -m captum_iba``: the command line."""

from captum_iba.app.cli import main

raise SystemExit(main())
