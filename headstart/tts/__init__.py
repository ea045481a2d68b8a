"""The speaking stage: reply text deltas -> clause chunks -> normalised text -> audio frames.

    chunker.py    ClauseChunker: the sync chunking policy (push / flush / reset)
    normalize.py  normalize_text: numbers, currency, times, abbreviations, URLs, markdown -> words
    base.py       Synthesizer protocol (+ errors, fade_edges)
    piper.py      PiperSynthesizer (piper-tts, onnxruntime with explicit threads)
    espeak.py     EspeakSynthesizer (system espeak-ng, no model)
    hibari.py     HibariSynthesizer (hibari-tts, 24 kHz ONNX; the bundled voice only, never downloads)
    coqui.py      CoquiSynthesizer (coqui-tts VITS / XTTS-v2 checkpoints, run in the `make coqui-env`
                  venv through coqui_worker.py over a length-prefixed pipe; coqui_tiny.py builds
                  random-weight models for tests)
    engines.py    load_synthesizer(config, threads)
    stream.py     TTSStream: the async stage (push_text / end_input / cancel, async-iterate AudioFrames,
                  optional soxr resampling to output_rate_hz)

Importing this package loads no engine; engines load only in `load_synthesizer` or their constructors.
"""

from headstart.tts.base import EngineNotAvailableError, Synthesizer, TTSError
from headstart.tts.chunker import ClauseChunker
from headstart.tts.engines import load_synthesizer
from headstart.tts.normalize import normalize_text
from headstart.tts.stream import ChunkTiming, TTSStream, make_tts_executor

__all__ = [
    "ChunkTiming",
    "ClauseChunker",
    "EngineNotAvailableError",
    "Synthesizer",
    "TTSError",
    "TTSStream",
    "load_synthesizer",
    "make_tts_executor",
    "normalize_text",
]
