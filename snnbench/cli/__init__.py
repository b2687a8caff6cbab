"""The ``snnbench`` command line: parse, call the library, map outcomes to exit codes.

:mod:`snnbench.cli.app` holds the Typer app and the exit-code rule, :mod:`.options` and
:mod:`.output` what the commands share, and each command is a module of its own
(:mod:`.run`, :mod:`.verify`, :mod:`.list`, :mod:`.show`, :mod:`.env`, :mod:`.report`,
:mod:`.compare`, :mod:`.history`, :mod:`.merge`). ``snnbench.cli:app`` and
``snnbench.cli:main`` are the entry points.
"""

from snnbench.cli.app import app, main

__all__ = ["app", "main"]
