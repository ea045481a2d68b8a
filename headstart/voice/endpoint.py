"""Endpointing: when the user's turn is over, decided on audio time from the VAD's events.

A turn opens at the first `SpeechStarted`. After a `SpeechEnded` at time t, the turn ends once the stream
reaches t + `EndpointConfig.silence_s` with no new speech; a `SpeechStarted` before that cancels the
wait and the turn goes on. A turn that has lasted `max_turn_s` ends even during speech (a guard against
a stuck VAD or endless noise); if speech is still going on, a new turn opens at that point.

All times are stream positions in seconds, so the decision does not depend on wall time or frame size.
The VAD's SpeechEnded time is padded (`VADConfig.speech_pad_s`), so the silence after the last voiced
window is speech_pad_s + silence_s (0.1 + 0.5 s with the defaults).
"""

from __future__ import annotations

from headstart.config import EndpointConfig
from headstart.events import EndOfTurn, SpeechEnded, SpeechStarted


class Endpointer:
    """A synchronous policy: `push(vad_event)`, `poll(audio_s) -> EndOfTurn | None`, `flush`, `reset`.

    Raises:
        ValueError: on a config with silence_s < 0 or max_turn_s <= 0, or on time going backwards.
    """

    def __init__(self, config: EndpointConfig) -> None:
        if config.silence_s < 0:
            raise ValueError(f"EndpointConfig.silence_s must be >= 0, got {config.silence_s}")
        if config.max_turn_s <= 0:
            raise ValueError(f"EndpointConfig.max_turn_s must be > 0, got {config.max_turn_s}")
        self.config = config
        self.reset()

    def reset(self) -> None:
        self._turn_start_s: float | None = None  # None: no turn open
        self._speaking = False
        self._silence_start_s: float | None = None
        self._last_s = 0.0
        self.forced = False  # whether the last EndOfTurn came from the max_turn_s guard

    @property
    def in_turn(self) -> bool:
        """True from a turn's first speech until its EndOfTurn."""
        return self._turn_start_s is not None

    @property
    def speaking(self) -> bool:
        return self._speaking

    def push(self, event: SpeechStarted | SpeechEnded) -> None:
        """Feed one VAD event (in stream order)."""
        if isinstance(event, SpeechStarted):
            self._speaking = True
            self._silence_start_s = None
            if self._turn_start_s is None:
                self._turn_start_s = event.audio_s
        elif isinstance(event, SpeechEnded):
            self._speaking = False
            if self._turn_start_s is not None:
                self._silence_start_s = event.audio_s
        else:
            raise TypeError(f"Endpointer.push takes SpeechStarted or SpeechEnded, got {type(event).__name__}")

    def poll(self, audio_s: float) -> EndOfTurn | None:
        """The stream has reached `audio_s`: return an EndOfTurn if the turn ends here, else None."""
        if audio_s < self._last_s:
            raise ValueError(f"audio time went backwards: {audio_s} < {self._last_s}")
        self._last_s = audio_s
        if self._turn_start_s is None:
            return None
        if self._silence_start_s is not None and audio_s - self._silence_start_s >= self.config.silence_s:
            return self._end(audio_s, forced=False)
        if audio_s - self._turn_start_s >= self.config.max_turn_s:
            return self._end(audio_s, forced=True)
        return None

    def flush(self, audio_s: float) -> EndOfTurn | None:
        """End of input at `audio_s`: an open turn ends here."""
        self._last_s = max(self._last_s, audio_s)
        if self._turn_start_s is None:
            return None
        self._speaking = False
        return self._end(audio_s, forced=False)

    def _end(self, audio_s: float, forced: bool) -> EndOfTurn:
        self.forced = forced
        self._silence_start_s = None
        # cut during speech: the speech goes on into a new turn
        self._turn_start_s = audio_s if forced and self._speaking else None
        return EndOfTurn(audio_s=audio_s)
