"""``python -m meshplan``: the ``meshplan`` command (without it, "No module named
meshplan.__main__", where no console script is installed)."""

import sys

from .cli import main

sys.exit(main())
