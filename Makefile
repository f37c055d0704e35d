# Quick start: `make demo` runs the whole loop locally; `make test` runs every test.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv test lint demo bench-service clean

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

# Two pytest-xdist workers a core (many tests wait on subprocesses and servers); the 15
# slowest tests are listed at the end.
WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -n $(WORKERS) --durations=15

# The webhook burst (2,000 signed deliveries, 100 of them commands, 64 in flight) against a real
# `ondemand serve` on SQLite and PostgreSQL; prints the figures docs/operations.md quotes.
bench-service: $(STAMP)
	$(PY) -m tools.bench_service $(BENCH_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache
