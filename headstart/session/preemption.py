"""The head start's decisions: when to start a held (preemptive) reply before the end of turn, when to
drop it, and whether the end of turn releases it. A plain synchronous policy on an injected clock; the
session executes the returned decisions (no I/O here).

    policy.partial(text)           every partial transcript of the user's turn
    policy.pause_started()         the VAD hears a pause after speech, not yet confirmed as its end
    policy.pause_ended()           the speech went on after that pause (held work is dropped)
    policy.speech_ended()          the VAD heard the user stop
    policy.final(text)             the utterance's final transcript
    policy.eou(text, probability)  an end-of-utterance probability for `text` (optional signal)
    policy.speech_started()        the VAD heard speech (resumed speech cancels held work)
    policy.end_of_turn(text)       -> Release (a hit) or CancelHeld + nothing (a miss: regenerate)
    policy.cancel(reason)          the turn was dropped (no words, cleared, reset)

When to preempt: once the user has stopped speaking and the text *reads complete* (see
`reads_complete`). Stopped speaking means the VAD's speech end (no new words can come, so the text is
as stable as it gets before the final pass) or, with `SessionConfig.preempt_on_pause`, a pause the VAD
hears but has not confirmed yet (`pause_started`, its `min_silence_s` still running): the reply then
gets those ~0.25 s too, and if the speech goes on (`pause_ended`) it is dropped. Reads complete means
its EOU probability is at least `preempt_threshold(...)` when one is known for exactly this text,
else (the simple rule, used while no EOU signal is wired) it ends with sentence punctuation. The final
transcript is checked again: a different text drops the held reply and, if it reads complete, starts
one on the final text. A held reply is released only when the end of turn's transcript equals the text
it was conditioned on (whitespace aside); anything else drops it, so a stale reply is never spoken.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from headstart.clock import Clock
from headstart.config import EndpointConfig, SessionConfig
from headstart.session.turntaking import has_words

_SENTENCE_END = (".", "?", "!", "…")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class Preempt:
    """Start a held reply conditioned on `text` as the user's message."""

    text: str


@dataclass(frozen=True, slots=True)
class CancelHeld:
    """Drop the held reply (a miss). `reason`: "speech_resumed", "text_changed", "mismatch", "no_words",
    "cleared"."""

    reason: str


@dataclass(frozen=True, slots=True)
class Release:
    """End of turn on the held reply's own text: send it now. `lead_s`: how long before the end of turn
    it started (the head start gained, seconds)."""

    text: str
    lead_s: float


Decision = Preempt | CancelHeld | Release


@dataclass(slots=True)
class HeadStartStats:
    """The head start's one record over a session (headstart/session/head_start.py): `hits` (held replies
    released), `misses` (held replies dropped), `wasted_tokens` (tokens generated for dropped replies;
    `HeadStart` adds them)."""

    hits: int = 0
    misses: int = 0
    wasted_tokens: int = 0

    @property
    def hit_rate(self) -> float | None:
        """hits / (hits + misses); None before any held reply ended."""
        total = self.hits + self.misses
        return self.hits / total if total else None


def preempt_threshold(config: SessionConfig, endpoint: EndpointConfig) -> float:
    """The EOU probability from which a held reply starts: `config.preempt_eou_threshold` when set;
    else for the trained head (`endpoint.eou_scorer == "head"`) `config.preempt_head_threshold`; else
    a quarter of the way from the endpointer's low to its high threshold for its `eou_scorer`
    (`headstart.voice.endpoint.eou_thresholds`) on a log scale."""
    from headstart.voice.endpoint import eou_thresholds

    if config.preempt_eou_threshold is not None:
        return float(config.preempt_eou_threshold)
    if endpoint.eou_scorer == "head" and config.preempt_head_threshold is not None:
        return float(config.preempt_head_threshold)
    low, high = (max(x, 1e-12) for x in eou_thresholds(endpoint))
    return math.exp(math.log(low) + 0.25 * (math.log(high) - math.log(low)))


def same_text(a: str, b: str) -> bool:
    """Equal but for whitespace (a partial joins committed and pending text with a space)."""
    return _SPACE.sub("", a) == _SPACE.sub("", b)


class PreemptionPolicy:
    """The head start's decisions for one session (see the module docstring).

    Args:
        clock: the time source (FakeClock in tests).
        config: `SessionConfig` (`head_start=False` or `preemptive=False`: no method ever returns a
            `Preempt`, so nothing is held and nothing is released).
        endpoint: the endpointer's `EndpointConfig` (its EOU scale sets the default threshold).

    Attributes:
        held_text: the text the held reply is conditioned on (None: nothing held).
        outcome: this turn's result so far: "none", "miss" (a held reply was dropped) or "hit".
        stats: counters over the session.
    """

    def __init__(self, clock: Clock, config: SessionConfig | None = None,
                 endpoint: EndpointConfig | None = None) -> None:
        self._clock = clock
        self.config = config or SessionConfig()
        self.eou_threshold = preempt_threshold(self.config, endpoint or EndpointConfig())
        self.stats = HeadStartStats()
        self.held_text: str | None = None
        self._held_at_s = 0.0
        self._latest = ""
        self._speaking = False
        self._paused = False  # a pause the VAD has not confirmed as the speech's end (preempt_on_pause)
        self._eou: tuple[str, float] | None = None
        self.outcome = "none"

    @property
    def latest_text(self) -> str:
        """The newest text of the user's turn (partial or final; "" between turns)."""
        return self._latest

    @property
    def enabled(self) -> bool:
        """The master switch (`SessionConfig.head_start`)."""
        return self.config.head_start

    @property
    def incremental_prefill(self) -> bool:
        """Partial transcripts prefill the KV cache (`head_start` and `incremental_prefill`)."""
        return self.config.head_start and self.config.incremental_prefill

    @property
    def preemptive(self) -> bool:
        """A held reply may start before the end of turn (`head_start` and `preemptive`)."""
        return self.config.head_start and self.config.preemptive

    def reads_complete(self, text: str) -> bool:
        """Would the user's turn plausibly end after `text`? EOU probability when known for this very
        text, else sentence punctuation at its end; never for fewer than `preempt_min_words` words."""
        text = text.strip()
        if len(text.split()) < max(1, self.config.preempt_min_words) or not has_words(text):
            return False  # too short, or fillers only ("um, uh"): no turn to answer
        if self._eou is not None and same_text(self._eou[0], text):
            return self._eou[1] >= self.eou_threshold
        return text.endswith(_SENTENCE_END)

    # -- events ---------------------------------------------------------------------------------------
    def speech_started(self) -> list[Decision]:
        self._speaking = True
        self._paused = False
        return self._cancel("speech_resumed")

    def pause_started(self) -> list[Decision]:
        """The VAD hears silence after speech that it has not confirmed as the speech's end: with
        `SessionConfig.preempt_on_pause` the latest text may start a held reply now (else nothing)."""
        if not self.config.preempt_on_pause or not self._speaking:
            return []
        self._paused = True
        return self._maybe_preempt(self._latest)

    def pause_ended(self) -> list[Decision]:
        """The speech went on before the VAD confirmed its end: a reply held on the pause is dropped."""
        if not self._paused:
            return []
        self._paused = False
        return self._cancel("speech_resumed")

    def partial(self, text: str) -> list[Decision]:
        self._latest = text
        if self.held_text is not None and not same_text(text, self.held_text):
            return self._cancel("text_changed")
        return []

    def speech_ended(self) -> list[Decision]:
        self._speaking = False
        self._paused = False
        return self._maybe_preempt(self._latest)

    def final(self, text: str) -> list[Decision]:
        """The utterance's final transcript ("" or fillers only = no words: the utterance is no turn)."""
        self._speaking = False
        if not has_words(text):
            self._latest = ""
            return self._cancel("no_words")
        self._latest = text
        decisions: list[Decision] = []
        if self.held_text is not None and not same_text(text, self.held_text):
            decisions += self._cancel("text_changed")
        return decisions + self._maybe_preempt(text)

    def eou(self, text: str, probability: float | None) -> list[Decision]:
        """An EOU probability for `text` (None: unknown). It may start a held reply while the user is
        silent and `text` is the latest."""
        self._eou = None if probability is None else (text, float(probability))
        if self._speaking_now or not same_text(text, self._latest):
            return []
        return self._maybe_preempt(text)

    def end_of_turn(self, text: str) -> list[Decision]:
        """The turn is over with transcript `text`: Release the held reply if it was conditioned on it,
        else drop it (the session then generates the reply as usual)."""
        held = self.held_text
        decisions: list[Decision]
        if held is not None and same_text(held, text):
            self.held_text = None
            self.stats.hits += 1
            self.outcome = "hit"
            decisions = [Release(held, self._clock.now() - self._held_at_s)]
        else:
            decisions = self._cancel("mismatch")
        self._new_turn()
        return decisions

    def cancel(self, reason: str = "cleared") -> list[Decision]:
        """The turn ends without a reply (no words, cleared input, reset)."""
        decisions = self._cancel(reason)
        self._new_turn()
        return decisions

    def drop(self, reason: str) -> list[Decision]:
        """Drop the held reply but keep the turn going (e.g. the held reply failed)."""
        return self._cancel(reason)

    def withdraw(self) -> None:
        """The session could not start the reply a `Preempt` asked for: nothing is held, and it
        counts as neither hit nor miss."""
        self.held_text = None

    def take_outcome(self) -> str:
        """This turn's outcome ("hit", "miss", "none"), then start counting the next turn."""
        outcome, self.outcome = self.outcome, "none"
        return outcome

    # -- internals ------------------------------------------------------------------------------------
    @property
    def _speaking_now(self) -> bool:
        """The user may be mid-word: speaking, and not in a pause that may start a held reply."""
        return self._speaking and not self._paused

    def _new_turn(self) -> None:
        self._latest = ""
        self._eou = None
        self._speaking = False
        self._paused = False

    def _maybe_preempt(self, text: str) -> list[Decision]:
        if not self.preemptive or self._speaking_now or not self.reads_complete(text):
            return []
        if self.held_text is not None and same_text(self.held_text, text):
            return []
        decisions = self._cancel("text_changed")
        self.held_text = text
        self._held_at_s = self._clock.now()
        return [*decisions, Preempt(text)]

    def _cancel(self, reason: str) -> list[Decision]:
        if self.held_text is None:
            return []
        self.held_text = None
        self.stats.misses += 1
        if self.outcome != "hit":
            self.outcome = "miss"
        return [CancelHeld(reason)]
