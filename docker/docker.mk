# Docker targets for snnbench; the Makefile includes this file (`-include docker/docker.mk`).
#
#   make docker-build                  build both images: snnbench:gpu and snnbench:cpu
#   make docker-bench CONFIG=configs/opennm-2024.toml
#                                      run a sweep in the GPU image; results land in ./results
#   make docker-bench DOCKER_TARGET=cpu CONFIG=default     the same in the CPU image
#   make docker-shell                  a shell in the image, ./results mounted
#   make docker-verify                 check the image's stack against its lock (and the GPU)
#   make docker-gpu-check              the GPU image's gpu-check on this GPU box (docker/README.md;
#                                      podman: DOCKER=podman DOCKER_GPU_FLAGS="--device nvidia.com/gpu=all")
#   make docker-lock                   regenerate docker/requirements-*.txt (needs uv)
#   make docker-lint                   hadolint on docker/Dockerfile
#
# Every run passes the image's tag and ID (plus registry digests, if it was pushed or pulled)
# into the container as SNNBENCH_IMAGE_TAG / SNNBENCH_IMAGE_DIGEST /
# SNNBENCH_IMAGE_REPO_DIGESTS; the run manifest records them. See docker/README.md.

DOCKER ?= docker
DOCKER_IMAGE ?= snnbench
# Which image docker-bench, docker-shell and docker-verify use: gpu or cpu.
DOCKER_TARGET ?= gpu
DOCKER_TAG = $(DOCKER_IMAGE):$(DOCKER_TARGET)
DOCKER_FILE := docker/Dockerfile
DOCKER_RESULTS ?= $(CURDIR)/results
# GPU architectures to compile sinabs-exodus and SpikingJelly's CUDA ops for (empty: the
# Dockerfile's default list, Turing to Blackwell). One architecture, e.g. "9.0", builds faster.
DOCKER_CUDA_ARCHS ?=
DOCKER_BUILD_ARGS ?=
DOCKER_RUN_ARGS ?=
DOCKER_GPU_FLAGS = $(if $(filter gpu,$(DOCKER_TARGET)),--gpus all)
# The commit the image is built from; "-dirty" when tracked files differ from it.
DOCKER_GIT_DIRTY = $(if $(shell git status --porcelain --untracked-files=no 2>/dev/null),-dirty)
DOCKER_GIT_COMMIT = $(shell git rev-parse HEAD 2>/dev/null || echo unknown)$(DOCKER_GIT_DIRTY)

# CONFIG given on the command line (or in the environment) wins; otherwise the GPU image runs
# the Open Neuromorphic sweep and the CPU image the default CPU sweep. (The Makefile's own
# CONFIG default, "default", is a CPU config and would leave the GPU idle.)
ifneq ($(filter command line environment,$(origin CONFIG)),)
DOCKER_CONFIG ?= $(CONFIG)
else
DOCKER_CONFIG ?= $(if $(filter cpu,$(DOCKER_TARGET)),default,opennm-2024)
endif

# Locking: uv resolves for the image's platform, not this machine's.
UV ?= uv
DOCKER_LOCK_DATE ?= 2026-11-22T00:00:00Z
DOCKER_LOCK_FLAGS = --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	--exclude-newer $(DOCKER_LOCK_DATE) --index-url https://pypi.org/simple \
	--no-emit-package samna --no-emit-package torchaudio \
	--custom-compile-command "make docker-lock"
# Where the resolver finds torch's CPU wheel (a flat list of wheels: a URL or a folder).
DOCKER_TORCH_CPU_LINKS ?= https://download.pytorch.org/whl/cpu/torch/

# Appends the '#outside-resolver' pins of $(1) (a .in file) to the lock $(2): packages the
# resolver cannot take (see the .in files); docker/install-stack.sh installs them separately.
define docker_outside_resolver
	{ echo; echo '# >>> installed outside the resolver by docker/install-stack.sh (pins from $(1))'; \
	  sed -n 's/^#outside-resolver //p' $(1); } >> $(2)
endef

.PHONY: docker-build docker-build-gpu docker-build-cpu docker-bench docker-shell docker-verify \
	docker-gpu-check docker-lock docker-lint

docker-build: docker-build-gpu docker-build-cpu

docker-build-gpu docker-build-cpu: docker-build-%:
	DOCKER_BUILDKIT=1 $(DOCKER) build -f $(DOCKER_FILE) --target $* -t $(DOCKER_IMAGE):$* \
		--build-arg IMAGE_TAG=$(DOCKER_IMAGE):$* --build-arg GIT_COMMIT=$(DOCKER_GIT_COMMIT) \
		$(if $(DOCKER_CUDA_ARCHS),--build-arg TORCH_CUDA_ARCH_LIST="$(DOCKER_CUDA_ARCHS)") \
		$(DOCKER_BUILD_ARGS) .

# Runs as the calling user so that ./results stays yours. The image's own init (tini) reaps
# the worker processes; --init is kept for `docker-shell`, whose --entrypoint bypasses it.
# The host's configs/ is mounted read-only at configs/ in the image's work folder, so a
# --config configs/NAME.toml path reads the host's file and edited configs need no rebuild.
docker-bench:
	@mkdir -p $(DOCKER_RESULTS)
	@digest=$$($(DOCKER) image inspect --format '{{.Id}}' $(DOCKER_TAG)) \
		|| { echo "no image $(DOCKER_TAG): run 'make docker-build-$(DOCKER_TARGET)'" >&2; exit 2; }; \
	repo_digests=$$($(DOCKER) image inspect --format '{{join .RepoDigests ","}}' $(DOCKER_TAG)); \
	tty=; if [ -t 0 ] && [ -t 1 ]; then tty=-it; fi; \
	set -x; \
	$(DOCKER) run --rm --init $$tty $(DOCKER_GPU_FLAGS) --user "$$(id -u):$$(id -g)" \
		-e SNNBENCH_IMAGE_TAG=$(DOCKER_TAG) -e SNNBENCH_IMAGE_DIGEST="$$digest" \
		-e SNNBENCH_IMAGE_REPO_DIGESTS="$$repo_digests" \
		-v "$(DOCKER_RESULTS):/results" -v "$(CURDIR)/snnbench/configs:/home/snnbench/configs:ro" \
		$(DOCKER_RUN_ARGS) $(DOCKER_TAG) run --config $(DOCKER_CONFIG)

docker-shell:
	@mkdir -p $(DOCKER_RESULTS)
	@digest=$$($(DOCKER) image inspect --format '{{.Id}}' $(DOCKER_TAG)) \
		|| { echo "no image $(DOCKER_TAG): run 'make docker-build-$(DOCKER_TARGET)'" >&2; exit 2; }; \
	$(DOCKER) run --rm --init -it $(DOCKER_GPU_FLAGS) --user "$$(id -u):$$(id -g)" \
		-e SNNBENCH_IMAGE_TAG=$(DOCKER_TAG) -e SNNBENCH_IMAGE_DIGEST="$$digest" \
		-v "$(DOCKER_RESULTS):/results" -v "$(CURDIR)/snnbench/configs:/home/snnbench/configs:ro" \
		$(DOCKER_RUN_ARGS) --entrypoint bash $(DOCKER_TAG)

# The build already ran these checks without a GPU; with one, the GPU stage also proves that
# torch, JAX and the compiled extensions see the device.
docker-verify:
	$(DOCKER) run --rm $(DOCKER_GPU_FLAGS) --workdir /opt/snnbench --entrypoint python $(DOCKER_TAG) \
		docker/verify_stack.py --lock snnbench/locks/requirements-$(DOCKER_TARGET).txt \
		--target $(DOCKER_TARGET) $(if $(filter gpu,$(DOCKER_TARGET)),--require-device)

# python -m snnbench.gpu_check in the GPU image (set-up report, verify on CUDA, a light
# opennm-2024 run, the report): its folder lands in $(DOCKER_RESULTS)/gpu-check-<date>-<gpu>.
# tini stays PID 1 (--entrypoint replaces the image's, so it is named again).
docker-gpu-check:
	@mkdir -p $(DOCKER_RESULTS)
	@digest=$$($(DOCKER) image inspect --format '{{.Id}}' $(DOCKER_IMAGE):gpu) \
		|| { echo "no image $(DOCKER_IMAGE):gpu: run 'make docker-build-gpu'" >&2; exit 2; }; \
	set -x; \
	$(DOCKER) run --rm $(or $(DOCKER_GPU_FLAGS),--gpus all) --user "$$(id -u):$$(id -g)" \
		-e SNNBENCH_IMAGE_TAG=$(DOCKER_IMAGE):gpu -e SNNBENCH_IMAGE_DIGEST="$$digest" \
		-v "$(DOCKER_RESULTS):/results" $(DOCKER_RUN_ARGS) --entrypoint /usr/bin/tini \
		$(DOCKER_IMAGE):gpu -s -- python -m snnbench.gpu_check $(GPU_CHECK_ARGS)

docker-lock:
	$(UV) pip compile pyproject.toml docker/requirements-gpu.in --extra all \
		$(DOCKER_LOCK_FLAGS) -o snnbench/locks/requirements-gpu.txt
	$(call docker_outside_resolver,docker/requirements-gpu.in,snnbench/locks/requirements-gpu.txt)
	$(UV) pip compile pyproject.toml docker/requirements-cpu.in --extra all --extra dev \
		$(DOCKER_LOCK_FLAGS) --find-links $(DOCKER_TORCH_CPU_LINKS) --no-emit-package torchvision \
		-o snnbench/locks/requirements-cpu.txt
	$(call docker_outside_resolver,docker/requirements-cpu.in,snnbench/locks/requirements-cpu.txt)

docker-lint:
	$(or $(wildcard $(VENV)/bin/hadolint),hadolint) docker/Dockerfile
