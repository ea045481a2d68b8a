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

# The optional coqui-tts environment (design.md §3a): its own torch/torchaudio, talked to through
# headstart/tts/coqui_worker.py. ~6 min and 6.3 GB here, once; `make test` builds it so the coqui tests
# run (`make test COQUI_ENV=` skips it, and those tests then skip with the reason).
COQUI_VENV ?= .venv-coqui
COQUI_PY := $(COQUI_VENV)/bin/python
COQUI_STAMP := $(COQUI_VENV)/.coqui-installed
COQUI_REQS := headstart/tts/coqui-requirements.txt

.PHONY: setup demo test test-quick models-demo models-test clean coqui-env test-coqui clean-coqui

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

COQUI_ENV ?= coqui-env

test: models-test $(COQUI_ENV)
	$(PY) -m pytest $(PYTEST_ARGS)

test-quick: models-test
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info

$(COQUI_STAMP): $(COQUI_REQS)
	test -x $(COQUI_PY) || $(PYTHON) -m venv $(COQUI_VENV)
	$(COQUI_PY) -m pip install --quiet --upgrade pip
	$(COQUI_PY) -m pip install -r $(COQUI_REQS)
	$(COQUI_PY) -c "import TTS, torchaudio, six; from TTS.utils.synthesizer import Synthesizer"
	touch $(COQUI_STAMP)

coqui-env: $(COQUI_STAMP)

# The coqui tests with tiny random-weight VITS/XTTS models built in the coqui env (the output is noise).
test-coqui: $(STAMP) $(COQUI_STAMP)
	HEADSTART_COQUI_PYTHON=$(abspath $(COQUI_PY)) $(PY) -m pytest tests/test_tts_coqui.py $(PYTEST_ARGS)

clean-coqui:
	rm -rf $(COQUI_VENV)
