"""`python -m tools.soak`: see tools/soak/cli.py."""

from tools.soak.cli import main

raise SystemExit(main())
