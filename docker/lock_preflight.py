"""Check, before any wheel is downloaded, that every pin of an image lock can be installed here.

    python docker/lock_preflight.py LOCK [--index-url URL]

One request per package to the index's JSON simple API (PEP 691): a pin passes when the index
has a wheel of that version for this interpreter's tags (``packaging.tags.sys_tags``, from pip's
copy of packaging) or its sdist. The pins below the lock's "installed outside the resolver"
marker count too (lava-dl's wheels declare Requires-Python <3.11 and are installed with
``--ignore-requires-python``, so Requires-Python is not checked for any pin). A broken lock
(a misspelt name, a version never uploaded, a wheel for another platform only) then fails the
image build in seconds with one line naming every bad pin, instead of after GBs of downloads.

Standard library plus pip's vendored packaging: it runs in the image's fresh venv. Exit 0: every
pin has a file; 1: one line on stderr naming the bad pins; 2: misuse or the index unreachable.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import sys
import urllib.error
import urllib.request

from pip._vendor.packaging.tags import Tag, sys_tags
from pip._vendor.packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from pip._vendor.packaging.version import InvalidVersion, Version

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#\\]+)")
JSON_SIMPLE = "application/vnd.pypi.simple.v1+json"


def pins(text: str) -> list[tuple[str, str]]:
    """Every ``name==version`` line of a lock (hash and ``# via`` lines are skipped)."""
    found = []
    for line in text.splitlines():
        match = PIN.match(line)
        if match:
            found.append((match.group(1), match.group(2)))
    return found


def installable(files: list[str], version: str, tags: frozenset[Tag]) -> bool:
    """True when one of ``files`` is a wheel of ``version`` for ``tags`` or its sdist."""
    try:
        wanted = Version(version)
    except InvalidVersion:
        return False
    for name in files:
        try:
            if name.endswith(".whl"):
                _, ver, _, wheel_tags = parse_wheel_filename(name)
                if ver == wanted and not wheel_tags.isdisjoint(tags):
                    return True
            elif (name.endswith((".tar.gz", ".zip"))
                  and parse_sdist_filename(name)[1] == wanted):
                return True
        except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
            continue
    return False


def project_files(index: str, name: str) -> list[str] | None:
    """The file names the index lists for ``name``; None when it has no such project."""
    url = f"{index.rstrip('/')}/{canonicalize_name(name)}/"
    request = urllib.request.Request(url, headers={"Accept": JSON_SIMPLE})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            page = json.load(response)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise
    return [str(f["filename"]) for f in page.get("files", [])]


def problems(lock: list[tuple[str, str]], index: str, tags: frozenset[Tag],
             fetch=project_files) -> list[str]:
    """``name==version (why)`` for every pin that cannot be installed, in the lock's order."""
    def one(pin: tuple[str, str]) -> str | None:
        name, version = pin
        files = fetch(index, name)
        if files is None:
            return f"{name}=={version} (no such project)"
        if not installable(files, version, tags):
            return f"{name}=={version} (no file for this Python and platform)"
        return None

    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        return [p for p in pool.map(one, lock) if p]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lock")
    parser.add_argument("--index-url", default=os.environ.get("PIP_INDEX_URL")
                        or "https://pypi.org/simple")
    args = parser.parse_args(argv)
    try:
        with open(args.lock, encoding="utf-8") as handle:
            lock = pins(handle.read())
    except OSError as exc:
        print(f"lock-preflight: cannot read {args.lock}: {exc.strerror}", file=sys.stderr)
        return 2
    if not lock:
        print(f"lock-preflight: {args.lock} pins nothing", file=sys.stderr)
        return 1
    try:
        bad = problems(lock, args.index_url, frozenset(sys_tags()))
    except (OSError, ValueError) as exc:
        print(f"lock-preflight: cannot read the index {args.index_url}: {exc}", file=sys.stderr)
        return 2
    if bad:
        print(f"lock-preflight: {args.lock} cannot be installed: {'; '.join(bad)}",
              file=sys.stderr)
        return 1
    # not "lock-preflight: ...": that prefix marks a failure (make image-check-gpu quotes it)
    print(f"lock preflight ok: all {len(lock)} pins of {args.lock} have a file on "
          f"{args.index_url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
