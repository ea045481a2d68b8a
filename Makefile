# Two entry points for a fresh Debian/Ubuntu machine with Python 3.11: `make demo` and `make test`.
# Both are idempotent: the venv and each prepared model are made once.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.headstart-installed
# CPU wheel pin; a GPU user who installed their own torch in $(VENV) keeps it.
TORCH_SPEC ?= torch==2.13.0
DEMO_MODELS := moonshine-base qwen2.5-coder-0.5b piper-joe
TEST_MODELS := whisper-tiny.en smollm2-135m piper-joe smart-turn-v3.2 moonshine-base

# The optional coqui-tts environment: its own torch/torchaudio, talked to through
# headstart/tts/coqui_worker.py. ~6 min and 6.3 GB here, once; `make test` builds it so the coqui tests
# run (`make test COQUI_ENV=` skips it, and those tests then skip with the reason).
COQUI_VENV ?= .venv-coqui
COQUI_PY := $(COQUI_VENV)/bin/python
COQUI_STAMP := $(COQUI_VENV)/.coqui-installed
COQUI_REQS := headstart/tts/coqui-requirements.txt

# llama-cpp-python's OpenAI-compatible server: the existing serving engine that the remote-LLM and
# scale tests start (tests/test_llm_remote.py, tests/test_scale.py; docs/remote.md). pip compiles
# llama.cpp from source (61 min with the multimodal library on 2 cores shared with four other jobs; 8 min
# on 2 quiet cores without it, measured with cmake on the sdist), once: the wheel is kept in
# $(WHEEL_CACHE) and reused (without the multimodal mtmd library, which the text-only server never loads:
# LLAVA_BUILD=OFF skips a large part of the compile), so a second `make test` only installs it (seconds). `make test LLAMA_ENV=`
# skips it, and those tests then skip with the reason.
LLAMA_CPP_VERSION ?= 0.3.36
WHEEL_CACHE ?= $(HOME)/.cache/headstart/wheels
LLAMA_STAMP := $(VENV)/.llama-server-$(LLAMA_CPP_VERSION)-installed

.PHONY: setup demo test test-quick test-unit lint models-demo models-test clean coqui-env test-coqui clean-coqui llama-server-env system-deps

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
LLAMA_ENV ?= llama-server-env
# The Debian packages the tests need (scripts/system-deps.sh: installs them as root or through sudo,
# else stops at once with the command to run); `make test SYSTEM_DEPS=` skips the check.
SYSTEM_DEPS ?= system-deps

system-deps:
	bash scripts/system-deps.sh

# The linter (ruff) and the type checker (mypy) over the package: both must be clean.
lint: $(STAMP)
	$(PY) -m ruff check headstart tests scripts
	$(PY) -m mypy

test: lint $(SYSTEM_DEPS) models-test $(COQUI_ENV) $(LLAMA_ENV)
	$(PY) -m pytest $(PYTEST_ARGS)

test-quick: lint $(SYSTEM_DEPS) models-test
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

# No models, no system packages: what a bare clone can run (the tests marked `models` or `slow` are left out).
test-unit: lint
	$(PY) -m pytest -m "not models and not slow" $(PYTEST_ARGS)

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

$(LLAMA_STAMP): $(STAMP)
	mkdir -p $(WHEEL_CACHE)
	ls $(WHEEL_CACHE)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1 || \
		CMAKE_ARGS="-DLLAVA_BUILD=OFF" $(PY) -m pip wheel --no-deps "llama-cpp-python==$(LLAMA_CPP_VERSION)" -w $(WHEEL_CACHE)
	$(PY) -m pip install --find-links $(WHEEL_CACHE) --only-binary llama-cpp-python \
		"llama-cpp-python[server]==$(LLAMA_CPP_VERSION)"
	$(PY) -c "import llama_cpp.server.app"
	touch $(LLAMA_STAMP)

llama-server-env: $(LLAMA_STAMP)
