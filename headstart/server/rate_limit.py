"""How fast a client may send audio (`ServerConfig.audio_burst_s`, `max_audio_speed`): a token bucket
over audio seconds. A plain synchronous policy on an injected clock; the connection closes a client it
refuses (one `error` "rate_limited", then 1008) rather than dropping frames one by one, which would cut
words out of the user's speech and answer each frame with an error."""

from __future__ import annotations

from headstart.clock import Clock


class AudioRateLimit:
    """Token bucket over audio seconds: starts full, holds at most `burst_s` (a client may send that
    much audio at once), refills `speed` audio-seconds per clock second. `allow(duration_s)` takes the
    frame's duration (seconds of audio) if it fits, and says whether it did."""

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
