# snnbench: `make bench` and `make test` do all set-up on a fresh machine.
#
# torch is installed first and pinned (TORCH_VERSION) through a constraints file, so that no
# later install can swap it for a multi-GB CUDA build. On a GPU box, set TORCH_VERSION and
# TORCH_INDEX (e.g. https://download.pytorch.org/whl/cu128) or use the Docker image.

PYTHON ?= python3
VENV ?= .venv
TORCH_VERSION ?= 2.13.0
# the Triton that torch 2.13's CUDA wheels pin: CPU tests interpret and compile (for sm_90, ahead
# of time) the fused kernels with the same Triton a GPU run uses
TRITON_VERSION ?= 3.7.1
TORCH_INDEX ?=
CONFIG ?= default
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.snnbench-installed
CONSTRAINTS := $(VENV)/constraints.txt
# Every library that installs on a CPU machine with Python 3.11 (sinabs-exodus needs CUDA+nvcc),
# and both cluster executors, so that CI tests them (submitit's local cluster, a local Ray).
EXTRAS := torch,fused,snntorch,norse,spikingjelly,sinabs,lava-dl,jax,haiku,spyx,rockpool,brainstate,dev,dist,slurm,ray

# GPU boxes (docs/gpu-check.md): the interpreter that already has a CUDA torch (and JAX), not
# .venv. WHEELHOUSE: install offline from that folder. GPU_ARCHS: TORCH_CUDA_ARCH_LIST for the
# CUDA builds (default: the visible GPUs).
GPU_PYTHON ?= python3
WHEELHOUSE ?=
GPU_ARCHS ?=
GPU_SETUP_ARGS ?=
GPU_CHECK_ARGS ?=

.PHONY: help setup bench test lint typecheck imports check dist-check image-check image-check-gpu regress clean valgrind \
	gpu-setup gpu-check gpu-wheelhouse

help:
	@echo "make bench     set up .venv, then run the default benchmark (configs/default.toml)"
	@echo "make test      set up .venv, then ruff + mypy and the test suite"
	@echo "make check     ruff + mypy + the import layers (lint-imports)"
	@echo "make dist-check  build the sdist and wheel, install the wheel in a fresh venv, use it"
	@echo "make image-check build the CPU image with podman (or docker) and use it"
	@echo "make image-check-gpu  the same for the GPU image, checked without a GPU"
	@echo "make regress   CPU smoke run compared against results/baselines/cpu-smoke"
	@echo "make slurm-check  (root) a single-node Slurm, without and with accounting: the"
	@echo "                  real-Slurm tests against it (slurm.mk, docs/executors.md)"
	@echo "make gpu-setup [GPU_PYTHON=...] [WHEELHOUSE=dir]   CUDA builds + GPU libraries"
	@echo "make gpu-check [GPU_PYTHON=...]   check a GPU box (< 25 min), results/gpu-check-*"
	@echo "make gpu-wheelhouse WHEELHOUSE=dir [GPU_MACHINE=box.json]   wheels for an offline box"
	@echo "make docker-build | docker-bench CONFIG=... | docker-shell   (see docker/README.md)"

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip setuptools wheel
	$(PIP) install --quiet "torch==$(TORCH_VERSION)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	printf 'torch==%s\ntriton==%s\n' "$(TORCH_VERSION)" "$(TRITON_VERSION)" > $(CONSTRAINTS)
	$(PIP) install --quiet -c $(CONSTRAINTS) -e ".[$(EXTRAS)]"
	# lava-dl's wheels declare python<3.11 although they work on 3.11: install without its
	# metadata checks; its import-time workarounds live in the lava-dl adapter's worker only.
	$(PIP) install --quiet -c $(CONSTRAINTS) --no-deps --ignore-requires-python "lava-dl==0.6.0"
	$(PY) -c "import torch, sys; v = torch.__version__.split('+')[0]; sys.exit(0 if v == '$(TORCH_VERSION)' else 'torch changed to ' + v)"
	touch $(STAMP)

bench: setup
	$(VENV)/bin/snnbench run --config $(CONFIG)

# lint and types first: CI runs make test, so a type or lint error fails the build; then the
# wheel as users install it (an editable install hides a module the wheel forgets)
test: setup check dist-check valgrind
	$(VENV)/bin/pytest -q

# valgrind (Debian's package) for the instruction-count metric's tests (run --instructions,
# tests/test_instructions.py): installed when missing where apt-get may run, else they skip
valgrind:
	@command -v valgrind >/dev/null 2>&1 \
		|| { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
		     && DEBIAN_FRONTEND=noninteractive apt-get install -y -q valgrind >/dev/null 2>&1; } \
		|| echo "make: valgrind is missing (apt-get install -y valgrind): the instruction-count tests skip"

# The sdist and the wheel built, checked, the wheel installed (not editable) into a fresh venv
# outside the checkout and used from another folder: scripts/dist_check.py says each step.
dist-check: setup
	$(PY) scripts/dist_check.py

# The CPU image built with podman (or docker) on a base made from the Debian mirror (no registry
# needed), then used: list, verify, a run onto a mounted folder, report. Tagged snnbench:cpu only
# when every check passed. Needs podman (apt-get install -y podman runc debootstrap) or docker;
# no venv. IMAGE_CHECK_ARGS: e.g. --base python:3.11.18-slim where a registry is reachable.
IMAGE_CHECK_ARGS ?=
image-check:
	python3 scripts/image_check.py $(IMAGE_CHECK_ARGS)

# The GPU image, built and checked on a machine without a GPU (docker/README.md, "What was
# checked here"): the same Debian base, every CUDA part from the package index (the compiler
# too, as wheels), the same lock as make gpu-setup. First a broken lock must fail the build at
# its preflight with one line and tag nothing; then the image is built (cold, then cached: both
# times and its size printed), its libraries checked, lava-dl's JIT extension built in it, list,
# verify, a CPU run onto a mounted folder. Tagged snnbench:gpu only when every check passed.
# IMAGE_CHECK_GPU_ARGS: e.g. --arch-list "8.0;9.0" (default 9.0, one architecture: CI's time).
IMAGE_CHECK_GPU_ARGS ?=
image-check-gpu:
	python3 scripts/image_check.py --target gpu $(IMAGE_CHECK_GPU_ARGS)

lint: setup
	$(VENV)/bin/ruff check snnbench tests docker examples scripts benchmarks

typecheck: setup
	$(VENV)/bin/mypy snnbench

# the import layers and forbidden imports of pyproject's [tool.importlinter]
imports: setup
	$(VENV)/bin/lint-imports

check: lint typecheck imports

regress: setup
	rm -rf results/ci-smoke
	$(VENV)/bin/snnbench run --config configs/ci-smoke.toml --out results/ci-smoke
	$(VENV)/bin/snnbench compare results/baselines/cpu-smoke results/ci-smoke --factor 1.25 --time-floor-ms 20 --format md

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache *.egg-info

# Set up the GPU-only parts in GPU_PYTHON's environment: sinabs-exodus and SpikingJelly's native
# ops compiled against its torch, JAX's CUDA plugin, lava-dl, CuPy, each library checked (one
# line each). The same package is the Docker GPU image's native step; it runs from this
# checkout's root (python -m) before snnbench is installed.
gpu-setup:
	$(GPU_PYTHON) -m snnbench.gpu_setup install $(if $(WHEELHOUSE),--wheelhouse $(WHEELHOUSE)) \
		$(if $(GPU_ARCHS),--arch-list "$(GPU_ARCHS)") $(GPU_SETUP_ARGS)

# Set-up report, verify on CUDA, a light opennm-2024 run, the report: one folder, < 25 min.
gpu-check:
	$(GPU_PYTHON) -m snnbench.gpu_check $(GPU_CHECK_ARGS)

# On a machine with network: the wheels and sources an offline GPU box needs (GPU_MACHINE: the
# box's facts from `python3 -m snnbench.gpu_setup probe > box.json`, to fetch only what it lacks).
GPU_MACHINE ?=
gpu-wheelhouse:
	$(or $(wildcard $(PY)),$(PYTHON)) -m snnbench.gpu_setup download \
		--dest $(or $(WHEELHOUSE),wheelhouse) $(if $(GPU_MACHINE),--machine $(GPU_MACHINE)) \
		$(GPU_SETUP_ARGS)

-include docker/docker.mk
-include slurm.mk
