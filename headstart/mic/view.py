"""The terminal view of `headstart mic`: state, transcripts, the streaming reply, per-turn latency.

`MicView.apply(event)` takes the server's JSON events (docs/protocol.md) as dicts; `render()` gives
a rich renderable (drawn with `rich.live.Live` on a terminal); `lines(event)` gives plain log lines
for a non-terminal stdout. No I/O here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

_STATES = {
    "session.started": "listening",
    "vad.speech_started": "hearing you",
    "vad.speech_stopped": "listening",
    "turn.end": "thinking",
    "reply.started": "thinking",
    "reply.audio.start": "speaking",
    "reply.paused": "paused (barge-in?)",
    "reply.resumed": "speaking",
    "reply.interrupted": "listening",
    "metrics.turn": "listening",
}
_MAX_HISTORY = 8


@dataclass
class MicView:
    state: str = "connecting"
    committed: str = ""  # the partial transcript's stable words
    pending: str = ""  # ... and its unstable tail (greyed)
    reply: str = ""  # the reply being generated
    history: list[tuple[str, str]] = field(default_factory=list)  # ("you" | "assistant" | "tool" | "timer", text)
    latency: list[dict] = field(default_factory=list)  # metrics.turn events, newest last
    error: str = ""
    echo_mode: str = ""
    calls: dict[str, str] = field(default_factory=dict)  # call id -> the call as shown, until its result
    announced: set[str] = field(default_factory=set)  # reply ids the agent started itself (a timer went off)

    def apply(self, event: dict) -> None:
        kind: str = event.get("type", "")
        self.state = _STATES.get(kind, self.state)
        if kind == "transcript.partial":
            self.committed, self.pending = event.get("committed", ""), event.get("pending", "")
        elif kind == "transcript.final":
            self.committed = self.pending = ""
            if event.get("text"):
                self._add("you", event["text"])
        elif kind == "reply.started":
            self.reply = ""
            if event.get("transcript") == "":
                self.announced.add(str(event.get("reply_id")))
        elif kind == "reply.text.delta":
            self.reply += event.get("text", "")
        elif kind == "reply.interrupted":
            heard = event.get("heard_text") or ""
            self._add("assistant", f"{heard} [interrupted]".strip())
            self.reply = ""
        elif kind == "reply.done":
            self._add("assistant", event.get("text") or self.reply)
            self.reply = ""
        elif kind == "tool.call":
            self.calls[str(event.get("call_id"))] = call_text(event)
        elif kind == "tool.result":
            call = self.calls.pop(str(event.get("call_id")), str(event.get("name", "")))
            self._add("tool", f"{call} {result_text(event)}")
        elif kind == "timer.fired":
            if event.get("kind") == "reminder":
                self._add("timer", f"reminder: {event.get('label') or 'now'}")
            else:
                self._add("timer", f"{event.get('name') or event.get('label')} {event.get('kind') or 'timer'} went off")
        elif kind == "metrics.turn":
            if str(event.get("reply_id")) not in self.announced:  # a timer's announcement: no user turn to time
                self.latency = [*self.latency[-(_MAX_HISTORY - 1):], event]
        elif kind == "error":
            self.error = f"{event.get('code')}: {event.get('message')}"

    def _add(self, who: str, text: str) -> None:
        self.history = [*self.history[-(_MAX_HISTORY - 1):], (who, text)]

    def render(self):
        from rich.console import Group
        from rich.panel import Panel
        from rich.table import Table
        from rich.text import Text

        talk = Text()
        styles = {"you": "bold cyan", "tool": "grey50", "timer": "bold yellow"}
        for who, text in self.history:
            talk.append(f"{who:>9}: ", style=styles.get(who, "bold green"))
            talk.append(text + "\n")
        if self.committed or self.pending:
            talk.append("      you: ", style="bold cyan")
            talk.append(self.committed)
            talk.append((" " if self.committed and self.pending else "") + self.pending, style="grey50")
            talk.append("\n")
        if self.reply:
            talk.append("assistant: ", style="bold green")
            talk.append(self.reply + " ▌\n")
        table = Table("turn", "voice→voice", "TTFT", "TTS TTFA", "head start", "tokens", box=None)
        for i, m in enumerate(self.latency, 1):
            table.add_row(str(i), _ms(m.get("vad_end_to_first_audio_ms")), _ms(m.get("ttft_ms")),
                          _ms(m.get("tts_ttfa_ms")), str(m.get("preemptive", "none")),
                          str(m.get("num_tokens", "")))
        status = Text(f"● {self.state}", style="bold yellow")
        if self.echo_mode:
            status.append(f"   echo: {self.echo_mode}", style="grey50")
        status.append("   Ctrl-C to quit", style="grey50")
        parts = [status, Panel(talk, title="conversation")]
        if self.latency:
            parts.append(Panel(table, title="latency per turn (ms, from the VAD's end of speech)"))
        if self.error:
            parts.append(Text(f"error {self.error}", style="bold red"))
        return Group(*parts)

    @staticmethod
    def lines(event: dict) -> list[str]:
        """Plain log lines for one event (stdout not a terminal): finals, replies, latency, errors."""
        kind = event.get("type")
        if kind == "mic.ready":
            return [f"listening: microphone at {event.get('input_rate_hz')} Hz, speakers at "
                    f"{event.get('output_rate_hz')} Hz, echo control {event.get('echo')}"]
        if kind == "transcript.final" and event.get("text"):
            return [f"you: {event['text']}"]
        # one line per reply: a reply's own line breaks would split it in a log
        if kind == "reply.done":
            return [f"assistant: {' '.join(str(event.get('text', '')).split())}"]
        if kind == "reply.interrupted":
            return [f"assistant (interrupted): {' '.join(str(event.get('heard_text', '')).split())}"]
        if kind == "metrics.turn":
            return [f"latency: voice->voice {_ms(event.get('vad_end_to_first_audio_ms'))} ms, "
                    f"TTFT {_ms(event.get('ttft_ms'))} ms, TTS TTFA {_ms(event.get('tts_ttfa_ms'))} ms, "
                    f"head start {event.get('preemptive', 'none')}"]
        if kind == "tool.call":
            return [f"tool: {call_text(event)}"]
        if kind == "tool.result":
            return [f"tool: {event.get('name', '')} {result_text(event)}"]
        if kind == "timer.fired":
            return [f"timer: {event.get('text', '')}"]
        if kind == "error":
            return [f"error {event.get('code')}: {event.get('message')}"]
        return []


def call_text(event: dict) -> str:
    """A `tool.call` as a reader takes it in at a glance: "timer_start {seconds: 60}", "get_time"."""
    arguments = event.get("arguments") or {}
    parts = [f"{k}: {json.dumps(int(v) if isinstance(v, float) and v.is_integer() else v, ensure_ascii=False)}"
             for k, v in (arguments.items() if isinstance(arguments, dict) else ())]
    name = str(event.get("name", ""))
    return f"{name} {{{', '.join(parts)}}}" if parts else name


def result_text(event: dict) -> str:
    """A `tool.result` after its call: "-> Timer set for one minute." or "failed: why"."""
    if not event.get("ok"):
        return f"failed: {event.get('error') or 'unknown error'}"
    result = event.get("result")
    return f"-> {result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)}"


def _ms(value) -> str:
    return "-" if value is None else f"{value:.0f}"
