"""One base class for every error a user can cause or fix.

The CLI maps :class:`UserError` to one line on stderr and exit code 2; anything else is a bug
and keeps its traceback for the developer (asv's ``UserError`` is the model).
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input, or a folder or environment that cannot be used; the message is one line."""
