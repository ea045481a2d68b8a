"""The listener's end-of-turn scorers: what feeds its Endpointer a probability that the turn is over.

* Semantic endpointing (`EOUScoring`): with an `eou_scorer` (an async callable text -> probability that
  the user's turn is complete, e.g. the session's LLM via headstart/llm/eou.py), every partial and final
  text is scored (at most one call in flight; the newest text wins) and the probability is pushed into
  the Endpointer, which adapts the silence it needs. A per-utterance memo of the scores it got pushes a
  final that repeats the last partial at once, with no call. After the speech end only the final text's
  score counts. With `EndpointConfig.semantic=False` the scorer is never called.
* Acoustic end of turn (`AcousticScoring`, with an `acoustic_scorer`, an async callable audio ->
  P(complete), e.g. Smart Turn v3.2, and `EndpointConfig.acoustic_model` set): once per pause, when the
  VAD has heard `EndpointConfig.acoustic_after_s` of silence after speech, the turn's audio so far (its
  last 8 s) is scored and pushed into the Endpointer, which fuses it with the text's EOU probability and
  trailing marks (headstart/voice/turn_fusion.py), or uses it as a veto (`EndpointConfig.acoustic_mode`).
  Speech that resumes makes it stale; the next pause is scored.

Both run their calls as tasks on the event loop and reach back into the listener through
`ListenerHooks`; a call that raises is handed to the listener (`ListenerHooks.fail`), which ends its
event stream with the error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import numpy as np

from headstart.audio import SAMPLE_RATE_HZ
from headstart.voice.endpoint import Endpointer
from headstart.voice.stream_audio import StreamAudio
from headstart.voice.utterance import Utterance
from headstart.voice.vad import VAD

EOUScorer = Callable[[str], Awaitable[float | None]]
AcousticScorer = Callable[[np.ndarray], Awaitable[float | None]]
_ACOUSTIC_WINDOW = 8 * SAMPLE_RATE_HZ  # what Smart Turn hears (headstart/voice/smart_turn.py)


@dataclass(frozen=True, slots=True)
class ListenerHooks:
    """What a scorer needs of the listener it serves.

    Attributes:
        current: `() -> Utterance | None`, the utterance speech goes to (None: none open).
        ended: `() -> bool`, whether the input has ended (`Listener.end_input`).
        poll: `() -> None`, let the endpointer decide the end of turn at the current position.
        schedule: `() -> None`, start the ASR pass that is due, if the worker is free.
        fail: `(exception) -> None`, hand a scorer's error to the consumer and end the stream.
    """

    current: Callable[[], Utterance | None]
    ended: Callable[[], bool]
    poll: Callable[[], None]
    schedule: Callable[[], None]
    fail: Callable[[Exception], None]


class EOUScoring:
    """The semantic EOU scorer's calls (see the module docstring).

    Args:
        scorer: `async (text) -> probability in [0, 1] or None`, or None: no semantic signal.
        endpointer: the listener's endpointer (its `config.semantic` False: the scorer is never called).
        hooks: the listener's `ListenerHooks`.
    """

    def __init__(self, scorer: EOUScorer | None, endpointer: Endpointer, hooks: ListenerHooks) -> None:
        self._scorer = scorer
        self._endpointer = endpointer
        self._hooks = hooks
        self._task: asyncio.Task[None] | None = None
        self._next: tuple[Utterance, str] | None = None  # newest text waiting to be scored
        self._text: str | None = None  # the text being scored now

    @property
    def enabled(self) -> bool:
        """Whether texts are scored: a scorer is given and the endpointer is semantic."""
        return self._scorer is not None and self._endpointer.config.semantic

    def speech_ended(self) -> None:
        """The VAD confirmed the speech end: scores of partials that did not hear it are stale, the
        endpointer waits for the final's."""
        if self.enabled:
            self._endpointer.await_eou()

    def score(self, utterance: Utterance, text: str) -> None:
        """Score `text` of `utterance`: now if the scorer is free, else once it is (newest text wins).
        Only the current utterance's non-empty texts are scored."""
        if self._scorer is None or utterance is not self._hooks.current() or not text:
            return
        if not self._endpointer.config.semantic:  # ablation: the scorer is ignored, not even called
            return
        utterance.eou_text = text
        known = utterance.eou_cache.get(text)
        if known is not None:  # scored before (the final often repeats the last partial): no second call
            self._next = None
            # after the speech end only the final text's score counts (a partial's is stale)
            if utterance.end is None or text == utterance.final_text:
                self._endpointer.push_eou(known, text)
                self._hooks.poll()
            return
        if self._task is not None:
            self._next = None if text == self._text else (utterance, text)
            return
        self._text = text
        self._task = asyncio.get_running_loop().create_task(self._run(utterance, text))

    async def drain(self) -> None:
        """Drop the text waiting to be scored and wait for the call in flight (it never raises)."""
        self._next = None
        if self._task is not None:
            await self._task

    async def _run(self, utterance: Utterance, text: str) -> None:
        assert self._scorer is not None
        try:
            probability = await self._scorer(text)
        except Exception as exc:  # noqa: BLE001 - handed to the consumer
            self._task = None
            self._hooks.fail(exc)
            return
        self._task = self._text = None
        if probability is not None:
            utterance.eou_cache[text] = probability
        current = utterance is self._hooks.current()
        if current and not self._hooks.ended() and (utterance.end is None or text == utterance.final_text):
            # (after the speech end only the final text's score counts; a newer cached score wins)
            newest = utterance.eou_text if utterance.eou_text in utterance.eou_cache else text
            self._endpointer.push_eou(utterance.eou_cache.get(newest, probability), newest)
            self._hooks.poll()
            self._hooks.schedule()
        elif current and utterance.final_text is not None and utterance.final_text in utterance.eou_cache:
            self._endpointer.push_eou(utterance.eou_cache[utterance.final_text], utterance.final_text)
            self._hooks.poll()
            self._hooks.schedule()
        following, self._next = self._next, None
        if following is not None:
            self.score(*following)


class AcousticScoring:
    """The acoustic scorer's calls, one per pause (see the module docstring).

    Args:
        scorer: `async (samples float32 16 kHz (n,)) -> probability in [0, 1] or None`, or None: off.
        endpointer: the listener's endpointer (scored only when its `acoustic_on` and `config.semantic`).
        vad: the listener's VAD (where the silence after speech began).
        audio: the listener's stream (the turn's audio is sliced from it).
        hooks: the listener's `ListenerHooks`.
    """

    def __init__(self, scorer: AcousticScorer | None, endpointer: Endpointer, vad: VAD, audio: StreamAudio,
                 hooks: ListenerHooks) -> None:
        self._scorer = scorer
        self._endpointer = endpointer
        self._vad = vad
        self._audio = audio
        self._hooks = hooks
        self._after = int(round(endpointer.config.acoustic_after_s * SAMPLE_RATE_HZ))
        self._task: asyncio.Task[None] | None = None

    def score(self) -> None:
        """After new audio: score the current turn's audio once per silence run, at `acoustic_after_s`
        of silence; speech that goes on makes an asked score stale."""
        utterance = self._hooks.current()
        if (
            self._scorer is None
            or not self._endpointer.acoustic_on
            or not self._endpointer.config.semantic
            or utterance is None
            or self._hooks.ended()
        ):
            return
        since = self._vad.silence_since_s
        if self._vad.speaking and since is None:
            # speech goes on (a short silence the VAD never called an end, or resumed speech): a score
            # of that silence is stale, the next one is scored anew
            if utterance.acoustic_asked:
                utterance.acoustic_asked = False
                utterance.acoustic_run += 1
                self._endpointer.push_acoustic(None)
            return
        if utterance.acoustic_asked or self._task is not None:
            return
        if since is not None:
            silence_start = int(round(since * SAMPLE_RATE_HZ))
        elif utterance.end is not None:  # the VAD confirmed the end already: its padded end
            silence_start = utterance.end
        else:
            return
        if self._audio.end - silence_start < self._after:
            return
        samples = self._audio.slice(max(utterance.start, self._audio.end - _ACOUSTIC_WINDOW), self._audio.end)
        if samples.size == 0:
            return
        utterance.acoustic_asked = True
        self._endpointer.await_acoustic()
        self._task = asyncio.get_running_loop().create_task(self._run(utterance, utterance.acoustic_run, samples))

    async def drain(self) -> None:
        """Wait for the call in flight (it never raises)."""
        if self._task is not None:
            await self._task

    async def _run(self, utterance: Utterance, run: int, samples: np.ndarray) -> None:
        assert self._scorer is not None
        try:
            probability = await self._scorer(samples)
        except Exception as exc:  # noqa: BLE001 - handed to the consumer
            self._task = None
            self._hooks.fail(exc)
            return
        self._task = None
        live = utterance is self._hooks.current() and not self._hooks.ended()
        if live and utterance.acoustic_run == run:
            self._endpointer.push_acoustic(probability)
            self._hooks.poll()
            self._hooks.schedule()
        elif live:
            self.score()  # a newer silence waited for this call
