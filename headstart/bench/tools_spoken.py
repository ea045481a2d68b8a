"""`headstart bench tools --spoken`: the tool bench's requests as speech, heard by the default recogniser.

Each request of `headstart.bench.tools.requests` is voiced by the project's voices (hibari, the default
reply voice, and piper-joe; by default they take turns, `each_voice` speaks every request in each),
with 0.5 s of room noise at -60 dBFS before it and under it, then streamed in 20 ms frames through the
listener a session builds (`headstart.bench.ask_back.hear`: Silero VAD, the streaming ASR with its
partial passes, the early final and the final re-decode, on the fixed-silence endpoint), so each
request is heard as the server's final pass hears it. Each worded final transcript then goes where a
session sends it: asked back when the recogniser was unsure (`session.ask_back.asks_back` with the
configured threshold), else through a fresh session's tools (`Toolbox.route`, the same matcher and
argument checks as the text bench).

Per request:

* the transcript's WER against the request text;
* the right tool and the right arguments (as the text bench scores them);
* a false action: a tool that would run for a request that needs none (the target is 0);
* asked back: the session would say "Sorry, could you say that again?" (no tool runs);
* the spoken result: the tool run on the transcript's call gives the same spoken answer (case and
  punctuation aside) as the tool run on the request text's own call, each on a fresh toolbox with the
  same pinned wall clock and an empty list file. A request that needs no tool is right when no tool ran.

Requests of more than one sentence ("Remind me in ten minutes to check the oven. Actually, never
mind.") are left out (`not_spoken` in the JSON line): spoken, the pause after the first sentence ends
a turn, its tool acts, and the second sentence is a turn of its own that would have to undo it, which
the session does not do yet; as text they stay in `headstart bench tools`.

A table per tool, then one JSON line (`bench`, `spoken`, `voices`, `asr`, `wer`, `right_tool`,
`right_tool_and_arguments`, `spoken_right`, `false_actions`, `asked_back`, `per_tool`, `misses`, ...).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from headstart.bench.tools import Request, ToolsBenchOptions, arguments_match, requests

SR = 16_000
VOICES = ("hibari", "piper-joe")
LEAD_S = 0.5  # room noise before the speech
NOISE_RMS = 10 ** (-60 / 20)
TAIL_S = 1.5  # room noise after the speech: the fixed-silence end of turn (0.5 s) and the final pass fit in it
PINNED_NOW = dt.datetime(2026, 12, 3, 15, 42, tzinfo=dt.UTC)  # both runs of a request see this time


@dataclasses.dataclass(frozen=True, slots=True)
class SpokenRequest:
    """A bench request voiced by `voice`: 16 kHz float32 mono `audio` whose speech starts at LEAD_S."""

    request: Request
    voice: str
    audio: np.ndarray


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """What a session would do with one spoken request: the worded final transcripts (`texts`) and
    their confidences, the tool call of the first turn that routed to one (`call`: a ToolCall or
    None), whether a turn was asked back, the transcript's WER, and the spoken answers of the tool run
    on the transcript's call and on the request text's call ("" for no call)."""

    spoken: SpokenRequest
    texts: tuple[str, ...]
    confidences: tuple[float | None, ...]
    wer: float
    call: Any
    calls: int
    asked_back: bool
    answer: str
    reference_answer: str

    @property
    def transcript(self) -> str:
        return " ".join(self.texts)


# -- the voices ------------------------------------------------------------------------------------------


def voice_requests(items: list[Request], voices: tuple[str, ...], each_voice: bool, seed: int = 0,
                   threads: int = 1) -> list[SpokenRequest]:
    """`items` spoken by `voices` (TTS engine names as `--tts` takes them): in turn (request i by voice
    i mod len(voices)), or every request in each voice with `each_voice`. Resampled to 16 kHz, LEAD_S of
    noise at -60 dBFS before the speech and the same noise under it.

    Raises:
        headstart.models.store.ModelNotPreparedError: a Piper voice is not prepared (names the command).
        TTSError: a voice failed or gave no audio for a request.
        ValueError: no voices, or an unknown engine name.
    """
    from headstart.audio import resample
    from headstart.config import ThreadPlan, TTSConfig
    from headstart.tts.base import TTSError
    from headstart.tts.engines import load_synthesizer

    if not voices:
        raise ValueError("no voices to speak the requests")
    rng = np.random.default_rng(seed)
    plan = dataclasses.replace(ThreadPlan(), tts_threads=threads)
    jobs: dict[str, list[int]] = {v: [] for v in voices}
    for i in range(len(items)):
        for v in (voices if each_voice else (voices[i % len(voices)],)):
            jobs[v].append(i)
    spoken: dict[tuple[int, str], SpokenRequest] = {}
    for voice, indexes in jobs.items():
        if not indexes:
            continue
        synth = load_synthesizer(dataclasses.replace(TTSConfig(), engine=voice), plan)
        try:
            for i in indexes:
                text = items[i].text
                parts = [np.asarray(a, dtype=np.float32) for a in synth.synthesize(text)]
                if not parts:
                    raise TTSError(f"{voice} gave no audio for {text!r}")
                speech = resample(np.concatenate(parts), synth.sample_rate, SR)
                audio = np.concatenate([np.zeros(int(LEAD_S * SR), np.float32), speech])
                audio = audio + (rng.standard_normal(audio.shape[0]) * NOISE_RMS).astype(np.float32)
                spoken[(i, voice)] = SpokenRequest(items[i], voice, audio.astype(np.float32))
        finally:
            close = getattr(synth, "close", None)
            if close is not None:
                close()
    return [spoken[(i, v)] for i in range(len(items)) for v in voices if (i, v) in spoken]


# -- what a session does with it -------------------------------------------------------------------------


class _Tools:
    """Fresh session tools per question (no timer, an empty list file in a temporary folder, the wall
    clock pinned to PINNED_NOW): `route` a text, `answer` a call (runs it)."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._n = 0

    def _box(self) -> Any:
        from headstart.clock import FakeClock
        from headstart.tools.lists import ListStore
        from headstart.tools.toolbox import Toolbox

        self._n += 1
        return Toolbox(FakeClock(), lists=ListStore(self._folder / f"lists-{self._n}.sqlite3"), now=lambda: PINNED_NOW)

    def route(self, text: str) -> Any:
        box = self._box()
        try:
            return box.route(text)
        finally:
            box.close()

    def answer(self, text: str) -> str:
        """The spoken answer of the call `text` routes to on a fresh toolbox ("" for none)."""
        box = self._box()
        try:
            call = box.route(text)
            return "" if call is None else asyncio.run(box.run(call)).spoken
        finally:
            box.close()


def _plain(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s:]", " ", text.lower()).split())


def decide(spoken: SpokenRequest, heard: Any, tools: _Tools, ask_back_below: float | None) -> Outcome:
    """A session's answer to each worded final of `heard` (an ask_back.Heard): asked back when the
    recogniser was unsure, else the tool call it routes to (the first turn with one counts)."""
    from headstart.session.ask_back import asks_back

    call, calls, asked, answer = None, 0, False, ""
    for text, confidence in zip(heard.texts, heard.confidences):
        if asks_back(confidence, text, ask_back_below):
            asked = True
            continue
        got = tools.route(text)
        if got is not None:
            calls += 1
            if call is None:
                call, answer = got, tools.answer(text)
    reference = tools.answer(spoken.request.text) if spoken.request.tool is not None else ""
    return Outcome(spoken, heard.texts, heard.confidences, heard.wer, call, calls, asked, answer, reference)


# -- the figures -----------------------------------------------------------------------------------------


def score(outcomes: list[Outcome]) -> dict[str, Any]:
    """Per tool ("(no tool)" for the requests no tool serves) and overall, counted in utterances (a
    request spoken in two voices counts twice): n, transcript WER, right tool, right arguments, spoken
    result right, false actions, asked back; and the misses."""
    from headstart.corpus.wer import corpus_word_error_rate

    rows: dict[str, dict[str, Any]] = {}
    pairs: dict[str, list[tuple[str, str]]] = {}
    misses: list[dict[str, Any]] = []
    false_actions: list[str] = []
    for o in outcomes:
        request = o.spoken.request
        key = request.tool or "(no tool)"
        row = rows.setdefault(key, {"n": 0, "right_tool": 0, "right_arguments": 0, "spoken_right": 0,
                                    "false_actions": 0, "asked_back": 0})
        pairs.setdefault(key, []).append((request.text, o.transcript))
        row["n"] += 1
        row["asked_back"] += o.asked_back
        got = None if o.call is None else o.call.tool.name
        right_tool = got == request.tool and o.calls <= 1
        right_arguments = right_tool and (o.call is None or arguments_match(request.tool, request.arguments, o.call.arguments))
        if request.tool is None:
            spoken_right = o.call is None
            if o.call is not None:
                row["false_actions"] += 1
                false_actions.append(f"{o.spoken.voice}: {request.text!r} heard {o.transcript!r} -> {got}")
        else:
            spoken_right = o.call is not None and _plain(o.answer) == _plain(o.reference_answer)
        row["right_tool"] += right_tool
        row["right_arguments"] += right_arguments
        row["spoken_right"] += spoken_right
        if not (right_arguments and spoken_right):
            misses.append({"text": request.text, "voice": o.spoken.voice, "heard": o.transcript,
                           "expected": request.tool, "got": got,
                           "arguments": None if o.call is None else o.call.arguments, "asked_back": o.asked_back,
                           "answer": o.answer, "reference_answer": o.reference_answer})
    for key, row in rows.items():
        row["wer"] = round(corpus_word_error_rate(pairs[key]), 4)
    n = len(outcomes)
    tool_rows = [r for k, r in rows.items() if k != "(no tool)"]
    n_tool = sum(r["n"] for r in tool_rows)
    return {
        "utterances": n, "tool_utterances": n_tool, "no_tool_utterances": n - n_tool,
        "wer": round(corpus_word_error_rate(p for ps in pairs.values() for p in ps), 4),
        "right_tool": round(sum(r["right_tool"] for r in rows.values()) / max(1, n), 4),
        "right_tool_and_arguments": round(sum(r["right_arguments"] for r in tool_rows) / max(1, n_tool), 4),
        "spoken_right": round(sum(r["spoken_right"] for r in tool_rows) / max(1, n_tool), 4),
        "false_actions": len(false_actions), "false_action_texts": false_actions,
        "asked_back": sum(r["asked_back"] for r in rows.values()),
        "per_tool": rows, "misses": misses,
    }


def several_sentences(text: str) -> bool:
    """Whether a request holds more than one sentence (a sentence end followed by more words)."""
    return re.search(r"[.?!]\s+\S", text.strip()) is not None


def run(small: bool = False, voices: tuple[str, ...] = VOICES, each_voice: bool = False, asr_model: str | None = None,
        threads: int = 1, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Voice, hear and route every request (`small`: every fourth); returns the JSON-ready result.

    Raises:
        headstart.models.store.ModelError: the ASR model or a Piper voice is not prepared.
        TTSError: a voice failed.
        ValueError: no voices or an unknown one.
    """
    from headstart.bench.ask_back import Utterance, hear
    from headstart.bench.machine import cpu_description
    from headstart.config import ASRConfig, SessionConfig
    from headstart.voice.asr_engines import load_asr

    started = time.perf_counter()
    asr_config = ASRConfig(model=asr_model or ASRConfig().model)
    asr = load_asr(asr_config, cpu_threads=threads)
    asr.warmup()
    everything = requests(small)
    items = [r for r in everything if not several_sentences(r.text)]
    not_spoken = [r.text for r in everything if several_sentences(r.text)]
    spoken = voice_requests(items, voices, each_voice, threads=threads)
    log(f"{len(spoken)} utterances of {len(items)} requests voiced in {time.perf_counter() - started:.0f} s")
    below = SessionConfig().ask_back_below
    outcomes = []
    with tempfile.TemporaryDirectory() as folder:
        tools = _Tools(Path(folder))
        for n, s in enumerate(spoken, 1):
            utterance = Utterance(f"r{n:03d}-{s.voice}", "synthetic", s.voice, s.request.text, s.audio, LEAD_S)
            o = decide(s, hear(utterance, asr, asr_config, seed=n, tail_s=TAIL_S), tools, below)
            outcomes.append(o)
            got = None if o.call is None else o.call.tool.name
            mark = "ok" if got == s.request.tool else "WRONG"
            log(f"[{n}/{len(spoken)}] {s.voice:<9} {mark:<5} wer {o.wer:.2f} {o.transcript!r} -> {got}"
                + (" (asked back)" if o.asked_back else "")
                + ("" if o.wer == 0 else f" (said: {s.request.text!r})"))
    result = {"bench": "tools", "spoken": True, "small": small, "voices": list(voices), "each_voice": each_voice,
              "asr": asr_config.model, "ask_back_below": below, "requests": len(items),
              "not_spoken": not_spoken, **score(outcomes)}
    result["machine"] = cpu_description()
    result["wall_s"] = round(time.perf_counter() - started, 1)
    return result


def format_table(result: dict[str, Any]) -> str:
    """The per-tool table and a summary line."""
    head = (f"{'tool':<18} {'n':>4} {'WER':>6} {'right tool':>11} {'right args':>11} {'spoken ok':>10} "
            f"{'false act.':>10} {'asked back':>10}")
    lines = [head]
    for name, row in sorted(result["per_tool"].items()):
        lines.append(f"{name:<18} {row['n']:>4} {row['wer']:>6.1%} {row['right_tool']:>11} {row['right_arguments']:>11} "
                     f"{row['spoken_right']:>10} {row['false_actions']:>10} {row['asked_back']:>10}")
    lines.append(f"{result['utterances']} spoken requests ({', '.join(result['voices'])}; {result['asr']}), "
                 f"{result['no_tool_utterances']} need no tool: WER {result['wer']:.1%}, right tool "
                 f"{result['right_tool']:.1%}, right tool and arguments {result['right_tool_and_arguments']:.1%}, "
                 f"spoken result right {result['spoken_right']:.1%}, asked back {result['asked_back']}, "
                 f"false actions {result['false_actions']} (target 0)")
    return "\n".join(lines)


def main(options: ToolsBenchOptions) -> int:
    """`headstart bench tools --spoken`: a line per utterance and the table (unless `json`), then the
    JSON line. Returns 0, 1 when a tool would run for a request that needs none, or 2 when a model or
    voice is missing or fails."""
    from headstart.models.store import ModelError
    from headstart.tts.base import TTSError

    voices = tuple(v.strip() for v in options.voices.split(",") if v.strip())
    log = (lambda *a, **k: None) if options.json else (lambda *a, **k: print(*a, **k, flush=True))
    try:
        result = run(options.small, voices, options.each_voice, options.asr, options.threads, log=log)
    except (ModelError, TTSError, ValueError) as exc:
        print(f"bench tools: {exc}")
        return 2
    if not options.json:
        print(format_table(result))
    print(json.dumps(result))
    return 0 if result["false_actions"] == 0 else 1
