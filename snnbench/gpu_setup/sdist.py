"""Fetch one source distribution from the package index into a folder, without building it.

``pip download`` cannot fetch sinabs-exodus's sdist on a machine without a CUDA torch: pip
prepares every download's metadata, and sinabs-exodus's ``setup.py`` imports torch's CUDA build
helpers to write it. The sdist itself is a plain file on the index, so ``download`` fetches it
here instead (the index's simple API, PEP 691 JSON or PEP 503 HTML), checks its sha256 (the one
pinned below where known, else the index's), and leaves it in the wheelhouse, where ``install``
finds it (``pip --no-index --find-links``) and builds it on the GPU box, against its torch.

Standard library only, like the rest of gpu_setup::

    python -m snnbench.gpu_setup.sdist --dest wheelhouse sinabs-exodus==2.0.0
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import os
import re
import sys
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from snnbench.gpu_setup._packaging import InvalidVersion, Version
from snnbench.gpu_setup.lock import canonical

#: the index when ``PIP_INDEX_URL`` names none
DEFAULT_INDEX = "https://pypi.org/simple"
#: the sha256 of each sdist fetched this way, as published on PyPI: a mirror (or a tampered
#: index) serving other bytes under the same name is refused
KNOWN_SHA256 = {
    "sinabs-exodus==2.0.0": "4d4e61da73aa7031a0b6be030afb9035a120b15dacfa9e034ff18006cefd37a5",
}
_JSON = "application/vnd.pypi.simple.v1+json"

#: ``urllib.request.urlopen``, or a fake of it: (request, timeout=) -> a response
Opener = Callable[..., Any]


class FetchError(Exception):
    """The sdist could not be fetched or did not check out; the message is one line."""


@dataclass(frozen=True)
class Link:
    """One file the index lists for a project."""

    filename: str
    url: str
    sha256: str | None


def index_url(environ: Mapping[str, str] | None = None) -> str:
    """The index pip would use: ``PIP_INDEX_URL``, else PyPI."""
    env = os.environ if environ is None else environ
    return (env.get("PIP_INDEX_URL") or DEFAULT_INDEX).rstrip("/")


def links(page: bytes, content_type: str, base_url: str) -> list[Link]:
    """The files a project page of the simple API lists (JSON or HTML)."""
    if content_type == _JSON:
        data = json.loads(page)
        return [Link(f["filename"], urllib.parse.urljoin(base_url, f["url"]),
                     (f.get("hashes") or {}).get("sha256")) for f in data.get("files", [])]
    found = []
    for href, text in re.findall(r"<a\s[^>]*href=\"([^\"]+)\"[^>]*>([^<]*)</a>",
                                 page.decode("utf-8", "replace"), flags=re.IGNORECASE):
        url, _, fragment = html.unescape(href).partition("#")
        sha = fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else None
        found.append(Link(text.strip(), urllib.parse.urljoin(base_url, url), sha))
    return found


def is_sdist_of(filename: str, name: str, version: str) -> bool:
    """True for ``<name>-<version>.tar.gz`` (any spelling of the name, PEP 440 equal version)."""
    if not filename.endswith(".tar.gz"):
        return False
    project, _, found = filename.removesuffix(".tar.gz").rpartition("-")
    try:
        return canonical(project) == canonical(name) and Version(found) == Version(version)
    except InvalidVersion:
        return False


def _open(opener: Opener, url: str, accept: str | None = None) -> Any:
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "file" and Path(urllib.request.url2pathname(parsed.path)).is_dir():
        url = urllib.parse.urljoin(url, "index.html")  # a local index is a folder tree
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        return opener(request, timeout=120)
    except (OSError, ValueError) as exc:
        raise FetchError(f"cannot read {url}: {exc}") from None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_sdist(requirement: str, dest: Path, index: str | None = None,
                opener: Opener = urllib.request.urlopen) -> Path:
    """Fetch the sdist of ``requirement`` (``name==version``) into ``dest``; its path.

    A file already there with the expected sha256 is kept. Raises :class:`FetchError`.
    """
    name, sep, version = requirement.partition("==")
    if not sep or not name.strip() or not version.strip():
        raise FetchError(f"{requirement!r} is not name==version")
    name, version = name.strip(), version.strip()
    page_url = f"{index or index_url()}/{canonical(name)}/"
    with _open(opener, page_url, f"{_JSON}, text/html;q=0.1") as response:
        content_type = response.headers.get_content_type()
        found = [link for link in links(response.read(), content_type, page_url)
                 if is_sdist_of(link.filename, name, version)]
    if not found:
        raise FetchError(f"no sdist of {name} {version} on {page_url}")
    link = found[0]
    pinned = KNOWN_SHA256.get(f"{canonical(name)}=={version}")
    if pinned and link.sha256 and link.sha256 != pinned:
        raise FetchError(f"{page_url} lists {link.filename} with sha256 {link.sha256}, not the "
                         f"published {pinned}")
    expected = pinned or link.sha256
    if expected is None:
        raise FetchError(f"{page_url} gives no sha256 for {link.filename}: nothing to check "
                         "it against")
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / Path(link.filename).name
    if target.is_file() and _sha256(target) == expected:
        return target
    part = target.with_name(f".{target.name}.part")
    digest = hashlib.sha256()
    try:
        with _open(opener, link.url) as response, open(part, "wb") as out:
            for block in iter(lambda: response.read(1 << 20), b""):
                digest.update(block)
                out.write(block)
        if digest.hexdigest() != expected:
            raise FetchError(f"{link.url} has sha256 {digest.hexdigest()}, expected {expected}")
        os.replace(part, target)
    finally:
        part.unlink(missing_ok=True)
    return target


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m snnbench.gpu_setup.sdist --dest DIR name==version``: 0, or 1 with one
    ``ERROR:`` line on stderr."""
    parser = argparse.ArgumentParser(prog="python -m snnbench.gpu_setup.sdist",
                                     description="Fetch one sdist from the package index.")
    parser.add_argument("requirement", help="name==version")
    parser.add_argument("--dest", type=Path, required=True, help="the folder to put it in")
    parser.add_argument("--index-url", help="the simple index (default: $PIP_INDEX_URL, "
                        "else PyPI)")
    args = parser.parse_args(argv)
    try:
        path = fetch_sdist(args.requirement, args.dest, args.index_url)
    except (FetchError, OSError) as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
