"""Offline study of the echo detector (headstart/session/echo.py) on real speech, the figures docs/server.md
"Echo" cites. Run: `.venv/bin/python scripts/echo_study.py` (a few seconds, no models).

1. Echo after an underrun: the client played 1 s of the reply, waited `gap_s` (its audio came late),
   resumed, and the VAD fires `heard_s` later. Per case, 51 trials (one per bench recording position):
   how often `is_echo` holds with the per-push playback positions (as the session passes them) and
   without them (the reply-only reference).
2. A voice over continuous echo at g times the echo's RMS: the peak similarity (the sure-echo bar is
   0.8, the echo bar 0.3).

The room is `room_echo` from tests/test_session_policy.py (delay, gain, a short decaying response, noise).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_session_policy import room_echo  # noqa: E402  (the tests' room model, one definition)

from headstart.bench import data  # noqa: E402
from headstart.session.echo import EchoDetector  # noqa: E402

FRAME = 320  # 20 ms pushes, as a client sends them
REPLY = "confbridge-mute-extended"  # the longest bench recording stands in for the reply's voice


def after_gap(reply: np.ndarray, start: int, gap_s: float, heard_s: float, positions: bool, rng) -> bool:
    before, after = reply[start : start + 16000], reply[start + 16000 : start + 48000]
    gap, heard = int(gap_s * 16000), int(heard_s * 16000)
    mic = room_echo(np.concatenate([before, np.zeros(gap, np.float32), after[:heard]]), 0.06, 0.5, rng)
    played = np.concatenate([np.arange(1, 16001), np.full(gap, 16000), 16000 + np.arange(1, heard + 1)])
    detector = EchoDetector()
    detector.push_played(np.concatenate([before, after]))
    for i in range(0, mic.shape[0], FRAME):
        detector.push_mic(mic[i : i + FRAME], played[min(i + FRAME, mic.shape[0]) - 1] / 16000 if positions else None)
    return detector.is_echo(played[-1] / 16000)


def main() -> None:
    rng = np.random.default_rng(5)
    reply = data.recording(REPLY).read()
    trials = len(data.recordings()) - 1
    print("1. echo after an underrun gap: is_echo in", trials, "trials")
    print(f"{'gap_s':>6} {'heard_s':>8} {'with positions':>15} {'reply only':>11}")
    for gap_s in (0.3, 0.6):
        for heard_s in (0.1, 0.16, 0.25):
            starts = rng.integers(0, reply.shape[0] - 60000, size=trials)
            with_pos = sum(after_gap(reply, int(s), gap_s, heard_s, True, rng) for s in starts)
            without = sum(after_gap(reply, int(s), gap_s, heard_s, False, rng) for s in starts)
            print(f"{gap_s:>6} {heard_s:>8} {with_pos:>15} {without:>11}")

    print("\n2. a voice over the echo at g times its RMS: similarity")
    played = data.recording("librivox-0880").read()[: 16000 * 4]
    echo = room_echo(played, delay_s=0.12, gain=0.3, rng=np.random.default_rng(1))[24000:32000]
    print(f"{'voice':>14} " + " ".join(f"g={g:<5}" for g in (0, 0.75, 1, 2, 3)))
    for name in ("cards_001", "librivox-0870", "vm-intro"):
        rec = data.recording(name)
        voice = rec.read()[int(rec.speech_start_s * 16000) :][:8000]
        voice = voice * np.sqrt(np.mean(echo**2) / np.mean(voice**2))
        peaks = []
        for g in (0, 0.75, 1, 2, 3):
            detector = EchoDetector()
            detector.push_played(played[: 16000 * 3])
            detector.push_mic(echo + g * voice)
            peaks.append(detector.similarity(played_s=2.0))
        print(f"{name:>14} " + " ".join(f"{p:<7.2f}" for p in peaks))


if __name__ == "__main__":
    main()
