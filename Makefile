# The two set-up commands: `make demo` and `make test`. Each creates .venv on
# first use and installs the package with every extra into it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
# What runs under every Keras backend (TensorFlow runs the whole suite).
BACKEND_TESTS := tests/layers tests/models tests/test_losses.py tests/test_metrics.py tests/test_schedules.py \
	tests/test_optimizers.py tests/test_buckets.py keras_transformer/layers keras_transformer/models \
	keras_transformer/losses.py keras_transformer/metrics.py keras_transformer/schedules.py \
	keras_transformer/optimizers.py keras_transformer/buckets.py

.PHONY: demo test test-fast lint install benchmark clean

$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# The TensorFlow and JAX suites run on two pytest-xdist workers: many tests
# wait on servers and subprocesses. An idle worker takes tests queued for the
# other (worksteal; measured about even with xdist's default). Running the
# JAX and PyTorch suites beside the TensorFlow one was slower (22.4 min
# against 20.3 to 20.9). A third worker was no faster either (TensorFlow
# suite 1,040 s against 1,012 s, CPU-2i): the two CPUs are 98% busy
# through the suite, so only less work shortens it; the TensorFlow suite
# names its 25 slowest tests, so that each run says where its time went.
# JAX compiles every operation for every new shape, and most of its suite's
# time went to LLVM's optimizer: at level 0 the suite took 112 s, not 142
# (CPU-2z5); its tests check the layers' arithmetic to tolerances, not
# XLA's code, which the TensorFlow suite's compiled exports run as users do.
test: $(STAMP) lint
	$(PY) -m pytest -n 2 --dist worksteal --durations=25 $(PYTEST_ARGS)
	KERAS_BACKEND=jax XLA_FLAGS=--xla_backend_optimization_level=0 \
		$(PY) -m pytest -n 2 --dist worksteal $(BACKEND_TESTS)
	KERAS_BACKEND=torch $(PY) -m pytest $(BACKEND_TESTS)

# The layers and the model alone, under the configured backend: a minute or two.
test-fast: $(STAMP)
	$(PY) -m pytest -q tests/layers tests/models keras_transformer/layers keras_transformer/models

benchmark: $(STAMP)
	$(PY) -m pip install --quiet '.[benchmark]'
	$(PY) benchmarks/train_throughput.py

clean:
	rm -rf $(VENV) runs exports .pytest_cache
