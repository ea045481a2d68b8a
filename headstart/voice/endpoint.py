"""Endpointing: when the user's turn is over, decided on audio time from the VAD's events and, when
available, a semantic end-of-utterance (EOU) probability of the text heard so far.

A turn opens at the first `SpeechStarted`. After a `SpeechEnded` at time t, the turn ends once the stream
reaches t + the required silence with no new speech; a `SpeechStarted` before that cancels the wait and
the turn goes on. The required silence is `EndpointConfig.silence_s` while no EOU probability is known;
once one is pushed (`push_eou`), it adapts: `min_silence_s` when the text reads complete (probability
>= the high threshold), `max_silence_s` when it reads cut off (<= the low one), log-linear in between;
the thresholds are those of `EndpointConfig.eou_scorer` (`eou_low`/`eou_high` for the trained head,
`token_eou_low`/`token_eou_high` for the raw end-of-turn token probability). So a
finished sentence ends quickly and a mid-sentence pause is waited out (the idea of semantic turn
detection, e.g. LiveKit's turn detector and Pipecat's Smart Turn; here the probability comes from the
chat LLM, headstart/llm/eou.py). `EndpointConfig.semantic=False` (an ablation) keeps the fixed
`silence_s` whatever the probability.

Two guards keep a turn from running forever:
* `max_wordless_s`: "speech" (claps, breathing, noise the VAD let through) in which the recogniser has
  found no word for that long, counted on the audio the recogniser has actually heard (`push_words`),
  ends the turn as if it were silence since the last word.
* `max_turn_s`: a turn that has lasted this long ends even during speech (a stuck VAD, endless noise);
  if speech is still going on, a new turn opens at that point (`forced` is then True).

All times are stream positions in seconds, so the decision does not depend on wall time or frame size.
The VAD's SpeechEnded time is padded (`VADConfig.speech_pad_s`), so the silence after the last voiced
window is speech_pad_s + the required silence, and the decision comes no earlier than the VAD's own
`min_silence_s` after the last voiced window.
"""

from __future__ import annotations

import math

from headstart.config import EndpointConfig
from headstart.events import EndOfTurn, SpeechEnded, SpeechStarted


def eou_thresholds(config: EndpointConfig) -> tuple[float, float]:
    """(low, high) probability thresholds for `config.eou_scorer` ("head" or "token")."""
    if config.eou_scorer == "token":
        return config.token_eou_low, config.token_eou_high
    return config.eou_low, config.eou_high


def required_silence_s(config: EndpointConfig, eou_probability: float | None) -> float:
    """The silence (seconds after the padded speech end) that ends a turn whose text has this EOU
    probability; `config.silence_s` when it is None (unknown) or `config.semantic` is False."""
    if eou_probability is None or not config.semantic:
        return config.silence_s
    low, high = eou_thresholds(config)
    if eou_probability >= high:
        return config.min_silence_s
    if eou_probability <= low:
        return config.max_silence_s
    # log-linear: the probabilities span orders of magnitude
    x = (math.log(eou_probability) - math.log(low)) / (math.log(high) - math.log(low))
    return config.max_silence_s + x * (config.min_silence_s - config.max_silence_s)


class Endpointer:
    """A synchronous policy: `push(vad_event)`, `push_eou(p)`, `push_words(...)`,
    `poll(audio_s) -> EndOfTurn | None`, `flush`, `reset`.

    Raises:
        ValueError: on an inconsistent config (negative silences, min > max silence, thresholds not
            0 < eou_low < eou_high <= 1, head_thresholds not 'trained'/'config', max_turn_s or max_wordless_s <= 0), on time going backwards or
            on a probability outside [0, 1] / NaN.
    """

    def __init__(self, config: EndpointConfig) -> None:
        if config.head_thresholds not in ("trained", "config"):
            raise ValueError(f"EndpointConfig.head_thresholds must be 'trained' or 'config', got {config.head_thresholds!r}")
        for name in ("silence_s", "min_silence_s", "max_silence_s"):
            if not getattr(config, name) >= 0:
                raise ValueError(f"EndpointConfig.{name} must be >= 0, got {getattr(config, name)}")
        if config.min_silence_s > config.max_silence_s:
            raise ValueError(
                f"EndpointConfig.min_silence_s ({config.min_silence_s}) exceeds max_silence_s ({config.max_silence_s})"
            )
        if config.eou_scorer not in ("head", "token"):
            raise ValueError(f"EndpointConfig.eou_scorer must be 'head' or 'token', got {config.eou_scorer!r}")
        for low_name, high_name in (("eou_low", "eou_high"), ("token_eou_low", "token_eou_high")):
            low, high = getattr(config, low_name), getattr(config, high_name)
            if not 0 < low < high <= 1:
                raise ValueError(f"EndpointConfig needs 0 < {low_name} < {high_name} <= 1, got {low}, {high}")
        if not config.max_turn_s > 0:
            raise ValueError(f"EndpointConfig.max_turn_s must be > 0, got {config.max_turn_s}")
        if not config.max_wordless_s > 0:
            raise ValueError(f"EndpointConfig.max_wordless_s must be > 0, got {config.max_wordless_s}")
        self.config = config
        self.reset()

    def reset(self) -> None:
        self._turn_start_s: float | None = None  # None: no turn open
        self._speaking = False
        self._silence_start_s: float | None = None
        self._last_s = 0.0
        self._eou: float | None = None
        self._awaiting = False  # the EOU of the text up to the speech end is being computed
        self._last_word_end_s: float | None = None
        self._heard_until_s: float | None = None
        self.forced = False  # whether the last EndOfTurn came from the max_turn_s guard

    @property
    def in_turn(self) -> bool:
        """True from a turn's first speech until its EndOfTurn."""
        return self._turn_start_s is not None

    @property
    def speaking(self) -> bool:
        return self._speaking

    @property
    def eou_probability(self) -> float | None:
        """The latest EOU probability pushed for the open turn (None: none yet)."""
        return self._eou

    @property
    def required_silence_s(self) -> float:
        """The silence after the speech end that ends the turn now (`max_silence_s` while awaiting
        the EOU of the text that covers the speech, see `await_eou`)."""
        if self._awaiting and self.config.semantic:
            return self.config.max_silence_s
        return required_silence_s(self.config, self._eou)

    def await_eou(self) -> None:
        """The EOU probability known now is stale (it scored text heard before the speech ended); until
        the next `push_eou` the turn needs `max_silence_s` (so a mid-sentence pause is not ended on an
        old score or on none). Ignored when no turn is open."""
        if self._turn_start_s is not None:
            self._awaiting = True

    @property
    def awaiting_eou(self) -> bool:
        return self._awaiting

    def push(self, event: SpeechStarted | SpeechEnded) -> None:
        """Feed one VAD event (in stream order)."""
        if isinstance(event, SpeechStarted):
            self._speaking = True
            self._silence_start_s = None
            if self._turn_start_s is None:
                self._turn_start_s = event.audio_s
                self._eou = None
                self._last_word_end_s = self._heard_until_s = None
        elif isinstance(event, SpeechEnded):
            self._speaking = False
            if self._turn_start_s is not None:
                self._silence_start_s = event.audio_s
        else:
            raise TypeError(f"Endpointer.push takes SpeechStarted or SpeechEnded, got {type(event).__name__}")

    def push_eou(self, probability: float | None) -> None:
        """The EOU probability of the open turn's latest text (None: forget it, back to `silence_s`).
        Ignored when no turn is open (a late result for a turn already ended). With
        `config.semantic` False it is only reported on the EndOfTurn, never changes the silence."""
        if probability is not None and not 0.0 <= probability <= 1.0:  # also rejects NaN
            raise ValueError(f"eou_probability must be in [0, 1], got {probability}")
        if self._turn_start_s is not None:
            self._eou = probability
            self._awaiting = False

    def push_words(self, last_word_end_s: float | None, heard_until_s: float) -> None:
        """The recogniser has heard the stream up to `heard_until_s`; the turn's last recognised word
        ends at `last_word_end_s` (None: no word yet). Feeds the `max_wordless_s` guard."""
        if self._turn_start_s is None:
            return
        if last_word_end_s is not None:
            self._last_word_end_s = last_word_end_s
        self._heard_until_s = max(self._heard_until_s or 0.0, heard_until_s)

    def poll(self, audio_s: float) -> EndOfTurn | None:
        """The stream has reached `audio_s`: return an EndOfTurn if the turn ends here, else None."""
        if audio_s < self._last_s:
            raise ValueError(f"audio time went backwards: {audio_s} < {self._last_s}")
        self._last_s = audio_s
        if self._turn_start_s is None:
            return None
        if self._silence_start_s is not None and audio_s - self._silence_start_s >= self.required_silence_s - 1e-9:
            return self._end(audio_s, forced=False)
        if self._speaking and self._wordless_since() is not None:
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

    def _wordless_since(self) -> float | None:
        """Where word-free "speech" began, if the recogniser has heard max_wordless_s of it."""
        if self._heard_until_s is None:
            return None
        since = self._last_word_end_s if self._last_word_end_s is not None else self._turn_start_s
        if self._heard_until_s - since >= self.config.max_wordless_s:
            return since
        return None

    def _end(self, audio_s: float, forced: bool) -> EndOfTurn:
        self.forced = forced
        self._silence_start_s = None
        eou = self._eou
        # cut during speech: the speech goes on into a new turn
        self._turn_start_s = audio_s if forced and self._speaking else None
        self._eou = None
        self._awaiting = False
        self._last_word_end_s = self._heard_until_s = None
        return EndOfTurn(audio_s=audio_s, eou_probability=1.0 if eou is None else eou)
