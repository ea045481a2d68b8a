# Two entry points for a fresh Debian/Ubuntu machine with Python 3.11: `make demo` and `make test`.
# Both are idempotent: the venv and each prepared model are made once.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.headstart-installed
# CPU wheel pin; a GPU user who installed their own torch in $(VENV) keeps it.
TORCH_SPEC ?= torch==2.13.0
DEMO_MODELS := whisper-tiny.en qwen2.5-coder-0.5b piper-joe
TEST_MODELS := whisper-tiny.en smollm2-135m piper-joe

.PHONY: setup demo test test-quick models-demo models-test clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install "$(TORCH_SPEC)"
	$(PY) -m pip install -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

models-demo: $(STAMP)
	$(PY) -m headstart models prepare $(DEMO_MODELS)

models-test: $(STAMP)
	$(PY) -m headstart models prepare $(TEST_MODELS)

demo: models-demo
	$(PY) -m headstart demo $(ARGS)

test: models-test
	$(PY) -m pytest $(PYTEST_ARGS)

test-quick: models-test
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
