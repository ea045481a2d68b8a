"""The `Reply` handle (headstart/session/reply.py) on its own, on a FakeClock with a scripted LLM stream and a
scripted synthesiser: the order and ids of its events, cancel (idempotent, nothing sent after it
returns, the heard text by the TTS stream's chunk spans), pause/resume, the held reply and its
release, pacing by the playback position, and a failing LLM."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from headstart.clock import FakeClock
from headstart.config import TTSConfig
from headstart.events import ReplyDone, TokenDelta
from headstart.llm.stream import ReplyStats
from headstart.session.reply import (
    Reply,
    ReplyAudio,
    ReplyAudioStart,
    ReplyPaused,
    ReplyResumed,
    ReplyStarted,
    StageError,
)
from headstart.seams import LLMReplyStream, Synthesizer
from headstart.timeline import TurnTimeline
from headstart.tts.chunker import ClauseChunker
from headstart.tts.stream import TTSStream

RATE_HZ = 8000
WORD_S = 0.1  # the fake voice speaks every word in 0.1 s


class WordVoice:
    """A `Synthesizer`: one array per chunk, WORD_S seconds of a tone per word."""

    sample_rate = RATE_HZ
    name = "fake:words"

    def __init__(self) -> None:
        self.texts: list[str] = []

    def synthesize(self, text: str):
        self.texts.append(text)
        words = len(text.split())
        if words:
            n = int(round(words * WORD_S * RATE_HZ))
            yield (0.1 * np.sin(np.arange(n, dtype=np.float32))).astype(np.float32)

    def warm_up(self) -> None:
        pass


class ScriptedStream:
    """An `LLMReplyStream` whose tokens the test hands out: `say(...)`, `finish()`, `fail(exc)`."""

    def __init__(self) -> None:
        self.stats = ReplyStats(requested_at_s=0.0)
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._cancelled = False

    def say(self, *texts: str) -> None:
        for text in texts:
            self._queue.put_nowait(TokenDelta(text, (len(self.stats.token_times_s),)))

    def finish(self) -> None:
        self._queue.put_nowait(None)

    def fail(self, exc: Exception) -> None:
        self._queue.put_nowait(exc)

    def cancel(self) -> None:
        self._cancelled = True
        self._queue.put_nowait(None)

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def __aiter__(self):
        return self._events()

    async def _events(self):
        text: list[str] = []
        while True:
            item = await self._queue.get()
            if self._cancelled or item is None:
                self.stats.done_at_s = 0.0
                yield ReplyDone("".join(text), len(text), "cancelled" if self._cancelled else "eos")
                return
            if isinstance(item, Exception):
                raise item
            assert isinstance(item, TokenDelta)
            text.append(item.text)
            self.stats.token_times_s.append(0.0)
            yield item


class Harness:
    """One reply with everything it sends recorded."""

    def __init__(self, executor, clock: FakeClock | None = None, *, held: bool = False,
                 playback_lead_s: float | None = None, ahead_s=lambda: None, on_audio=lambda frame: None,
                 transcript: str = "hi") -> None:
        self.clock = clock or FakeClock(10.0)
        self.stream = ScriptedStream()
        self.voice = WordVoice()
        self.sent: list[object] = []
        self.finished: list[Reply] = []
        self.failed: list[Exception] = []
        self.llm_started = 0
        self.turn = TurnTimeline(transcript=transcript)

        def open_tts() -> TTSStream:
            return TTSStream(self.voice, ClauseChunker(TTSConfig()), executor, clock=self.clock)

        def on_llm_started() -> None:
            self.llm_started += 1

        self.reply = Reply("r7", self.turn, lambda reply, event: self.sent.append(event), self.clock, open_tts,
                           stream=self.stream, held=held, playback_lead_s=playback_lead_s, ahead_s=ahead_s,
                           on_audio=on_audio, on_llm_started=on_llm_started, on_finished=self.finished.append,
                           on_failed=lambda reply, exc: self.failed.append(exc))

    def of(self, kind) -> list:
        return [e for e in self.sent if isinstance(e, kind)]


@pytest.fixture
def executor():
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tts")
    yield pool
    pool.shutdown(wait=True)


async def until(predicate, timeout_s: float = 5.0) -> None:
    """Let the loop (and the tts thread) run until `predicate()` holds."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(0.002)


def test_the_fakes_implement_the_seams():
    assert isinstance(WordVoice(), Synthesizer)

    async def main():
        assert isinstance(ScriptedStream(), LLMReplyStream)

    asyncio.run(main())


def test_a_reply_sends_its_events_in_order_each_with_its_reply_id(executor):
    async def main():
        h = Harness(executor, transcript="what is up")
        h.reply.start()
        assert h.sent == [ReplyStarted("r7", "what is up")] and h.turn.reply_started_at_s == 10.0
        h.stream.say("One two three four.", " Five six.")
        h.stream.finish()
        text = await h.reply
        return h, text

    h, text = asyncio.run(main())
    assert text == "One two three four. Five six." and h.turn.reply == text
    assert all(event.reply_id == "r7" for event in h.sent)  # the LLM's own events too
    kinds = [type(e) for e in h.sent]
    assert kinds[0] is ReplyStarted and kinds.count(ReplyStarted) == 1
    assert [e.text for e in h.of(TokenDelta)] == ["One two three four.", " Five six."]
    assert kinds.index(TokenDelta) < kinds.index(ReplyDone) and kinds.count(ReplyDone) == 1
    assert kinds.count(ReplyAudioStart) == 1 and kinds.index(ReplyAudioStart) < kinds.index(ReplyAudio)
    assert h.of(ReplyAudioStart)[0].sample_rate == RATE_HZ
    audio_s = sum(e.frame.duration_s for e in h.of(ReplyAudio))
    assert audio_s == pytest.approx(6 * WORD_S) and h.reply.audio_s == pytest.approx(audio_s)
    assert h.turn.reply_audio_s == pytest.approx(audio_s) and h.turn.num_tokens == 2
    assert h.finished == [h.reply] and h.reply.finished and not h.reply.running
    assert h.llm_started == 1 and h.failed == []


def test_chunk_spans_and_heard_text_come_from_the_tts_stream(executor):
    async def main():
        h = Harness(executor)
        h.reply.start()
        h.stream.say("One two three four.", " Five six seven, eight nine ten eleven twelve.", " Thirteen.")
        h.stream.finish()
        await h.reply
        return h

    h = asyncio.run(main())
    spans = h.reply.tts.spans()
    assert [s.text for s in spans] == ["One two three four.", "Five six seven, eight nine ten eleven twelve.",
                                       "Thirteen."]
    assert all(s.complete and s.sample_rate == RATE_HZ for s in spans)
    # contiguous sample spans covering exactly the audio that left
    assert spans[0].start_sample == 0 and [s.start_sample for s in spans[1:]] == [s.end_sample for s in spans[:-1]]
    assert [s.end_sample - s.start_sample for s in spans] == [3200, 6400, 800]
    assert spans[-1].end_sample == sum(e.frame.samples.shape[0] for e in h.of(ReplyAudio))
    assert h.reply.spans() == [(s.text, pytest.approx(s.audio_s)) for s in spans]
    assert h.reply.synthesised_s == pytest.approx(1.3)
    assert h.reply.heard_text(0.0) == ""
    assert h.reply.heard_text(0.25) == "One two"
    assert h.reply.heard_text(0.4) == "One two three four."
    assert h.reply.heard_text(0.65) == "One two three four. Five six"
    assert h.reply.heard_text(5.0) == "One two three four. Five six seven, eight nine ten eleven twelve. Thirteen."


def test_cancel_is_idempotent_and_nothing_is_sent_after_it_returns(executor):
    async def main():
        h = Harness(executor)
        h.reply.start()
        h.stream.say("One two three four.", " Five six")
        await until(lambda: h.of(ReplyAudio))  # the first chunk is playing
        sent = list(h.sent)
        heard = h.reply.cancel("barge_in", 0.2)
        assert h.sent == sent  # cancel itself sends nothing
        assert h.reply.cancelled and h.reply.cancel_reason == "barge_in"
        assert h.stream.cancelled and h.reply.tts.cancelled
        h.stream.say(" seven.")  # late tokens, and the rest of the synthesis, never leave
        h.reply.pause()
        h.reply.resume()
        await asyncio.sleep(0.05)
        assert h.reply.cancel("client", 3.0) == heard  # idempotent: the first verdict stands
        with pytest.raises(asyncio.CancelledError):
            await h.reply
        return h, sent, heard

    h, sent, heard = asyncio.run(main())
    assert heard == "One two" and h.reply.cancel_reason == "barge_in"
    assert h.sent == sent
    assert h.finished == [] and h.failed == [] and not h.reply.finished and h.llm_started == 1
    # what was sent before but is still queued for the consumer is dropped: its content, not its controls
    assert not h.reply.delivers(h.of(TokenDelta)[0]) and not h.reply.delivers(h.of(ReplyAudio)[0])
    assert h.reply.delivers(ReplyStarted("r7", "hi")) and h.reply.delivers(ReplyPaused("r7"))


def test_cancel_before_the_reply_ran_sends_nothing_more(executor):
    async def main():
        h = Harness(executor)
        h.reply.start()
        assert h.reply.cancel("new_turn", 0.0) == ""
        h.stream.say("Hello.")
        h.stream.finish()
        with pytest.raises(asyncio.CancelledError):
            await h.reply
        await asyncio.sleep(0.02)
        return h

    h = asyncio.run(main())
    assert h.sent == [ReplyStarted("r7", "hi")] and h.voice.texts == [] and h.finished == []


def test_pause_holds_the_audio_until_resume(executor):
    async def main():
        h = Harness(executor)
        h.reply.start()
        h.reply.pause()
        h.stream.say("One two three four.", " Five six.")
        h.stream.finish()
        await until(lambda: h.reply.tts is not None and len(h.reply.tts.spans()) == 2
                    and all(s.complete for s in h.reply.tts.spans()))
        await asyncio.sleep(0.02)
        assert h.of(ReplyAudio) == [] and h.of(ReplyPaused) == [ReplyPaused("r7")]
        assert h.of(ReplyDone)  # the LLM is not paused, only the audio
        h.reply.resume()
        await h.reply
        return h

    h = asyncio.run(main())
    kinds = [type(e) for e in h.sent]
    assert kinds.index(ReplyResumed) < kinds.index(ReplyAudioStart)
    assert sum(e.frame.duration_s for e in h.of(ReplyAudio)) == pytest.approx(0.6)


def test_a_held_reply_sends_nothing_until_released_then_everything_in_order(executor):
    async def main():
        h = Harness(executor, held=True)
        h.reply.start()
        h.stream.say("One two three four.", " Five six.")
        h.stream.finish()
        await until(lambda: h.reply.tts is not None and len(h.reply.tts.spans()) == 2
                    and all(s.complete for s in h.reply.tts.spans()))
        await asyncio.sleep(0.02)
        assert h.sent == [] and h.reply.held and h.reply.running  # generated and synthesised, held
        assert h.reply.held_tokens == 2 and h.reply.synthesised_s == pytest.approx(0.6)
        assert h.turn.first_token_at_s is None and h.turn.reply_started_at_s is None
        h.clock.advance(1.5)  # the end of turn comes later
        turn = TurnTimeline(transcript="hi there")
        h.reply.release(turn)
        assert not h.reply.held and h.reply.turn is turn and h.reply.released_at_s == 11.5
        assert [type(e) for e in h.sent] == [ReplyStarted, TokenDelta, TokenDelta, ReplyDone]
        text = await h.reply
        return h, turn, text

    h, turn, text = asyncio.run(main())
    assert h.sent[0] == ReplyStarted("r7", "hi there") and text == "One two three four. Five six."
    assert all(e.reply_id == "r7" for e in h.sent)
    assert turn.reply_started_at_s == turn.first_token_at_s == 11.5 and turn.tts_first_text_at_s == 11.5
    assert turn.num_tokens == 2 and turn.reply == text and h.turn.reply == ""
    assert sum(e.frame.duration_s for e in h.of(ReplyAudio)) == pytest.approx(0.6)
    assert h.finished == [h.reply]


def test_a_cancelled_held_reply_is_never_released(executor):
    async def main():
        h = Harness(executor, held=True)
        h.reply.start()
        h.stream.say("One two.")
        await until(lambda: h.reply.held_tokens == 1)
        h.reply.cancel("speech_resumed", 0.0)
        h.reply.release(TurnTimeline(transcript="hi"))
        await asyncio.sleep(0.02)
        return h

    h = asyncio.run(main())
    assert h.sent == [] and h.reply.held


def test_pacing_keeps_the_audio_within_the_playback_lead(executor):
    lead_s = 0.25
    clock = FakeClock(0.0)
    sent_s = 0.0
    started_at = None

    def played_s() -> float:
        return 0.0 if started_at is None else min(sent_s, clock.now() - started_at)

    def ahead_s() -> float:
        return sent_s - played_s()

    aheads: list[float] = []

    def on_audio(frame) -> None:  # the frame leaves now: the client starts playing at the first
        nonlocal sent_s, started_at
        aheads.append(ahead_s())
        if started_at is None:
            started_at = clock.now()
        sent_s += frame.duration_s

    async def main():
        h = Harness(executor, clock, playback_lead_s=lead_s, ahead_s=ahead_s, on_audio=on_audio)
        h.reply.start()
        for i in range(8):
            h.stream.say(f" Sentence {i} has five words.")
        h.stream.finish()
        await h.reply

    asyncio.run(main())
    # each frame (one per 0.5 s chunk) leaves only once at most `lead_s` is unplayed
    assert len(aheads) == 8 and all(a <= lead_s + 1e-9 for a in aheads)
    assert clock.now() == pytest.approx(7 * 0.5 - lead_s, abs=0.11)  # paced by playback, not by synthesis


def test_an_llm_failure_is_reported_once_as_llm_failed(executor):
    async def main():
        h = Harness(executor)
        h.reply.start()
        h.stream.say("One two.")
        h.stream.fail(RuntimeError("context full"))
        with pytest.raises(StageError) as error:
            await h.reply
        await asyncio.sleep(0.02)
        return h, error.value

    h, error = asyncio.run(main())
    assert error.code == "llm_failed" and "context full" in str(error)
    assert h.failed == [error] and h.finished == [] and h.llm_started == 1
    assert h.reply.tts.cancelled and h.stream.cancelled
    assert not any(isinstance(e, ReplyDone) for e in h.sent)


def test_misuse_is_a_clear_error(executor):
    async def main():
        h = Harness(executor)
        with pytest.raises(RuntimeError, match="never started"):
            await h.reply
        h.reply.start()
        with pytest.raises(RuntimeError, match="already started"):
            h.reply.start()
        h.reply.cancel("reset", 0.0)
        with pytest.raises(ValueError, match="stream"):
            Reply("r8", TurnTimeline(), lambda r, e: None, h.clock, lambda: None)

    asyncio.run(main())


def _tool_reply(executor, answer: str, preview: str | None):
    """A held tool reply whose tool says `answer` and whose preview is `preview`: (voice, sent, reply)."""
    clock = FakeClock(10.0)
    voice = WordVoice()
    sent: list[object] = []
    runs: list[float] = []

    async def tool() -> str:
        runs.append(clock.now())
        await asyncio.sleep(0.05)  # the preview's audio, ready since the hold, must not leave meanwhile
        return answer

    def open_tts() -> TTSStream:
        return TTSStream(voice, ClauseChunker(TTSConfig()), executor, clock=clock)

    reply = Reply("r8", TurnTimeline(transcript="set a timer"), lambda r, e: sent.append(e), clock, open_tts,
                  held=True, tool=tool, tool_preview=lambda: preview)
    return voice, sent, reply, runs


@pytest.mark.parametrize("preview", ["Timer set for one minute.", "Timer set for two minutes.", None])
def test_a_held_tool_reply_voices_its_preview_while_held_and_speaks_the_real_answer(executor, preview):
    answer = "Timer set for one minute."

    async def main():
        voice, sent, reply, runs = _tool_reply(executor, answer, preview)
        reply.start()
        if preview is not None:
            await until(lambda: voice.texts == [preview])  # voiced ahead
        else:
            await asyncio.sleep(0.05)
            assert voice.texts == []
        assert sent == [] and runs == []  # held: nothing left, the tool has not run
        reply.release(TurnTimeline(transcript="set a timer"))
        text = await reply
        return voice, sent, text, runs

    voice, sent, text, runs = asyncio.run(main())
    assert text == answer and len(runs) == 1
    assert [e.text for e in sent if isinstance(e, TokenDelta)] == [answer]
    # the audio that left is the answer's (5 words), whatever was voiced ahead
    audio_s = sum(e.frame.duration_s for e in sent if isinstance(e, ReplyAudio))
    assert audio_s == pytest.approx(5 * WORD_S)
    assert voice.texts == ([answer] if preview in (answer, None) else [preview, answer])
