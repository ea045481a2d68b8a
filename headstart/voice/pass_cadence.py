"""When the listener runs an ASR pass, and when a finished pass counts as an utterance's final.

A synchronous policy on audio time (samples received), resolved once from `ASRConfig` and the engine's
`ListeningDefaults` (a setting left None is the engine's):

* Partials re-transcribe the whole utterance so far, whenever the ASR worker is free and at least
  `ASRConfig.min_new_audio_s` of new audio has come, or, past `ASRConfig.partial_long_s` of buffered
  audio, that interval times buffer / partial_long_s (an engine whose pass cost grows with the audio
  keeps a bounded share of its core; the VAD's pauses start passes anyway).
* Early final: once the VAD has heard `ASRConfig.early_final_s` of silence after speech (before its
  `min_silence_s` confirms the end), a pass starts if the ASR is free (`speech_may_end`); a pass that
  heard the utterance up to its padded end minus `ASRConfig.final_slack_s` (the VAD's padding is
  non-speech) is its final (`heard_to`). While that silence is shorter than early_final_s the cadence
  pass is held back (`silence_pending`), so the ASR is free for the pass that hears the whole utterance.
"""

from __future__ import annotations

from dataclasses import dataclass

from headstart.audio import SAMPLE_RATE_HZ
from headstart.config import ASRConfig
from headstart.seams import ListeningDefaults
from headstart.voice.utterance import Utterance

_EARLY_MIN_AUDIO_S = 0.4  # no early-final pass on less audio than this


def _samples(seconds: float) -> int:
    return int(round(seconds * SAMPLE_RATE_HZ))


@dataclass(frozen=True, slots=True)
class PassCadence:
    """The listener's pass schedule, in samples of the 16 kHz stream (see the module docstring).

    Attributes:
        min_new_samples: new audio before the next partial pass (`min_new_audio_s`).
        partial_long_s: buffered audio (seconds) past which that interval grows (inf: never).
        early_final_samples: silence after speech that starts an early-final pass (None: off).
        final_slack_samples: how far short of the padded speech end a final pass may stop.
        trim_after_samples: buffered audio past which a long utterance is trimmed (`Utterance.trim`).
        final_redecode: the final transcript is the final pass' own hypothesis.
        agreement_n: LocalAgreement's n.
    """

    min_new_samples: int
    partial_long_s: float
    early_final_samples: int | None
    final_slack_samples: int
    trim_after_samples: int
    final_redecode: bool
    agreement_n: int

    @classmethod
    def resolve(cls, config: ASRConfig, engine: ListeningDefaults) -> PassCadence:
        """`config`'s settings, each left None taken from `engine`.

        Raises:
            ValueError: min_new_audio_s < 0, partial_long_s <= 0, agreement_n not an int >= 1,
                early_final_s <= 0 (None is off), final_slack_s < 0.
        """
        interval_s = engine.partial_interval_s if config.min_new_audio_s is None else config.min_new_audio_s
        long_s = engine.partial_long_s if config.partial_long_s is None else config.partial_long_s
        slack_s = engine.final_slack_s if config.final_slack_s is None else config.final_slack_s
        redecode = engine.final_redecode if config.final_redecode is None else bool(config.final_redecode)
        agreement_n = engine.agreement_n if config.agreement_n is None else config.agreement_n
        if not interval_s >= 0:
            raise ValueError(f"ASRConfig.min_new_audio_s must be >= 0, got {interval_s}")
        if not long_s > 0:
            raise ValueError(f"ASRConfig.partial_long_s must be > 0 (inf: never), got {long_s}")
        if not (isinstance(agreement_n, int) and agreement_n >= 1):
            raise ValueError(f"ASRConfig.agreement_n must be an int >= 1, got {agreement_n!r}")
        if config.early_final_s is not None and not config.early_final_s > 0:
            raise ValueError(f"ASRConfig.early_final_s must be > 0 or None, got {config.early_final_s}")
        if not slack_s >= 0:
            raise ValueError(f"ASRConfig.final_slack_s must be >= 0, got {slack_s}")
        return cls(
            min_new_samples=_samples(interval_s),
            partial_long_s=float(long_s),
            early_final_samples=None if config.early_final_s is None else _samples(config.early_final_s),
            final_slack_samples=_samples(slack_s),
            trim_after_samples=_samples(config.trim_after_s),
            final_redecode=redecode,
            agreement_n=agreement_n,
        )

    def partial_due(self, utterance: Utterance, audio_end: int, silence_since_s: float | None) -> bool:
        """Whether a partial pass over `utterance` up to `audio_end` should start now (the ASR being
        free): the speech may have ended here, or enough new audio came and no short pause holds it.
        `silence_since_s`: the VAD's `silence_since_s` (where the silence after speech began, or None)."""
        return self.speech_may_end(utterance, audio_end, silence_since_s) or (
            audio_end - utterance.last_pass_end >= self.partial_interval(utterance, audio_end)
            and not self.silence_pending(audio_end, silence_since_s)
        )

    def partial_interval(self, utterance: Utterance, audio_end: int) -> int:
        """New audio (samples) the next cadence pass waits for: `min_new_audio_s`, growing in proportion
        to the buffer past `partial_long_s` (a pass then costs more; the pauses' passes come anyway)."""
        buffered_s = (audio_end - utterance.audio_start) / SAMPLE_RATE_HZ
        return max(int(self.min_new_samples * max(1.0, buffered_s / self.partial_long_s)), 1)

    def silence_pending(self, audio_end: int, silence_since_s: float | None) -> bool:
        """The VAD hears silence after speech, less than `early_final_s` of it: hold the cadence pass
        back (at most early_final_s), so that, if the speech ends here, the ASR is free for the pass
        that hears the whole utterance instead of busy with one that stops just short of its end."""
        if self.early_final_samples is None or silence_since_s is None:
            return False
        return audio_end - _samples(silence_since_s) < self.early_final_samples

    def speech_may_end(self, utterance: Utterance, audio_end: int, silence_since_s: float | None) -> bool:
        """The VAD has heard `early_final_s` of silence after speech that no pass has heard past yet:
        a pass now hears the whole utterance if the speech does end here."""
        if self.early_final_samples is None or silence_since_s is None:
            return False
        since = _samples(silence_since_s)
        return (
            audio_end - since >= self.early_final_samples
            and utterance.last_pass_end < since + self.early_final_samples
            # Whisper on a clip this short tends to loop ("Press Press Press ...")
            and audio_end - utterance.audio_start >= _EARLY_MIN_AUDIO_S * SAMPLE_RATE_HZ
        )

    def heard_to(self, utterance: Utterance, end: int) -> bool:
        """Whether the newest finished pass heard `utterance` up to sample `end` (a padded speech end)
        but the final's slack."""
        return utterance.covered >= end - self.final_slack_samples

    def covers(self, utterance: Utterance) -> bool:
        """Whether the newest finished pass heard the utterance up to its end (but the VAD's padding)."""
        return utterance.end is not None and self.heard_to(utterance, utterance.end)
