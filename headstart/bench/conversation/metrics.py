"""The harness's figures, computed from the client's event logs (`TurnRecord`s): pure functions, no I/O.

Per turn (seconds, all on the client clock, from the true end of the user's speech):
  partial_s      -> the first `transcript.partial` whose audio reaches the end of speech
  eou_s          -> `turn.end` received (end-of-turn delay)
  final_s        -> the first non-empty `transcript.final` received
  first_token_s  -> the first `reply.text.delta` received
  v2v_s          -> the first reply audio byte received (voice-to-voice)
and from the server's `metrics.turn`: ttft_s (LLM asked -> first token), tpot_s (time per output
token), tts_ttfa_s (first text to the synthesiser -> its first audio), reply_tokens, reply_audio_s,
preemptive ("hit" / "miss" / "none"); wer of the turn's transcript against the reference;
playback gaps (`playback_gaps`): underruns of the client's playback buffer once the reply's audio began;
the reply as heard (`reply_audio`, `reply_wer`): the audio the client received for the turn's reply and
the WER of an ASR's transcript of it against the reply text.

Pause set: a turn is cut off when the first `turn.end` falls (by its `audio_ms`, a stream position)
before the inserted pause is over. Barge-in: from the send time of the barge-in utterance's first
word to the moment the reply falls silent at the client (it pauses on `reply.paused`, flushes on
`reply.interrupted`, or simply runs out of audio), replayed on the same `Player` model the client used.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from headstart.bench.conversation.client import Player, TurnRecord, replay

FRAME_S = 0.02
GAP_MIN_S = 0.04  # a playback gap shorter than two frames is delivery jitter, not an underrun
V2V_CAPACITY_P90_S = 1.0  # a session count is served when its p90 voice-to-voice stays under this
STAGES = ("partial_s", "eou_s", "final_s", "first_token_s", "v2v_s")
TABLE_METRICS = ("v2v_s", "eou_s", "partial_s", "final_s", "first_token_s", "ttft_s", "tpot_s", "tts_ttfa_s",
                 "reply_tokens")


def _first(record: TurnRecord, kind: str, where=lambda p: True, after: float = float("-inf")):
    for t, k, payload in record.events:
        if k == kind and t >= after and where(payload):
            return t, payload
    return None, None


def _since(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None else end - start


def _ms_to_s(value) -> float | None:
    return None if value is None else float(value) / 1000.0


def turn_figures(record: TurnRecord) -> dict:
    """The figures of one question-and-answer turn (see the module docstring); None where the event
    did not happen. `reply` is False when no reply started (nothing heard)."""
    from headstart.corpus.wer import word_error_rate

    end = record.speech_end_at_s
    end_stream = record.speech_end_stream_s
    def covers_end(p: dict) -> bool:
        return end_stream is None or (p.get("audio_ms") or 0.0) / 1000.0 >= end_stream - FRAME_S

    t_partial, _ = _first(record, "transcript.partial", covers_end)
    t_eou, eou = _first(record, "turn.end")
    t_final, _ = _first(record, "transcript.final", lambda p: bool((p.get("text") or "").strip()))
    t_token, _ = _first(record, "reply.text.delta")
    t_audio, _ = _first(record, "audio")
    _, metrics = _first(record, "metrics.turn")
    transcript = (metrics or {}).get("transcript")
    if transcript is None:
        transcript = " ".join(p.get("text", "") for _, k, p in record.events if k == "transcript.final").strip()
    out = {
        "name": record.name,
        "session": record.session,
        "synthetic": record.synthetic,
        "tool_request": record.tool_request,
        # the local tool the server ran for this turn's reply (its `tool.call`), None when the LLM answered
        "tool": next((p.get("name") for _, k, p in record.events if k == "tool.call"), None),
        "partial_s": _since(end, t_partial),
        "eou_s": _since(end, t_eou),
        "final_s": _since(end, t_final),
        "first_token_s": _since(end, t_token),
        "v2v_s": _since(end, t_audio),
        "partials": sum(k == "transcript.partial" for _, k, _ in record.events),
        "eou_probability": (eou or {}).get("eou_probability"),
        "ttft_s": _ms_to_s((metrics or {}).get("ttft_ms")),
        "tpot_s": _ms_to_s((metrics or {}).get("tpot_ms")),
        "tts_ttfa_s": _ms_to_s((metrics or {}).get("tts_ttfa_ms")),
        "reply_tokens": (metrics or {}).get("num_tokens"),
        "reply_audio_s": _ms_to_s((metrics or {}).get("reply_audio_ms")),
        "preemptive": (metrics or {}).get("preemptive", "none"),
        "transcript": transcript,
        "reference": record.reference,
        "reply_text": (metrics or {}).get("reply", ""),
        "wer": word_error_rate(record.reference, transcript) if record.reference else None,
        "reply": t_token is not None or metrics is not None,
        "timed_out": record.timed_out,
        **playback_gaps(record),
    }
    return out


def playback_gaps(record: TurnRecord, min_gap_s: float = GAP_MIN_S) -> dict:
    """Underruns of the client's playback buffer in the turn's first reply: the events replayed on the
    client's `Player` from the reply's first audio; a gap is a stretch where the buffer ran dry while
    more audio of the reply was still to come (its next frame arrived later), at least `min_gap_s`
    long (shorter ones are delivery jitter a client's jitter buffer absorbs). Gaps after a pause or a
    flush (barge-in) are not counted. Returns {"gaps": count or None (no reply audio), "gap_s": total
    seconds, "max_gap_s"}."""
    player = Player()
    rid, count, total, longest = None, 0, 0.0, 0.0
    for t, kind, payload in sorted(record.events, key=lambda e: e[0]):
        if kind == "reply.audio.start" and rid is None:
            rid = payload.get("reply_id")
        elif rid is None or payload.get("reply_id") != rid:
            continue
        if kind in ("reply.paused", "reply.interrupted"):
            break
        if kind == "audio" and player.reply_id == rid:
            dry = player.dry_at()
            if dry is not None and t - dry >= min_gap_s:
                count, total, longest = count + 1, total + (t - dry), max(longest, t - dry)
        replay(player, kind, payload, t)
    if rid is None:
        return {"gaps": None, "gap_s": None, "max_gap_s": None}
    return {"gaps": count, "gap_s": total, "max_gap_s": longest}


def is_cutoff(record: TurnRecord) -> bool | None:
    """Pause set: True if the first `turn.end` was decided (by stream position) before the pause was
    over; None for a record without a pause."""
    if record.pause_end_s is None:
        return None
    _, eou = _first(record, "turn.end")
    if eou is None or eou.get("audio_ms") is None:
        return False
    return eou["audio_ms"] / 1000.0 < record.pause_end_s - 1e-6


def reply_silent_at(events: Iterable[tuple[float, str, dict]], since: float) -> float:
    """When the reply audio falls silent at the client at or after `since`: replays the events on the
    client's `Player` (it pauses on `reply.paused`, flushes on `reply.interrupted`, else runs dry).
    `since` itself when nothing was playing then; past the last event, when the audio received would
    have run out."""
    player = Player()
    events = sorted(events, key=lambda e: e[0])
    i = 0
    while i < len(events) and events[i][0] <= since:
        replay(player, *events[i][1:], events[i][0])
        i += 1
    if not player.playing(since):
        return since
    for t, kind, payload in events[i:]:
        dry = player.dry_at()
        if dry is not None and dry <= t:
            return dry
        replay(player, kind, payload, t)
        if not player.playing(t):
            return t
    dry = player.dry_at()
    return dry if dry is not None else since


def bargein_figures(record: TurnRecord) -> dict | None:
    """Barge-in: `bargein_stop_s` (first word -> the reply silent at the client), `bargein_pause_s`
    (first word -> the server's first `reply.paused` or `reply.interrupted` received: the barge-in
    itself, also when a short reply ran out of audio first; None when neither came),
    `bargein_interrupt_s` (first word -> `reply.interrupted` received; None when the reply was not
    interrupted), `ran_out` (the reply fell silent by running out of audio, before any pause: its
    stop time says nothing about the barge-in). None when the reply ended before the barge-in could
    start."""
    word = record.barge_speech_start_at_s
    if word is None:
        return None
    silent = reply_silent_at(record.events, word)
    t_interrupt, _ = _first(record, "reply.interrupted", after=word)
    t_pause, _ = _first(record, "reply.paused", after=word)
    stopped = min((t for t in (t_pause, t_interrupt) if t is not None), default=None)
    return {
        "name": record.name,
        "barge": record.barge_name,
        "bargein_stop_s": _since(word, silent),
        "bargein_pause_s": _since(word, stopped),
        "bargein_interrupt_s": _since(word, t_interrupt),
        "interrupted": t_interrupt is not None,
        "ran_out": silent is not None and (stopped is None or silent < stopped),
    }


def fraction(flags: Iterable[bool]) -> float | None:
    """The share of True among `flags` (None when there are none)."""
    xs = list(flags)
    return sum(xs) / len(xs) if xs else None


def percentile(values: Iterable[float | None], q: float) -> float | None:
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return float(np.percentile(np.asarray(xs), q)) if xs else None


def stats(values: Iterable[float | None]) -> dict:
    """{"p50", "p90", "max", "n"} of the values that are not None (None figures when there are none)."""
    xs = [float(v) for v in values if v is not None]
    return {"p50": percentile(xs, 50), "p90": percentile(xs, 90), "max": max(xs) if xs else None, "n": len(xs)}


def capacity(v2v_by_sessions: dict[int, list[float | None]], limit_s: float = V2V_CAPACITY_P90_S) -> int:
    """The most concurrent sessions whose p90 voice-to-voice stays under `limit_s` (0: not even one).
    A turn without a reply counts as infinitely late; counts above a failed one do not count."""
    best = 0
    for n in sorted(v2v_by_sessions):
        values = [1e9 if v is None else v for v in v2v_by_sessions[n]]  # no reply: as good as never
        if not values or float(np.percentile(np.asarray(values), 90)) >= limit_s:
            break
        best = n
    return best


def summarize_config(qa: list[dict], cutoffs: list[bool], bargeins: list[dict]) -> dict:
    """One configuration's JSON figures from its turn figures, pause verdicts and barge-in figures."""
    from headstart.corpus.wer import corpus_word_error_rate

    def r(x: float | None) -> float | None:
        return None if x is None else round(x, 4)

    replied = [f for f in qa if f["reply"]]
    hits = sum(f["preemptive"] == "hit" for f in qa)
    misses = sum(f["preemptive"] == "miss" for f in qa)
    scored = [(f["reference"], f["transcript"] or "") for f in qa if f["reference"]]
    out = {
        "v2v_p50_s": r(percentile([f["v2v_s"] for f in qa], 50)),
        "v2v_p90_s": r(percentile([f["v2v_s"] for f in qa], 90)),
        "ttft_p50_s": r(percentile([f["ttft_s"] for f in qa], 50)),
        "eou_delay_p50_s": r(percentile([f["eou_s"] for f in qa], 50)),
        "false_cutoff_rate": r(sum(cutoffs) / len(cutoffs)) if cutoffs else None,
        "bargein_stop_p50_s": r(percentile([b["bargein_stop_s"] for b in bargeins], 50)),
        # the server's pause or interrupt itself, and how many replies ran out before it
        "bargein_pause_p50_s": r(percentile([b.get("bargein_pause_s") for b in bargeins], 50)),
        "bargein_ran_out": sum(bool(b.get("ran_out")) for b in bargeins),
        "preemptive_hit_rate": r(hits / (hits + misses)) if hits + misses else None,
        "preemptive_hits": hits,
        "preemptive_misses": misses,
        "wer": r(corpus_word_error_rate(scored)) if scored else None,
        "turns": len(qa),
        "replies": len(replied),
        "pause_items": len(cutoffs),
        "bargeins": len(bargeins),
        # replies whose playback ran dry before their audio was over, and the gaps' total p50 / max
        "underrun_rate": r(fraction(f["gaps"] > 0 for f in qa if f["gaps"] is not None)),
        "underrun_s_p50": r(percentile([f["gap_s"] for f in qa], 50)),
        "underrun_s_max": r(max((f["gap_s"] for f in qa if f["gap_s"] is not None), default=None)),
    }
    for key in TABLE_METRICS:
        s = stats(f[key] for f in qa)
        out[key.removesuffix("_s") + "_stats" + ("_s" if key.endswith("_s") else "")] = {
            k: (r(v) if k != "n" else v) for k, v in s.items()
        }
    return out


TOOL_GAP_TARGET_S = 0.1  # tool turns' v2v p50 within this of the plain turns' (the same run, the same voice)


def tool_turn_figures(figures: list[dict]) -> dict:
    """The tools scenario's comparison from its turn figures (`turn_figures`): the tool turns (requests
    whose reply a local tool gave) against the plain turns (questions the LLM answered), p50 / p90 of
    voice-to-voice and p50 of the stages before it, and the gap of the p50s (tool minus plain; the
    target: at most TOOL_GAP_TARGET_S). A tool request the server answered with the LLM (misheard) is
    counted in `tool_requests_missed`, in neither group; a plain turn that ran a tool in
    `false_actions`."""

    def r(x: float | None) -> float | None:
        return None if x is None else round(x, 4)

    tool = [f for f in figures if f["tool_request"] and f["tool"] is not None]
    plain = [f for f in figures if not f["tool_request"] and f["tool"] is None]
    out: dict = {"tool_turns": len(tool), "plain_turns": len(plain),
                 "tool_requests_missed": sum(f["tool_request"] and f["tool"] is None for f in figures),
                 "false_actions": sum(not f["tool_request"] and f["tool"] is not None for f in figures)}
    for name, group in (("tool", tool), ("plain", plain)):
        out[f"{name}_v2v_p50_s"] = r(percentile([f["v2v_s"] for f in group], 50))
        out[f"{name}_v2v_p90_s"] = r(percentile([f["v2v_s"] for f in group], 90))
        for key in ("eou_s", "final_s", "first_token_s", "tts_ttfa_s"):
            out[f"{name}_{key.removesuffix('_s')}_p50_s"] = r(percentile([f[key] for f in group], 50))
        out[f"{name}_preemptive_hits"] = sum(f["preemptive"] == "hit" for f in group)
    gap = (None if out["tool_v2v_p50_s"] is None or out["plain_v2v_p50_s"] is None
           else out["tool_v2v_p50_s"] - out["plain_v2v_p50_s"])
    out["v2v_p50_gap_s"] = r(gap)
    out["within_target"] = None if gap is None else gap <= TOOL_GAP_TARGET_S
    return out


def reply_audio(record: TurnRecord) -> tuple[np.ndarray, int, str] | None:
    """The turn's reply as the client received it: the reply `metrics.turn` reports, its audio (float32
    mono in [-1, 1), decoded from the PCM16 frames) at the sample rate of its `reply.audio.start` (Hz),
    and its text. None when the turn has no `metrics.turn`, or no audio or no text for its reply."""
    _, metrics = _first(record, "metrics.turn")
    if metrics is None:
        return None
    rid, text = metrics.get("reply_id"), (metrics.get("reply") or "").strip()
    data = record.reply_audio.get(rid) if rid is not None else None
    if not data or not text:
        return None
    _, start = _first(record, "reply.audio.start", lambda p: p.get("reply_id") == rid)
    rate = int((start or {}).get("sample_rate") or 16_000)
    samples = np.frombuffer(bytes(data[: len(data) // 2 * 2]), dtype="<i2").astype(np.float32) / 32768.0
    return samples, rate, text


def reply_wer(heard: list[dict]) -> float | None:
    """The corpus WER of the replies as heard: `heard` holds {"reply_text", "heard"} per reply (the
    text the LLM wrote, the ASR's transcript of its audio). None when there are none."""
    from headstart.corpus.wer import corpus_word_error_rate

    pairs = [(h["reply_text"], h["heard"]) for h in heard if h.get("reply_text")]
    return corpus_word_error_rate(pairs) if pairs else None
