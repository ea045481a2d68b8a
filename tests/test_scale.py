"""Horizontal scale: two `headstart serve` processes behind a real nginx (Debian's, run unprivileged
from a temp prefix) with the shipped deploy/nginx.conf, sharing one LLM engine (llama-cpp-python's
server when installed, else each process runs smollm2-135m itself). Four concurrent spoken sessions
go through the one address; both processes get sessions, each session stays on its process for its
life (nginx's log names one backend per websocket), and every session gets its reply."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from remote_engine import (
    LLAMA_SERVER_MISSING,
    MODEL_ALIAS,
    Process,
    free_port,
    start_headstart_serve,
    start_llama_server,
    wait_http,
)

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("nginx") is None,
                                 reason="nginx is not installed (Debian: apt-get install nginx; .ci/run does)")]

ROOT = Path(__file__).resolve().parents[1]
RECORDINGS = ("goforward", "conf-full", "vm-changeto", "dir-welcome")


def nginx_config(folder: Path, listen_port: int, backends: list[int]) -> Path:
    """deploy/nginx.conf with our ports, inside a main config that runs without root: no daemon, no
    master (no user switch), pid, logs and temp files in `folder`, an access log naming the upstream."""
    site = (ROOT / "deploy" / "nginx.conf").read_text()
    site, n = re.subn(r"(?m)^    server 127\.0\.0\.1:\d+ (.*)\n", "", site)
    assert n == 2, "deploy/nginx.conf's upstream changed shape"
    servers = "".join(f"    server 127.0.0.1:{p} max_fails=3 fail_timeout=10s;\n" for p in backends)
    site = site.replace("    least_conn;\n", "    least_conn;\n" + servers)
    assert "listen 8765;" in site
    site = site.replace("listen 8765;", f"listen 127.0.0.1:{listen_port};")
    (folder / "headstart.conf").write_text(site)
    main = f"""
daemon off;
master_process off;
worker_processes 1;
pid {folder}/nginx.pid;
error_log {folder}/error.log info;
events {{ worker_connections 256; }}
http {{
    log_format upstream '"$request" $status upstream=$upstream_addr';
    access_log {folder}/access.log upstream;
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
    include {folder}/headstart.conf;
}}
"""
    path = folder / "nginx.conf"
    path.write_text(main)
    return path


def healthz(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
        return json.loads(response.read())


def test_sessions_spread_over_two_processes_behind_nginx(tmp_path):
    from websockets.asyncio.client import connect

    from headstart.corpus import recordings as data
    from headstart.models.store import ModelError, gguf_path

    processes: list[Process] = []
    try:
        if LLAMA_SERVER_MISSING is None:  # the documented deployment: one engine shared by all processes
            engine_port = free_port()
            try:
                gguf = gguf_path("smollm2-135m")
            except ModelError as exc:
                pytest.skip(str(exc))
            processes.append(start_llama_server(gguf, engine_port, tmp_path / "engine.log"))
            llm = f"openai://127.0.0.1:{engine_port}/{MODEL_ALIAS}"
        else:
            llm = "smollm2-135m"
        backends = [free_port(), free_port()]
        for i, port in enumerate(backends):
            processes.append(start_headstart_serve(port, llm, tmp_path / f"serve{i}.log", "--tts", "espeak",
                                                   "--max-sessions", "2", "--max-new-tokens", "16"))
        proxy_port = free_port()
        config = nginx_config(tmp_path, proxy_port, backends)
        nginx = Process(["nginx", "-p", str(tmp_path), "-e", f"{tmp_path}/error.log", "-c", str(config)],
                        tmp_path / "nginx.out")
        processes.append(nginx)
        wait_http(f"http://127.0.0.1:{proxy_port}/healthz", 20, nginx.proc, tmp_path / "error.log")

        recordings = [data.recording(name) for name in RECORDINGS]

        async def session(ws, rec):
            audio = np.concatenate([rec.read(), np.zeros(24000, dtype=np.float32)])
            pcm = (np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes()
            for lo in range(0, len(pcm), 1280):  # 40 ms frames at 2x real time
                await ws.send(pcm[lo:lo + 1280])
                await asyncio.sleep(0.02)
            events, audio_bytes = [], 0
            while True:
                message = await asyncio.wait_for(ws.recv(), 120)
                if isinstance(message, bytes):
                    audio_bytes += len(message)
                    continue
                event = json.loads(message)
                events.append(event)
                if event["type"] in ("metrics.turn", "error"):
                    return events, audio_bytes

        async def main():
            sockets = []
            for _ in recordings:  # connect one after the other: least_conn alternates
                ws = await connect(f"ws://127.0.0.1:{proxy_port}/ws", max_size=None)
                await ws.send(json.dumps({"type": "session.start", "sample_rate": 16000}))
                started = json.loads(await asyncio.wait_for(ws.recv(), 20))
                assert started["type"] == "session.started", started
                sockets.append(ws)
            loads = [healthz(port)["sessions"] for port in backends]
            results = await asyncio.gather(*(session(ws, rec) for ws, rec in zip(sockets, recordings)))
            for ws in sockets:
                await ws.close()
            return loads, results

        loads, results = asyncio.run(main())
    finally:
        for process in reversed(processes):
            process.stop()

    assert loads == [2, 2], loads  # both processes got sessions
    for (events, audio_bytes), name in zip(results, RECORDINGS):
        kinds = [e["type"] for e in events]
        assert "error" not in kinds, (name, events[-1])
        done = next((e for e in events if e["type"] == "reply.done"), None)
        assert done is not None and done["text"].strip() and audio_bytes > 0, (name, kinds)
    # each websocket went to one backend for its whole life, and both backends served some
    lines = [line for line in (tmp_path / "access.log").read_text().splitlines() if '"GET /ws ' in line]
    upstreams = [line.rsplit("upstream=", 1)[1] for line in lines]
    assert len(upstreams) == 4 and all("," not in u for u in upstreams), lines
    assert {u.rsplit(":", 1)[1] for u in upstreams} == {str(p) for p in backends}, lines
