"""How fast a client may send audio: a token bucket over audio seconds."""

from __future__ import annotations

from headstart.clock import Clock


class AudioRateLimit:
    """Token bucket over audio seconds: refills `speed` audio-seconds per clock second, holds at most
    `burst_s`. `allow(duration_s)` takes the frame's duration if it fits."""

    def __init__(self, clock: Clock, speed: float, burst_s: float) -> None:
        self._clock = clock
        self.speed = speed
        self.burst_s = burst_s
        self._tokens = burst_s
        self._at = clock.now()

    def allow(self, duration_s: float) -> bool:
        now = self._clock.now()
        self._tokens = min(self.burst_s, self._tokens + (now - self._at) * self.speed)
        self._at = now
        if duration_s <= self._tokens + 1e-9:
            self._tokens -= duration_s
            return True
        return False
