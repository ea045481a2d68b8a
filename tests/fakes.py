"""Shared test fakes (plain objects implementing headstart/seams.py's protocols and the listener's shape).
Each section says who uses it."""

from __future__ import annotations

import asyncio
from collections import deque
from concurrent.futures import Executor, Future

import numpy as np

from headstart.events import ReplyDone, TokenDelta

# -- scripted session stages: a listener, an LLM backend and a synthesiser (tests/test_session.py) ------


class ScriptedListener:
    """A listener (voice/listener.py `Listener`'s shape) that emits scripted events by audio time: each
    event of `script` (a list of (audio_s, event)) is emitted by the `push` whose audio reaches
    `audio_s`; `end_input` emits the rest and ends the stream. `made` records every instance."""

    made: list[ScriptedListener] = []

    def __init__(self, script, eou_scorer=None, acoustic_scorer=None) -> None:
        self.script = deque(sorted(script, key=lambda item: item[0]))
        self.eou_scorer, self.acoustic_scorer = eou_scorer, acoustic_scorer
        self.audio_s = 0.0
        self.bargein_armed = False
        self.pause_s: float | None = None  # the VAD's unconfirmed pause so far (set by tests)
        self.in_speech = False  # the VAD is inside a speech segment (set by tests)
        self.pause_heard = True  # the latest partial heard the speech up to that pause (set by tests)
        self.expected_final_text = ""  # the final's text if the speech ended now ("": none; set by tests)
        self._queue: asyncio.Queue = asyncio.Queue()
        ScriptedListener.made.append(self)

    @property
    def silence_pending(self) -> bool:
        return self.pause_s is not None

    @silence_pending.setter
    def silence_pending(self, pending: bool) -> None:  # a pause just begun (0 s of it)
        self.pause_s = 0.0 if pending else None

    async def push(self, frame) -> None:
        self.audio_s += frame.duration_s
        while self.script and self.script[0][0] <= self.audio_s + 1e-9:
            self._queue.put_nowait(self.script.popleft()[1])

    async def commit(self) -> None:
        await self.end_input()

    async def end_input(self) -> None:
        while self.script:
            self._queue.put_nowait(self.script.popleft()[1])
        self._queue.put_nowait(None)

    def __aiter__(self):
        return self

    async def __anext__(self):
        event = await self._queue.get()
        if event is None:
            self._queue.put_nowait(None)
            raise StopAsyncIteration
        return event


class ScriptedStats:
    def __init__(self, requested_at_s: float) -> None:
        self.requested_at_s = requested_at_s
        self.token_times_s: list[float] = []
        self.done_at_s: float | None = None


class ScriptedReplyStream:
    """An `LLMReplyStream` that answers with `text` word by word once `gate` is set (the test decides
    when the first token comes); it touches the clock only to stamp its stats."""

    def __init__(self, text: str, gate: asyncio.Event, clock) -> None:
        self.words = text.split()
        self.gate = gate
        self.clock = clock
        self.stats = ScriptedStats(clock.now())
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    async def __aiter__(self):
        await self.gate.wait()
        for i, word in enumerate(self.words):
            if self.cancelled:
                return
            self.stats.token_times_s.append(self.clock.now())
            yield TokenDelta(word if i == 0 else " " + word, (i,))
        self.stats.done_at_s = self.clock.now()
        yield ReplyDone(" ".join(self.words), len(self.words), "eos")


class ScriptedTurn:
    """An `LLMTurn`: records the partials it prefilled; its reply is the backend's answer."""

    def __init__(self, llm: ScriptedLLM, messages) -> None:
        self.llm, self.messages = llm, [dict(m) for m in messages]
        self.updates: list[str] = []
        self.closed = False

    def update(self, user_text: str) -> None:
        self.updates.append(user_text)

    def reply(self, final_text: str) -> ScriptedReplyStream:
        return self.llm.answer([*self.messages, {"role": "user", "content": final_text}])

    def close(self) -> None:
        self.closed = True


class ScriptedLLM:
    """An `LLMBackend` with no model: `answers` maps a user text to the reply text (`default` for any
    other); every reply waits for `gate` (set it when the first token should come). It records
    the chats it was asked to answer (`asked`) and the turns it opened (`turns`). `decoder`: what it
    decodes with unless the config a call passes says `speculative="none"`, as llm/local.py `LocalLLM`
    does (`decoders` records the one each call used)."""

    max_positions = None

    def __init__(self, clock, answers: dict[str, str] | None = None, default: str = "I do not know.",
                 decoder: object | None = None) -> None:
        self.clock = clock
        self.answers = answers or {}
        self.default = default
        self.decoder = decoder
        self.gate = asyncio.Event()
        self.asked: list[list[dict[str, str]]] = []
        self.turns: list[ScriptedTurn] = []
        self.decoders: list[object] = []  # the decoder each reply_stream / live_turn call decoded with

    def answer(self, messages) -> ScriptedReplyStream:
        self.asked.append([dict(m) for m in messages])
        text = self.answers.get(messages[-1]["content"], self.default)
        return ScriptedReplyStream(text, self.gate, self.clock)

    def decoder_for(self, config) -> object | None:
        return None if config.speculative == "none" else self.decoder

    def reply_stream(self, messages, config, executor, clock=None) -> ScriptedReplyStream:
        self.decoders.append(self.decoder_for(config))
        return self.answer(messages)

    def live_turn(self, messages_before, config, executor, clock=None) -> ScriptedTurn:
        self.decoders.append(self.decoder_for(config))
        self.turns.append(ScriptedTurn(self, messages_before))
        return self.turns[-1]

    def count_tokens(self, text: str) -> int:
        return len(text.split())


class InlineExecutor(Executor):
    """Runs each job at once on the calling thread, so a fast fake stage (ScriptedTTS) is done before
    the event loop moves on: no real thread's timing in a FakeClock test."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting side, as a thread would
            future.set_exception(exc)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass


class ScriptedTTS:
    """A `Synthesizer`: `seconds_per_word` of silence per word, at 16 kHz, in one array per chunk."""

    sample_rate = 16000
    name = "scripted"

    def __init__(self, seconds_per_word: float = 0.25) -> None:
        self.seconds_per_word = seconds_per_word
        self.spoken: list[str] = []

    def synthesize(self, text: str):
        words = text.split()
        if not words:
            return
        self.spoken.append(text)
        yield np.zeros(int(round(len(words) * self.seconds_per_word * self.sample_rate)), np.float32)

    def warm_up(self) -> None:
        pass


async def settle(rounds: int = 20) -> None:
    """Let the event loop run what is ready (no clock moves)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


class AudioDriver:
    """Pushes silent 16 kHz frames of `frame_s` into a session, the FakeClock moving with the audio (real
    time); after each push the event loop settles. `audio_s`: the audio pushed so far."""

    def __init__(self, session, clock, frame_s: float = 0.1) -> None:
        self.session, self.clock, self.frame_s = session, clock, frame_s
        self.audio_s = 0.0

    async def until(self, audio_s: float, at: dict | None = None) -> None:
        """Push until the audio reaches `audio_s`. `at`: {audio_s: callback} run once the audio reaches
        that time (e.g. open an LLM gate)."""
        from headstart.audio import AudioFrame

        pending = sorted((at or {}).items())
        while self.audio_s < audio_s - 1e-9:
            self.clock.advance(self.frame_s)
            self.audio_s += self.frame_s
            samples = np.zeros(int(round(16000 * self.frame_s)), np.float32)
            await self.session.push_audio(AudioFrame(samples, 16000))
            await settle()
            while pending and pending[0][0] <= self.audio_s + 1e-9:
                pending.pop(0)[1]()
                await settle()
