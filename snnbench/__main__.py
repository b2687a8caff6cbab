"""``python -m snnbench``: the same CLI as the ``snnbench`` command."""

from __future__ import annotations

from snnbench.cli import main

if __name__ == "__main__":
    main()
