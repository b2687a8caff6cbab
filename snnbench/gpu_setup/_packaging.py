"""``packaging``, the one parser of versions, requirements and names here, wherever this runs.

Where snnbench is installed, ``packaging`` is too (a dependency in pyproject.toml). On a bare
GPU box, before anything is installed, it is pip's vendored copy (``pip._vendor.packaging``):
this package's whole job is driving pip, so pip is the one thing every box it runs on has,
and pip has vendored ``packaging`` in every release for years. Installing ``packaging`` from the
wheelhouse first was the other choice, and a worse one: it would install into the interpreter
that runs this (not necessarily the ``--python`` being set up) before the plan is even made,
and ``probe``, ``check`` and ``--dry-run`` must install nothing. The fallback is in this one
module, so every other module imports ``packaging``'s names from here.
"""

from __future__ import annotations

try:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version
except ModuleNotFoundError:  # a bare GPU box, before anything is installed: pip's own copy
    from pip._vendor.packaging.requirements import (  # type: ignore[assignment,no-redef]
        InvalidRequirement,
        Requirement,
    )
    from pip._vendor.packaging.utils import canonicalize_name  # type: ignore[assignment]
    from pip._vendor.packaging.version import (  # type: ignore[assignment]
        InvalidVersion,
        Version,
    )

__all__ = ["InvalidRequirement", "InvalidVersion", "Requirement", "Version", "canonicalize_name"]
