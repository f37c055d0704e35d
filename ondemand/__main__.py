"""`python -m ondemand`: the same as the `ondemand` command."""

import sys

from ondemand.cli import main

sys.exit(main())
