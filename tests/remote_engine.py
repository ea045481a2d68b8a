"""Test helpers: a real llama-cpp-python OpenAI-compatible server (the existing engine the remote LLM
backend talks to) serving a prepared GGUF on loopback, and `headstart serve` processes."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

LLAMA_SERVER_MISSING = (
    None if importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("uvicorn") is not None
    else "llama-cpp-python[server] is not installed (`make llama-server-env` builds it; `make test LLAMA_ENV=` skips)"
)
MODEL_ALIAS = "smollm2"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout_s: float, proc: subprocess.Popen | None = None, log: Path | None = None) -> None:
    """Wait until `url` answers 200 (raises with the process log if it died or time ran out)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}: {_tail(log)}")
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout_s} s: {_tail(log)}")


def _tail(log: Path | None) -> str:
    if log is None or not log.exists():
        return ""
    return log.read_text(errors="replace")[-3000:]


class Process:
    """A child process with its output in a log file; `stop()` ends it (SIGTERM, then SIGKILL)."""

    def __init__(self, args: list[str], log: Path, env: dict | None = None) -> None:
        self.log = log
        self._file = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(args, stdout=self._file, stderr=subprocess.STDOUT,
                                     env={**os.environ, **(env or {})}, start_new_session=True)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._file.close()

    def kill(self) -> None:
        """The engine going away at once (SIGKILL: no goodbye on its connections)."""
        self.stop(signal.SIGKILL)

    def output(self) -> str:
        """Everything the process has written so far."""
        self._file.flush()
        return self.log.read_text(errors="replace")


def start_llama_server(gguf: Path, port: int, log: Path, n_ctx: int = 2048) -> Process:
    """llama-cpp-python's server on 127.0.0.1:`port` serving `gguf` as model "smollm2". One thread:
    the machine is shared. `interrupt_requests False`: a new request waits instead of cutting off
    the one streaming (the default cuts it: several sessions share this engine)."""
    args = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", MODEL_ALIAS,
            "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", "1",
            "--n_threads_batch", "1", "--interrupt_requests", "False", "--verbose", "True"]
    process = Process(args, log)
    try:
        wait_http(f"http://127.0.0.1:{port}/v1/models", 120, process.proc, log)
    except BaseException:
        process.stop()
        raise
    return process


def start_headstart_serve(port: int, llm: str, log: Path, *extra: str) -> Process:
    """`headstart serve` on 127.0.0.1:`port` with whisper-tiny.en and `llm` (waits for /healthz)."""
    args = [sys.executable, "-m", "headstart", "serve", "--port", str(port), "--llm", llm, *extra]
    process = Process(args, log)
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", 180, process.proc, log)
    except BaseException:
        process.stop()
        raise
    return process
