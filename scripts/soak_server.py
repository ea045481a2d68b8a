"""Soak of `headstart serve`: many spoken turns over one websocket session, with the process's RSS and the
LLM prompt's size after each turn (a long conversation must keep working with flat memory).

    .venv/bin/python scripts/soak_server.py --turns 40 --max-history-tokens 256
    .venv/bin/python scripts/soak_server.py --turns 40 --max-history-tokens none   # the unbounded history

The server runs in this process (port 0) with the real models (ASR whisper-tiny.en, `--llm`, Piper), so
its session's history and prompt can be read; the client sends the packaged recordings in turn (each
followed by 2 s of silence) at `--speed` x real time, plays replies at once (it reports each reply's
audio as played on arrival) and waits for the turn's `metrics.turn` (or 60 s); a turn not ended 8 s
after its audio (a text that reads unfinished) is ended with `input.commit`. The client is
headstart/server/client.py. RSS is the whole process's (`psutil`), client included. Prints a table
and ends with one JSON line.
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
    parser.add_argument("--llm", default="smollm2-135m")
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
    config = replace(
        base, threads=replace(base.threads, torch_threads=args.torch_threads),
        llm=replace(base.llm, model=args.llm, dtype="float32", max_new_tokens=args.max_new_tokens,
                    max_history_tokens=args.max_history_tokens),
    )
    components = Components.load(config)
    server = VoiceServer(components, ServerConfig(port=0))
    port = await server.start()
    recordings = [r for r in data.recordings() if r.duration_s <= 6.0]
    rows: list[dict] = []
    events: list[ServerEvent] = []
    played_bytes: dict[str, int] = {}  # reply id -> its audio received (played on arrival), bytes

    def count(kind: type[ServerEvent]) -> int:
        return sum(isinstance(e, kind) for e in events)

    try:
        async with await VoiceClient.open(f"ws://127.0.0.1:{port}/ws") as client:
            await client.send(SessionStart())

            async def reader() -> None:
                async for item in client:
                    if isinstance(item, ReplyAudioFrame):
                        if item.reply_id is not None:
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
                done_before = count(MetricsTurn)
                errors_before = count(ErrorEvent)
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
                rows.append({
                    "turn": turn + 1, "recording": rec.name, "answered": bool(metrics), "committed": committed,
                    "errors": [e.code for e in events if isinstance(e, ErrorEvent)][errors_before:],
                    "history_messages": len(session.history), "prompt_tokens": len(prompt),
                    "dropped_turns": session.conversation.dropped_turns,
                    "rss_mb": round(rss_mb(), 1), "turn_s": round(time.monotonic() - t0, 2),
                })
                row = rows[-1]
                print(f"{row['turn']:>4} {row['recording'][:24]:<24} answered={row['answered']!s:<5} "
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
    return {
        "turns": len(rows), "answered": sum(r["answered"] for r in rows),
        "errors": sorted({c for r in rows for c in r["errors"]}), "llm": args.llm,
        "max_history_tokens": args.max_history_tokens, "max_prompt_tokens": max(r["prompt_tokens"] for r in rows),
        "last_prompt_tokens": rows[-1]["prompt_tokens"], "dropped_turns": rows[-1]["dropped_turns"],
        "rss_mb_after_turn_1": rss[0], "rss_mb_first_quarter_median": statistics.median(rss[:tenth]),
        "rss_mb_last_quarter_median": statistics.median(rss[-tenth:]), "rss_mb_max": max(rss),
        "seconds": round(total_s, 1),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    summary = asyncio.run(soak(args))
    print(json.dumps(summary))
    return 0 if summary["answered"] == summary["turns"] and not summary["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
