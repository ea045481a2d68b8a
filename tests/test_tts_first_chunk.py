"""The short early first chunk, spoken by the real Piper voice: streamed token by token through a
TTSStream (resampled to 16 kHz as a session would), the joined audio of the first chunk and the rest is
heard right by whisper (WER <= 15 %) and every chunk joins the next without a click."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from headstart.bench.tts import pseudo_tokens
from headstart.config import ThreadPlan, TTSConfig
from headstart.tts.chunker import ClauseChunker
from headstart.tts.engines import load_synthesizer
from headstart.tts.stream import TTSStream, make_tts_executor
from tests.prepared import prepared

# (reply, its first chunk under the default policy): a one-word opener, a two-word one, a word cut
REPLIES = [
    ("Sure, here is the plan for today.", "Sure,"),
    ("Of course, I can help you with that.", "Of course,"),
    ("I think the best way to learn a new language is to practise every day.", "I think the best way"),
    ("You can reset your password from the settings page.", "You can reset your password"),
]
RATE = 16_000


def _plain(text: str) -> str:
    return " ".join("".join(ch for ch in text.lower() if ch.isalnum() or ch in " '").split())


async def _speak(synth, text: str) -> tuple[list[np.ndarray], list[str], list[int]]:
    executor = make_tts_executor()
    try:
        stream = TTSStream(synth, ClauseChunker(TTSConfig()), executor, output_rate_hz=RATE)
        for token in pseudo_tokens(text):
            stream.push_text(token)
        stream.end_input()
        frames = [frame.samples async for frame in stream]
        return frames, [t.text for t in stream.timings], [round(t.audio_s * RATE) for t in stream.timings]
    finally:
        executor.shutdown(wait=True)


@pytest.mark.slow
def test_short_first_chunk_then_the_rest_is_heard_right_and_joins_without_clicks():
    import jiwer
    from faster_whisper import WhisperModel

    from headstart.models.store import resolve_model

    synth = prepared(lambda: load_synthesizer(TTSConfig(engine="piper-joe"), ThreadPlan(tts_threads=1)))
    whisper_path = prepared(lambda: resolve_model("whisper-tiny.en"))
    model = WhisperModel(str(whisper_path), device="cpu", compute_type="int8", cpu_threads=1)
    said, heard = [], []
    for text, first in REPLIES:
        frames, chunks, lengths = asyncio.run(asyncio.wait_for(_speak(synth, text), 60.0))
        assert chunks[0] == first and len(chunks) >= 2  # the early cut really happened
        audio = np.concatenate(frames)
        assert audio.dtype == np.float32 and np.isfinite(audio).all() and np.abs(audio).max() <= 1.0
        assert sum(lengths) == audio.shape[0]
        # every chunk starts and ends at (near) zero after the fades and the resampler: no click at joins
        for edge in np.cumsum([0, *lengths]):
            around = audio[max(0, edge - 16) : edge + 16]
            assert np.abs(around).max() < 0.02, (text, int(edge), float(np.abs(around).max()))
        segments, _ = model.transcribe(audio, beam_size=1, language="en")
        said.append(_plain(text))
        heard.append(_plain(" ".join(s.text for s in segments)))
    wer = jiwer.wer(said, heard)
    assert wer <= 0.15, list(zip(said, heard))
