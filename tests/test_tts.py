"""The speaking stage: engines (Piper, espeak-ng), the factory, and the async TTSStream (first audio
before the text ends, cancel/re-arm, timing on an injected clock, clean chunk joins)."""

from __future__ import annotations

import asyncio
import re
import string
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from headstart.audio import AudioFrame, resample
from headstart.clock import FakeClock
from headstart.config import ThreadPlan, TTSConfig
from headstart.tts.base import EngineNotAvailableError, Synthesizer, fade_edges
from headstart.tts.chunker import ClauseChunker
from headstart.tts.engines import load_synthesizer
from headstart.tts.stream import TTSStream
from tests.prepared import prepared

RATE = 22_050


class FakeSynth:
    """A deterministic engine for timing/cancel tests: 10 ms of tone per character, one array per
    sentence; each array 'takes' `compute_s` on the shared fake clock. Records texts and threads."""

    name = "fake"
    sample_rate = RATE

    def __init__(self, clock: FakeClock | None = None, compute_s: float = 0.05, fail_on: str | None = None):
        self.clock = clock
        self.compute_s = compute_s
        self.fail_on = fail_on
        self.texts: list[str] = []
        self.threads: set[str] = set()
        self.arrays_made = 0
        self.gate: threading.Event | None = None  # if set, each array waits for it

    def synthesize(self, text: str) -> Iterator[np.ndarray]:
        if not text.strip():
            return
        self.texts.append(text)
        self.threads.add(threading.current_thread().name)
        if self.fail_on and self.fail_on in text:
            raise RuntimeError("engine exploded")
        for sentence in re.split(r"(?<=[.!?])\s+", text):
            if self.gate is not None:
                assert self.gate.wait(5.0)
            if self.clock is not None:
                self.clock.advance(self.compute_s)
            self.arrays_made += 1
            n = int(0.01 * RATE * len(sentence))
            yield fade_edges(0.3 * np.sin(np.arange(n, dtype=np.float32) * 0.1), RATE)

    def warm_up(self) -> None:
        pass


async def collect(stream: TTSStream) -> list[AudioFrame]:
    return [frame async for frame in stream]


# --- the stream, with a fake engine -------------------------------------------------------------


def test_first_audio_comes_before_the_text_ends(tts_executor):
    synth = FakeSynth()

    async def main():
        stream = TTSStream(synth, ClauseChunker(), tts_executor)
        stream.push_text("The weather today is sunny. And")
        first = await asyncio.wait_for(stream.__anext__(), 5.0)  # no end_input yet
        assert synth.texts == ["The weather today is sunny."]
        stream.push_text(" tomorrow it rains.")
        stream.end_input()
        rest = await asyncio.wait_for(collect(stream), 5.0)
        return first, rest

    first, rest = asyncio.run(main())
    assert first.sample_rate == RATE and first.samples.dtype == np.float32
    assert len(rest) == 1
    assert synth.texts == ["The weather today is sunny.", "And tomorrow it rains."]
    assert all(name.startswith("tts") for name in synth.threads)


def test_ttfa_is_measured_on_the_injected_clock(tts_executor):
    clock = FakeClock(100.0)
    synth = FakeSynth(clock, compute_s=0.05)

    async def main():
        stream = TTSStream(synth, ClauseChunker(), tts_executor, clock=clock)
        stream.push_text("Hello there my friend. ")
        await stream.__anext__()  # the engine "took" 0.05 s on the fake clock
        clock.advance(1.0)
        stream.push_text("Second sentence here. Third one.")
        stream.end_input()
        await collect(stream)
        return stream

    stream = asyncio.run(main())
    t = stream.timings
    assert [c.text for c in t] == ["Hello there my friend.", "Second sentence here.", "Third one."]
    assert t[0].ready_at_s == pytest.approx(100.0)
    assert t[0].ttfa_s == pytest.approx(0.05) and t[0].synth_ttfa_s == pytest.approx(0.05)
    assert stream.first_audio_at_s == pytest.approx(100.05)
    assert stream.ttfa_s == pytest.approx(0.05)
    assert stream.input_started_at_s == pytest.approx(100.0)
    assert t[1].ready_at_s == pytest.approx(101.05) and t[1].ttfa_s == pytest.approx(0.05)
    # The third chunk was ready at the same time but waited for the engine: its TTFA includes that.
    assert t[2].ttfa_s == pytest.approx(0.10) and t[2].synth_ttfa_s == pytest.approx(0.05)
    assert [c.index for c in t] == [0, 1, 2]
    assert t[0].audio_s == pytest.approx(0.01 * len("Hello there my friend."), abs=1e-3)


def test_text_is_normalised_before_synthesis(tts_executor):
    synth = FakeSynth()

    async def main():
        stream = TTSStream(synth, ClauseChunker(), tts_executor)
        stream.push_text("It costs $49.95 at 8:00 AM. Ask **Dr. Lee** 😊")
        stream.end_input()
        await collect(stream)

    asyncio.run(main())
    assert synth.texts == ["It costs forty-nine dollars and ninety-five cents at eight AM.", "Ask Doctor Lee"]


@pytest.mark.parametrize("pieces", [[""], ["   "], ["..."], ["", "   ", "...", "\n\n", "😊"], []])
def test_empty_pieces_give_no_audio_and_no_error(tts_executor, pieces):
    synth = FakeSynth()

    async def main():
        stream = TTSStream(synth, ClauseChunker(), tts_executor)
        for piece in pieces:
            stream.push_text(piece)
        stream.end_input()
        return await asyncio.wait_for(collect(stream), 5.0), stream

    frames, stream = asyncio.run(main())
    assert frames == [] and synth.texts == [] and stream.timings == [] and stream.ttfa_s is None
    assert stream.done


def test_long_unpunctuated_text_reaches_the_engine_whole_in_pieces_under_the_limit(tts_executor):
    synth = FakeSynth()
    words = [f"word{i}" for i in range(60)]
    text = " ".join(words)

    async def main():
        stream = TTSStream(synth, ClauseChunker(TTSConfig(max_chunk_chars=100)), tts_executor, normalize=lambda s: s)
        for i in range(0, len(text), 9):
            stream.push_text(text[i : i + 9])
        stream.end_input()
        await collect(stream)

    asyncio.run(main())
    assert len(synth.texts) >= 4 and all(len(t) <= 100 for t in synth.texts)
    assert " ".join(synth.texts).split() == words


def test_cancel_stops_at_once_and_a_new_stream_works(tts_executor):
    synth = FakeSynth()
    synth.gate = threading.Event()
    sentences = " ".join(f"This is sentence number {i}." for i in range(20))

    async def main():
        chunker = ClauseChunker()
        stream = TTSStream(synth, chunker, tts_executor)
        stream.push_text(sentences)  # 20 chunks queued, engine held at the gate
        synth.gate.set()
        first = await asyncio.wait_for(stream.__anext__(), 5.0)
        stream.cancel()
        after = await asyncio.wait_for(collect(stream), 5.0)
        stream.cancel()  # idempotent
        stream.push_text("late tokens are ignored.")
        stream.end_input()  # no-op after cancel
        made_at_cancel = synth.arrays_made
        # "Stop a long reply after 1 s, then ask again": the next reply plays.
        again = TTSStream(synth, chunker, tts_executor)
        again.push_text("A new answer.")
        again.end_input()
        frames = await asyncio.wait_for(collect(again), 5.0)
        return first, after, made_at_cancel, frames, stream

    first, after, made_at_cancel, frames, stream = asyncio.run(main())
    assert isinstance(first, AudioFrame)
    assert after == [] and stream.cancelled and stream.done
    assert made_at_cancel <= 3  # at most the in-flight array(s), not the 20 queued chunks
    assert len(frames) == 1 and synth.texts[-1] == "A new answer."


def test_cancel_before_any_audio_drops_everything(tts_executor):
    synth = FakeSynth()

    async def main():
        stream = TTSStream(synth, ClauseChunker(), tts_executor)
        stream.push_text("One sentence here. Another one there. ")
        stream.end_input()
        stream.cancel()
        return await asyncio.wait_for(collect(stream), 5.0)

    assert asyncio.run(main()) == []


def test_engine_error_reaches_the_consumer_and_the_next_stream_works(tts_executor):
    synth = FakeSynth(fail_on="boom")

    async def main():
        stream = TTSStream(synth, ClauseChunker(), tts_executor)
        stream.push_text("Fine first. Then boom. Never said.")
        stream.end_input()
        got = []
        with pytest.raises(RuntimeError, match="engine exploded"):
            async for frame in stream:
                got.append(frame)
        again = TTSStream(synth, ClauseChunker(), tts_executor)
        again.push_text("Works again.")
        again.end_input()
        return got, await asyncio.wait_for(collect(again), 5.0)

    got, again = asyncio.run(main())
    assert len(got) == 1 and len(again) == 1


def test_push_after_end_input_is_an_error(tts_executor):
    async def main():
        stream = TTSStream(FakeSynth(), ClauseChunker(), tts_executor)
        stream.end_input()
        stream.end_input()  # idempotent
        with pytest.raises(RuntimeError, match="end_input"):
            stream.push_text("more")
        return await collect(stream)

    assert asyncio.run(main()) == []


def test_frames_of_a_fixed_duration(tts_executor):
    async def main():
        stream = TTSStream(FakeSynth(), ClauseChunker(), tts_executor, frame_s=0.02)
        stream.push_text("Twenty characters ok.")
        stream.end_input()
        return await collect(stream)

    frames = asyncio.run(main())
    assert [f.num_samples for f in frames[:-1]] == [441] * (len(frames) - 1)
    assert sum(f.num_samples for f in frames) == int(0.01 * RATE * len("Twenty characters ok."))


def test_engine_output_with_nan_is_an_error(tts_executor):
    class NaNSynth(FakeSynth):
        def synthesize(self, text):
            yield np.array([0.0, np.nan], dtype=np.float32)

    async def main():
        stream = TTSStream(NaNSynth(), ClauseChunker(), tts_executor)
        stream.push_text("Hi.")
        stream.end_input()
        await collect(stream)

    with pytest.raises(ValueError, match="NaN"):
        asyncio.run(main())


# --- engines and the factory -----------------------------------------------------------------------


def test_espeak_missing_is_a_clear_error():
    from headstart.tts.espeak import EspeakSynthesizer

    with pytest.raises(EngineNotAvailableError, match="apt-get install espeak-ng"):
        EspeakSynthesizer(executable="/nonexistent/espeak-ng")


def test_piper_missing_voice_is_a_clear_error(tmp_path):
    from headstart.tts.piper import PiperSynthesizer

    with pytest.raises(FileNotFoundError, match="Piper voice not found"):
        PiperSynthesizer(tmp_path / "nope.onnx")
    (tmp_path / "v.onnx").write_bytes(b"not a model")
    with pytest.raises(FileNotFoundError, match="config not found"):
        PiperSynthesizer(tmp_path / "v.onnx")
    with pytest.raises(FileNotFoundError):
        load_synthesizer(TTSConfig(engine=str(tmp_path / "missing.onnx")), ThreadPlan())


def test_unknown_engine_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown TTS engine"):
        load_synthesizer(TTSConfig(engine="festival"), ThreadPlan())


def _espeak_available() -> bool:
    import shutil

    return shutil.which("espeak-ng") is not None


needs_espeak = pytest.mark.skipif(not _espeak_available(), reason="espeak-ng is not installed")


def _assert_clean_back_to_back(frames: list[AudioFrame], rate: int) -> None:
    """float32 audio only; every chunk starts and ends near zero (no header bytes, no clicks)."""
    assert frames
    for frame in frames:
        x = frame.samples
        assert frame.sample_rate == rate
        assert x.dtype == np.float32 and x.ndim == 1 and x.size > 0
        assert np.isfinite(x).all() and np.abs(x).max() <= 1.0
        assert not x[:4].tobytes().startswith(b"RIFF")
        # A RIFF/WAVE header read as samples would be large values; speech chunks start silent.
        assert np.abs(x[:32]).max() < 0.02, x[:32]
        assert np.abs(x[-32:]).max() < 0.02, x[-32:]
    joined = np.concatenate([f.samples for f in frames])
    assert joined.size == sum(f.num_samples for f in frames)


@needs_espeak
def test_espeak_synthesises_float32_audio():
    synth = load_synthesizer(TTSConfig(engine="espeak"), ThreadPlan())
    assert isinstance(synth, Synthesizer) and synth.sample_rate == 22_050
    audio = list(synth.synthesize("Hello world."))
    assert len(audio) == 1 and audio[0].dtype == np.float32 and audio[0].shape[0] / 22_050 > 0.5
    assert list(synth.synthesize("")) == [] and list(synth.synthesize("...")) == []
    # Text that looks like an option goes in on stdin, never as an argument.
    assert list(synth.synthesize("-v xx --help"))


@needs_espeak
def test_espeak_numbers_streamed_back_to_back_have_no_headers_or_clicks(tts_executor):
    synth = load_synthesizer(TTSConfig(engine="espeak"), ThreadPlan())

    async def main():
        stream = TTSStream(synth, ClauseChunker(), tts_executor)
        for piece in "1\n\n2\n\n3\n\n":
            stream.push_text(piece)
        stream.end_input()
        return await asyncio.wait_for(collect(stream), 30.0), stream

    frames, stream = asyncio.run(main())
    assert [t.spoken_text for t in stream.timings] == ["one", "two", "three"]
    _assert_clean_back_to_back(frames, 22_050)


# --- slow: the real Piper voice, checked by ear (whisper) -------------------------------------------


@pytest.fixture(scope="module")
def piper_joe():
    return prepared(lambda: load_synthesizer(TTSConfig(engine="piper-joe"), ThreadPlan(tts_threads=1)))


def _words(text: str) -> list[str]:
    return text.lower().translate(str.maketrans("", "", string.punctuation.replace("'", ""))).split()


@pytest.mark.slow
def test_piper_joe_speaks_words_whisper_can_hear(piper_joe):
    from faster_whisper import WhisperModel

    from headstart.models.store import resolve_model

    assert piper_joe.sample_rate == 22_050 and piper_joe.name.startswith("piper:")
    text = "The quick brown fox jumps over the lazy dog near the river bank."
    audio = np.concatenate(list(piper_joe.synthesize(text)))
    assert audio.dtype == np.float32 and audio.shape[0] / 22_050 >= 0.5
    model = WhisperModel(str(resolve_model("whisper-tiny.en")), device="cpu", compute_type="int8", cpu_threads=1)
    segments, _ = model.transcribe(resample(audio, 22_050, 16_000), beam_size=1, language="en")
    heard = _words(" ".join(s.text for s in segments))
    said = _words(text)
    recovered = sum(1 for w in said if w in heard) / len(said)
    assert recovered >= 0.8, heard


@pytest.mark.slow
def test_piper_joe_stream_back_to_back_is_clean_and_empty_text_is_silent(piper_joe, tts_executor):
    assert list(piper_joe.synthesize("")) == [] and list(piper_joe.synthesize("  ...  ")) == []

    async def main():
        stream = TTSStream(piper_joe, ClauseChunker(), tts_executor)
        for piece in "1\n\n2\n\n3\n\n":
            stream.push_text(piece)
        stream.end_input()
        return await asyncio.wait_for(collect(stream), 60.0), stream

    frames, stream = asyncio.run(main())
    assert len(stream.timings) == 3 and all(t.ttfa_s > 0 for t in stream.timings)
    _assert_clean_back_to_back(frames, 22_050)
