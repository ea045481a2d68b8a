"""The `metrics.turn` event of a finished turn, built from its `TurnTimeline`."""

from __future__ import annotations

from headstart.server.protocol import HeadStartFigures, HeldReply, MetricsTurn, TurnLatencies, ms
from headstart.timeline import TurnTimeline


def turn_metrics(t: TurnTimeline, reply_id: str, interrupted: bool) -> MetricsTurn:
    """Every latency figure of a turn in ms (None where it did not happen), from its timeline.

    The figures are `TurnTimeline.metrics` in ms: `vad_end_to_*` from the VAD's end of speech (the
    server cannot know the true end of speech; the harness measures that from the client), and those
    that need the true end when the timeline has it.

    Raises:
        TypeError: the timeline has a figure the event does not (`TurnLatencies` lacks its field).
    """
    latencies = TurnLatencies(**{k.removesuffix("_s") + "_ms": ms(v) for k, v in t.metrics().items()})
    return MetricsTurn(reply_id=reply_id, interrupted=interrupted, transcript=t.transcript, reply=t.reply,
                       num_tokens=t.num_tokens, reply_audio_ms=ms(t.reply_audio_s), latencies=latencies,
                       head_start=head_start_metrics(t))


def head_start_metrics(t: TurnTimeline) -> HeadStartFigures:
    """The head start's figures of a turn: `preemptive` ("hit": a held reply was released, "miss": one
    was dropped, "none"), the session's running `preemptive_hits` / `_misses` / `_wasted_tokens`, and
    on a hit `preemptive_lead_ms` (how long before the end of turn it started), `held_tokens`,
    `held_audio_ms` (ready when the turn ended)."""
    head, eou = t.head_start, t.eou  # None: no head start outcome / no EOU counters on this turn
    held = None
    if head is not None and head.release is not None:
        held = HeldReply(preemptive_lead_ms=ms(head.release.lead_s), held_tokens=head.release.held_tokens,
                         held_audio_ms=ms(head.release.held_audio_s))
    return HeadStartFigures(
        preemptive=head.preemptive if head is not None else "none",
        preemptive_hits=head.hits if head is not None else 0,
        preemptive_misses=head.misses if head is not None else 0,
        preemptive_wasted_tokens=head.wasted_tokens if head is not None else 0,
        # the EOU signal: the probability the end of turn was decided on (1.0: none known), and the
        # session's running count of estimates computed / skipped (user speaking, stale, priority)
        eou_probability=t.eou_probability,
        eou_computed=eou.computed if eou is not None else 0,
        eou_skipped=eou.skipped if eou is not None else 0,
        eou_compute_ms=ms(eou.compute_s if eou is not None else 0.0),
        held=held,
    )
