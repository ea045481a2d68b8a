"""Shared pytest set-up."""

# CPython 3.11.7 can raise a spurious "SystemError: AST constructor recursion depth mismatch" when an
# ast.parse (pytest's assertion rewriting of a plugin imported late, e.g. hypothesis' at the terminal
# summary) overlaps with work on other threads (gh-106905, fixed in 3.11.8). Importing the plugin's
# package here, before any test starts a thread, keeps that parse out of the threaded part of the run.
import hypothesis  # noqa: F401

# -- fixtures shared by several test files (the loaders and their skip rule: tests/prepared.py) --------
import pytest  # noqa: E402


@pytest.fixture(autouse=True, scope="session")
def _private_data_dir(tmp_path_factory):
    """Tools are on by default, and a session that hears "add milk to my shopping list" keeps it in the
    user's data folder: the tests get a folder of their own ($HEADSTART_DATA_DIR), never the real one."""
    import os

    from headstart.tools.lists import DATA_DIR_ENV

    before = os.environ.get(DATA_DIR_ENV)
    os.environ[DATA_DIR_ENV] = str(tmp_path_factory.mktemp("headstart-data"))
    yield
    if before is None:
        os.environ.pop(DATA_DIR_ENV, None)
    else:
        os.environ[DATA_DIR_ENV] = before


@pytest.fixture
def one_torch_thread():
    """torch on one thread for the test (tiny forwards on a shared 2-core machine are erratic on two);
    a module opts in with `pytestmark = pytest.mark.usefixtures("one_torch_thread")`."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def asr_executor():
    """The listener's ASR executor (`make_asr_executor`), shut down after the test."""
    from headstart.voice.listener import make_asr_executor

    pool = make_asr_executor()
    yield pool
    pool.shutdown(wait=True)


@pytest.fixture
def tts_executor():
    """The TTS executor (`make_tts_executor`), shut down after the test."""
    from headstart.tts.stream import make_tts_executor

    pool = make_tts_executor()
    yield pool
    pool.shutdown(wait=True)


@pytest.fixture
def llm_pool():
    """The "llm" executor (`llm_executor`), shut down after the test."""
    from headstart.llm.stream import llm_executor

    pool = llm_executor()
    yield pool
    pool.shutdown(wait=True)


@pytest.fixture(scope="session")
def sentence():
    """'he was not an ill disposed young man' (LibriVox, 2.99 s): float32 at 16 kHz."""
    from tests.prepared import speech

    return speech("pocketsphinx_librivox/librivox-0880.wav")


@pytest.fixture(scope="module")
def components():
    """The default pipeline with SmolLM2-135M as the LLM (24 new tokens), loaded once per module: the
    small real models a server or client test talks to. A module that needs other settings defines its
    own `components`."""
    from dataclasses import replace

    from headstart.session.components import Components
    from headstart.config import PipelineConfig

    base = PipelineConfig()
    components = Components.load(replace(base, llm=replace(base.llm, model="smollm2-135m", max_new_tokens=24)))
    yield components
    components.close()


@pytest.fixture(scope="module")
def smollm2_engine():
    """SmolLM2-135M, the small real LLM, as the session loads it (LLMConfig defaults), one per module."""
    from headstart.config import LLMConfig
    from tests.prepared import llm_engine

    return llm_engine(LLMConfig(model="smollm2-135m"))
