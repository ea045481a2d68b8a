"""Soak of `headstart serve`: many spoken turns over one websocket session, with each turn's
voice-to-voice, TTFT, the LLM prompt's size and the process's RSS (a long conversation must keep working
at a flat cost).

    .venv/bin/python scripts/soak_server.py --turns 100 --max-history-tokens 1024
    .venv/bin/python scripts/soak_server.py --turns 100 --memory off   # the whole history, for comparison
    .venv/bin/python scripts/soak_server.py --turns 150 --speed 1      # a ~30-minute conversation

The server runs in this process (port 0) with the real default models (ASR, `--llm`, voice), so its
session's history and prompt can be read; the client sends the packaged recordings in turn (each
followed by 2 s of silence) at `--speed` x real time, plays replies at once (it reports each reply's
audio as played on arrival) and waits for the turn's `metrics.turn` (or 60 s); a turn not ended 8 s
after its audio (a text that reads unfinished) is ended with `input.commit`. Between turns it waits
until the session's memory is idle (a compaction runs while the assistant is idle, as it would while a
user thinks). Voice-to-voice is measured by the client: from the recording's true end of speech (sent
at `--speed`) to the reply's first audio frame. The client is headstart/server/client.py. RSS is the
whole process's (`psutil`), client included. Prints a table and ends with one JSON line, which compares
the p90 TTFT and voice-to-voice of turns 80-100 with turns 10-20 (scaled to `--turns`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from dataclasses import replace

import numpy as np


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from headstart.llm.history import parse_history_setting

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--llm", default=None, help="the LLM (default: the pipeline's default)")
    parser.add_argument("--memory", choices=("off", "window", "summary"), default=None,
                        help="what the session keeps past the history budget (default: the pipeline's default)")
    parser.add_argument("--max-history-tokens", type=parse_history_setting, default="auto")
    parser.add_argument("--max-new-tokens", type=int, default=40)
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument("--speed", type=float, default=3.0, help="audio sent at this many times real time")
    args = parser.parse_args(argv)
    if args.turns < 1 or not 0.5 <= args.speed <= 3.5:
        parser.error("--turns must be >= 1 and --speed in [0.5, 3.5] (the server accepts 4x at most)")
    return args


def rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


async def soak(args: argparse.Namespace) -> dict:
    from headstart.corpus import recordings as data
    from headstart.session.components import Components
    from headstart.config import PipelineConfig
    from headstart.server.client import ReplyAudioFrame, VoiceClient
    from headstart.server.protocol import (
        ErrorEvent, MetricsTurn, ReplyAudioStart, ServerEvent, SessionStart, SessionStarted, TurnEnd)
    from headstart.server.server import ServerConfig, VoiceServer

    base = PipelineConfig()
    llm = replace(base.llm, model=args.llm or base.llm.model, max_new_tokens=args.max_new_tokens,
                  max_history_tokens=args.max_history_tokens, memory=args.memory or base.llm.memory)
    config = replace(base, threads=replace(base.threads, torch_threads=args.torch_threads), llm=llm)
    components = Components.load(config)
    server = VoiceServer(components, ServerConfig(port=0))
    port = await server.start()
    recordings = [r for r in data.recordings() if r.duration_s <= 6.0]
    rows: list[dict] = []
    events: list[ServerEvent] = []
    played_bytes: dict[str, int] = {}  # reply id -> its audio received (played on arrival), bytes
    first_audio_at: list[float] = []  # monotonic time of each reply's first audio frame

    def count(kind: type[ServerEvent]) -> int:
        return sum(isinstance(e, kind) for e in events)

    try:
        async with await VoiceClient.open(f"ws://127.0.0.1:{port}/ws") as client:
            await client.send(SessionStart())

            async def reader() -> None:
                async for item in client:
                    if isinstance(item, ReplyAudioFrame):
                        if item.reply_id is not None:
                            if played_bytes.get(item.reply_id, 0) == 0:
                                first_audio_at.append(time.monotonic())
                            played_bytes[item.reply_id] = played_bytes.get(item.reply_id, 0) + len(item.pcm16)
                            await client.report_playback(item.reply_id, played_bytes[item.reply_id] / 2 / rate * 1000)
                        continue
                    events.append(item)
                    if isinstance(item, ReplyAudioStart):
                        played_bytes[item.reply_id] = 0

            rate = float(components.tts.sample_rate)
            started_event = await asyncio.wait_for(client.receive(), 60)
            if not isinstance(started_event, SessionStarted):
                raise RuntimeError(f"the server did not start a session: {started_event}")
            events.append(started_event)
            task = asyncio.create_task(reader())
            session = next(iter(server.connections)).session
            started = time.monotonic()
            for turn in range(args.turns):
                rec = recordings[turn % len(recordings)]
                audio = np.concatenate([rec.read(), np.zeros(32_000, np.float32)])
                pcm = (np.clip(audio, -1, 1) * 32767).astype("<i2")
                waited_from = time.monotonic()
                for _ in range(1200):  # the user speaks once the assistant is idle (see the docstring)
                    if not session.compacting:
                        break
                    await asyncio.sleep(0.05)
                waited_compaction_s = time.monotonic() - waited_from
                done_before = count(MetricsTurn)
                errors_before = count(ErrorEvent)
                audio_before = len(first_audio_at)
                t0 = time.monotonic()
                for lo in range(0, pcm.shape[0], 320):
                    await client.send_pcm16(pcm[lo : lo + 320].tobytes())
                    await asyncio.sleep(0.02 / args.speed)
                ends_before = count(TurnEnd)
                committed = False
                while count(MetricsTurn) == done_before:
                    waited_s = time.monotonic() - t0 - audio.shape[0] / 16_000 / args.speed
                    if not committed and waited_s > 8 and count(TurnEnd) == ends_before:
                        # a text that reads unfinished ("If this is correct, press...") waits for more
                        # speech: end the turn as push-to-talk would, so every turn gets its reply
                        committed = True
                        await client.commit()
                    if time.monotonic() - t0 > 60:
                        break
                    await asyncio.sleep(0.05)
                await asyncio.sleep(0.3)  # the history is written as the turn completes
                metrics = [e for e in events if isinstance(e, MetricsTurn)][done_before:]
                prompt = components.local_engine.render_prompt(session.conversation.messages())
                speech_end = t0 + rec.speech_end_s / args.speed
                v2v_ms = (first_audio_at[audio_before] - speech_end) * 1000 if len(first_audio_at) > audio_before else None
                ttft_ms = metrics[0].latencies.ttft_ms if metrics else None
                rows.append({
                    "turn": turn + 1, "recording": rec.name, "answered": bool(metrics), "committed": committed,
                    "v2v_ms": None if v2v_ms is None else round(v2v_ms), "ttft_ms": None if ttft_ms is None else round(ttft_ms),
                    "compactions": session.compactions, "compactions_dropped": session.compactions_dropped,
                    "waited_for_compaction_s": round(waited_compaction_s, 2),
                    "errors": [e.code for e in events if isinstance(e, ErrorEvent)][errors_before:],
                    "history_messages": len(session.history), "prompt_tokens": len(prompt),
                    "dropped_turns": session.conversation.dropped_turns,
                    "rss_mb": round(rss_mb(), 1), "turn_s": round(time.monotonic() - t0, 2),
                })
                row = rows[-1]
                print(f"{row['turn']:>4} {row['recording'][:24]:<24} answered={row['answered']!s:<5} "
                      f"v2v={row['v2v_ms'] or 0:>5} ms ttft={row['ttft_ms'] or 0:>4} ms compactions={row['compactions']:>2}"
                      f"/{row['compactions_dropped']} dropped (waited {row['waited_for_compaction_s']:.1f} s) "
                      f"history={row['history_messages']:>3} prompt={row['prompt_tokens']:>5} "
                      f"dropped={row['dropped_turns']:>3} rss={row['rss_mb']:>7.1f} MB "
                      f"errors={row['errors']} {row['turn_s']:.1f} s", flush=True)
            total_s = time.monotonic() - started
            await client.end()
            await asyncio.wait_for(task, 10)
    finally:
        await server.close()
        components.close()
    rss = [r["rss_mb"] for r in rows]
    tenth = max(1, len(rows) // 4)

    def p90(key: str, lo: float, hi: float) -> float | None:
        """p90 of `key` over turns lo..hi of a 100-turn session, scaled to the turns run."""
        n = len(rows)
        values = [r[key] for r in rows[round(lo / 100 * n) - 1 : round(hi / 100 * n)] if r[key] is not None]
        return float(np.percentile(values, 90)) if values else None

    early_ttft, late_ttft = p90("ttft_ms", 10, 20), p90("ttft_ms", 80, 100)
    early_v2v, late_v2v = p90("v2v_ms", 10, 20), p90("v2v_ms", 80, 100)
    return {
        "turns": len(rows), "answered": sum(r["answered"] for r in rows),
        "errors": sorted({c for r in rows for c in r["errors"]}), "llm": config.llm.model,
        "max_history_tokens": args.max_history_tokens, "max_prompt_tokens": max(r["prompt_tokens"] for r in rows),
        "last_prompt_tokens": rows[-1]["prompt_tokens"], "dropped_turns": rows[-1]["dropped_turns"],
        "rss_mb_after_turn_1": rss[0], "rss_mb_first_quarter_median": statistics.median(rss[:tenth]),
        "rss_mb_last_quarter_median": statistics.median(rss[-tenth:]), "rss_mb_max": max(rss),
        "memory": config.llm.memory, "compactions": rows[-1]["compactions"],
        "compactions_dropped": rows[-1]["compactions_dropped"],
        "ttft_p90_ms_turns_10_20": early_ttft, "ttft_p90_ms_turns_80_100": late_ttft,
        "ttft_p90_ratio_late_early": None if not early_ttft or late_ttft is None else round(late_ttft / early_ttft, 3),
        "v2v_p90_ms_turns_10_20": early_v2v, "v2v_p90_ms_turns_80_100": late_v2v,
        "v2v_p90_ratio_late_early": None if not early_v2v or late_v2v is None else round(late_v2v / early_v2v, 3),
        "prompt_tokens_p50_turns_10_20": statistics.median(r["prompt_tokens"] for r in rows[len(rows) // 10 : len(rows) // 5 or 1]),
        "prompt_tokens_p50_turns_80_100": statistics.median(r["prompt_tokens"] for r in rows[len(rows) * 4 // 5 :]),
        "seconds": round(total_s, 1),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    summary = asyncio.run(soak(args))
    print(json.dumps(summary))
    return 0 if summary["answered"] == summary["turns"] and not summary["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
