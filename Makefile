# Quick start: `make demo` runs the whole loop locally; `make test` runs every test.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv test lint demo bench-service images soak clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first: the pinned CPU build; a GPU host brings its own torch.
	$(PY) -m pip install -q "torch==2.13.0"
	$(PY) -m pip install -q -e ".[service,runner,kernels,test,dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/ondemand demo $(DEMO_ARGS)

# Two pytest-xdist workers a core (many tests wait on subprocesses and servers), an idle one
# taking tests from a busy one's share (so no long test is left to run alone at the end); the
# 15 slowest tests are listed at the end.
WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))

# Bytecode is written and reused: the suite starts a few hundred Python processes (runners,
# services, jobs) that import the same modules, and pytest rewrites every test module's
# asserts; a shell that sets PYTHONDONTWRITEBYTECODE would have each of them compile afresh.
test: export PYTHONDONTWRITEBYTECODE :=
test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -n $(WORKERS) --dist worksteal --durations=15

# The webhook burst (2,000 signed deliveries, 100 of them commands, 64 in flight) against a real
# `ondemand serve` on SQLite and PostgreSQL; prints the figures docs/operations.md quotes.
bench-service: $(STAMP)
	$(PY) -m tools.bench_service $(BENCH_ARGS)

# Builds the service and runner images with buildah on a debootstrap Debian base (no registry,
# no container daemon) and starts each once; needs root, buildah and debootstrap. Not the venv:
# the script uses only the standard library.
images:
	$(PYTHON) -m devtools.images $(IMAGES_ARGS)

# The soak: 3 replicas on PostgreSQL behind HAProxy, 8 runners, a maintainer's load and a fault
# every 45-90 s, then invariants checked from what GitHub shows (tools/soak/; needs haproxy).
# SOAK_ARGS="--minutes 5 --seed 2 --fault-interval 15:30 --json soak.json"
soak: $(STAMP)
	$(PY) -m tools.soak $(SOAK_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache
