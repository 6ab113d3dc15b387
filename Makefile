# Two commands: `make run` (set up + main job) and `make test` (set up + tests).
# Everything the project needs is installed from here, on a fresh machine too.
PY      ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

export SETUPTOOLS_USE_DISTUTILS := stdlib
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1
export OMPI_MCA_rmaps_base_oversubscribe := 1
export TF_CPP_MIN_LOG_LEVEL := 2
export PYTHONHASHSEED := 0

.PHONY: run test test-exact test-measured lint typecheck bench setup calibrate wheel-check clean

setup: $(STAMP)

# (the Makefile too: a new system package here reruns the set-up on machines set up before)
$(STAMP): pyproject.toml requirements.lock Makefile
	@missing=""; command -v mpirun >/dev/null 2>&1 || missing="openmpi-bin libopenmpi-dev"; \
	  command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	  for tool in slurmctld slurmd sbatch munged; do \
	    command -v $$tool >/dev/null 2>&1 || PATH="$$PATH:/usr/sbin:/sbin" command -v $$tool \
	      >/dev/null 2>&1 || { missing="$$missing slurm-wlm munge"; break; }; done; \
	  if [ -n "$$missing" ]; then $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; fi
	@[ -x $(BIN)/python ] || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade "pip>=24" "setuptools>=77.0.3,<82" wheel
	$(BIN)/pip install -q -c requirements.lock numpy==1.26.4
	$(BIN)/pip install -q --no-build-isolation -c requirements.lock chainer==7.8.1
	$(BIN)/pip install -q --no-build-isolation -c requirements.lock -e ".[frameworks,dev]"
	@touch $@

run: $(STAMP)
	$(BIN)/testbed run scenarios/quickstart.yaml

# lint = style (ruff) + types (mypy, non-strict, core and engines and application)
lint: $(STAMP)
	$(BIN)/ruff check testbed simulators real_runs tests
	$(BIN)/mypy

# the whole suite; benchmarks run once each as plain tests (no statistics)
test: lint
	HYPOTHESIS_PROFILE=ci $(BIN)/python -m pytest -q --benchmark-disable --durations=30 $(PYTEST_ARGS)

# the two tiers of the suite (together they are `make test`): exact tests (numbers,
# properties, closed forms: the same on every machine) and machine-measured ones
# (timings of this machine, asserted with statistics that hold under load)
test-exact: lint
	HYPOTHESIS_PROFILE=ci $(BIN)/python -m pytest -q --benchmark-disable -m "not measured" $(PYTEST_ARGS)

test-measured: $(STAMP)
	HYPOTHESIS_PROFILE=ci $(BIN)/python -m pytest -q --benchmark-disable -m measured $(PYTEST_ARGS)

# benchmarks only, with statistics
bench: $(STAMP)
	$(BIN)/python -m pytest -q tests -k bench --benchmark-enable --benchmark-only \
	  --benchmark-columns=min,mean,max,rounds

# refit the ABCI profile from the shared CSV into build/ (never into the package's profile)
calibrate: $(STAMP)
	@mkdir -p build
	$(BIN)/testbed records import-paradl ../shared/data/abci-paradl/calibration.csv -o build/abci-paradl.jsonl
	$(BIN)/testbed calibrate build/abci-paradl.jsonl --base abci-v100 -o build/abci-v100-calibrated.yaml

clean:
	rm -rf $(VENV) .pytest_cache .benchmarks build *.egg-info
