"""The session's listener and the task that reads its events.

    listening = Listening(make_listener, on_event, on_error)
    listening.start()                          # the reading task (once; before the first audio)
    await listening.push(frame, bargein_armed)
    await listening.commit()                   # push-to-talk released: the utterance ends now
    await listening.restart()                  # drop the audio in progress: a fresh listener
    await listening.end_input()                # the listener's last events, then its task ends
    await listening.stop()                     # no more events: the speech in progress is dropped

The listener (headstart/seams.py `SpeechListener`: voice/listener.py `Listener`, or a test's scripted
one) runs in one task per listener, started with the first audio (an idle session runs nothing). Each
event goes to `on_event` on the event loop, in order; an exception out of the listener goes to
`on_error` and ends that task (the consumer sees it, the session goes on).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import Executor
from typing import TYPE_CHECKING

from headstart.audio import AudioFrame
from headstart.seams import AcousticScorer, EOUScorer, ListenerEvent, SpeechListener

if TYPE_CHECKING:
    from headstart.config import EndpointConfig, PipelineConfig
    from headstart.seams import Transcriber
    from headstart.session.components import Components
    from headstart.voice.listener import Listener


def default_listener(components: Components, endpoint: EndpointConfig, eou_scorer: EOUScorer | None = None,
                     acoustic_scorer: AcousticScorer | None = None) -> SpeechListener:
    """A `Listener` on `components`' VAD (`config.vad`), ASR (`asr`, `config.asr`, `asr_executor`) and an
    endpointer on `endpoint` (the resolved EndpointConfig: `EOUPlan.endpoint`), with the EOU scorers
    the session's `EOUService` gives (None: no signal)."""
    return build_listener(components.config, components.asr, components.asr_executor, endpoint,
                          eou_scorer=eou_scorer, acoustic_scorer=acoustic_scorer)


def build_listener(config: PipelineConfig, asr: Transcriber | None, asr_executor: Executor, endpoint: EndpointConfig,
                   eou_scorer: EOUScorer | None = None, acoustic_scorer: AcousticScorer | None = None) -> Listener:
    """The listener a session builds, from its parts: a `Listener` with a fresh VAD on `config.vad`, the
    recogniser `asr` on `config.asr` (run on `asr_executor`) and an `Endpointer` on `endpoint` (the
    resolved EndpointConfig). Drivers without a session (`bench asr`) build theirs here too, so that
    they measure the listener and endpoint the server runs. Raises ValueError for inconsistent settings
    (`Endpointer`, `Listener`)."""
    from headstart.voice.endpoint import Endpointer
    from headstart.voice.listener import Listener
    from headstart.voice.vad import create_vad

    return Listener(create_vad(config.vad), asr, Endpointer(endpoint), config.asr, asr_executor,
                    eou_scorer=eou_scorer, acoustic_scorer=acoustic_scorer)


class Listening:
    """One session's listener and its reading task (see the module docstring).

    Args:
        make: `() -> listener`, called now and for a fresh one on `restart`.
        on_event: `(event) -> None` for each of the listener's events.
        on_error: `(exception) -> None` when the listener raised.

    Attributes:
        listener: the listener audio goes to now.
    """

    def __init__(self, make: Callable[[], SpeechListener], on_event: Callable[[ListenerEvent], None],
                 on_error: Callable[[Exception], None]) -> None:
        self._make = make
        self._on_event = on_event
        self._on_error = on_error
        self.listener: SpeechListener = make()
        self._task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()  # a restarted listener's task may still be ending

    @property
    def started(self) -> bool:
        """The current listener's task runs (it got audio, or the input ended)."""
        return self._task is not None

    @property
    def tasks(self) -> list[asyncio.Task[None]]:
        """Reading tasks not done yet (the current listener's, an old one's still being cancelled)."""
        return [t for t in self._tasks if not t.done()]

    def start(self) -> None:
        """Start reading the current listener's events (idempotent)."""
        if self._task is None:
            task = asyncio.create_task(self._read(self.listener), name="session-listen")
            self._task = task
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def push(self, frame: AudioFrame, bargein_armed: bool) -> None:
        """User audio to the listener; `bargein_armed`: the VAD's quicker start over a reply."""
        self.start()
        self.listener.bargein_armed = bargein_armed
        await self.listener.push(frame)

    async def commit(self) -> None:
        """The speech so far gets its final transcript and end of turn now (`Listener.commit`: the same
        listener goes on, so audio positions keep counting). Nothing before the first audio."""
        if self._task is not None:
            await self.listener.commit()

    async def restart(self) -> None:
        """Drop the audio in progress: a fresh listener (started by the next audio); the old one's task
        is cancelled and awaited."""
        task = self._task
        self.listener, self._task = self._make(), None
        if task is not None:
            if not task.done():
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def stop(self) -> None:
        """Stop listening, dropping the speech in progress: the current listener's task is cancelled
        and awaited, and no more of its events come (no final transcript, no end of turn)."""
        task, self._task = self._task, None
        if task is not None:
            if not task.done():
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def end_input(self) -> None:
        """No more audio: the listener's last events (a final transcript, an end of turn) go to
        `on_event`, then its task ends."""
        self.start()
        await self.listener.end_input()
        assert self._task is not None
        await self._task

    async def _read(self, listener: SpeechListener) -> None:
        try:
            async for event in listener:
                self._on_event(event)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - surface to the consumer, never lose it
            self._on_error(exc)
