#!/usr/bin/env bash
# Make the CPU image's base locally, for machines that reach a Debian mirror but no container
# registry (make image-check runs this; docker/README.md explains it):
#
#   localhost/debian:bookworm        debootstrap --variant=minbase from the mirror apt uses
#   localhost/python:3.11-bookworm   Debian's python3 (3.11) + the host's extra CA certificates
#                                    (Containerfile.python): a stand-in for python:3.11-slim
#
#   docker/base/make-base-images.sh [podman|docker]
#
# An image that already exists is kept (delete it to rebuild). SNNBENCH_DEBIAN_MIRROR overrides
# the mirror. Nothing is tagged unless it was built completely. Exit 2: something is missing.
set -euo pipefail

engine=${1:-podman}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
debian_tag=localhost/debian:bookworm
python_tag=localhost/python:3.11-bookworm

fail() { echo "make-base-images: $*" >&2; exit 2; }
exists() { "$engine" image inspect "$1" >/dev/null 2>&1; }

# The mirror apt uses for bookworm: deb822 sources first, then the one-line format.
mirror() {
    if [[ -n ${SNNBENCH_DEBIAN_MIRROR:-} ]]; then echo "$SNNBENCH_DEBIAN_MIRROR"; return; fi
    local f uri
    for f in /etc/apt/sources.list.d/*.sources; do
        [[ -e $f ]] || continue
        uri=$(awk '/^URIs:/ {u=$2} /^Suites:.*bookworm( |$)/ && u ~ /debian\/?$/ {print u; exit}' "$f")
        [[ -n $uri ]] && { echo "$uri"; return; }
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [[ -e $f ]] || continue
        uri=$(awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' "$f")
        [[ -n $uri ]] && { echo "$uri"; return; }
    done
    echo "http://deb.debian.org/debian"
}

if ! exists "$debian_tag"; then
    command -v debootstrap >/dev/null || fail "debootstrap is not installed (apt-get install -y debootstrap)"
    url=$(mirror)
    python3 - "$url" <<'PY' || fail "the Debian mirror $url is not reachable (set SNNBENCH_DEBIAN_MIRROR)"
import sys, urllib.request
urllib.request.urlopen(sys.argv[1].rstrip("/") + "/dists/bookworm/Release", timeout=20).read(1)
PY
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    start=$SECONDS
    debootstrap --variant=minbase bookworm "$work/rootfs" "$url" >"$work/debootstrap.log" 2>&1 \
        || { tail -n 20 "$work/debootstrap.log" >&2; fail "debootstrap from $url failed"; }
    # a complete archive first: a failed tar must not leave a half image behind
    tar -C "$work/rootfs" -cf "$work/rootfs.tar" .
    "$engine" import "$work/rootfs.tar" "$debian_tag" >"$work/import.log" 2>&1 \
        || { cat "$work/import.log" >&2; fail "importing the root file system failed"; }
    rm -rf "$work/rootfs" "$work/rootfs.tar"
    echo "make-base-images: $debian_tag from $url in $((SECONDS - start)) s"
else
    echo "make-base-images: $debian_tag exists (kept)"
fi

if ! exists "$python_tag"; then
    ctx=$(mktemp -d)
    trap 'rm -rf "$ctx"' EXIT
    mkdir "$ctx/ca"
    cp /usr/local/share/ca-certificates/*.crt "$ctx/ca/" 2>/dev/null || true
    touch "$ctx/ca/.none"
    start=$SECONDS
    format=(); [[ $engine == podman ]] && format=(--format docker)
    "$engine" build "${format[@]}" -q -f "$here/Containerfile.python" -t "$python_tag" "$ctx" >/dev/null
    echo "make-base-images: $python_tag in $((SECONDS - start)) s"
else
    echo "make-base-images: $python_tag exists (kept)"
fi
