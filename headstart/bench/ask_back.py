"""`headstart bench ask-back [--asr MODEL] [--limit N] [--json]`: the ask-back threshold on clean and
misheard turns.

The session asks "Sorry, could you say that again?" (headstart/session/ask_back.py) when the final
transcript's recogniser confidence, its mean word probability (`FinalTranscript.confidence`), is under
`SessionConfig.ask_back_below`. This bench says what a threshold costs and buys: the clean turns it
asks back (transcribed without an error: the target is 0), the garbled turns it catches (WER >= 0.5:
an answer to those answers words the user did not say) and the partly wrong ones it asks back.

The turns:

* synthetic: the spoken-style questions, requests and statements of `bench/data/ask_back_questions.txt`
  (written for this project), each voiced by espeak-ng (headstart/tts/espeak.py) in three voices (en-us,
  en-us+f3, en-gb), with 0.5 s of room noise at -60 dBFS before the speech and under it;
* real: the packaged recordings of real people (headstart/corpus/recordings.py), reference as packaged,
  shortest first (`--limit N` takes the first N questions in each voice and the N shortest recordings).

Each turn, followed by 3 s of room noise at its own level, is streamed in 20 ms frames through the
listener a session builds (session/listening.py `build_listener`: Silero VAD, the ASR with its partial
passes, early final and final re-decode) on the endpoint of a session without an EOU signal (the fixed
silence: no LLM is loaded; the final passes are the same, only a recording with a long pause inside
could be split into turns differently). Every ASR pass is let finish before the next frame, so the run
measures the passes an idle machine would run, not this machine's speed. A turn's confidence is the
`FinalTranscript.confidence` the listener emits for the final its EndOfTurn came after (the latest: as
the session takes it, speech that resumes before the end of turn makes one final of both parts), and
whether it is asked back is the session's own rule (`asks_back`). A recording the listener split into
two turns is asked back when either is (its confidence: the lower); its WER is the joined text's. One
that ends in no words (nothing the session would reply to) is counted as unheard, in no class.

Reported for each threshold of a sweep (0.50-0.90 in steps of 0.05) and for the configured default:
the clean turns asked back, the garbled turns caught, the partly wrong turns (0 < WER < 0.5) asked
back; also the lowest confidence of a clean turn (a threshold up to it asks no clean turn back). A
table, then one JSON line (`bench`, `asr`, `thresholds`, `default`, `turns`, `machine`, ...).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

SR = 16_000
FRAME_S = 0.02
TAIL_S = 3.0  # room noise after each turn: the VAD's end of speech and the final come in it
LEAD_S = 0.5  # room noise before a synthetic turn
SYNTHETIC_NOISE_RMS = 10 ** (-60 / 20)
VOICES = ("en-us", "en-us+f3", "en-gb")
THRESHOLDS = tuple(round(0.50 + 0.05 * i, 2) for i in range(9))  # 0.50 ... 0.90
GARBLED_WER = 0.5
DATA_FILE = "ask_back_questions.txt"
CLASSES = ("clean", "partly_wrong", "garbled", "unheard")


@dataclass(frozen=True, slots=True)
class Utterance:
    """One user turn to transcribe: 16 kHz float32 mono `audio` whose speech starts `speech_start_s` in,
    its reference `text`, `source` "synthetic" (espeak-ng voice `voice`) or "real" (a packaged
    recording, `voice` "")."""

    name: str
    source: str
    voice: str
    text: str
    audio: np.ndarray
    speech_start_s: float


@dataclass(frozen=True, slots=True)
class Heard:
    """What the listener made of one Utterance: the texts and confidences (mean word probability in
    [0, 1]; None: unknown) of the worded final transcripts its turns ended on, in order, and the WER of
    their joined text."""

    utterance: Utterance
    texts: tuple[str, ...]
    confidences: tuple[float | None, ...]
    wer: float

    @property
    def transcript(self) -> str:
        return " ".join(self.texts)

    @property
    def confidence(self) -> float | None:
        """The lowest known confidence of its final transcripts (the one that decides an ask-back)."""
        known = [c for c in self.confidences if c is not None]
        return min(known) if known else None

    @property
    def kind(self) -> str:
        """"clean" (WER 0), "partly_wrong" (0 < WER < 0.5), "garbled" (WER >= 0.5) or "unheard" (no
        final transcript with words: the session replies nothing)."""
        if not self.texts:
            return "unheard"
        if self.wer == 0:
            return "clean"
        return "garbled" if self.wer >= GARBLED_WER else "partly_wrong"

    def asked_back(self, below: float | None) -> bool:
        """Whether a session with `SessionConfig.ask_back_below = below` asks back (any of its turns)."""
        from headstart.session.ask_back import asks_back

        return any(asks_back(c, t, below) for t, c in zip(self.texts, self.confidences))


# -- the turns -----------------------------------------------------------------------------------------
def questions() -> list[str]:
    """The packaged turns of `bench/data/ask_back_questions.txt` (comments and blank lines skipped)."""
    text = resources.files("headstart.bench").joinpath("data", DATA_FILE).read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def unknown_voices(voices: tuple[str, ...], executable: str = "espeak-ng") -> list[str]:
    """The `voices` ("LANGUAGE" or "LANGUAGE+VARIANT") that espeak-ng does not list (`--voices`,
    `--voices=variant`). It speaks an unknown one in a default voice without an error, so a mistyped
    voice would be measured under the wrong label. Raises OSError when `executable` does not run."""
    import subprocess

    def column(args: list[str], index: int) -> set[str]:
        listing = subprocess.run([executable, *args], capture_output=True, text=True, timeout=30, check=False).stdout
        return {row.split()[index] for row in listing.splitlines()[1:] if len(row.split()) > index}

    languages = column(["--voices"], 1)
    variants = {name.removeprefix("!v/") for name in column(["--voices=variant"], 4)}
    out = []
    for voice in voices:
        language, _, variant = voice.partition("+")
        if language not in languages or (variant and variant not in variants):
            out.append(voice)
    return out


def synthetic_utterances(texts: list[str], voices: tuple[str, ...] = VOICES, seed: int = 0) -> list[Utterance]:
    """Each text voiced by espeak-ng in each voice (`EspeakSynthesizer`), resampled to 16 kHz, with
    LEAD_S of room noise at -60 dBFS before it and the same noise under it.

    Raises:
        EngineNotAvailableError: espeak-ng is not installed.
        ValueError: a voice espeak-ng does not have (`unknown_voices`).
        TTSError: espeak-ng failed, or gave no audio for a text.
    """
    from headstart.audio import resample
    from headstart.tts.base import TTSError
    from headstart.tts.espeak import EspeakSynthesizer

    if not voices or not texts:
        return []
    EspeakSynthesizer()  # EngineNotAvailableError first, with the install command
    unknown = unknown_voices(voices)
    if unknown:
        raise ValueError(f"espeak-ng has no voice {', '.join(unknown)} (`espeak-ng --voices` lists them)")
    rng = np.random.default_rng(seed)
    out = []
    for voice in voices:
        synth = EspeakSynthesizer(voice=voice)
        for n, text in enumerate(texts, 1):
            parts = [np.asarray(a, dtype=np.float32) for a in synth.synthesize(text)]
            if not parts:
                raise TTSError(f"espeak-ng ({voice}) gave no audio for {text!r}")
            speech = resample(np.concatenate(parts), synth.sample_rate, SR)
            audio = np.concatenate([np.zeros(int(LEAD_S * SR), np.float32), speech])
            audio = audio + (rng.standard_normal(audio.shape[0]) * SYNTHETIC_NOISE_RMS).astype(np.float32)
            out.append(Utterance(f"q{n:02d}-{voice}", "synthetic", voice, text, audio.astype(np.float32), LEAD_S))
    return out


def real_utterances(limit: int | None = None) -> list[Utterance]:
    """The packaged recordings, shortest first (quick runs take the short ones): the first `limit` of
    them (None: all)."""
    from headstart.corpus.recordings import recordings

    chosen = sorted(recordings(), key=lambda r: (r.duration_s, r.name))[:limit]
    return [Utterance(r.name, "real", "", r.text, r.read(), r.speech_start_s) for r in chosen]


# -- the listener ----------------------------------------------------------------------------------------
async def _turn_finals(listener: Any, audio: np.ndarray) -> list[Any]:
    """Stream `audio` through `listener` frame by frame, each ASR pass finished before the next frame;
    return the FinalTranscript each EndOfTurn ended on (the latest before it, as the session takes it:
    a final whose utterance resumed is superseded by the later one that covers it all)."""
    from headstart.audio import AudioFrame
    from headstart.events import EndOfTurn, FinalTranscript

    finals: list[Any] = []
    latest: list[Any] = []

    async def consume() -> None:
        async for event in listener:
            if isinstance(event, FinalTranscript):
                latest[:] = [event]
            elif isinstance(event, EndOfTurn) and latest:
                finals.append(latest.pop())

    consumer = asyncio.create_task(consume())
    step = int(round(FRAME_S * SR))
    for start in range(0, audio.shape[0], step):
        await listener.push(AudioFrame(audio[start : start + step], SR))
        await listener.settle()
        await asyncio.sleep(0)  # let the consumer take the events
    await listener.end_input()
    await consumer  # re-raises the listener's failure (the ASR's error chained)
    return finals


def hear(utterance: Utterance, asr: Any, asr_config: Any, seed: int = 0, tail_s: float = TAIL_S) -> Heard:
    """Stream `utterance` (and `tail_s` of room noise at its own level) through a session's listener on
    `asr` (a loaded Transcriber for `asr_config`, an ASRConfig); score the worded finals its turns
    ended on.

    Raises:
        RuntimeError: the ASR failed (the cause chained).
    """
    from headstart.bench.asr import endpoint_config, room_noise
    from headstart.config import PipelineConfig
    from headstart.corpus.wer import word_error_rate
    from headstart.session.listening import build_listener
    from headstart.session.turntaking import has_words
    from headstart.voice.listener import make_asr_executor

    tail = room_noise(utterance.audio, utterance.speech_start_s, tail_s, np.random.default_rng(seed))
    audio = np.concatenate([utterance.audio, tail])
    executor = make_asr_executor()
    try:
        listener = build_listener(PipelineConfig(asr=asr_config), asr, executor, endpoint_config(False, "head"))
        finals = asyncio.run(_turn_finals(listener, audio))
    finally:
        executor.shutdown(wait=True)
    worded = [f for f in finals if has_words(f.text)]
    texts = tuple(f.text for f in worded)
    return Heard(utterance, texts, tuple(f.confidence for f in worded), word_error_rate(utterance.text, " ".join(texts)))


# -- the figures -----------------------------------------------------------------------------------------
def sweep(heard: list[Heard], thresholds: tuple[float, ...]) -> list[dict[str, Any]]:
    """Per threshold: the clean, partly wrong and garbled turns asked back (`<kind>_asked_back`) out of
    how many (`<kind>`), in all and per source (`by_source`)."""

    def counts(group: list[Heard], below: float) -> dict[str, int]:
        out: dict[str, int] = {}
        for kind in CLASSES[:3]:
            members = [h for h in group if h.kind == kind]
            out[kind] = len(members)
            out[f"{kind}_asked_back"] = sum(h.asked_back(below) for h in members)
        return out

    rows = []
    for below in thresholds:
        row: dict[str, Any] = {"below": below, **counts(heard, below)}
        row["by_source"] = {s: counts([h for h in heard if h.utterance.source == s], below)
                            for s in ("synthetic", "real")}
        rows.append(row)
    return rows


def run(asr_model: str | None = None, limit: int | None = None, threads: int = 1,
        voices: tuple[str, ...] = VOICES, log=print) -> dict[str, Any]:
    """Transcribe every turn (the first `limit` questions in each of `voices` and the `limit` shortest
    recordings; None: all) with ASR `asr_model` (None: `ASRConfig.model`, the session's) on `threads`
    CPU threads; return the JSON-ready result.

    Raises:
        headstart.models.store.ModelError: the ASR model is not prepared.
        EngineNotAvailableError, TTSError: espeak-ng is missing or failed.
        ValueError: a voice espeak-ng does not have.
    """
    from headstart.bench.machine import cpu_description
    from headstart.config import ASRConfig, SessionConfig
    from headstart.voice.asr_engines import load_asr

    started = time.perf_counter()
    asr_config = ASRConfig(model=asr_model or ASRConfig().model)
    utterances = synthetic_utterances(questions()[:limit], voices) + real_utterances(limit)
    asr = load_asr(asr_config, cpu_threads=threads)
    asr.warmup()
    heard = []
    for n, utterance in enumerate(utterances, 1):
        h = hear(utterance, asr, asr_config, seed=n)
        heard.append(h)
        conf = "  -  " if h.confidence is None else f"{h.confidence:.3f}"
        log(f"[{n}/{len(utterances)}] {utterance.name:<22} {h.kind:<12} conf {conf} wer {h.wer:.2f}  "
            f"{h.transcript!r}" + ("" if h.wer == 0 else f" (said: {utterance.text!r})"))
    default = SessionConfig().ask_back_below
    thresholds = tuple(sorted(set(THRESHOLDS) | ({default} if default is not None else set())))
    rows = sweep(heard, thresholds)
    clean = [h.confidence for h in heard if h.kind == "clean" and h.confidence is not None]
    safe = [r for r in rows if r["clean_asked_back"] == 0]
    best = max(safe, key=lambda r: (r["garbled_asked_back"], r["below"])) if safe else None
    return {
        "bench": "ask-back",
        "asr": asr_config.model,
        "default_below": default,
        "default": next((r for r in rows if r["below"] == default), None),
        "thresholds": rows,
        # a threshold up to this asks no clean turn back (asks_back: confidence < threshold)
        "min_clean_confidence": round(min(clean), 4) if clean else None,
        # the sweep's threshold that catches the most garbled turns without asking a clean turn back
        "best_below": best["below"] if best else None,
        "turns": {kind: sum(h.kind == kind for h in heard) for kind in CLASSES},
        "synthetic": sum(u.source == "synthetic" for u in utterances),
        "real": sum(u.source == "real" for u in utterances),
        "voices": list(voices),
        "garbled_wer": GARBLED_WER,
        "limit": limit,
        "machine": cpu_description(),
        "wall_s": round(time.perf_counter() - started, 1),
        "utterances": [
            {"name": h.utterance.name, "source": h.utterance.source, "reference": h.utterance.text,
             "transcript": h.transcript, "confidence": None if h.confidence is None else round(h.confidence, 4),
             "wer": round(h.wer, 4), "kind": h.kind, "finals": len(h.texts)}
            for h in heard
        ],
    }


def format_table(result: dict[str, Any]) -> str:
    """The sweep as a text table: per threshold, clean asked back, garbled caught, partly wrong asked back."""
    lines = [f"{'below':>6}  {'clean asked back':>16}  {'garbled caught':>14}  {'partly wrong asked back':>23}"]
    for r in result["thresholds"]:
        mark = "  (default)" if r["below"] == result["default_below"] else ""
        lines.append(f"{r['below']:>6.2f}  {r['clean_asked_back']:>8}/{r['clean']:<7}  "
                     f"{r['garbled_asked_back']:>7}/{r['garbled']:<6}  "
                     f"{r['partly_wrong_asked_back']:>11}/{r['partly_wrong']:<11}{mark}")
    turns = result["turns"]
    lines.append(f"{result['synthetic']} synthetic + {result['real']} real turns ({result['asr']}): "
                 f"{turns['clean']} clean, {turns['partly_wrong']} partly wrong, {turns['garbled']} garbled "
                 f"(WER >= {result['garbled_wer']}), {turns['unheard']} unheard; lowest clean confidence "
                 f"{result['min_clean_confidence']}; best threshold of the sweep (no clean turn asked back, "
                 f"most garbled caught): {result['best_below']}")
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class AskBackBenchOptions:
    """The options of `headstart bench ask-back`; their meaning and defaults: its `--help`
    (headstart/cli/bench/ask_back.py)."""

    asr: str | None = None
    limit: int | None = None
    voices: str = ",".join(VOICES)
    threads: int = 1
    json: bool = False


def main(options: AskBackBenchOptions) -> int:
    """Entry point of `headstart bench ask-back`: the per-turn lines and the table (unless `json`), then
    the JSON line. Returns 0, or 2 when the ASR model, espeak-ng or one of the voices is missing, or
    `limit` is under 1."""
    from headstart.models.store import ModelError
    from headstart.tts.base import TTSError

    if options.limit is not None and options.limit < 1:
        print("bench ask-back: --limit must be at least 1")
        return 2
    voices = tuple(v.strip() for v in options.voices.split(",") if v.strip())
    log = (lambda *a, **k: None) if options.json else print
    try:
        result = run(options.asr, options.limit, options.threads, voices, log=log)
    except (ModelError, TTSError, FileNotFoundError, ValueError) as exc:
        print(f"bench ask-back: {exc}")
        return 2
    if not options.json:
        print()
        print(format_table(result))
    print(json.dumps(result))
    return 0
