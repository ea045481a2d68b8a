"""`headstart demo [WAV ...]`: answer recorded utterances by voice and show where the time went.

Each WAV is one user turn of one conversation. Its audio is streamed in 20 ms frames at real-time pace
(`--fast`: as fast as the pipeline takes it) through VAD -> streaming ASR -> end of turn -> LLM ->
incremental TTS; after each file the "microphone" keeps sending silence until the reply is done, as a
live one would. Partial transcripts and reply tokens print as they stream; the assistant's audio goes
to `reply.wav`; a table of per-turn latencies follows and the last line is one JSON object.

The true end of speech of a bench recording is its stored `speech_end_s`; for other files it is the
VAD's end of speech (the JSON says which, in `speech_end_source`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from headstart.audio import SAMPLE_RATE_HZ, AudioError, AudioFrame, read_wav, write_wav
from headstart.cli.options import (  # noqa: F401 (tests/test_session_switches.py imports the head-start pair from here)
    add_head_start_argument,
    add_pipeline_arguments,
    build_config,
    session_config_from_args,
)
from headstart.clock import MonotonicClock
from headstart.events import (
    EndOfTurn,
    FinalTranscript,
    PartialTranscript,
    ReplyDone,
    SpeechEnded,
    SpeechStarted,
    TokenDelta,
)
from headstart.timeline import TurnTimeline

FRAME_S = 0.02
MAX_WAIT_AFTER_FILE_S = 60.0
GAP_BETWEEN_REPLIES_S = 0.3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("wavs", nargs="*", help="audio files (any rate, mono or stereo) or bench recording "
                        "names; default: a synthetic question, \"What is the capital of France?\" "
                        "(headstart/corpus/demo/README.md)")
    parser.add_argument("--fast", action="store_true", help="stream the audio as fast as possible, "
                        "not at real-time pace (latencies then mean less)")
    add_pipeline_arguments(parser)
    parser.add_argument("--out", default="reply.wav", help="where to write the assistant's audio")
    parser.add_argument("--quiet", action="store_true", help="print only the table and the JSON line")


@dataclass
class UserTurn:
    """One input file: its audio at 16 kHz and, if known, its true end of speech (seconds in the file)."""

    name: str
    samples: np.ndarray
    speech_end_s: float | None
    reference: str | None = None


@dataclass
class TurnResult:
    name: str
    offset_s: float  # where the file starts in the session's audio stream
    speech_end_source: str = "vad"
    vad_speech_end_s: float | None = None  # stream position of the VAD's last end of speech
    timeline: TurnTimeline | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    audio: list[np.ndarray] = field(default_factory=list)


def load_turns(specs: list[str]) -> list[UserTurn]:
    """Read the inputs: bench recording names or audio paths (resampled to 16 kHz mono).

    Raises:
        FileNotFoundError, AudioError: a missing or unreadable file (the message names it).
    """
    from headstart.corpus import recordings as data

    if not specs:
        default = data.demo_recording()  # synthetic speech: an everyday question (corpus/demo/README.md)
        return [UserTurn(default.name, read_wav(default.path), default.speech_end_s, default.text)]
    turns = []
    by_path = {rec.path.resolve(): rec for rec in data.recordings()}
    for spec in specs:
        path = Path(spec)
        if path.exists():
            rec = by_path.get(path.resolve())
        else:
            try:
                rec = data.demo_recording() if spec == data.DEMO_RECORDING_NAME else data.recording(spec)
            except KeyError:
                if path.suffix or len(path.parts) > 1:
                    raise FileNotFoundError(f"no such audio file: {spec}") from None
                names = ", ".join(r.name for r in data.recordings())
                raise FileNotFoundError(f"no such audio file or bench recording: {spec} (recordings: {names})") from None
        if rec is not None:
            turns.append(UserTurn(rec.name, read_wav(rec.path), rec.speech_end_s, rec.text))
            continue
        samples = read_wav(spec)
        if samples.size == 0:
            raise AudioError(f"{spec} holds no audio samples")
        turns.append(UserTurn(Path(spec).name, samples, None))
    return turns


class Printer:
    """Live view: partial transcripts overwrite one line on a terminal; reply tokens stream."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.tty = sys.stdout.isatty()
        self._partial_len = 0
        self._in_reply = False

    def _clear_partial(self) -> None:
        if self._partial_len and self.tty:
            sys.stdout.write("\r" + " " * self._partial_len + "\r")
        self._partial_len = 0

    def partial(self, event: PartialTranscript) -> None:
        if self.quiet:
            return
        line = f"… {event.committed}" + (f" [{event.pending}]" if event.pending else "")
        if self.tty:
            self._clear_partial()
            sys.stdout.write(line)
            self._partial_len = len(line)
        else:
            print(line)
        sys.stdout.flush()

    def final(self, text: str) -> None:
        if self.quiet:
            return
        self._clear_partial()
        print(f"user: {text}" if text else "user: (no words heard)", flush=True)

    def token(self, text: str) -> None:
        if self.quiet:
            return
        if not self._in_reply:
            sys.stdout.write("assistant: ")
            self._in_reply = True
        sys.stdout.write(text)
        sys.stdout.flush()

    def reply_done(self) -> None:
        if self._in_reply and not self.quiet:
            print(flush=True)
        self._in_reply = False

    def info(self, text: str) -> None:
        if not self.quiet:
            self._clear_partial()
            print(text, flush=True)


async def run_conversation(components, turns: list[UserTurn], *, fast: bool, printer: Printer) -> list[TurnResult]:
    """Stream `turns` through one Session; returns one TurnResult per input file."""
    from headstart.session.session import ReplyAudio, Session, TurnCompleted

    clock = MonotonicClock()
    session = Session(components, clock=clock)
    results: list[TurnResult] = []
    current: list[TurnResult] = []  # the turn whose audio is being sent
    utterance_open = [False]  # between the VAD's speech start and the end of that utterance

    async def consume() -> None:
        async for event in session:
            turn = current[-1] if current else None
            if isinstance(event, SpeechStarted):
                utterance_open[0] = True
            elif isinstance(event, PartialTranscript):
                printer.partial(event)
            elif isinstance(event, SpeechEnded) and turn is not None:
                turn.vad_speech_end_s = event.audio_s
            elif isinstance(event, FinalTranscript):
                printer.final(event.text)
                if not event.text.strip():
                    utterance_open[0] = False  # noise, not words: no reply will come
            elif isinstance(event, EndOfTurn):
                utterance_open[0] = False
            elif isinstance(event, TokenDelta):
                printer.token(event.text)
            elif isinstance(event, ReplyDone):
                printer.reply_done()
            elif isinstance(event, ReplyAudio) and turn is not None:
                turn.audio.append(event.frame.samples)
            elif isinstance(event, TurnCompleted) and turn is not None:
                turn.timeline = event.timeline
                turn.done.set()

    consumer = asyncio.create_task(consume())
    stream_s = 0.0
    start = clock.now()
    silence = np.zeros(int(FRAME_S * SAMPLE_RATE_HZ), dtype=np.float32)
    try:
        for user_turn in turns:
            result = TurnResult(user_turn.name, offset_s=stream_s)
            results.append(result)
            current.append(result)
            for lo in range(0, user_turn.samples.shape[0], silence.shape[0]):
                block = user_turn.samples[lo : lo + silence.shape[0]]
                await session.push_audio(AudioFrame(block, SAMPLE_RATE_HZ))
                stream_s += block.shape[0] / SAMPLE_RATE_HZ
                if fast:
                    await asyncio.sleep(0)
                else:
                    await clock.sleep(start + stream_s - clock.now())
            # The microphone stays open: silence at real-time pace until the reply is over.
            waited_s = 0.0
            if fast:
                start = clock.now() - stream_s
            settle_s = components.config.endpoint.silence_s + 0.5
            while not result.done.is_set() and waited_s < MAX_WAIT_AFTER_FILE_S and not consumer.done():
                if waited_s >= settle_s and not utterance_open[0] and not session.reply_active:
                    result.done.set()  # nothing (more) was heard: no reply to wait for
                    break
                await session.push_audio(AudioFrame(silence, SAMPLE_RATE_HZ))
                stream_s += FRAME_S
                waited_s += FRAME_S
                await clock.sleep(start + stream_s - clock.now())
            if not result.done.is_set() and not consumer.done():
                printer.info(f"(no end of turn within {MAX_WAIT_AFTER_FILE_S:.0f} s after {user_turn.name})")
        await session.end_input()
        await consumer
    finally:
        if not consumer.done():
            consumer.cancel()
        await session.aclose()

    for user_turn, result in zip(turns, results):
        timeline = result.timeline
        if timeline is None:
            continue
        true_end: float | None
        if user_turn.speech_end_s is not None:
            true_end = result.offset_s + user_turn.speech_end_s
            result.speech_end_source = "bench data"
        else:
            true_end = result.vad_speech_end_s
        if true_end is not None:
            timeline.speech_end_at_s = session.audio_clock.clock_at(true_end)
    return results


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}"


def _turn_records(timeline: TurnTimeline) -> dict[str, float | int]:
    """The head start's and the EOU service's figures of a turn for its JSON row (seconds), only those
    the turn has: the release on a hit, the running counters once the end of turn gave a reply."""
    row: dict[str, float | int] = {}
    head, eou = timeline.head_start, timeline.eou
    if head is not None and head.release is not None:
        row.update(preemptive_lead_s=head.release.lead_s, held_tokens=head.release.held_tokens,
                   held_audio_s=head.release.held_audio_s)
    if head is not None:
        row.update(preemptive_hits=head.hits, preemptive_misses=head.misses, preemptive_wasted_tokens=head.wasted_tokens)
    if timeline.eou_probability is not None:
        row["eou_probability"] = timeline.eou_probability
    if eou is not None:
        row.update(eou_computed=eou.computed, eou_compute_s=eou.compute_s)
    return row


def report(results: list[TurnResult], turns: list[UserTurn], models: dict, fast: bool, quiet: bool) -> dict:
    """Print the latency table; return the JSON object (first turn at top level, all under `turns`)."""
    from rich.console import Console
    from rich.table import Table

    columns = [
        ("speech end → final", "speech_end_to_final_s"),
        ("→ first token", "speech_end_to_first_token_s"),
        ("→ first audio (v2v)", "voice_to_voice_s"),
        ("TTFT", "ttft_s"),
        ("TPOT", "tpot_s"),
        ("TTS TTFA", "tts_ttfa_s"),
    ]
    table = Table(title="per-turn latency (ms)" + (" — --fast: not real-time pace" if fast else ""))
    table.add_column("turn")
    for title, _ in columns:
        table.add_column(title, justify="right")
    table.add_column("preemptive")
    rows = []
    for user_turn, result in zip(turns, results):
        timeline = result.timeline
        metrics = timeline.metrics() if timeline is not None else {key: None for _, key in columns}
        preemptive = "none" if timeline is None or timeline.head_start is None else timeline.head_start.preemptive
        row: dict[str, Any] = {
            "file": result.name,
            **{key: (None if value is None else round(value, 4)) for key, value in metrics.items()},
            "transcript": timeline.transcript if timeline is not None else "",
            "reply": timeline.reply if timeline is not None else "",
            "num_tokens": timeline.num_tokens if timeline is not None else 0,
            "reply_audio_s": round(timeline.reply_audio_s, 3) if timeline is not None else 0.0,
            "speech_end_source": result.speech_end_source,
            "preemptive": preemptive,
        }
        if timeline is not None:
            row.update(_turn_records(timeline))
        if user_turn.reference is not None:
            row["reference"] = user_turn.reference
        rows.append(row)
        table.add_row(result.name, *(_fmt(metrics[key]) for _, key in columns), preemptive)
    Console(file=sys.stdout, width=120).print(table)
    summary: dict[str, Any] = {**rows[0], "models": models, "pace": "fast" if fast else "realtime"}
    if len(rows) > 1:
        summary["turns"] = rows
    return summary


def run_from_args(args: argparse.Namespace) -> int:
    from headstart.models.store import ModelError
    from headstart.session.session import Components
    from headstart.tts.base import TTSError

    printer = Printer(args.quiet)
    try:
        turns = load_turns(args.wavs)
    except (FileNotFoundError, AudioError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    config = build_config(args)
    try:
        components = Components.load(config, log=lambda msg: printer.info(msg))
    except (ModelError, TTSError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        results = asyncio.run(run_conversation(components, turns, fast=args.fast, printer=printer))
    finally:
        components.close()

    tts_rate = components.tts.sample_rate
    pieces: list[np.ndarray] = []
    gap = np.zeros(int(GAP_BETWEEN_REPLIES_S * tts_rate), dtype=np.float32)
    for result in results:
        if result.audio:
            pieces += [*result.audio, gap]
    audio = np.concatenate(pieces[:-1]) if pieces else np.zeros(0, dtype=np.float32)
    if audio.size:
        write_wav(args.out, audio, tts_rate)
        printer.info(f"wrote {args.out}: {audio.size / tts_rate:.2f} s at {tts_rate} Hz")
    else:
        printer.info("no reply: nothing was heard, so no reply.wav was written")
    models = {"asr": config.asr.model, "llm": config.llm.model, "tts": config.tts.engine, "vad": config.vad.engine}
    summary = report(results, turns, models, args.fast, args.quiet)
    summary["head_start"] = config.session.head_start
    # the switches in force ("preemptive" itself is the first turn's outcome: hit/miss/none)
    summary["incremental_prefill_on"] = config.session.head_start and config.session.incremental_prefill
    summary["preemptive_on"] = config.session.head_start and config.session.preemptive
    summary["eou"] = config.session.eou
    summary["llm"] = components.llm_info()  # precision, the exactness self-test, the decoder in use
    summary["reply_wav"] = str(args.out) if audio.size else None
    print(json.dumps(summary, ensure_ascii=False))
    return 0
