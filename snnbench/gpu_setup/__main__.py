"""``python -m snnbench.gpu_setup``: see :mod:`snnbench.gpu_setup`."""

from __future__ import annotations

import sys

from snnbench.gpu_setup.cli import main

if __name__ == "__main__":
    sys.exit(main())
