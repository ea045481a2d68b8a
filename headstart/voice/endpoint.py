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

Acoustic fusion (`EndpointConfig.acoustic_model` set, headstart/voice/turn_fusion.py): the listener
scores the turn's audio once per pause, at `acoustic_after_s` of silence (`await_acoustic`, then
`push_acoustic`); once both that score and the text's EOU probability are known, the required silence
follows the fused probability (with the fusion's own thresholds) instead of the text's alone. While an
acoustic score is being computed the turn waits for it (`max_silence_s` at most); without one (speech
too short to reach the pause) the text alone decides, as without the fusion. Speech that resumes makes
the acoustic score stale: it is forgotten.

Acoustic veto (`EndpointConfig.acoustic_mode = "veto"`): the acoustic score is taken the same way, but the
text's EOU probability decides as without it, except that a pause whose acoustic score is below
`acoustic_veto_below` (it sounds unfinished) waits at least `max_silence_s` — it can only lengthen a wait,
never shorten one. Waiting for the score, or no score, is as with the fusion.

All times are stream positions in seconds, so the decision does not depend on wall time or frame size.
The VAD's SpeechEnded time is padded (`VADConfig.speech_pad_s`), so the silence after the last voiced
window is speech_pad_s + the required silence, and the decision comes no earlier than the VAD's own
`min_silence_s` after the last voiced window.
"""

from __future__ import annotations

import math

from headstart.config import EndpointConfig
from headstart.events import EndOfTurn, SpeechEnded, SpeechStarted
from headstart.voice.turn_fusion import FITTED, FusionWeights


def eou_thresholds(config: EndpointConfig) -> tuple[float, float]:
    """(low, high) probability thresholds for `config.eou_scorer` ("head" or "token")."""
    if config.eou_scorer == "token":
        return config.token_eou_low, config.token_eou_high
    return config.eou_low, config.eou_high


def required_silence_s(
    config: EndpointConfig, eou_probability: float | None, thresholds: tuple[float, float] | None = None
) -> float:
    """The silence (seconds after the padded speech end) that ends a turn whose text has this EOU
    probability; `config.silence_s` when it is None (unknown) or `config.semantic` is False.
    `thresholds`: (low, high) in place of the config's (the fusion's own pair)."""
    if eou_probability is None or not config.semantic:
        return config.silence_s
    low, high = eou_thresholds(config) if thresholds is None else thresholds
    if eou_probability >= high:
        return config.min_silence_s
    if eou_probability <= low:
        return config.max_silence_s
    # log-linear: the probabilities span orders of magnitude
    x = (math.log(eou_probability) - math.log(low)) / (math.log(high) - math.log(low))
    return config.max_silence_s + x * (config.min_silence_s - config.max_silence_s)


class Endpointer:
    """A synchronous policy: `push(vad_event)`, `push_eou(p, text)`, `push_acoustic(p)`, `push_words(...)`,
    `poll(audio_s) -> EndOfTurn | None`, `flush`, `reset`.

    Args:
        config: the settings; `config.acoustic_model` (not None) switches the acoustic score on: the
            fusion (`acoustic_mode` "fusion", with `eou_scorer` "head", the probabilities it was fitted
            on) or the veto (`acoustic_mode` "veto", either scorer).
        fusion: the fusion's weights and thresholds (default `turn_fusion.FITTED`); used only with
            `config.acoustic_model` set.

    Raises:
        ValueError: on an inconsistent config (negative silences, min > max silence, thresholds not
            0 < eou_low < eou_high <= 1, head_thresholds not 'trained'/'config', max_turn_s, max_wordless_s
            or acoustic_after_s <= 0, acoustic_mode not 'fusion'/'veto', acoustic_veto_below outside
            [0, 1]), on time going backwards or
            on a probability outside [0, 1] / NaN.
    """

    def __init__(self, config: EndpointConfig, fusion: FusionWeights | None = None) -> None:
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
        if not config.acoustic_after_s > 0:
            raise ValueError(f"EndpointConfig.acoustic_after_s must be > 0, got {config.acoustic_after_s}")
        if config.acoustic_mode not in ("fusion", "veto"):
            raise ValueError(f"EndpointConfig.acoustic_mode must be 'fusion' or 'veto', got {config.acoustic_mode!r}")
        if not 0.0 <= config.acoustic_veto_below <= 1.0:  # also rejects NaN
            raise ValueError(f"EndpointConfig.acoustic_veto_below must be in [0, 1], got {config.acoustic_veto_below}")
        if fusion is not None and not isinstance(fusion, FusionWeights):
            raise TypeError(f"fusion must be FusionWeights, got {type(fusion).__name__}")
        self.config = config
        # the fusion is on only with an acoustic model configured (today's endpointer otherwise), and for
        # the trained head's probabilities it was fitted on (the raw token probability has another scale)
        self.fusion: FusionWeights | None = (
            (fusion or FITTED)
            if config.acoustic_model and config.acoustic_mode == "fusion" and config.eou_scorer == "head"
            else None
        )
        # the veto only lengthens the text's waits, so it suits either EOU scorer
        self.veto = bool(config.acoustic_model) and config.acoustic_mode == "veto"
        self.reset()

    def reset(self) -> None:
        self._turn_start_s: float | None = None  # None: no turn open
        self._speaking = False
        self._silence_start_s: float | None = None
        self._last_s = 0.0
        self._eou: float | None = None
        self._eou_text = ""  # the text behind _eou, as the recogniser wrote it (its trailing marks)
        self._awaiting = False  # the EOU of the text up to the speech end is being computed
        self._acoustic: float | None = None  # the acoustic score of the pause in progress
        self._awaiting_acoustic = False
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
    def acoustic_on(self) -> bool:
        """Whether this endpointer uses an acoustic score of the pause (the fusion or the veto)."""
        return self.fusion is not None or self.veto

    @property
    def vetoed(self) -> bool:
        """Whether the veto holds the turn now: veto mode, a known text EOU probability and an acoustic
        score of the pause below `acoustic_veto_below`."""
        return (
            self.veto
            and self._eou is not None
            and self._acoustic is not None
            and self._acoustic < self.config.acoustic_veto_below
        )

    @property
    def acoustic_probability(self) -> float | None:
        """The acoustic score pushed for the pause in progress (None: none, or speech resumed since)."""
        return self._acoustic

    @property
    def fused_probability(self) -> float | None:
        """The fusion's probability from the text's EOU probability, the acoustic score and the text's
        trailing marks; None while the fusion is off or either score is unknown."""
        if self.fusion is None or self._eou is None or self._acoustic is None:
            return None
        return self.fusion.probability(self._eou, self._acoustic, self._eou_text)

    @property
    def required_silence_s(self) -> float:
        """The silence after the speech end that ends the turn now (`max_silence_s` while awaiting
        the EOU of the text that covers the speech, see `await_eou`, or the acoustic score of the pause)."""
        if (self._awaiting or self._awaiting_acoustic) and self.config.semantic:
            return self.config.max_silence_s
        fused = self.fused_probability
        if fused is not None:
            assert self.fusion is not None  # fused_probability is None while the fusion is off
            return required_silence_s(self.config, fused, (self.fusion.eou_low, self.fusion.eou_high))
        silence = required_silence_s(self.config, self._eou)
        if self.vetoed and self.config.semantic:
            return max(silence, self.config.max_silence_s)
        return silence

    def await_eou(self) -> None:
        """The EOU probability known now is stale (it scored text heard before the speech ended); until
        the next `push_eou` the turn needs `max_silence_s` (so a mid-sentence pause is not ended on an
        old score or on none). Ignored when no turn is open."""
        if self._turn_start_s is not None:
            self._awaiting = True

    @property
    def awaiting_eou(self) -> bool:
        return self._awaiting

    def await_acoustic(self) -> None:
        """An acoustic score of the pause in progress is being computed: until `push_acoustic` the
        turn needs `max_silence_s`. Ignored when no turn is open or no acoustic score is used
        (`acoustic_on`)."""
        if self._turn_start_s is not None and self.acoustic_on:
            self._awaiting_acoustic = True

    @property
    def awaiting_acoustic(self) -> bool:
        return self._awaiting_acoustic

    def push_acoustic(self, probability: float | None) -> None:
        """The acoustic P(complete) of the open turn's audio at the pause in progress (None: none could
        be computed; the text alone decides). Ignored when no turn is open or no acoustic score is used
        (`acoustic_on`)."""
        if probability is not None and not 0.0 <= probability <= 1.0:  # also rejects NaN
            raise ValueError(f"acoustic probability must be in [0, 1], got {probability}")
        if self._turn_start_s is not None and self.acoustic_on:
            self._acoustic = probability
            self._awaiting_acoustic = False

    def push(self, event: SpeechStarted | SpeechEnded) -> None:
        """Feed one VAD event (in stream order)."""
        if isinstance(event, SpeechStarted):
            self._speaking = True
            self._silence_start_s = None
            # the pause was not the end: its acoustic score is stale (the listener drops a late one)
            self._acoustic = None
            self._awaiting_acoustic = False
            if self._turn_start_s is None:
                self._turn_start_s = event.audio_s
                self._eou = None
                self._eou_text = ""
                self._last_word_end_s = self._heard_until_s = None
        elif isinstance(event, SpeechEnded):
            self._speaking = False
            if self._turn_start_s is not None:
                self._silence_start_s = event.audio_s
        else:
            raise TypeError(f"Endpointer.push takes SpeechStarted or SpeechEnded, got {type(event).__name__}")

    def push_eou(self, probability: float | None, text: str = "") -> None:
        """The EOU probability of the open turn's latest text (None: forget it, back to `silence_s`).
        `text`: that text as the recogniser wrote it (the fusion reads its trailing marks).
        Ignored when no turn is open (a late result for a turn already ended). With
        `config.semantic` False it is only reported on the EndOfTurn, never changes the silence."""
        if probability is not None and not 0.0 <= probability <= 1.0:  # also rejects NaN
            raise ValueError(f"eou_probability must be in [0, 1], got {probability}")
        if not isinstance(text, str):
            raise ValueError(f"text must be a str, got {text!r}")
        if self._turn_start_s is not None:
            self._eou = probability
            self._eou_text = text
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
        assert since is not None  # push_words sets _heard_until_s only in an open turn; _end clears it
        if self._heard_until_s - since >= self.config.max_wordless_s:
            return since
        return None

    def _end(self, audio_s: float, forced: bool) -> EndOfTurn:
        self.forced = forced
        self._silence_start_s = None
        fused = self.fused_probability if self.config.semantic else None
        eou = self._eou if fused is None else fused
        # cut during speech: the speech goes on into a new turn
        self._turn_start_s = audio_s if forced and self._speaking else None
        self._eou = None
        self._eou_text = ""
        self._awaiting = False
        self._acoustic = None
        self._awaiting_acoustic = False
        self._last_word_end_s = self._heard_until_s = None
        return EndOfTurn(audio_s=audio_s, eou_probability=1.0 if eou is None else eou)
