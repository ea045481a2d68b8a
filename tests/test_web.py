"""The browser demo page (headstart/server/web/): its files are served with the right content types, and, in a
real headless Chromium (Debian's, driven by Playwright), a fake microphone fed from a real recording
talks to a real loopback server with the small models: the recording is transcribed, a reply streams
in and is played, and the latency figures appear. Also: a denied microphone and a server that goes
away and comes back (no models needed for those)."""

from __future__ import annotations

import asyncio
import os
import re
import threading
import urllib.request
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from headstart.config import PipelineConfig
from headstart.server.server import ServerConfig, VoiceServer, web_dir

CHROMIUM = os.environ.get("HEADSTART_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
# The flags known to work here: no sandbox as root, no GPU, and nothing that phones home.
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--use-fake-device-for-media-stream",
]
JS_TYPES = {"text/javascript", "application/javascript"}


def no_model_components():
    from test_server import no_model_components as components

    return components()


class ServerThread:
    """A VoiceServer on its own event loop in a thread, so the test thread can drive the browser."""

    def __init__(self, components, port: int = 0, **overrides) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="web-test-server", daemon=True)
        self.thread.start()
        self.server = VoiceServer(components, ServerConfig(port=port, **overrides))
        self.port = self._call(self.server.start())
        self.url = f"http://127.0.0.1:{self.port}/"

    def _call(self, coro, timeout: float = 20.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self._call(self.server.close())

    def stop(self) -> None:
        self.close()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def get(url: str) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.headers.get("Content-Type", ""), response.read()


def referenced_files(name: str, seen: set[str]) -> None:
    """The page's own files, found by following index.html's src/href and the JS modules' imports and
    addModule() calls (so a file added later is checked too)."""
    if name in seen:
        return
    seen.add(name)
    text = (web_dir() / name).read_text(encoding="utf-8")
    if name.endswith(".html"):
        refs = re.findall(r'(?:src|href)="([^":#?]+)"', text)
    else:
        refs = re.findall(r"""(?:from\s+|addModule\()\s*['"]\.?/?([\w./-]+)['"]""", text)
    for ref in refs:
        referenced_files(ref.lstrip("./"), seen)


def test_page_files_are_served_with_their_content_types():
    files: set[str] = set()
    referenced_files("index.html", files)
    assert {"index.html", "app.js", "style.css", "capture-worklet.js", "playback-worklet.js",
            "resampler.js"} <= files
    assert files == {p.name for p in web_dir().iterdir() if p.is_file()}, "a file in web/ nothing uses"
    server = ServerThread(no_model_components())
    try:
        root = get(server.url)
        served = {name: get(server.url + name) for name in sorted(files)}
    finally:
        server.stop()
    assert root == served["index.html"]
    for name, (status, kind, body) in served.items():
        assert status == 200, name
        assert body == (web_dir() / name).read_bytes(), name
        mime = kind.split(";")[0].strip()
        if name.endswith(".js"):  # module scripts and worklets are refused under any other type
            assert mime in JS_TYPES, (name, kind)
        elif name.endswith(".css"):
            assert mime == "text/css", (name, kind)
        elif name.endswith(".html"):
            assert mime == "text/html", (name, kind)
            assert b'<meta charset="utf-8">' in body  # the server sends no charset


# -- in a real browser ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def playwright():
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"the browser tests need Debian's chromium at {CHROMIUM} (apt-get install chromium; "
                    ".ci/run installs it)")
    from playwright.sync_api import sync_playwright

    # Playwright must never download a browser: launch Debian's, by path.
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    with sync_playwright() as p:
        yield p


def launch(playwright, extra_args: list[str]):
    """Debian's Chromium, headless; Playwright gives every launch a fresh, empty --user-data-dir."""
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=[*CHROMIUM_ARGS, *extra_args])


def fake_mic_wav(tmp_path: Path, speech: np.ndarray, lead_s: float, tail_s: float) -> Path:
    from headstart.audio import write_wav

    path = tmp_path / "mic.wav"
    audio = np.concatenate([np.zeros(int(lead_s * 16000), np.float32), speech,
                            np.zeros(int(tail_s * 16000), np.float32)])
    write_wav(path, audio, 16000)
    return path


def page_text(page, selector: str) -> str:
    return page.locator(selector).inner_text().strip()


RECORD_SENT = """
    window.__sent = [];
    const send = WebSocket.prototype.send;
    WebSocket.prototype.send = function (data) {
      if (typeof data === 'string') window.__sent.push(JSON.parse(data));
      return send.call(this, data);
    };
"""


@pytest.fixture(scope="module")
def chromium(playwright):
    browser = launch(playwright, [])
    yield browser
    browser.close()


def sent(page, kind: str) -> list[dict]:
    return page.evaluate(f"window.__sent.filter(m => m.type === {kind!r})")


@pytest.mark.slow
def test_transcripts_reply_text_and_a_flush_on_interrupt(chromium):
    """The page's rendering and playback for server events fed to it directly (window.headstart.dispatch),
    with the real AudioWorklets: partial (pending greyed) -> final, streamed reply text, reply audio
    played, then `reply.interrupted`: the buffer is flushed and the played position reported."""
    server = ServerThread(no_model_components())
    context = chromium.new_context(permissions=["microphone"])
    try:
        page = context.new_page()
        page.add_init_script(RECORD_SENT)
        page.goto(server.url)
        page.click("#start")
        page.wait_for_function("window.headstart.state.sessionStarted", timeout=10_000)
        page.click("#mute")  # the fake device's beeps must not reach the server's VAD
        assert page.get_attribute("#mute", "aria-pressed") == "true"
        dispatch = "e => window.headstart.dispatch(e)"
        page.evaluate(dispatch, {"type": "transcript.partial", "text": "go forward ten", "committed": "go forward",
                                 "pending": "ten", "audio_ms": 900})
        user = page.locator("#log li.user")
        assert user.locator(".committed").inner_text() == "go forward"
        assert user.locator(".pending").inner_text().strip() == "ten"
        grey = page.eval_on_selector("#log li.user .pending", "e => getComputedStyle(e).color")
        black = page.eval_on_selector("#log li.user .committed", "e => getComputedStyle(e).color")
        assert grey != black
        page.evaluate(dispatch, {"type": "transcript.final", "text": "Go forward ten meters.", "audio_ms": 2100})
        assert user.locator(".body").inner_text() == "Go forward ten meters."
        assert user.locator(".pending").count() == 0
        page.evaluate(dispatch, {"type": "turn.end", "audio_ms": 2100, "eou_probability": 0.9})
        assert page.evaluate("window.headstart.state.agent") == "thinking"
        page.evaluate(dispatch, {"type": "reply.started", "reply_id": "r1", "transcript": "Go forward ten meters."})
        for piece in ["Going", " forward", " now,", " ten meters."]:
            page.evaluate(dispatch, {"type": "reply.text.delta", "reply_id": "r1", "text": piece})
        agent = page.locator("#log li.agent .body")
        assert agent.inner_text() == "Going forward now, ten meters."

        # 2 s of a 440 Hz tone at 22.05 kHz in 100 ms frames, as the server would send it.
        page.evaluate(dispatch, {"type": "reply.audio.start", "reply_id": "r1", "sample_rate": 22050,
                                 "format": "pcm16"})
        page.evaluate("""() => {
            for (let f = 0; f < 20; f++) {
              const pcm = new Int16Array(2205);
              for (let i = 0; i < pcm.length; i++) pcm[i] = 8000 * Math.sin(2 * Math.PI * 440 * (f * 2205 + i) / 22050);
              window.headstart.dispatch(pcm.buffer);
            }
        }""")
        page.wait_for_function("window.headstart.state.agent === 'speaking'", timeout=5_000)
        page.wait_for_function("window.headstart.stats.playedMs >= 300", timeout=5_000)
        positions = sent(page, "playback.position")
        assert positions and all(p["reply_id"] == "r1" for p in positions)
        assert [p["position_ms"] for p in positions] == sorted(p["position_ms"] for p in positions)

        page.evaluate(dispatch, {"type": "reply.interrupted", "reply_id": "r1", "heard_text": "Going forward",
                                 "played_ms": 400.0, "reason": "barge_in", "flush": True})
        page.wait_for_function("window.__sent.filter(m => m.type === 'playback.position').length > "
                               f"{len(positions)} && window.headstart.state.playingReplyId === null", timeout=5_000)
        final = sent(page, "playback.position")[-1]
        assert final["reply_id"] == "r1" and 300 <= final["position_ms"] < 1500  # flushed well before 2 s
        played = page.evaluate("window.headstart.stats.playedSamples")
        page.wait_for_timeout(300)  # nothing more plays after the flush
        assert page.evaluate("window.headstart.stats.playedSamples") == played
        assert page.evaluate("window.headstart.state.agent") == "listening"
        assert page.locator("#log li.agent .unheard").inner_text().strip() == "now, ten meters."
        assert "interrupted" in page.locator("#log li.agent .note").inner_text()
    finally:
        context.close()
        server.stop()


@pytest.mark.slow
def test_push_to_talk_sends_audio_only_while_held_then_commits(chromium):
    server = ServerThread(no_model_components())
    context = chromium.new_context(permissions=["microphone"])
    try:
        page = context.new_page()
        page.add_init_script(RECORD_SENT)
        page.goto(server.url)
        assert page.locator("#talk").is_hidden()
        page.check("input[value=ptt]")
        assert page.locator("#talk").is_visible()
        page.click("#start")
        page.wait_for_function("window.headstart.state.sessionStarted", timeout=10_000)
        page.click("#mute")  # silence, so the server's VAD has nothing to say
        page.wait_for_function("window.headstart.stats.framesCaptured >= 15", timeout=5_000)  # the mic runs
        assert page.evaluate("window.headstart.stats.framesSent") == 0  # not held: nothing is sent

        page.hover("#talk")
        page.mouse.down()
        assert page.get_attribute("#talk", "aria-pressed") == "true"
        page.wait_for_function("window.headstart.stats.framesSent >= 15", timeout=5_000)
        page.mouse.up()
        assert page.get_attribute("#talk", "aria-pressed") == "false"
        page.wait_for_function("window.__sent.some(m => m.type === 'input.commit')", timeout=5_000)
        held = page.evaluate("window.headstart.stats.framesSent")
        page.wait_for_timeout(300)
        assert page.evaluate("window.headstart.stats.framesSent") == held  # released: nothing more

        page.locator("body").focus()
        page.keyboard.down("Space")  # the space bar works the same way
        page.wait_for_function(f"window.headstart.stats.framesSent >= {held + 10}", timeout=5_000)
        page.keyboard.up("Space")
        page.wait_for_function("window.__sent.filter(m => m.type === 'input.commit').length === 2", timeout=5_000)

        page.check("input[value=handsfree]")  # hands-free: every frame goes
        assert page.locator("#talk").is_hidden()
        now = page.evaluate("window.headstart.stats.framesSent")
        page.wait_for_function(f"window.headstart.stats.framesSent >= {now + 10}", timeout=5_000)
        assert not page.locator("#alert").is_visible()
    finally:
        context.close()
        server.stop()


@pytest.mark.slow
def test_denied_microphone_and_a_server_that_goes_away(chromium):
    server = ServerThread(no_model_components())
    port = server.port
    try:
        # No permission granted and no fake UI: getUserMedia is refused, as when a person clicks "Block".
        denied = chromium.new_context()
        page = denied.new_page()
        page.goto(server.url)
        page.click("#start")
        page.wait_for_selector("#alert:not([hidden])", timeout=10_000)
        assert "Microphone access was denied" in page_text(page, "#alert")
        assert page.evaluate("window.headstart.stats.connects") == 0
        assert page_text(page, "#start") == "Start talking"
        denied.close()

        context = chromium.new_context(permissions=["microphone"])
        page = context.new_page()
        page.goto(server.url)
        page.click("#start")
        page.wait_for_function("window.headstart.state.sessionStarted", timeout=10_000)
        assert page_text(page, "#connection") == "Connected"
        assert page.evaluate("window.headstart.state.agent") == "listening"
        page.wait_for_function("window.headstart.stats.framesSent >= 10", timeout=10_000)

        server.close()  # the server goes away
        page.wait_for_function("window.headstart.state.connection === 'reconnecting'", timeout=10_000)
        assert "Reconnecting in" in page_text(page, "#alert")
        assert page.evaluate("window.headstart.state.agent") == "idle"
        server.stop()

        server = ServerThread(no_model_components(), port=port)  # ... and comes back on the same port
        page.wait_for_function("window.headstart.stats.connects === 2", timeout=20_000)
        assert page.locator("#alert").is_hidden()
        assert page_text(page, "#connection") == "Connected"
        assert page.evaluate("window.headstart.stats.reconnects") >= 1
        context.close()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def components():
    from headstart.session.session import Components

    base = PipelineConfig()
    config = replace(base, llm=replace(base.llm, model="smollm2-135m", max_new_tokens=16))
    components = Components.load(config)
    yield components
    components.close()


@pytest.mark.slow
def test_a_spoken_turn_in_a_real_browser(playwright, components, tmp_path):
    from headstart.corpus.recordings import default_recording
    from headstart.corpus.wer import word_error_rate

    rec = default_recording()
    wav = fake_mic_wav(tmp_path, rec.read(), lead_s=1.0, tail_s=4.0)
    server = ServerThread(components)
    chromium = launch(playwright, ["--use-fake-ui-for-media-stream",
                                          f"--use-file-for-fake-audio-capture={wav}%noloop"])
    try:
        page = chromium.new_page(viewport={"width": 1200, "height": 820})
        console: list[str] = []
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
        page.goto(server.url)
        page.click("#start")
        try:
            page.wait_for_function("window.headstart.metrics.length >= 1", timeout=60_000)
            page.wait_for_function("window.headstart.stats.repliesPlayed >= 1", timeout=30_000)
        except Exception:
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "web-failed.png"))
            raise AssertionError(f"page state: {page.evaluate('JSON.stringify(window.headstart)')}; "
                                 f"console: {console}") from None
        hs = page.evaluate("""() => ({stats: window.headstart.stats, metrics: window.headstart.metrics,
            states: window.headstart.agentStates, events: window.headstart.events, agent: window.headstart.state.agent,
            rate: window.headstart.state.outputRate})""")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "web.png"), full_page=True)

        user = page.locator("#log li.user")
        agent = page.locator("#log li.agent")
        assert user.count() == 1 and agent.count() == 1, console
        heard = user.locator(".body").inner_text()
        assert word_error_rate(rec.text, heard) <= 0.25, (rec.text, heard)
        turn = hs["metrics"][0]["metrics"]
        assert turn["transcript"].strip() == heard.strip()
        shown = " ".join(agent.locator(".body").inner_text().split())  # the page lays a reply's newlines out as spaces
        assert shown == " ".join(turn["reply"].split()) != ""

        # Every byte of the reply's audio arrived and was played through the worklet.
        stats = hs["stats"]
        assert stats["audioBytesReceived"] / 2 / hs["rate"] == pytest.approx(turn["reply_audio_ms"] / 1000, abs=0.05)
        assert stats["playedMs"] == pytest.approx(turn["reply_audio_ms"], abs=60)
        assert stats["playbackDropped"] == 0
        # The agent listened, thought, spoke and listened again.
        states = hs["states"]
        assert states[:1] == ["listening"] and states[-1] == "listening"
        assert states.index("thinking") < states.index("speaking"), states

        # The latency figures and the timeline.
        row = hs["metrics"][0]
        assert 0 < row["heard_v2v_ms"] < 20_000
        # A preemptive hit whose held reply already had tokens at the end of turn has a TTFT of 0 ms,
        # and one without has its first token from logits the EOU estimate left (well under 1 ms).
        if turn["preemptive"] == "hit":
            assert row["ttft_ms"] >= 0, row
        else:
            assert row["ttft_ms"] > 0, row
        assert row["tts_ttfa_ms"] > 0
        for figure in ("#m-v2v", "#m-server-v2v", "#m-ttft", "#m-ttfa"):
            assert re.fullmatch(r"\d+ ms", page_text(page, figure)), figure
        assert page_text(page, "#m-v2v") == f"{round(row['heard_v2v_ms'])} ms"
        assert page.locator("#timeline rect").count() >= 4
        assert page.locator("#history tr").count() == 1
        assert not [c for c in console if c.startswith(("error", "pageerror"))], console
    finally:
        chromium.close()
        server.stop()


@pytest.mark.slow
def test_tool_calls_and_a_timer_in_the_conversation_view(chromium):
    """`tool.call` / `tool.result` fed to the page: a small line between the user's turn and the reply it
    serves, running, then with its result (or why it failed, with no alert: the reply apologises); a
    `timer.fired` is a line of its own, and its announcement (a reply with no user turn) is shown and
    played, without counting as a turn in the latency view."""
    server = ServerThread(no_model_components())
    context = chromium.new_context(permissions=["microphone"])
    try:
        page = context.new_page()
        page.add_init_script(RECORD_SENT)
        page.goto(server.url)
        page.click("#start")
        page.wait_for_function("window.headstart.state.sessionStarted", timeout=10_000)
        page.click("#mute")
        dispatch = "e => window.headstart.dispatch(e)"
        for event in [
            {"type": "transcript.final", "text": "Set a timer for one minute.", "audio_ms": 2100},
            {"type": "turn.end", "audio_ms": 2100, "eou_probability": 0.9},
            {"type": "reply.started", "reply_id": "r1", "transcript": "Set a timer for one minute."},
            {"type": "tool.call", "reply_id": "r1", "call_id": "c1", "name": "timer_start",
             "arguments": {"seconds": 60.0}},
        ]:
            page.evaluate(dispatch, event)
        tool = page.locator("#log li.tool")
        assert tool.count() == 1 and tool.get_attribute("data-state") == "running"
        assert tool.locator("code").inner_text() == "timer_start {seconds: 60}"
        order = page.evaluate("[...document.querySelectorAll('#log li')].map(li => li.className)")
        assert order == ["user", "tool", "agent"]  # under the user's turn, before the reply
        page.evaluate(dispatch, {"type": "tool.result", "reply_id": "r1", "call_id": "c1", "name": "timer_start",
                                 "ok": True, "result": "Timer set for one minute.", "duration_ms": 0.4})
        assert tool.get_attribute("data-state") == "ok"
        assert " ".join(tool.inner_text().split()) == "⏱ timer_start {seconds: 60} → Timer set for one minute."

        for event in [
            {"type": "transcript.final", "text": "Ring the bell.", "audio_ms": 5000},
            {"type": "reply.started", "reply_id": "r2", "transcript": "Ring the bell."},
            {"type": "tool.call", "reply_id": "r2", "call_id": "c2", "name": "ring_bell", "arguments": {}},
            {"type": "tool.result", "reply_id": "r2", "call_id": "c2", "name": "ring_bell", "ok": False,
             "result": None, "error": "tool ring_bell timed out after 2 s", "duration_ms": 2000.0},
            {"type": "error", "code": "tool_failed", "message": "tool ring_bell timed out after 2 s"},
        ]:
            page.evaluate(dispatch, event)
        failed = page.locator("#log li.tool[data-call-id='c2']")
        assert failed.get_attribute("data-state") == "failed"
        assert " ".join(failed.inner_text().split()) == "🔧 ring_bell ✗ tool ring_bell timed out after 2 s"
        assert page.locator("#alert").is_hidden()

        # the timer goes off: its line, then its announcement, spoken and played
        played = page.evaluate("window.headstart.stats.repliesPlayed")
        page.evaluate(dispatch, {"type": "timer.fired", "timer_id": 1, "kind": "timer", "label": "one minute",
                                 "name": "", "text": "Your one minute timer is done."})
        assert page_text(page, "#log li.timer") == "⏱ One minute timer went off"
        page.evaluate(dispatch, {"type": "reply.started", "reply_id": "r3", "transcript": ""})
        page.evaluate(dispatch, {"type": "reply.text.delta", "reply_id": "r3", "text": "Your one minute timer is done."})
        page.evaluate(dispatch, {"type": "reply.audio.start", "reply_id": "r3", "sample_rate": 22050, "format": "pcm16"})
        page.evaluate("""() => {
            for (let f = 0; f < 5; f++) {
              const pcm = new Int16Array(2205);
              for (let i = 0; i < pcm.length; i++) pcm[i] = 8000 * Math.sin(2 * Math.PI * 440 * (f * 2205 + i) / 22050);
              window.headstart.dispatch(pcm.buffer);
            }
        }""")
        page.evaluate(dispatch, {"type": "reply.done", "reply_id": "r3", "text": "Your one minute timer is done.",
                                 "audio_ms": 500.0})
        page.evaluate(dispatch, {"type": "metrics.turn", "reply_id": "r3", "transcript": "",
                                 "reply": "Your one minute timer is done."})
        page.wait_for_function(f"window.headstart.stats.repliesPlayed > {played}", timeout=5_000)
        assert page_text(page, "#log li.agent[data-reply-id='r3'] .body") == "Your one minute timer is done."
        assert page.evaluate("[window.headstart.stats.timersFired, window.headstart.stats.announcements, "
                             "window.headstart.metrics.length]") == [1, 1, 0]
        assert sent(page, "playback.position")[-1]["reply_id"] == "r3"
    finally:
        context.close()
        server.stop()


@pytest.mark.slow
def test_a_spoken_timer_request_shows_its_tool_line_and_the_timer_speaks(playwright, components, tmp_path):
    """Tools on, the real models: "Set a timer for two seconds." through the fake microphone gets the tool
    line under the user's turn with the tool's answer, then the timer's line and its announcement,
    played."""
    from headstart.audio import resample

    tools_on = replace(components, config=replace(components.config,
                                                  session=replace(components.config.session, tools=True)))
    tts = components.tts
    speech = resample(np.concatenate(list(tts.synthesize("Set a timer for two seconds."))).astype(np.float32),
                      tts.sample_rate, 16000)
    wav = fake_mic_wav(tmp_path, speech, lead_s=1.0, tail_s=8.0)
    server = ServerThread(tools_on)
    browser = launch(playwright, ["--use-fake-ui-for-media-stream", f"--use-file-for-fake-audio-capture={wav}%noloop"])
    try:
        page = browser.new_page()
        console: list[str] = []
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
        page.goto(server.url)
        page.click("#start")
        try:
            page.wait_for_selector("#log li.tool[data-state='ok']", timeout=60_000)
            page.wait_for_function("window.headstart.stats.timersFired >= 1 && "
                                   "window.headstart.stats.repliesPlayed >= 2", timeout=30_000)
        except Exception:
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "web-tools-failed.png"))
            raise AssertionError(f"page state: {page.evaluate('JSON.stringify(window.headstart)')}; "
                                 f"log: {page.locator('#log').inner_text()}; console: {console}") from None
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "web-tools.png"), full_page=True)
        tool = page.locator("#log li.tool")
        assert tool.count() == 1
        assert " ".join(tool.inner_text().split()) == "⏱ timer_start {seconds: 2} → Timer set for two seconds."
        order = page.evaluate("[...document.querySelectorAll('#log li')].map(li => li.className)")
        assert order == ["user", "tool", "agent", "timer", "agent"], order
        assert page_text(page, "#log li.timer") == "⏱ Two second timer went off"
        replies = page.locator("#log li.agent .body")
        assert replies.nth(0).inner_text() == "Timer set for two seconds."
        assert replies.nth(1).inner_text() == "Your two second timer is done."
        assert page.evaluate("[window.headstart.metrics.length, window.headstart.stats.announcements]") == [1, 1]
        assert not [c for c in console if c.startswith(("error", "pageerror"))], console
    finally:
        browser.close()
        server.stop()
