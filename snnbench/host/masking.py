"""Credentials never written: the one place that decides what is a secret and masks it.

A secret is found two ways. By the variable's *name* (``*_TOKEN``, ``*API_KEY``, ``*CRED*``,
``*DSN*``…): its whole value is masked. By the *value*, whatever the name: the password of a
URL (``postgres://user:pw@host`` → ``postgres://user:***@host``) and a ``password=…`` or
``--token …`` style option inside a command line or flag string. Every writer of environment
values (manifest, host records, reports, ``env --json``, ``compare``) masks through
:func:`masked_env_vars`; a worker's own output is scrubbed of the secret values its
environment held (:func:`secret_values`, :func:`scrub`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

#: parts of a name that mark a credential: such a variable is recorded as ``***``, whatever
#: its prefix, so a token never reaches a manifest, a host record or a report
SECRET_MARKERS: tuple[str, ...] = (
    "TOKEN", "KEY", "SECRET", "PASS", "AUTH", "CRED", "DSN", "COOKIE", "PRIVATE",
)
MASK = "***"

#: ``scheme://user:password@`` (the user is kept: it says whose account, not how to use it)
_URL_CREDENTIAL = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:)[^\s/@]+@")
#: words that name a credential inside an option or a key=value pair
_SECRET_WORD = r"(?:password|passwd|passphrase|pwd|token|secret|api[_-]?key|apikey|" \
               r"access[_-]?key|private[_-]?key|credentials?|auth)"
#: ``password=…``, ``--db-password=…``, ``?token=…``: the value after ``=``
_KEY_VALUE = re.compile(
    rf"(?P<head>(?<![A-Za-z0-9])[-\w.]*{_SECRET_WORD}[-\w.]*\s*=\s*)"
    r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s&;,\"']+)",
    re.IGNORECASE)
#: ``--password VALUE`` (an option and its value as two words)
_OPTION_VALUE = re.compile(
    rf"(?P<head>(?<!\S)--?[-\w]*{_SECRET_WORD}[-\w]*\s+)(?P<value>(?!-)\S+)",
    re.IGNORECASE)
#: a secret shorter than this is not searched for in output (``1``, ``on``: it would mask
#: ordinary numbers and words, and such a value guards nothing)
MIN_SCRUBBED_LENGTH = 6


def looks_secret(name: str) -> bool:
    """True for a variable name that looks like a credential (``*_TOKEN``, ``*API_KEY``…)."""
    upper = name.upper()
    return any(marker in upper for marker in SECRET_MARKERS)


def mask_text(text: str) -> str:
    """``text`` with URL passwords and ``password=…``/``--token …`` values replaced by
    ``***``; the rest (user names, hosts, other options) is kept."""
    text = _URL_CREDENTIAL.sub(lambda m: f"{m['head']}{MASK}@", text)
    text = _KEY_VALUE.sub(lambda m: f"{m['head']}{MASK}", text)
    return _OPTION_VALUE.sub(lambda m: f"{m['head']}{MASK}", text)


def mask_value(name: str, value: Any) -> Any:
    """The value to record for variable ``name``: ``***`` for a credential-looking name,
    else the value with any credential inside it masked (non-strings unchanged)."""
    if looks_secret(str(name)):
        return MASK
    return mask_text(value) if isinstance(value, str) else value


def masked_env_vars(env_vars: Mapping[str, Any]) -> dict[str, Any]:
    """``env_vars`` with every credential masked, by name and inside values (for variables
    read here, or from a run folder written by an older snnbench, or by someone else)."""
    return {k: mask_value(k, v) for k, v in env_vars.items()}


def secret_values(environ: Mapping[str, str]) -> list[str]:
    """The secrets an environment holds: the values of credential-looking variables and the
    parts :func:`mask_text` would mask in any value, longest first."""
    found: set[str] = set()
    for name, value in environ.items():
        if looks_secret(name):
            found.add(value)
            continue
        for pattern in (_KEY_VALUE, _OPTION_VALUE):
            found.update(m["value"].strip("\"'") for m in pattern.finditer(value))
        for match in _URL_CREDENTIAL.finditer(value):
            found.add(match[0][len(match["head"]):-1])
    return sorted((v for v in found if len(v) >= MIN_SCRUBBED_LENGTH), key=len, reverse=True)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` (a worker's output, an error message) with every value of ``secrets``
    replaced by ``***`` and any other URL password or ``password=…`` value masked."""
    for secret in secrets:
        text = text.replace(secret, MASK)
    return mask_text(text)
