"""EchoGuard (headstart/session/echo.py): the session's echo checks over an EchoDetector: mic audio converted at
the edge, each reply's audio resampled to 16 kHz as it leaves, the verdicts; off, every check says no."""

from __future__ import annotations

import numpy as np

from headstart.audio import AudioFrame
from headstart.session.echo import EchoDetector, EchoGuard, echo_text


class RecordingDetector(EchoDetector):
    def __init__(self) -> None:
        super().__init__()
        self.mic: list[tuple[int, float | None]] = []
        self.played: list[int] = []

    def push_mic(self, samples, played_s=None) -> None:
        self.mic.append((samples.shape[0], played_s))
        super().push_mic(samples, played_s)

    def push_played(self, samples) -> None:
        self.played.append(samples.shape[0])
        super().push_played(samples)


def test_audio_is_converted_to_16k_mono_at_the_edge():
    detector = RecordingDetector()
    guard = EchoGuard(detector)
    stereo_48k = np.zeros((4800, 2), np.int16)  # 0.1 s
    guard.heard(AudioFrame(stereo_48k, 48000), played_s=0.5)
    assert detector.mic == [(1600, 0.5)]
    sink = guard.reply_sink()  # one reply: its own resampler
    for _ in range(3):
        sink(AudioFrame(np.zeros(2205, np.float32), 22050))  # 0.1 s each
    # at 16 kHz: 0.1 s a frame once the streaming filter's delay (the first frame's shortfall) is filled
    assert all(abs(n - 1600) <= 32 for n in detector.played[1:]) and 4000 < sum(detector.played) <= 4800
    guard.reset_played()
    assert detector._played_len == 0


def test_the_reply_coming_back_is_echo_and_a_new_voice_is_not():
    rng = np.random.default_rng(0)
    reply = (0.3 * rng.standard_normal(16000)).astype(np.float32)  # 1 s of reply audio
    guard = EchoGuard(EchoDetector())
    guard.reply_sink()(AudioFrame(reply, 16000))
    delayed = np.concatenate([np.zeros(960, np.float32), 0.5 * reply[:-960]])  # 60 ms later, half as loud
    guard.heard(AudioFrame(delayed, 16000), played_s=1.0)
    assert guard.speech_is_echo(1.0, just_spoke=False)
    assert guard.sure_echo(True, lambda: 1.0) and not guard.sure_echo(False, lambda: 1.0)
    voice = EchoGuard(EchoDetector())
    voice.reply_sink()(AudioFrame(reply, 16000))
    voice.heard(AudioFrame((0.3 * rng.standard_normal(16000)).astype(np.float32), 16000), played_s=1.0)
    assert not voice.speech_is_echo(1.0, just_spoke=False)
    assert not voice.speech_is_echo(None, just_spoke=False)  # nothing playing, nothing just played


def test_off_every_check_says_no():
    guard = EchoGuard(None)
    guard.heard(AudioFrame(np.ones(1600, np.float32), 16000), played_s=0.2)
    guard.reply_sink()(AudioFrame(np.ones(1600, np.float32), 16000))
    guard.reset_played()
    assert not guard.speech_is_echo(0.2, just_spoke=True)
    assert not guard.sure_echo(True, lambda: 0.2)


def test_the_echo_of_a_number_is_recognised_in_its_spoken_form():
    """The voice says "ten" for "10" and the ASR may write either: both count as the reply's words when
    the session tells its own echo from the user (a CI run saw "I'm going ten." taken for a barge-in)."""
    from headstart.session.turntaking import is_echo_text

    reply = echo_text("I'm going 10 meters forward.")
    assert reply == "I'm going 10 meters forward. I'm going ten meters forward."
    assert echo_text("Hello there.") == "Hello there."
    assert is_echo_text("I'm going ten.", reply) and is_echo_text("I'm going 10 meters.", reply)
    assert not is_echo_text("I'm going ten.", "I'm going 10 meters forward.")  # the raw text alone
    assert not is_echo_text("stop please", reply)
