#!/usr/bin/env bash
# Install the locked snnbench stack into the active Python environment, one step at a time.
# docker/Dockerfile runs one step per image layer; the same steps rehearse the CPU image's
# install in a plain venv (docker/README.md, "What was checked here").
#
#   docker/install-stack.sh TARGET STEP
#     TARGET  gpu | cpu      the lock is snnbench/locks/requirements-TARGET.txt ($LOCK overrides)
#     STEP    preflight  every pin of the lock has a file on the index for this Python
#                      (docker/lock_preflight.py: one request per package, no wheel downloaded):
#                      a broken lock fails here in seconds, with one line, before GBs arrive
#             tools    pip, setuptools, wheel, setuptools-scm, ninja (every later build runs
#                      with --no-build-isolation, against exactly these)
#             torch    cpu only: torch and torchvision from $TORCH_INDEX (the PyTorch CPU index;
#                      set TORCH_INDEX= to use pip's configured indexes instead)
#             locked   every other pin of the resolved part of the lock, --no-deps
#             locked-cuda, locked-torch   gpu only: the CUDA wheels (nvidia-*, cuda-*), then
#                      torch, triton and torchvision, each its own layer before `locked`
#                      (which then skips them: already installed at the pinned version). One
#                      8 GB layer needs about three times its size free while the engine
#                      commits it; parts of at most ~4 GB fit where that did not.
#             cuda-home  gpu only: make $CUDA_HOME, when it is the nvidia/cu13 folder of the
#                      CUDA wheels (nvcc, crt, nvvm, cccl, the runtime's headers), look like a
#                      toolkit to nvcc and torch's extension builder (the links they expect);
#                      a CUDA_HOME elsewhere (a real toolkit) is left alone
#             native   gpu only: python -m snnbench.gpu_setup, the recipe of `make gpu-setup`:
#                      SpikingJelly from its sdist with its native CUDA operators and
#                      sinabs-exodus from its sdist, both compiled against the installed torch
#                      (needs nvcc and TORCH_CUDA_ARCH_LIST), lava-dl, CuPy, each checked
#             outside  cpu only: lava-dl, whose wheels declare Requires-Python <3.11 (the GPU
#                      image gets it from the native step)
#             project  snnbench itself, from the repository root
#             all      the above, in order
#
# Every install is --no-deps: the lock is the complete list, so nothing is resolved here.
set -euo pipefail

usage="usage: $0 gpu|cpu preflight|tools|torch|locked|locked-cuda|locked-torch|cuda-home|native|outside|project|all"
target=${1:?$usage}
step=${2:?$usage}
case $target in gpu | cpu) ;; *) echo "$usage" >&2; exit 2 ;; esac

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
lock=${LOCK:-$root/snnbench/locks/requirements-$target.txt}
python=${PYTHON:-python}
pip=("$python" -m pip install --no-deps --no-cache-dir --disable-pip-version-check)
marker='^# >>> installed outside the resolver'
build_tools='^(pip|setuptools|setuptools-scm|vcs-versioning|packaging|wheel|ninja)=='
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The resolved part of the lock: pin lines above the marker.
resolved() { sed "/$marker/,\$d" "$lock" | grep -E '^[A-Za-z0-9]'; }

# The exact pin of one package, from anywhere in the lock ("name==version").
pin() {
    local line
    line=$(grep -E "^$1==" "$lock" | head -n 1) || true
    if [[ -z $line ]]; then
        echo "$lock pins no $1" >&2
        return 1
    fi
    echo "$line"
}

step_preflight() {
    "$python" "$here/lock_preflight.py" "$lock"
}

step_tools() {
    resolved | grep -E "$build_tools" >"$work/tools.txt"
    "${pip[@]}" -r "$work/tools.txt"
}

step_torch() {
    [[ $target == cpu ]] || return 0
    resolved | grep -E '^(torch|torchvision)==' >"$work/torch.txt"
    local index=${TORCH_INDEX-https://download.pytorch.org/whl/cpu}
    "${pip[@]}" ${index:+--index-url "$index"} -r "$work/torch.txt"
}

step_locked() {
    local skip
    if [[ $target == cpu ]]; then
        skip="$build_tools|^(torch|torchvision)=="  # from the CPU index, in step_torch
    else
        skip="$build_tools|^spikingjelly=="  # rebuilt from source, in step_native
    fi
    resolved | grep -Ev "$skip" >"$work/locked.txt"
    "${pip[@]}" --no-build-isolation -r "$work/locked.txt"
}

step_cuda_home() {
    [[ $target == gpu ]] || return 0
    : "${CUDA_HOME:?set CUDA_HOME: a CUDA toolkit, or the nvidia/cu13 folder of the CUDA wheels}"
    [[ -x $CUDA_HOME/bin/nvcc ]] || { echo "install-stack: no nvcc in CUDA_HOME=$CUDA_HOME" >&2; return 1; }
    if [[ $CUDA_HOME == */site-packages/nvidia/cu* ]]; then
        # nvcc.profile puts $TOP/targets/x86_64-linux/{include,lib} (and include/cccl) on its
        # paths, as the toolkit lays them out; the wheels put them straight into include/ and
        # lib/. torch links -lcudart, and the runtime wheel brings only libcudart.so.13.
        mkdir -p "$CUDA_HOME/targets/x86_64-linux"
        ln -sfn ../../include "$CUDA_HOME/targets/x86_64-linux/include"
        ln -sfn ../../lib "$CUDA_HOME/targets/x86_64-linux/lib"
        local so
        so=$(cd "$CUDA_HOME/lib" && ls libcudart.so.* | head -n 1)
        ln -sfn "$so" "$CUDA_HOME/lib/libcudart.so"
    fi
    # every torch extension includes Python.h (a base whose Python lacks it: python3-dev)
    local include
    include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    [[ -e $include/Python.h ]] || {
        echo "install-stack: no Python.h in $include: CUDA extensions cannot be built" >&2
        return 1
    }
    local release
    release=$("$CUDA_HOME/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
    echo "cuda-home: nvcc $release in $CUDA_HOME"
}

step_locked_part() {
    [[ $target == gpu ]] || return 0
    local pattern=$1
    resolved | grep -E "$pattern" >"$work/part.txt"
    "${pip[@]}" --no-build-isolation -r "$work/part.txt"
}

step_native() {
    [[ $target == gpu ]] || return 0
    : "${TORCH_CUDA_ARCH_LIST:?set TORCH_CUDA_ARCH_LIST: no GPU is visible while building}"
    # The same recipe as `make gpu-setup` on a GPU box without Docker: it builds SpikingJelly's
    # native operators (SJ_BUILD_NATIVE_CUDA=1) and sinabs-exodus from their sdists against the
    # installed torch (--no-build-isolation), installs lava-dl (--ignore-requires-python) and
    # CuPy at the lock's versions, then checks every library. Everything else is installed
    # already (step locked), so it installs nothing unpinned; --strict fails the build on any
    # library that is not ok. The project itself comes later (step project): --skip harness.
    # python -m from the root: snnbench is not installed yet, gpu_setup runs from the source.
    (cd "$root" && PIP_NO_CACHE_DIR=1 "$python" -m snnbench.gpu_setup install --lock "$lock" \
        --skip harness --strict --arch-list "$TORCH_CUDA_ARCH_LIST" \
        ${MAX_JOBS:+--max-jobs "$MAX_JOBS"} --log-dir "$work/gpu-setup")
}

step_outside() {
    [[ $target == cpu ]] || return 0  # the GPU image: snnbench.gpu_setup, in step native
    # lava-dl 0.6 works on Python 3.11 but declares <3.11; its only runtime dependency the
    # adapters need (opencv-python-headless) is in the resolved part of the lock.
    "${pip[@]}" --ignore-requires-python "$(pin lava-dl)"
}

step_project() {
    # setuptools builds in the source tree: remove what this build left, and only that.
    local before made
    before=$(ls -d "$root/build" "$root"/*.egg-info 2>/dev/null || true)
    "${pip[@]}" --no-build-isolation "$root"
    for made in "$root/build" "$root"/*.egg-info; do
        if [[ -e $made ]] && ! grep -qxF "$made" <<<"$before"; then
            rm -rf "$made"
        fi
    done
}

case $step in
    preflight | tools | torch | locked | native | outside | project) "step_$step" ;;
    cuda-home) step_cuda_home ;;
    locked-cuda) step_locked_part '^(nvidia-|cuda-)' ;;
    locked-torch) step_locked_part '^(torch|triton|torchvision)==' ;;
    all) for s in preflight tools torch locked cuda_home native outside project; do "step_$s"; done ;;
    *) echo "$usage" >&2; exit 2 ;;
esac
