"""The listener's parts on their own: the pass cadence (voice/pass_cadence.py), the utterance's trimming
(voice/utterance.py) and the stream buffer (voice/stream_audio.py)."""

from __future__ import annotations

import numpy as np
import pytest

from headstart.config import ASRConfig
from headstart.seams import ListeningDefaults
from headstart.voice.agreement import LocalAgreement
from headstart.voice.pass_cadence import PassCadence
from headstart.voice.stream_audio import StreamAudio
from headstart.voice.utterance import Utterance
from headstart.voice.words import Word

SR = 16000


def utterance(start: int = 0, **fields) -> Utterance:
    return Utterance(**{"start": start, "agreement": LocalAgreement(2), "audio_start": start, "last_pass_end": start,
                        **fields})


def test_settings_left_none_are_the_engines():
    engine = ListeningDefaults(partial_interval_s=0.1, final_slack_s=0.3, final_redecode=True, agreement_n=3)
    cadence = PassCadence.resolve(ASRConfig(), engine)
    assert (cadence.min_new_samples, cadence.final_slack_samples, cadence.final_redecode, cadence.agreement_n) == (
        1600, 4800, True, 3)
    cadence = PassCadence.resolve(ASRConfig(min_new_audio_s=0.5, agreement_n=1, final_redecode=False), engine)
    assert (cadence.min_new_samples, cadence.agreement_n, cadence.final_redecode) == (8000, 1, False)


@pytest.mark.parametrize("field, value", [("min_new_audio_s", -1.0), ("partial_long_s", 0.0), ("agreement_n", 0),
                                          ("early_final_s", 0.0), ("final_slack_s", -0.1)])
def test_inconsistent_settings_are_refused(field, value):
    with pytest.raises(ValueError, match=field):
        PassCadence.resolve(ASRConfig(**{field: value}), ListeningDefaults())


def test_the_interval_grows_with_the_buffer_past_partial_long_s():
    cadence = PassCadence.resolve(ASRConfig(min_new_audio_s=0.4, partial_long_s=5.0), ListeningDefaults())
    u = utterance()
    assert cadence.partial_interval(u, 2 * SR) == cadence.partial_interval(u, 5 * SR) == int(0.4 * SR)
    assert cadence.partial_interval(u, 10 * SR) == 2 * int(0.4 * SR)


def test_a_short_pause_holds_the_cadence_pass_and_a_longer_one_starts_the_early_final():
    cadence = PassCadence.resolve(ASRConfig(min_new_audio_s=0.4, early_final_s=0.2), ListeningDefaults())
    u = utterance(last_pass_end=int(0.9 * SR))
    # silence since 1.0 s: at 1.1 s the cadence waits (a pass would stop just short of the end)
    assert cadence.silence_pending(int(1.1 * SR), 1.0) and not cadence.partial_due(u, int(1.1 * SR), 1.0)
    # at 1.2 s the speech may have ended: a pass now hears all of it
    assert cadence.speech_may_end(u, int(1.2 * SR), 1.0) and cadence.partial_due(u, int(1.2 * SR), 1.0)
    # no pause: the cadence alone decides
    assert cadence.partial_due(u, int(1.3 * SR), None) and not cadence.partial_due(u, int(1.2 * SR), None)


def test_a_pass_is_final_when_it_heard_up_to_the_padded_end_but_the_slack():
    cadence = PassCadence.resolve(ASRConfig(final_slack_s=0.1), ListeningDefaults())
    u = utterance(covered=int(0.95 * SR))
    assert not cadence.covers(u)  # no end yet
    u.end = SR
    assert cadence.covers(u) and not cadence.heard_to(u, int(1.1 * SR))


def test_a_long_utterance_starts_over_after_its_last_committed_sentence():
    u = utterance()
    words = [Word(" One.", 0.0, 1.0), Word(" Two", 1.0, 2.0), Word(" three", 2.0, 3.0), Word(" four", 3.0, 4.0)]
    u.agreement.push(words)
    u.agreement.push(words)
    u.trim(5 * SR, trim_after=10 * SR)  # short enough: nothing moves
    assert (u.audio_start, u.prompt) == (0, "")
    u.trim(12 * SR, trim_after=10 * SR)
    assert (u.audio_start, u.trimmed_words, u.prompt) == (SR, 1, "One.")


def test_the_stream_is_sliced_by_absolute_sample_index():
    audio = StreamAudio()
    audio.append(np.arange(10, dtype=np.float32))
    audio.append(np.zeros(0, np.float32))
    audio.append(np.arange(10, 20, dtype=np.float32))
    assert audio.end == 20 and audio.slice(8, 12).tolist() == [8, 9, 10, 11]
    audio.forget_before(15)  # the joined chunk ends after 15: kept
    assert audio.slice(0, 3).tolist() == [0, 1, 2]
    audio.append(np.arange(20, 25, dtype=np.float32))
    audio.forget_before(20)
    assert audio.slice(0, 22).tolist() == [20, 21] and audio.slice(30, 40).size == 0
