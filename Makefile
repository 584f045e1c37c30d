# The two set-up commands: `make demo` and `make test`. Each creates .venv on
# first use and installs the package into it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: demo test install benchmark clean

$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

benchmark: $(STAMP)
	$(PY) -m pip install --quiet '.[benchmark]'
	$(PY) benchmarks/train_throughput.py

clean:
	rm -rf $(VENV) runs exports .pytest_cache
