"""Session churn against `headstart serve`: many short connections that each speak one turn and drop
(no `session.end`, the socket just closes), with the process's RSS, its thread count and the server's
open sessions sampled as they go: memory per session must stay flat.

    .venv/bin/python scripts/churn_server.py --sessions 400 --every 25
    .venv/bin/python scripts/churn_server.py --sessions 3000 --every 100 --spoken-every 10

With `--spoken-every N` only every N-th connection speaks a turn; the others end in the other ways a
client leaves, in turn: a socket closed right after `session.started`, a drop in the middle of an
utterance (0.5 s of speech sent), a handshake with no `session.start`, and a proper `session.end`.

The server runs in this process (port 0) with the real models (the default ASR and voice, `--llm`,
default the small test model smollm2-135m), so RSS covers both sides; before each sample the garbage
collector runs. Each connection sends one short packaged recording (with 0.5 s of silence after it)
at `--speed` x real time, ends the turn (`input.commit`), waits for the reply's first audio (or 20 s),
then closes. A table, then one
JSON line: RSS after the first sample and at the end, and the slope over the second half (MB per 100
sessions), the peak thread count, and the sessions left open.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import threading
import time
from dataclasses import replace

import numpy as np


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=400)
    parser.add_argument("--every", type=int, default=25, help="sample RSS every this many sessions")
    parser.add_argument("--llm", default="smollm2-135m")
    parser.add_argument("--speed", type=float, default=3.0, help="audio sent at this many times real time")
    parser.add_argument("--spoken-every", type=int, default=1,
                        help="every N-th connection speaks a turn; the others leave in the other ways (1: all speak)")
    parser.add_argument("--tracemalloc", type=int, default=0, metavar="N",
                        help="trace Python allocations from the first sample past half the sessions on (slower "
                             "from there): at the end, the N call sites that kept most (0: off)")
    args = parser.parse_args(argv)
    if args.sessions < 2 or args.every < 1 or args.spoken_every < 1 or not 0.5 <= args.speed <= 3.5:
        parser.error("--sessions must be >= 2, --every >= 1, --spoken-every >= 1 and --speed in [0.5, 3.5]")
    return args


# How a connection that does not speak a turn leaves (--spoken-every).
LEAVE_KINDS = ("start_drop", "mid_utterance", "no_session", "session_end")


async def one_session(client, kind: str, pcm: np.ndarray, speed: float) -> int:
    """One connection of `kind` (a spoken "turn" or one of LEAVE_KINDS) on an open `client`; the caller
    closes it. Returns 1 when a spoken turn's reply audio arrived (within 20 s), else 0."""
    from headstart.server.client import ReplyAudioFrame
    from headstart.server.protocol import ReplyAudioStart, SessionEnd, SessionStart

    if kind == "no_session":
        return 0  # the handshake only
    await client.send(SessionStart())
    await asyncio.wait_for(client.receive(), 30)  # session.started
    if kind == "start_drop":
        return 0
    if kind == "session_end":
        await client.send(SessionEnd())
        return 0
    sent = pcm if kind == "turn" else pcm[:8000]  # mid_utterance: 0.5 s of the turn
    for lo in range(0, sent.shape[0], 320):
        await client.send_pcm16(sent[lo : lo + 320].tobytes())
        await asyncio.sleep(0.02 / speed)
    if kind == "mid_utterance":
        return 0
    await client.commit()  # the turn ends now (push-to-talk): the churn is about sessions, not the endpointer
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        item = await asyncio.wait_for(client.receive(), max(0.1, deadline - time.monotonic()))
        if isinstance(item, ReplyAudioStart | ReplyAudioFrame):
            return 1
    return 0


def baseline_sessions(samples: list[dict], args: argparse.Namespace) -> int:
    """The session count at the first sample past half the sessions (the tracemalloc baseline)."""
    return next(s["sessions"] for s in samples if s["sessions"] >= args.sessions / 2)


def rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


async def churn(args: argparse.Namespace) -> dict:
    from headstart.config import PipelineConfig
    from headstart.corpus import recordings as data
    from headstart.server.client import VoiceClient
    from headstart.server.server import ServerConfig, VoiceServer
    from headstart.session.components import Components

    base = PipelineConfig()
    config = replace(base, llm=replace(base.llm, model=args.llm, max_new_tokens=24))
    components = Components.load(config)
    server = VoiceServer(components, ServerConfig(port=0, max_sessions=4))
    port = await server.start()
    turns = [r for r in data.recordings() if 1.0 <= r.duration_s <= 3.5][:8]
    pcms = [(np.clip(np.concatenate([r.read(), np.zeros(8000, np.float32)]), -1, 1) * 32767).astype("<i2")
            for r in turns]
    samples: list[dict] = []
    kinds: dict[str, int] = {}
    baseline = None  # the tracemalloc snapshot past half the sessions
    answered = 0
    started = time.monotonic()
    try:
        for n in range(1, args.sessions + 1):
            pcm = pcms[n % len(pcms)]
            kind = "turn" if n % args.spoken_every == 0 or n == 1 else LEAVE_KINDS[n % len(LEAVE_KINDS)]
            kinds[kind] = kinds.get(kind, 0) + 1
            client = await VoiceClient.open(f"ws://127.0.0.1:{port}/ws")
            try:
                answered += await one_session(client, kind, pcm, args.speed)
            except (TimeoutError, ConnectionError):
                pass
            finally:
                await client.close()  # a drop (but for session_end): the socket just closes
            if n % args.every == 0 or n == 1:
                for _ in range(50):  # the server notices the close and ends the session
                    if not server.connections:
                        break
                    await asyncio.sleep(0.05)
                gc.collect()
                if args.tracemalloc and baseline is None and n >= args.sessions / 2:
                    import tracemalloc

                    tracemalloc.start(10)  # from here on only: what the second half allocates and keeps
                    baseline = tracemalloc.take_snapshot()
                samples.append({"sessions": n, "rss_mb": round(rss_mb(), 1), "threads": threading.active_count(),
                                "open_sessions": len(server.connections), "tasks": len(asyncio.all_tasks()),
                                "answered": answered, "s": round(time.monotonic() - started, 1)})
                s = samples[-1]
                print(f"{s['sessions']:>6} sessions  rss {s['rss_mb']:>8.1f} MB  threads {s['threads']:>3}  "
                      f"open {s['open_sessions']}  tasks {s['tasks']:>3}  answered {s['answered']:>5}  {s['s']:>7.1f} s",
                      flush=True)
        if baseline is not None:
            gc.collect()
            growth = tracemalloc.take_snapshot().compare_to(baseline, "traceback")
            print(f"Python allocations that grew most over the second half ({n - baseline_sessions(samples, args)} sessions):")
            for stat in growth[: args.tracemalloc]:
                print(f"  {stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+7d} blocks")
                for line in stat.traceback.format()[-8:]:
                    print(f"      {line}")
    finally:
        await server.close()
        components.close()
    half = [s for s in samples if s["sessions"] >= args.sessions / 2]
    slope = None
    if len(half) >= 2:
        x = np.array([s["sessions"] for s in half], float)
        y = np.array([s["rss_mb"] for s in half], float)
        slope = round(float(np.polyfit(x, y, 1)[0]) * 100, 2)
    return {"sessions": args.sessions, "kinds": kinds, "answered": answered, "llm": args.llm,
            "rss_mb_first": samples[0]["rss_mb"], "rss_mb_last": samples[-1]["rss_mb"],
            "rss_mb_per_100_sessions_second_half": slope, "threads_max": max(s["threads"] for s in samples),
            "open_sessions_last": samples[-1]["open_sessions"], "seconds": round(time.monotonic() - started, 1)}


def main(argv: list[str] | None = None) -> int:
    summary = asyncio.run(churn(parse_args(argv)))
    print(json.dumps(summary))
    return 0 if summary["open_sessions_last"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
