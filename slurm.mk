# `make slurm-check`: the Slurm executor against a real single-node Slurm on this machine
# (root, Debian/Ubuntu), in two setups: without accounting, then with slurmdbd + MariaDB.
# Installs the packages when missing, starts the cluster (scripts/slurm_cluster.sh), runs the
# real-Slurm tests (pytest -m real_slurm), and stops the cluster whatever happened. One line
# per setup: the result and the cluster's start-up time.

SLURM_PACKAGES ?= slurm-wlm munge slurmdbd mariadb-server
SLURM_SETUPS ?= noacct acct
SLURM_TESTS ?= tests/test_slurm_real.py
SLURM_PYTEST_ARGS ?=

.PHONY: slurm-check slurm-packages slurm-up slurm-down

slurm-packages:
	@missing=""; for p in $(SLURM_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" \
			|| missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing"; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing >/dev/null \
			|| { apt-get update -q >/dev/null && \
			     DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing >/dev/null; }; \
	fi

slurm-up: slurm-packages
	scripts/slurm_cluster.sh start $(if $(filter acct,$(SETUP)),--accounting)

slurm-down:
	scripts/slurm_cluster.sh stop

# the venv is set up first unless it is there already (CI: `make test` made it)
slurm-check: $(if $(wildcard $(VENV)/bin/pytest),,setup) slurm-packages
	@status=0; summary=""; \
	for setup in $(SLURM_SETUPS); do \
		flag=""; [ $$setup = acct ] && flag=--accounting; \
		log=$$(mktemp); \
		trap 'scripts/slurm_cluster.sh stop >/dev/null 2>&1' EXIT INT TERM; \
		t0=$$(date +%s); \
		if scripts/slurm_cluster.sh start $$flag >$$log 2>&1; then \
			up=$$(sed -n 's/.*started in \([0-9.]*\) s.*/\1/p' $$log); \
			if SNNBENCH_REAL_SLURM=1 $(VENV)/bin/pytest -q -m real_slurm -p no:cacheprovider \
					$(SLURM_TESTS) $(SLURM_PYTEST_ARGS); then \
				result=passed; \
			else result=FAILED; status=1; fi; \
		else \
			cat $$log; up="-"; result="FAILED (the cluster did not start)"; status=1; \
		fi; \
		scripts/slurm_cluster.sh stop >/dev/null 2>&1; trap - EXIT INT TERM; \
		line="slurm-check $$setup: $$result, cluster up in $$up s, $$(( $$(date +%s) - t0 )) s in all"; \
		echo "$$line"; summary="$$summary$$line\n"; rm -f $$log; \
	done; \
	printf "$$summary"; exit $$status
