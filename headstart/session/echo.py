"""Echo: is the microphone hearing the reply the session is playing? (normalised cross-correlation)"""

from __future__ import annotations

import math

import numpy as np

from collections.abc import Callable

from headstart.audio import SAMPLE_RATE_HZ, AudioFrame, StreamResampler, resample, to_mono_float32

class EchoDetector:
    """Is the microphone hearing the reply the session is playing?

    Keeps the last `mic_window_s` of microphone audio and the current reply's audio (both 16 kHz float32
    mono) and compares them by normalised cross-correlation (the peak over all delays up to
    `max_delay_s` of the mic behind playback, around the playback position). Speaker-to-mic echo is a
    filtered, delayed copy of the reply and correlates strongly; a person's own voice does not.
    With the client's playback position given for each mic push, it also compares against the reply
    as it was heard: a client that ran out of audio (an underrun) played a gap the reply audio lacks,
    and the echo after it matches only the reference with that gap.

    Args:
        mic_window_s: microphone audio compared (the part the VAD just called speech).
        max_delay_s: acoustic + buffering delay searched.
        threshold: correlation peak at or above which the audio is echo.
        sure_threshold: peak at or above which the mic holds nothing but echo: a voice over the echo
            at ~0.75 of its level or more pulls the peak of echo + voice under 0.8 (1 / sqrt(1 + g^2)).
        position_jitter_s: how far the `played_s` given to `push_mic` may be off (the client's last
            report plus the time since: up to a report interval, ~0.1 s in the web client) before
            the aligned reference takes it for a stall or a resume; the mic is also compared with
            twice this much of what plays next while the playback is stalled (the echo of a resume
            not yet seen as one).
        gap_memory_s: an underrun gap up to about this long stays a gap within the reply (the echo
            after it is compared with the audio around it); after a longer one the reference
            starts over as at the reply's start (at least 40 % reply audio in every alignment).
    """

    def __init__(self, mic_window_s: float = 0.5, max_delay_s: float = 0.6, threshold: float = 0.3,
                 sure_threshold: float = 0.8, position_jitter_s: float = 0.1, gap_memory_s: float = 2.0) -> None:
        self.mic_window = int(mic_window_s * SAMPLE_RATE_HZ)
        self.max_delay = int(max_delay_s * SAMPLE_RATE_HZ)
        self.threshold = threshold
        self.sure_threshold = sure_threshold
        self.position_jitter = int(position_jitter_s * SAMPLE_RATE_HZ)
        self._aligned_keep = self.mic_window + self.max_delay + int(gap_memory_s * SAMPLE_RATE_HZ)
        self._mic = np.zeros(0, dtype=np.float32)
        self._played: list[np.ndarray] = []
        self._played_len = 0
        # What was playing while each mic sample arrived (same end as _mic; compared: its last
        # mic_window + max_delay, kept: gap_memory_s more): the reference as the client played it,
        # with its underrun gaps.
        self._aligned = np.zeros(0, dtype=np.float32)
        self._last_pos: int | None = None  # reply position (samples) the aligned reference has reached
        self._stalled = False  # the client's playback stopped (an underrun) and has not resumed

    def push_mic(self, samples: np.ndarray, played_s: float | None = None) -> None:
        """float32 (n,) 16 kHz microphone audio; `played_s`: the client's playback position of the
        reply (s) when it arrived, None while nothing plays.

        The position is an estimate (the client's last report plus the time since, off by up to a
        report interval or a late push), so the aligned reference does not follow it push by push:
        it plays on with the mic's own clock and only stops when the position falls more than
        `position_jitter_s` behind it (an underrun: the audio since the stall is taken back), and
        resumes when the position moves on by more than that (the audio since is put back)."""
        n = samples.shape[0]
        self._mic = np.concatenate([self._mic, samples])[-self.mic_window :]
        segment = np.zeros(n, dtype=np.float32)
        if played_s is None or not self._played_len:
            self._last_pos, self._stalled = None, False
            self._aligned = np.concatenate([self._aligned, segment])[-self._aligned_keep :]
            return
        played = self._joined()
        pos = min(int(played_s * SAMPLE_RATE_HZ), played.shape[0])
        ref = self._last_pos
        if ref is None:  # playback (or its reports) starts: the audio up to the position just played
            part = played[max(0, pos - n) : pos]
            segment[n - part.shape[0] :] = part
            ref, self._stalled = pos, False
        elif not self._stalled:
            part = played[ref : ref + n]  # playing on; none left: the client ran out of audio
            segment[: part.shape[0]] = part
            ref += part.shape[0]
        self._aligned = np.concatenate([self._aligned, segment])[-self._aligned_keep :]
        if not self._stalled and pos < ref - self.position_jitter:
            back = min(ref - pos, self._aligned.shape[0])  # the client stopped at pos: not heard
            self._aligned[self._aligned.shape[0] - back :] = 0.0
            ref, self._stalled = pos, True
        elif pos > ref + self.position_jitter:  # resumed after a stall, or the estimate ran ahead
            ahead = min(pos - ref, self._aligned.shape[0])
            if self._stalled:  # played since the stall ended: heard
                self._aligned[self._aligned.shape[0] - ahead :] = played[pos - ahead : pos]
            ref, self._stalled = pos, False
        self._last_pos = ref

    def push_played(self, samples: np.ndarray) -> None:
        """float32 (n,) 16 kHz reply audio, in playback order."""
        if samples.size:
            self._played.append(samples.astype(np.float32, copy=False))
            self._played_len += samples.shape[0]

    def reset_played(self) -> None:
        self._played, self._played_len = [], 0
        self._last_pos, self._stalled = None, False

    def _joined(self) -> np.ndarray:
        played = np.concatenate(self._played) if len(self._played) > 1 else self._played[0]
        self._played = [played]
        return played

    def similarity(self, played_s: float | None = None) -> float:
        """Peak normalised cross-correlation in [0, 1] of the mic window against the reply audio that
        ends at playback position `played_s` (None: all reply audio so far), and against the reply as
        the client played it (`push_mic`'s positions: its underrun gaps included); the larger."""
        mic = self._mic
        if mic.shape[0] < self.mic_window // 2 or not self._played_len:
            return 0.0
        played = self._joined()
        end = played.shape[0] if played_s is None else min(played.shape[0], int(played_s * SAMPLE_RATE_HZ) + SAMPLE_RATE_HZ // 4)
        start = end - mic.shape[0] - self.max_delay
        ref = played[max(0, start):end]
        if start < 0:
            # the mic window reaches back before the reply began (the speaker was silent then)
            ref = _from_onset(np.concatenate([np.zeros(-start, dtype=np.float32), ref]), -start, mic.shape[0])
        peak = normalized_xcorr_peak(mic, ref)
        if self._last_pos is not None and self._aligned.shape[0] >= mic.shape[0]:
            # reply audio before the window (a gap within the reply, not its start): no onset cut
            kept = self._aligned
            aligned = kept[-(self.mic_window + self.max_delay) :]
            onset = max(0, int(np.argmax(kept != 0)) - (kept.shape[0] - aligned.shape[0]))
            aligned = _from_onset(aligned, onset, mic.shape[0])
            peak = max(peak, normalized_xcorr_peak(mic, aligned))
            if self._stalled:
                # and what plays next: the echo of a resume the positions do not show yet (the VAD
                # may fire on its first 80 ms; a client whose output ran dry plays it at once). The
                # stall's position reads late by up to a report interval, so the resume may start a
                # little before `_last_pos`: searched in 5 ms steps. Only in a stall: the extra
                # alignments let a user's voice match by chance (nothing plays then to be paused).
                pos = self._last_pos
                for start in range(max(0, pos - self.position_jitter // 2), pos + 1, SAMPLE_RATE_HZ // 200):
                    ahead = played[start : pos + 2 * self.position_jitter]
                    peak = max(peak, normalized_xcorr_peak(mic, np.concatenate([aligned, ahead])))
        return peak

    def is_echo(self, played_s: float | None = None) -> bool:
        return self.similarity(played_s) >= self.threshold

    def is_sure_echo(self, played_s: float | None = None) -> bool:
        """The mic window is the reply's echo alone (no voice over it at a comparable level)."""
        return self.similarity(played_s) >= self.sure_threshold


class EchoGuard:
    """A session's echo checks over one `EchoDetector` (None: echo detection off, every check says no):
    the microphone audio as it arrives, each reply's audio as it leaves, and the verdicts turn-taking
    asks for. Plain and synchronous."""

    def __init__(self, detector: EchoDetector | None) -> None:
        self.detector = detector

    def heard(self, frame: AudioFrame, played_s: float | None) -> None:
        """Microphone audio (any rate or channel count); `played_s`: the client's playback position of
        the reply when it was heard (None while the agent is silent), so echo after an underrun matches."""
        if self.detector is None:
            return
        mono = to_mono_float32(frame.samples)
        if frame.sample_rate != SAMPLE_RATE_HZ:
            mono = resample(mono, int(frame.sample_rate), SAMPLE_RATE_HZ)
        self.detector.push_mic(mono, played_s)

    def reply_sink(self) -> Callable[[AudioFrame], None]:
        """Where one reply's audio frames go as they leave (with its own resampler to 16 kHz)."""
        to_16k: StreamResampler | None = None

        def push(frame: AudioFrame) -> None:
            nonlocal to_16k
            if self.detector is None:
                return
            if frame.sample_rate != SAMPLE_RATE_HZ and to_16k is None:
                to_16k = StreamResampler(frame.sample_rate, SAMPLE_RATE_HZ)
            self.detector.push_played(to_16k.push(frame.samples) if to_16k is not None else frame.samples)

        return push

    def reset_played(self) -> None:
        """A new reply starts (or the last one was cut off): forget the reply audio."""
        if self.detector is not None:
            self.detector.reset_played()

    def speech_is_echo(self, played_s: float | None, just_spoke: bool) -> bool:
        """Is speech that starts now the reply's echo? `played_s`: the playback position while the agent
        speaks (None when it does not); `just_spoke`: a reply just finished (its tail may still echo)."""
        if self.detector is None:
            return False
        if played_s is not None:
            return self.detector.is_echo(played_s)
        return just_spoke and self.detector.is_echo(None)

    def sure_echo(self, awaits_verdict: bool, played_s: Callable[[], float]) -> bool:
        """Whether the mic still holds the playing reply's echo alone (for an utterance turn-taking holds
        for a verdict: its words then do not count)."""
        return self.detector is not None and awaits_verdict and self.detector.is_sure_echo(played_s())


def echo_text(reply_text: str) -> str:
    """A reply's text as the ASR may write its echo: the text and its spoken form (the voice says "ten"
    for "10", tts/normalize.py, and the ASR writes what it hears)."""
    from headstart.tts.normalize import normalize_text

    spoken = normalize_text(reply_text)
    return f"{reply_text} {spoken}" if spoken and spoken != reply_text else reply_text


def _from_onset(ref: np.ndarray, onset: int, n: int) -> np.ndarray:
    """`ref` (silence up to index `onset`, then reply audio) cut so that every alignment of an `n`-sample
    window holds at least 40 % reply audio: a short overlap with the onset of the user's own voice
    would correlate by chance."""
    return ref[max(0, onset - int(0.6 * n)):]


def normalized_xcorr_peak(x: np.ndarray, ref: np.ndarray) -> float:
    """max over lags k of |<x, ref[k:k+n]>| / (|x| |ref[k:k+n]|), for ref at least as long as x
    (a shorter ref is zero-padded). 0.0 for silent input. Computed with one real FFT."""
    n = x.shape[0]
    if n == 0 or ref.shape[0] == 0:
        return 0.0
    if ref.shape[0] < n:
        ref = np.concatenate([ref, np.zeros(n - ref.shape[0], dtype=np.float32)])
    x = x.astype(np.float64) - x.mean()
    r = ref.astype(np.float64)
    x_norm = np.sqrt(np.dot(x, x))
    if x_norm < 1e-6:
        return 0.0
    size = 1 << int(math.ceil(math.log2(n + r.shape[0])))
    corr = np.fft.irfft(np.fft.rfft(r, size) * np.conj(np.fft.rfft(x, size)), size)[: r.shape[0] - n + 1]
    csum = np.concatenate([[0.0], np.cumsum(r)])
    csum2 = np.concatenate([[0.0], np.cumsum(r * r)])
    window_sum = csum[n:] - csum[:-n]
    window_energy = np.maximum(csum2[n:] - csum2[:-n] - window_sum**2 / n, 0.0)
    denominator = x_norm * np.sqrt(window_energy)
    valid = denominator > 1e-6 * max(1.0, x_norm)
    if not valid.any():
        return 0.0
    return float(np.max(np.abs(corr[valid]) / denominator[valid]))
