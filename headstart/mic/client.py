"""`headstart mic`: talk to the assistant through this computer's microphone and speakers.

    headstart mic --server ws://127.0.0.1:8765/ws     # a running `headstart serve`
    headstart mic --local                             # the whole pipeline in this process
    headstart mic --list-devices | --input N|NAME --output N|NAME | --echo auto|aec|gate|off

`--local` loads the models, starts an in-process `VoiceServer` on a free loopback port and connects to
it like any client: one code path, the documented protocol (docs/protocol.md), spoken through
headstart/server/client.py.

Audio: the microphone is opened at its device's native rate (many refuse 16 kHz) and resampled to
16 kHz with `StreamResampler`; reply audio (at `reply.audio.start`'s rate) is resampled to the output
device's native rate. The sounddevice callback threads only hand audio over: capture frames go to the
event loop with `loop.call_soon_threadsafe`; the output callback takes samples from `PlaybackBuffer`
(a lock-guarded queue) and hands what it played back the same way (playback position, echo
reference). Echo control: `headstart.mic.echo`.

sounddevice (PortAudio) is imported lazily: `import headstart.mic.client` works without it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from headstart.audio import SAMPLE_RATE_HZ, StreamResampler, float32_to_pcm16
from headstart.config import PipelineConfig
from headstart.mic.view import MicView
from headstart.server.client import ClientConnectError, ReplyAudioFrame, VoiceClient
from headstart.server.protocol import (
    ClientMessage,
    PlaybackPosition,
    ReplyAudioStart,
    ReplyDone,
    ReplyInterrupted,
    ReplyPaused,
    ReplyResumed,
    ServerEvent,
    SessionStarted,
    event_fields,
)

SEND_FRAME = SAMPLE_RATE_HZ // 50  # 20 ms frames to the server (640 bytes)
POSITION_EVERY_S = 0.1  # playback.position cadence while playing
BLOCK_S = 0.02  # sounddevice block length


class MicError(RuntimeError):
    """The app cannot run: no PortAudio, no such device, the server refused or went away."""


def import_sounddevice():
    """sounddevice, or MicError with what to install (PortAudio is a system library)."""
    try:
        import sounddevice
    except ImportError as exc:
        raise MicError("headstart mic needs sounddevice: pip install 'headstart[mic]'") from exc
    except OSError as exc:  # sounddevice raises OSError when libportaudio is missing
        raise MicError(f"PortAudio is missing ({exc}); install it, e.g. apt-get install libportaudio2") from exc
    return sounddevice


class FrameHandoff:
    """A sounddevice input callback that only hands a mono float32 copy of each block to the loop.

    `deliver(samples)` runs on the event loop thread (call_soon_threadsafe); the audio thread does
    nothing else. Blocks after the loop closed are dropped (shutdown races).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, deliver: Callable[[np.ndarray], None]) -> None:
        self.loop = loop
        self.deliver = deliver
        self.overflows = 0

    def __call__(self, indata, frames, time_info, status) -> None:
        if status:
            self.overflows += 1
        block = np.array(indata[:, 0] if indata.ndim == 2 else indata, dtype=np.float32, copy=True)
        with contextlib.suppress(RuntimeError):  # the loop is closed: we are shutting down
            self.loop.call_soon_threadsafe(self.deliver, block)


class PlaybackBuffer:
    """Reply audio waiting for the output device (at its rate), filled by the loop, drained by the
    output callback.

    `fill(out)` (audio thread) copies queued samples into `out` (float32 (n,)), zero-fills the rest,
    and hands `(reply_id, played_samples_of_that_reply, block)` to `on_played` on the loop. `pause()`
    keeps the queue and plays silence; `flush()` drops it (a confirmed barge-in).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop | None,
                 on_played: Callable[[str | None, int, np.ndarray], None] | None = None) -> None:
        self.loop = loop
        self.on_played = on_played
        self._lock = threading.Lock()
        self._chunks: collections.deque[tuple[str, np.ndarray]] = collections.deque()
        self._played: dict[str, int] = {}
        self.paused = False

    def push(self, reply_id: str, samples: np.ndarray) -> None:
        if samples.size:
            with self._lock:
                self._chunks.append((reply_id, samples.astype(np.float32, copy=False)))

    def flush(self) -> None:
        with self._lock:
            self._chunks.clear()

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False

    @property
    def queued_samples(self) -> int:
        with self._lock:
            return sum(c.size for _, c in self._chunks)

    def played_samples(self, reply_id: str) -> int:
        with self._lock:
            return self._played.get(reply_id, 0)

    def fill(self, out: np.ndarray) -> None:
        out[:] = 0.0
        reply_id = None
        with self._lock:
            filled = 0
            while not self.paused and filled < out.size and self._chunks:
                rid, chunk = self._chunks[0]
                if reply_id is not None and rid != reply_id:
                    break  # one reply per block, so positions stay per reply
                reply_id = rid
                take = min(out.size - filled, chunk.size)
                out[filled:filled + take] = chunk[:take]
                filled += take
                if take == chunk.size:
                    self._chunks.popleft()
                else:
                    self._chunks[0] = (rid, chunk[take:])
            played = 0
            if reply_id is not None:
                played = self._played[reply_id] = self._played.get(reply_id, 0) + filled
        if self.on_played is not None and self.loop is not None:
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(self.on_played, reply_id, played, out.copy())

    def output_callback(self, outdata, frames, time_info, status) -> None:
        """sounddevice OutputStream callback (mono float32)."""
        self.fill(outdata[:, 0])


class CaptureChain:
    """Microphone blocks at the device rate -> echo control -> 16 kHz PCM16 frames of 20 ms.

    `push(samples)` returns the whole 20 ms frames completed (bytes each, 640 bytes)."""

    def __init__(self, device_rate_hz: int, echo) -> None:
        self.resampler = StreamResampler(device_rate_hz, SAMPLE_RATE_HZ)
        self.echo = echo
        self._pending = np.zeros(0, dtype=np.float32)

    def push(self, samples: np.ndarray) -> list[bytes]:
        clean = self.echo.near_end(self.resampler.push(samples))
        self._pending = np.concatenate([self._pending, clean])
        count = self._pending.size // SEND_FRAME
        out = [float32_to_pcm16(self._pending[i * SEND_FRAME:(i + 1) * SEND_FRAME]) for i in range(count)]
        self._pending = self._pending[count * SEND_FRAME:]
        return out


class MicClient:
    """One conversation over the websocket: microphone -> server, server events -> view and speakers.

    `streams` opens the audio devices: a callable `(capture_callback, playback_callback) ->
    (input_rate_hz, output_rate_hz, latency_s, close)`; the default opens sounddevice streams.
    `show(view, event)` gets each server event as its JSON object (and a "mic.ready" one).
    """

    def __init__(self, url: str, *, echo_mode: str = "auto", input_device=None, output_device=None,
                 show: Callable[[MicView, dict], None] | None = None, streams=None) -> None:
        self.url = url
        self.echo_mode = echo_mode
        self.input_device = input_device
        self.output_device = output_device
        self.view = MicView()
        self.show = show or (lambda view, event: None)
        self.streams = streams or self._open_sounddevice
        self.stop = asyncio.Event()
        self.client: VoiceClient | None = None
        self.reply_id: str | None = None
        self.reply_resampler: StreamResampler | None = None
        self.output_rate_hz = 0
        self._sendq: asyncio.Queue[bytes | ClientMessage] = asyncio.Queue()
        self._last_position_at = -1.0
        self.closed_by_server: str | None = None

    # -- audio devices ----------------------------------------------------------------------------

    def _open_sounddevice(self, capture_callback, playback_callback):
        sd = import_sounddevice()
        try:
            in_info = sd.query_devices(self.input_device, "input")
            out_info = sd.query_devices(self.output_device, "output")
            in_rate, out_rate = int(in_info["default_samplerate"]), int(out_info["default_samplerate"])
            rec = sd.InputStream(device=self.input_device, samplerate=in_rate, channels=1, dtype="float32",
                                 blocksize=int(in_rate * BLOCK_S), callback=capture_callback)
            play = sd.OutputStream(device=self.output_device, samplerate=out_rate, channels=1, dtype="float32",
                                   blocksize=int(out_rate * BLOCK_S), callback=playback_callback)
        except (ValueError, sd.PortAudioError) as exc:
            raise MicError(f"cannot open the audio devices: {exc} (see --list-devices)") from exc
        play.start()
        rec.start()

        def close() -> None:
            for stream in (rec, play):
                with contextlib.suppress(Exception):
                    stream.stop()
                    stream.close()

        return in_rate, out_rate, float(rec.latency) + float(play.latency), close

    # -- the conversation -------------------------------------------------------------------------

    async def run(self) -> int:
        """Connect, stream until `stop` is set or the server closes. 0 on a clean end, 1 if the server
        went away. Raises MicError when the server cannot be reached or refuses the session."""
        from headstart.mic.echo import make_echo_control

        loop = asyncio.get_running_loop()
        try:
            self.client = client = await VoiceClient.open(self.url, open_timeout_s=10)
        except ClientConnectError as exc:
            raise MicError(str(exc)) from exc
        close_streams = None
        tasks: list[asyncio.Task] = []
        try:
            await client.start()
            started = await asyncio.wait_for(client.receive(), 15)
            if not isinstance(started, SessionStarted):
                shown = event_fields(started) if isinstance(started, ServerEvent) else "reply audio"
                raise MicError(f"the server did not start a session: {shown}")
            self._on_event(started)
            self.player = PlaybackBuffer(loop, self._on_played)
            handoff_target: list[Callable[[np.ndarray], None]] = []
            capture = FrameHandoff(loop, lambda block: handoff_target[0](block))
            in_rate, self.output_rate_hz, latency_s, close_streams = self.streams(capture, self.player.output_callback)
            self.echo = make_echo_control(self.echo_mode, delay_ms=latency_s * 1000.0)
            self.view.echo_mode = type(self.echo).__name__
            self.chain = CaptureChain(in_rate, self.echo)
            self.far_resampler = StreamResampler(self.output_rate_hz, SAMPLE_RATE_HZ)
            handoff_target.append(self._on_captured)
            self.show(self.view, {"type": "mic.ready", "input_rate_hz": in_rate, "output_rate_hz": self.output_rate_hz,
                                  "echo": self.view.echo_mode})
            tasks = [asyncio.create_task(self._sender(client), name="mic-sender"),
                     asyncio.create_task(self._reader(client), name="mic-reader")]
            stop_wait = asyncio.create_task(self.stop.wait())
            await asyncio.wait([stop_wait, *tasks], return_when=asyncio.FIRST_COMPLETED)
            stop_wait.cancel()
        finally:
            if close_streams is not None:
                await asyncio.to_thread(close_streams)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.end(), 2)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), 3)
        return 1 if self.closed_by_server is not None else 0

    def _on_captured(self, block: np.ndarray) -> None:
        for frame in self.chain.push(block):
            self._sendq.put_nowait(frame)

    def _on_played(self, reply_id: str | None, played: int, block: np.ndarray) -> None:
        self.echo.far_end(self.far_resampler.push(block))
        if reply_id is None or self.output_rate_hz <= 0:
            return
        now = asyncio.get_running_loop().time()
        drained = self.player.queued_samples == 0
        if drained or now - self._last_position_at >= POSITION_EVERY_S:
            self._last_position_at = now
            self._position(reply_id, played)

    def _position(self, reply_id: str, played: int) -> None:
        position_ms = round(played * 1000.0 / self.output_rate_hz, 1)
        self._sendq.put_nowait(PlaybackPosition(reply_id=reply_id, position_ms=position_ms))

    async def _sender(self, client: VoiceClient) -> None:
        while True:
            item = await self._sendq.get()
            if isinstance(item, bytes):
                await client.send_pcm16(item)
            else:
                await client.send(item)

    async def _reader(self, client: VoiceClient) -> None:
        async for item in client:
            if isinstance(item, ReplyAudioFrame):
                self._on_audio(item)
            else:
                self._on_event(item)
        if not self.stop.is_set():
            self.closed_by_server = f"{client.close_code} {client.close_reason}".strip()

    def _on_audio(self, frame: ReplyAudioFrame) -> None:
        if self.reply_id is None or self.reply_resampler is None or len(frame.pcm16) % 2:
            return
        self.player.push(self.reply_id, self.reply_resampler.push(frame.samples()))

    def _on_event(self, event: ServerEvent) -> None:
        if isinstance(event, ReplyAudioStart):
            self._flush_resampler()
            self.reply_id = event.reply_id
            self.reply_resampler = StreamResampler(int(event.sample_rate), self.output_rate_hz)
            self.player.resume()
        elif isinstance(event, ReplyDone) and event.reply_id == self.reply_id:
            self._flush_resampler()
        elif isinstance(event, ReplyPaused):
            self.player.pause()
            if event.reply_id:
                self._position(event.reply_id, self.player.played_samples(event.reply_id))
        elif isinstance(event, ReplyResumed):
            self.player.resume()
        elif isinstance(event, ReplyInterrupted):
            self.player.flush()
            self.player.resume()
            self.reply_resampler = None
        fields = event_fields(event)
        self.view.apply(fields)
        self.show(self.view, fields)

    def _flush_resampler(self) -> None:
        if self.reply_resampler is not None and self.reply_id is not None:
            self.player.push(self.reply_id, self.reply_resampler.flush())
        self.reply_resampler = None


# -- the app -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MicOptions:
    """What `headstart mic` talks to and through.

    Attributes:
        server: the websocket URL of a running `headstart serve` (ws://HOST:PORT/ws), or None with `local`.
        local: the pipeline to load and serve in this process (None: use `server`).
        echo: echo control: "auto", "aec", "gate" or "off" (`headstart.mic.echo`).
        input_device, output_device: a PortAudio device index or part of its name; None: the default.
    """

    server: str | None
    local: PipelineConfig | None
    echo: str = "auto"
    input_device: int | str | None = None
    output_device: int | str | None = None


def list_devices() -> str:
    """PortAudio's audio devices, as sounddevice prints them. MicError when there are none."""
    devices = import_sounddevice().query_devices()
    if len(devices) == 0:
        raise MicError("PortAudio finds no audio devices (no sound card, or a container without one)")
    return str(devices)


def check_devices(input_device=None, output_device=None) -> None:
    """Raise MicError unless PortAudio has the input and output devices asked for (None: the defaults)."""
    sd = import_sounddevice()
    for device, kind in ((input_device, "input"), (output_device, "output")):
        try:
            sd.query_devices(device, kind)
        except (ValueError, sd.PortAudioError) as exc:
            which = f"{kind} device {device!r}" if device is not None else f"default {kind} device"
            raise MicError(f"no {which} ({exc}); see `headstart mic --list-devices`") from exc


def run(options: MicOptions) -> int:
    """Talk until Ctrl-C or the server goes away; the exit status. Raises MicError (no PortAudio, no
    such device, a model that cannot load, the server refused) before any model loads where it can."""
    check_devices(options.input_device, options.output_device)  # fail before loading any model
    return asyncio.run(_main(options))


async def _load_in_background(load: Callable[[], object], stop: asyncio.Event):
    """`load()` on a daemon thread; its result, or None when `stop` is set first (Ctrl-C while the
    models load: loading cannot be cancelled, and a daemon thread does not hold up the exit the way
    `asyncio.to_thread`'s executor would). Re-raises what `load` raised."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future = loop.create_future()
    done.add_done_callback(lambda f: f.cancelled() or f.exception())  # no 'never retrieved' after Ctrl-C

    def settle(ok: bool, value) -> None:
        if not done.done():
            (done.set_result if ok else done.set_exception)(value)

    def work() -> None:
        try:
            result = load()
        except BaseException as exc:  # noqa: BLE001 -- handed to the loop, raised there
            ok, result = False, exc
        else:
            ok = True
        with contextlib.suppress(RuntimeError):  # the loop is closed: we were interrupted
            loop.call_soon_threadsafe(settle, ok, result)

    threading.Thread(target=work, name="mic-load", daemon=True).start()
    stop_wait = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait([done, stop_wait], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop_wait.cancel()
    if stop.is_set():
        if done.done() and done.exception() is None and hasattr(done.result(), "close"):
            done.result().close()
        return None
    return done.result()


async def _main(options: MicOptions) -> int:
    from rich.console import Console
    from rich.live import Live

    console = Console()
    server = components = None
    url = options.server
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # Ctrl-C is ours from the start: while the models load, during the conversation, while closing.
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    live = None
    try:
        if options.local is not None:
            from headstart.models.store import ModelError
            from headstart.server.server import WS_PATH, ServerConfig, VoiceServer
            from headstart.session.session import Components
            from headstart.tts.base import TTSError

            def log(message: str) -> None:
                if not stop.is_set():  # quiet once interrupted (the load thread may still be running)
                    console.print(message)

            config = options.local
            try:
                components = await _load_in_background(lambda: Components.load(config, log=log), stop)
            except (ModelError, TTSError, FileNotFoundError, ValueError) as exc:
                raise MicError(str(exc)) from exc
            if components is None:
                print("interrupted while loading the models", file=sys.stderr)
                return 0
            server = VoiceServer(components, ServerConfig(port=0))
            url = f"ws://127.0.0.1:{await server.start()}{WS_PATH}"
        if console.is_terminal:
            live = Live(console=console, auto_refresh=False, transient=False)

            def show(view: MicView, event: dict) -> None:
                live.update(view.render(), refresh=True)
        else:
            def show(view: MicView, event: dict) -> None:
                for line in MicView.lines(event):
                    print(line, flush=True)

        assert url is not None  # MicOptions holds a server URL or a local pipeline
        client = MicClient(url, echo_mode=options.echo, input_device=options.input_device,
                           output_device=options.output_device, show=show)
        client.stop = stop
        if stop.is_set():
            return 0
        if live is not None:
            live.start()
        code = await client.run()
    finally:
        if live is not None:
            live.stop()
        if server is not None:
            await server.close()
        if components is not None:
            components.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    if client.closed_by_server is not None:
        print(f"the server closed the connection ({client.closed_by_server})", file=sys.stderr)
    return code
