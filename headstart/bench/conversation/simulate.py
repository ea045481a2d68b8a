"""`headstart bench conversation --simulate`: the same client, server and session in one process, on a
virtual clock that skips idle time.

The model (a *skip-idle* clock):

    virtual time = real time (time.perf_counter) + all idle time skipped so far

Everything runs on one asyncio loop (`SkipIdleLoop`): the harness's client (conversation_client.py,
unchanged: the same frames, player model, barge-in and pause logic), the `VoiceServer` connection and
its `Session` (unchanged), joined by an in-memory websocket pair instead of a loopback socket. The
loop's `time()` is the virtual clock, and the client, the server, the session and its policies all
read it, so `asyncio.sleep`, the client's 20 ms frame pacing, the player model, `playback.position`,
the server's playback lead and every timestamp run on virtual time.

* **Idle is skipped.** When the loop would block waiting for its next timer (the client pacing its
  next frame, the endpointer's silence filled with room noise, the reply audio playing out at the
  client) *and no compute job is queued or running on any executor*, the clock jumps to that timer at
  once instead of waiting for it.
* **Compute costs what it costs.** The session's blocking stages run on the same named single-thread
  executors as in real time (ASR passes, LLM prefill / decode / EOU, TTS synthesis, wrapped in
  `TrackedExecutor`). While any job is queued or running nothing is skipped: virtual time then runs
  at the pace of real time, frames keep arriving at 20 ms intervals, and a job's cost in virtual time
  is its real duration, with the same threads overlapping on the same cores as in a real-time run.
  Overlap therefore needs no model of its own: stages on different executors overlap exactly as they
  do for real; each executor is a serial resource (one thread); work on the loop thread (the VAD,
  the client, the protocol encoding) also costs its real time.

What this gives: the figures of a real-time run (the same events, stamped on one clock at the
client), in the wall time the compute takes, with the waits for real-time audio cut out. It is a
simulation, and says so (`"simulated": true` in the JSON, a line above the table, the plots' titles).

Limits (what differs from a real-time run):
  - No websocket framing or loopback socket: frames pass through memory (their cost, well under a
    millisecond a frame, is not counted), and the server's HTTP handshake and its 503 for too many
    sessions are not exercised (a session over `max_sessions` gets the server's `busy` error instead).
  - The client and the server share one event loop and thread (in real time the client has its own
    loop on another thread): loop-thread work of one waits for the other's, as on a 1-core client.
  - A job's cost is its real duration on this machine *now*: under contention (other processes, the
    other stages) it is as slow as a real-time run would be at that moment, no more deterministic.
  - Only work on the tracked executors stops the skipping. Anything that computes on a thread of its
    own and reports back later (none of headstart's stages do) would be skipped over as if idle.
  - The GPU or a remote engine (`--llm openai://...`): their time is real waiting on a socket, not a
    job on an executor, and would be skipped; `--simulate` refuses a remote LLM.
"""

from __future__ import annotations

import asyncio
import contextlib
import selectors
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

SIMULATION_MODEL = ("skip-idle virtual clock: in-process client, server and session on one loop; idle waits "
                    "(nothing queued or running on any executor) are skipped; compute runs at real cost")


class SkipIdleClock:
    """Virtual seconds: `real()` plus the idle time skipped so far; a `headstart.clock.Clock`.

    Thread-safe counters of the compute jobs in flight (`job_submitted` / `job_finished`, from
    `TrackedExecutor`): the clock may skip only while that count is zero.

    Args:
        real: the real monotonic time source in seconds (default `time.perf_counter`; a fake in tests).
    """

    def __init__(self, real: Callable[[], float] = time.perf_counter) -> None:
        self._real = real
        self._lock = threading.Lock()
        self._in_flight = 0
        self.skipped_s = 0.0
        self.skips = 0
        self.jobs = 0

    def now(self) -> float:
        return self._real() + self.skipped_s

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))  # on the loop's (virtual) time

    @property
    def in_flight(self) -> int:
        """Compute jobs queued or running on the tracked executors."""
        return self._in_flight

    def job_submitted(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.jobs += 1

    def job_finished(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def skip(self, seconds: float) -> None:
        """Jump ahead by `seconds` of idle time (the loop's selector calls this)."""
        if seconds > 0:
            self.skipped_s += seconds
            self.skips += 1


class SkipIdleSelector(selectors.DefaultSelector):
    """The loop's selector: a wait for the next timer that nothing can cut short (no I/O ready, no job
    in flight) returns at once, and the clock skips the wait."""

    def __init__(self, clock: SkipIdleClock) -> None:
        super().__init__()
        self._clock = clock

    def select(self, timeout: float | None = None):
        if timeout is not None and timeout <= 0:
            return super().select(0)
        if self._clock.in_flight:
            return super().select(timeout)  # compute in progress: wait in real time (its result wakes us)
        ready = super().select(0)
        if ready or timeout is None:
            # no timer at all: only an outside event can wake the loop; wait for it as asyncio would
            return ready or super().select(timeout)
        self._clock.skip(timeout)
        return []


class SkipIdleLoop(asyncio.SelectorEventLoop):
    """An asyncio loop whose `time()` is `clock.now()` and whose idle waits are skipped."""

    def __init__(self, clock: SkipIdleClock) -> None:
        self.skip_clock = clock
        super().__init__(SkipIdleSelector(clock))

    def time(self) -> float:
        return self.skip_clock.now()


def _tracked_submit(clock: SkipIdleClock, submit: Callable[..., Future], fn, args, kwargs) -> Future:
    """`submit(run)` where `run` calls `fn(*args, **kwargs)`; the job counts as in flight on `clock` from
    now until its result has been handed on (so the loop is already woken when the count drops)."""
    outer: Future = Future()

    def run() -> None:
        if not outer.set_running_or_notify_cancel():
            return  # cancelled while queued
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting side, as an executor does
            outer.set_exception(exc)
        else:
            outer.set_result(result)  # runs the loop's wake-up callback before the count drops

    def finished(inner: Future) -> None:
        if inner.cancelled():
            outer.cancel()  # shutdown(cancel_futures=True) dropped it before it ran
        clock.job_finished()

    clock.job_submitted()
    try:
        inner = submit(run)
    except BaseException:
        clock.job_finished()
        raise
    inner.add_done_callback(finished)
    return outer


class TrackedExecutor(Executor):
    """Runs jobs on `inner` (e.g. a stage's single-thread executor), counted in flight on `clock` from
    submission until their result has been handed on. Cancellation and shutdown pass through."""

    def __init__(self, inner: Executor, clock: SkipIdleClock) -> None:
        self.inner = inner
        self._clock = clock

    def submit(self, fn, /, *args, **kwargs) -> Future:
        return _tracked_submit(self._clock, self.inner.submit, fn, args, kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.inner.shutdown(wait=wait, cancel_futures=cancel_futures)


class TrackedThreadPool(ThreadPoolExecutor):
    """A ThreadPoolExecutor whose jobs are counted in flight on `clock` (asyncio's default executor must
    be a ThreadPoolExecutor)."""

    def __init__(self, clock: SkipIdleClock, max_workers: int | None = None, thread_name_prefix: str = "") -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix=thread_name_prefix)
        self._clock = clock

    def submit(self, fn, /, *args, **kwargs) -> Future:
        return _tracked_submit(self._clock, super().submit, fn, args, kwargs)


# -- an in-memory websocket pair -------------------------------------------------------------------------

_CLOSED = object()


class MemoryWebSocket:
    """One end of an in-memory websocket: the subset of `websockets`' connection API that the harness's
    client (headstart/server/client.py) and the server use (`send`, `recv`, `async for`, `close`,
    `close_code`, `close_reason`, `request.path`). Messages (str or bytes) arrive in order; after
    `close()` by either end both ends' iteration ends and `send` raises
    `websockets.exceptions.ConnectionClosedOK`."""

    def __init__(self, path: str = "/ws") -> None:
        self.request = SimpleNamespace(path=path, headers={})
        self._inbox: asyncio.Queue = asyncio.Queue()
        self.peer: MemoryWebSocket | None = None
        self.closed = False
        self.close_code: int | None = None
        self.close_reason = ""

    def _closed_error(self):
        from websockets.exceptions import ConnectionClosedOK
        from websockets.frames import Close

        close = Close(self.close_code or 1000, "")
        return ConnectionClosedOK(close, close, False)

    async def send(self, message: str | bytes) -> None:
        if self.closed:
            raise self._closed_error()
        assert self.peer is not None
        self.peer._inbox.put_nowait(message)

    async def recv(self) -> str | bytes:
        item = await self._inbox.get()
        if item is _CLOSED:
            self._inbox.put_nowait(_CLOSED)
            raise self._closed_error()
        return item

    def __aiter__(self):
        return self._messages()

    async def _messages(self):
        from websockets.exceptions import ConnectionClosedOK

        while True:
            try:
                yield await self.recv()
            except ConnectionClosedOK:
                return

    async def close(self, code: int = 1000, reason: str = "") -> None:
        for end in (self, self.peer):
            if end is not None and not end.closed:
                end.closed, end.close_code, end.close_reason = True, code, reason
                end._inbox.put_nowait(_CLOSED)


def memory_pair(path: str = "/ws") -> tuple[MemoryWebSocket, MemoryWebSocket]:
    """(client end, server end) of a new in-memory websocket."""
    client, server = MemoryWebSocket(path), MemoryWebSocket(path)
    client.peer, server.peer = server, client
    return client, server


class InProcessServer:
    """A `VoiceServer` on the current loop whose connections come through `memory_pair`, never a socket.

    `connect(url, **ignored)` is an async context manager like `websockets.asyncio.client.connect`; each
    call opens one server connection (one Session) handled by the server's own websocket handler."""

    def __init__(self, components: Any, max_sessions: int, clock: SkipIdleClock) -> None:
        from headstart.server.server import ServerConfig, VoiceServer

        self.server = VoiceServer(components, ServerConfig(host="127.0.0.1", port=0, max_sessions=max_sessions),
                                  clock=clock)
        self.tasks: set[asyncio.Task] = set()

    @contextlib.asynccontextmanager
    async def connect(self, url: str = "memory:///ws", **_: Any):
        client, server_end = memory_pair()

        async def handle() -> None:
            # the server's own per-connection handler (path check, session limit, the Session's life);
            # its end closes the connection, 1011 when it raised, as websockets' server does
            code = 1011
            try:
                await self.server._handle(server_end)
                code = 1000
            finally:
                await server_end.close(code)

        task = asyncio.create_task(handle(), name="sim-server-connection")
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        try:
            yield client
        finally:
            await client.close()

    async def close(self, timeout_s: float = 60.0) -> None:
        """Let the connections finish their shutdown, then cancel what is left (a pass in flight)."""
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=timeout_s)
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)


def tracked_components(components: Any, config: Any, clock: SkipIdleClock) -> Any:
    """`components` with `config` and every stage executor wrapped in a `TrackedExecutor` on `clock`
    (the models and their threads are shared; nothing is reloaded)."""
    import dataclasses

    return dataclasses.replace(
        components, config=config,
        asr_executor=TrackedExecutor(components.asr_executor, clock),
        llm_executor=TrackedExecutor(components.llm_executor, clock),
        tts_executor=TrackedExecutor(components.tts_executor, clock),
    )


def run_simulated(main: Callable[[InProcessServer, SkipIdleClock], Any], components: Any, config: Any,
                  max_sessions: int, real: Callable[[], float] = time.perf_counter) -> tuple[Any, dict]:
    """Run `await main(server, clock)` on a fresh `SkipIdleLoop` with an `InProcessServer` over
    `components` (with `config`), then close the server's connections.

    Returns (main's result, {"virtual_s", "wall_s", "skipped_s", "skips", "jobs"}): the virtual time the
    run covered, the real time it took, the idle time skipped, how many waits were skipped and how many
    compute jobs ran. The loop's default executor is tracked too (`run_in_executor(None, ...)`)."""
    clock = SkipIdleClock(real)
    default = TrackedThreadPool(clock, max_workers=2, thread_name_prefix="sim-default")
    comps = tracked_components(components, config, clock)

    async def body():
        asyncio.get_running_loop().set_default_executor(default)
        server = InProcessServer(comps, max_sessions, clock)
        try:
            return await main(server, clock)
        finally:
            await server.close()

    started_real, started_virtual = real(), clock.now()
    try:
        with asyncio.Runner(loop_factory=lambda: SkipIdleLoop(clock)) as runner:
            result = runner.run(body())
    finally:
        default.shutdown(wait=False, cancel_futures=True)
    wall = real() - started_real
    return result, {"virtual_s": round(clock.now() - started_virtual, 3), "wall_s": round(wall, 3),
                    "skipped_s": round(clock.skipped_s, 3), "skips": clock.skips, "jobs": clock.jobs}
