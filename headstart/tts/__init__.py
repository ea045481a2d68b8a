"""The speaking stage: reply text deltas -> clause chunks -> normalised text -> audio frames.

    chunker.py    ClauseChunker: the sync chunking policy (push / flush / reset)
    normalize.py  normalize_text: numbers, currency, times, abbreviations, URLs, markdown -> words
    base.py       Synthesizer protocol (+ errors, fade_edges)
    piper.py      PiperSynthesizer (piper-tts, onnxruntime with explicit threads)
    espeak.py     EspeakSynthesizer (system espeak-ng, no model)
    engines.py    load_synthesizer(config, threads)
    stream.py     TTSStream: the async stage (push_text / end_input / cancel, async-iterate AudioFrames)

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
