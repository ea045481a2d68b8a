"""`headstart bench asr [--json] [--input-dir DIR]`: the listening stage on real recordings.

Every recording is streamed through the real `Listener` (Silero VAD, whisper through LocalAgreement,
the Endpointer with, by default, the semantic EOU signal of the session's LLM as the session loads it
(`LLMConfig`: model and quantisation; `--llm`, `--quantize`): the trained head of
headstart/llm/eou_head.py with the thresholds calibrated with it, or with `--eou token` the raw
end-of-turn token probability of headstart/llm/eou.py) in 20 ms frames, followed by 3 s of low
room-level noise. The listener and its endpoint are those a session builds (session/listening.py
`build_listener` on the EndpointConfig that session/eou.py `resolve_eou` gives for the same model and
settings: `endpoint_config`). Figures:

* WER of the final transcripts (normalised text, corpus-level);
* partial latency: for each word of the final transcript, the time from the end of that word (its
  whisper timestamp) to the first partial transcript that contains it; p50/p90 over all words;
* final delay: when the FinalTranscript is ready minus the end-of-turn decision (0 when it was ready
  first); p50;
* final after the VAD: when the FinalTranscript is ready minus when the VAD confirmed the end of
  speech (0 when the final pass had finished by then); p50/p90 over the complete recordings;
* end-of-turn delay: when the EndOfTurn is available (decided *and* final ready) minus the true end of
  speech (bench data: `speech_end_s`; an --input-dir: Silero's last speech end minus its padding);
  p50/p90 over the complete recordings;
* false cut-off rate on the pause set: each recording of four words or more, with a 0.6-1.5 s pause
  inserted at the word gap nearest its middle (found with whisper word timestamps), once filled with
  the recording's own room noise and once with digital zero: an EndOfTurn decided inside the pause is
  a cut-off;
* RTF: ASR compute time / audio time;
* where the end-of-turn delay goes (`stages_p50_s`, after the true speech end): the VAD confirmed the
  end, the final transcript was ready, its EOU probability was known, the endpointer decided, the
  EndOfTurn was out; and the EOU probabilities behind the decisions (`eou_scores`: what each complete
  recording's turn ended on, what was heard inside each pause).

Time. The stream is not paced by sleeping: it runs on *audio time*, with every ASR pass and EOU call
occupying its worker for the wall time it really took (a discrete-event simulation: a pass started at
audio time t with a 0.6 s compute delivers its result at t + 0.6 s, and frames after that see it). That
is what a real-time run on this machine would see, without the idle waiting. The latency figures
(partial, final delay, end-of-turn delay) therefore depend on the wall time of the compute and on how
busy the CPU is; WER and the false cut-offs depend on it only through which partials exist when the
endpointer decides. `--timing cpu` counts each job's process CPU time instead, with jobs run one at a
time: what an otherwise idle core would give, for comparisons on a machine shared with others.

The last line printed is one JSON object with the keys `wer`, `partial_p50_s`, `partial_p90_s`,
`final_delay_p50_s`, `eou_delay_p50_s`, `eou_delay_p90_s`, `false_cutoff_rate`, `rtf`, `model`,
`utterances` (plus details).
"""

from __future__ import annotations

import asyncio
import csv
import json
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

SR = 16000
FRAME_S = 0.02
TAIL_S = 3.0
TARGETS = {
    "wer": 0.04,
    "partial_p50_s": 0.5,
    "final_delay_p50_s": 0.15,
    "final_after_vad_p50_s": 0.15,
    "eou_delay_p50_s": 0.3,
    "false_cutoff_rate": 0.02,
}


@dataclass
class Item:
    name: str
    text: str
    audio: np.ndarray  # float32 16 kHz mono
    speech_end_s: float
    speech_start_s: float = 0.0


@dataclass
class RunResult:
    final_text: str = ""
    words: list = field(default_factory=list)  # final pass words (Word) for partial latency
    partials: list = field(default_factory=list)  # (virtual time, text)
    finals: list = field(default_factory=list)  # (virtual time, FinalTranscript)
    turns: list = field(default_factory=list)  # (virtual time, EndOfTurn)
    speech_ends: list = field(default_factory=list)  # (virtual time, SpeechEnded): when the VAD confirmed it
    scores: list = field(default_factory=list)  # (virtual time delivered, text, EOU probability)
    asr_compute_s: float = 0.0
    asr_passes: int = 0
    eou_compute_s: list = field(default_factory=list)
    acoustic: list = field(default_factory=list)  # (virtual time delivered, P(complete), compute s)


@dataclass(frozen=True, slots=True)
class AsrBenchOptions:
    """The options of `headstart bench asr`; their meaning and defaults: its `--help` (headstart/cli/)."""

    json: bool
    input_dir: str | None
    model: str | None
    endpointing: str
    llm: str | None
    quantize: str | None
    llm_dtype: str | None
    eou: str
    eou_head: str | None
    eou_thresholds: str
    acoustic_model: str | None
    acoustic_mode: str | None
    acoustic_veto_below: float | None
    no_streaming: bool
    limit: int | None
    no_pauses: bool
    pauses_only: bool
    timing: str
    threads: int
    seed: int


# -- data ------------------------------------------------------------------------------------------
def load_items(input_dir: str | None) -> list[Item]:
    """The bench data (true speech bounds from the data index) or a folder with transcripts.tsv.

    Raises:
        FileNotFoundError: DIR has no transcripts.tsv or a listed file is missing.
        ValueError: transcripts.tsv lacks the `file` and `text` columns.
    """
    from headstart.audio import read_wav

    if input_dir is None:
        from headstart.corpus.recordings import recordings

        return [Item(r.name, r.text, r.read(), r.speech_end_s, r.speech_start_s) for r in recordings()]
    root = Path(input_dir)
    index = root / "transcripts.tsv"
    if not index.is_file():
        raise FileNotFoundError(f"{index} not found: --input-dir needs WAVs and a transcripts.tsv (file, text)")
    with index.open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    if not rows or len(rows[0]) < 2:
        raise ValueError(f"{index}: the header row needs at least two columns (file, text)")
    items = []
    for row in rows[1:]:
        if len(row) < 2 or not row[0].strip():
            continue
        path = root / row[0]
        if not path.is_file():
            raise FileNotFoundError(f"{path} (listed in {index}) not found")
        audio = read_wav(path, sample_rate=SR)
        start, end = _speech_bounds(audio)
        items.append(Item(path.stem, row[1], audio, end, start))
    if not items:
        raise ValueError(f"{index} lists no recordings")
    return items


def _speech_bounds(audio: np.ndarray) -> tuple[float, float]:
    """Silero's first speech start and last speech end (padding removed), for recordings without an index."""
    from headstart.config import VADConfig
    from headstart.events import SpeechEnded, SpeechStarted
    from headstart.voice.vad import SileroVAD

    config = VADConfig()
    vad = SileroVAD(config)
    events = vad.push(audio) + vad.flush()
    starts = [e.audio_s for e in events if isinstance(e, SpeechStarted)]
    ends = [e.audio_s for e in events if isinstance(e, SpeechEnded)]
    if not ends:
        return 0.0, audio.shape[0] / SR
    return starts[0] + config.speech_pad_s, max(ends[-1] - config.speech_pad_s, 0.0)


def room_noise(audio: np.ndarray, speech_start_s: float, seconds: float, rng: np.random.Generator) -> np.ndarray:
    """`seconds` of noise at the recording's own background level (RMS of its leading non-speech,
    at least -70 dBFS), white: a room, not digital zero."""
    lead = audio[: max(int(speech_start_s * SR) - 800, 0)]
    rms = float(np.sqrt(np.mean(lead.astype(np.float64) ** 2))) if lead.size >= 800 else 0.0
    rms = max(rms, 10 ** (-70 / 20))
    return (rng.standard_normal(int(round(seconds * SR))) * rms).astype(np.float32)


@dataclass
class PauseItem:
    item: Item
    audio: np.ndarray
    pause_start_s: float
    pause_end_s: float
    kind: str  # "noise" or "zero"


def pause_set(items: list[Item], asr: Any, seed: int) -> list[PauseItem]:
    """For each item of >= 4 reference words: a 0.6-1.5 s pause at the word gap nearest the middle
    (whisper word timestamps of the whole recording), filled with room noise, and again with zeros."""
    rng = random.Random(seed)
    noise_rng = np.random.default_rng(seed)
    out = []
    for item in items:
        if len(item.text.replace("...", " ").split()) < 4:
            continue
        words = asr.transcribe(item.audio).words
        if len(words) < 4:
            continue
        k = len(words) // 2
        gap_s = (words[k - 1].end_s + words[k].start_s) / 2
        cut = int(round(gap_s * SR))
        pause_s = rng.uniform(0.6, 1.5)
        for kind in ("noise", "zero"):
            fill = (
                room_noise(item.audio, item.speech_start_s, pause_s, noise_rng)
                if kind == "noise"
                else np.zeros(int(round(pause_s * SR)), np.float32)
            )
            audio = np.concatenate([item.audio[:cut], fill, item.audio[cut:]])
            out.append(PauseItem(item, audio, cut / SR, cut / SR + pause_s, kind))
    return out


# -- audio-time simulation ---------------------------------------------------------------------------
class _Job:
    def __init__(self, submit_s: float) -> None:
        self.submit_s = submit_s
        self.compute_s = 0.0
        self.computed = threading.Event()
        self.release = threading.Event()
        self.future: asyncio.Future | None = None

    @property
    def end_s(self) -> float:
        return self.submit_s + self.compute_s


class _Sim:
    """Audio-time driver: `now_s` is the audio pushed so far; jobs finish at submit + compute time."""

    def __init__(self, timing: str = "wall") -> None:
        self.now_s = 0.0
        self.asr_job: _Job | None = None
        self.eou_jobs: list[_Job] = []
        self.llm_free_s = 0.0
        self.acoustic_free_s = 0.0
        # "wall": a job costs its wall time (what this machine gives now, other users' load included);
        # "cpu": its process CPU time, jobs run one at a time (what an otherwise idle core would give)
        self.timing = timing
        self.lock = threading.Lock()

    def measure(self, fn):
        """Run `fn()`; return (its result, its cost in seconds under `timing`)."""
        if self.timing == "cpu":
            with self.lock:
                started = time.process_time()
                out = fn()
                return out, time.process_time() - started
        started = time.perf_counter()
        out = fn()
        return out, time.perf_counter() - started


class _PacedASR:
    """Runs the real ASR at once (in the ASR executor), then holds the result until the simulation
    reaches the pass' start + its compute time."""

    def __init__(self, asr: Any, sim: _Sim, result: RunResult) -> None:
        self.asr, self.sim, self.result = asr, sim, result
        self.listening = asr.listening  # the engine's streaming settings (Listener)

    def transcribe(self, samples: np.ndarray, offset_s: float = 0.0, prompt: str | None = None):
        job = _Job(self.sim.now_s)
        self.sim.asr_job = job
        try:
            out, job.compute_s = self.sim.measure(
                lambda: self.asr.transcribe(samples, offset_s, prompt=prompt) if prompt else self.asr.transcribe(samples, offset_s)
            )
            self.result.asr_compute_s += job.compute_s
            self.result.asr_passes += 1
        finally:
            job.computed.set()
        job.release.wait()
        return out

    def warmup(self) -> None:
        """The engine's own (a `Transcriber` like any the listener takes)."""
        self.asr.warmup()


async def _advance(sim: _Sim, listener: Any, target_s: float) -> None:
    """Deliver, in order, every ASR/EOU result due at or before `target_s`; then now = target_s."""
    while True:
        while listener.asr_busy and sim.asr_job is None:  # noqa: ASYNC110 - the ASR thread sets no event; a pass scheduled but not yet on its thread
            await asyncio.sleep(0.0005)
        job = sim.asr_job
        if job is not None:
            await asyncio.to_thread(job.computed.wait)
        candidates = [j for j in ([job] if job is not None else []) + sim.eou_jobs if j.end_s <= target_s]
        if not candidates:
            break
        first = min(candidates, key=lambda j: j.end_s)
        sim.now_s = max(sim.now_s, first.end_s)
        if first is job:
            sim.asr_job = None
            job.release.set()
        else:
            sim.eou_jobs.remove(first)
            first.future.set_result(None)  # type: ignore[union-attr]
        if first is job:
            await listener.settle()
        for _ in range(4):  # let the consumer stamp the events with this time
            await asyncio.sleep(0)
    sim.now_s = max(sim.now_s, target_s)


def _make_scorer(sim: _Sim, estimator: Any, messages: list, result: RunResult):
    async def score(text: str) -> float:
        # blocking, measured; delivered at audio time
        est, compute_s = sim.measure(lambda: estimator.estimate(messages, text))
        job = _Job(max(sim.now_s, sim.llm_free_s))
        job.compute_s = compute_s
        job.computed.set()
        sim.llm_free_s = job.end_s
        job.future = asyncio.get_running_loop().create_future()
        sim.eou_jobs.append(job)
        result.eou_compute_s.append(compute_s)
        await job.future
        result.scores.append((sim.now_s, text, est.probability))
        return est.probability

    return score


def _make_acoustic_scorer(sim: _Sim, model: Any, result: RunResult):
    """The acoustic model on its own worker (one thread), delivered at audio time like the EOU calls."""
    async def score(samples: np.ndarray) -> float:
        probability, compute_s = sim.measure(lambda: model.completion_probability(samples))
        job = _Job(max(sim.now_s, sim.acoustic_free_s))
        job.compute_s = compute_s
        job.computed.set()
        sim.acoustic_free_s = job.end_s
        job.future = asyncio.get_running_loop().create_future()
        sim.eou_jobs.append(job)
        await job.future
        result.acoustic.append((sim.now_s, probability, compute_s))
        return probability

    return score


async def _stream(audio: np.ndarray, asr: Any, config: Any, scorer_parts: tuple | None, timing: str = "wall",
                  acoustic: Any = None) -> RunResult:
    from headstart.audio import AudioFrame
    from headstart.events import EndOfTurn, FinalTranscript, PartialTranscript, SpeechEnded
    from headstart.session.listening import build_listener
    from headstart.voice.listener import make_asr_executor

    result = RunResult()
    sim = _Sim(timing)
    paced = _PacedASR(asr, sim, result)
    scorer = _make_scorer(sim, scorer_parts[0], scorer_parts[1], result) if scorer_parts else None
    executor = make_asr_executor()
    # the listener and endpointer a session builds (`config.endpoint`: resolved by `endpoint_config`)
    listener = build_listener(config, paced, executor, config.endpoint, eou_scorer=scorer,
                              acoustic_scorer=_make_acoustic_scorer(sim, acoustic, result) if acoustic is not None else None)

    texts: list[str] = []  # one per turn: a later final of a turn covers all of it (speech resumed)
    turn_open = [False]

    async def consume() -> None:
        async for event in listener:
            if isinstance(event, PartialTranscript):
                result.partials.append((sim.now_s, event.text))
            elif isinstance(event, FinalTranscript):
                result.finals.append((sim.now_s, event))
                if turn_open[0]:
                    texts[-1] = event.text
                else:
                    texts.append(event.text)
                    turn_open[0] = True
            elif isinstance(event, EndOfTurn):
                result.turns.append((sim.now_s, event))
                turn_open[0] = False
            elif isinstance(event, SpeechEnded):
                result.speech_ends.append((sim.now_s, event))

    consumer = asyncio.create_task(consume())
    step = int(FRAME_S * SR)
    try:
        for start in range(0, audio.shape[0], step):
            frame = audio[start : start + step]
            await _advance(sim, listener, start / SR)
            await listener.push(AudioFrame(frame, SR))
            sim.now_s = (start + frame.shape[0]) / SR
            for _ in range(4):
                await asyncio.sleep(0)
        await _advance(sim, listener, float("inf"))
        ending = asyncio.create_task(listener.end_input())
        while not ending.done():
            await _advance(sim, listener, float("inf"))
            await asyncio.sleep(0.001)
        await consumer
    finally:
        if sim.asr_job is not None:
            sim.asr_job.release.set()
        executor.shutdown(wait=True)
    result.final_text = " ".join(text for text in texts if text)
    return result


# -- metrics -------------------------------------------------------------------------------------------
STAGES = ("vad_end", "final", "final_eou", "decision", "end_of_turn")


def _stage_times(res: RunResult, t_avail: float) -> dict[str, float]:
    """When each step towards the first end of turn happened (virtual time): the VAD confirmed the
    speech end, the final transcript was ready, the EOU probability of its text was known, the
    endpointer decided (`EndOfTurn.audio_s`), the EndOfTurn was out. A step that did not happen
    before the end of turn takes the end of turn's time."""
    eot = res.turns[0][1]
    vad = [t for t, _ in res.speech_ends if t <= t_avail]
    finals = [(t, f) for t, f in res.finals if t <= t_avail and f.text]
    out = {"vad_end": vad[-1] if vad else t_avail}
    if finals:
        t_final, final = finals[-1]
        out["final"] = t_final
        scored = [t for t, text, _ in res.scores if text == final.text]
        out["final_eou"] = max(t_final, scored[0]) if scored else t_avail
    else:
        out["final"] = out["final_eou"] = t_avail
    out["decision"] = eot.audio_s
    out["end_of_turn"] = t_avail
    return out


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def _partial_latencies(result: RunResult, words: list) -> list[float]:
    """Word end (final pass timestamps) -> first partial (or final) whose text holds it at its position."""
    from headstart.corpus.wer import normalize_text

    seen = [(t, normalize_text(text).split()) for t, text in result.partials]
    seen += [(t, normalize_text(f.text).split()) for t, f in result.finals]
    seen.sort(key=lambda x: x[0])
    out = []
    final_norm = []
    for w in words:
        final_norm.extend(normalize_text(w.text).split() or [""])
        i = len(final_norm)
        for t, toks in seen:
            if len(toks) >= i and toks[i - 1] == final_norm[-1]:
                out.append(max(t - w.end_s, 0.0))
                break
    return out


def _load_avg() -> float | None:
    """The 1-minute load average (the CPU is shared: latencies scale with it); None where unknown."""
    import os

    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


@dataclass
class _EOUSignal:
    """The semantic EOU signal the bench scores texts with: the session's LLM and its EOU model."""

    estimator: Any  # llm/eou_head.py EOUHead or llm/eou.py EOUEstimator: `estimate(messages, text)`
    messages: list  # the chat before the user's text: the system prompt
    llm_config: Any  # the LLMConfig the engine was loaded with
    engine: Any


def _load_eou_signal(llm: str | None, quantize: str | None, llm_dtype: str | None, eou_kind: str,
                     head_path: str | None) -> _EOUSignal:
    """The session's LLM (`LLMConfig`, with these overrides) and its EOU model: the trained head (its
    file `head_path`, or the cache's or packaged one) or, with `eou_kind` "token", the end-of-turn token.
    Raises ValueError for a head file without `eou_kind` "head" or one for another LLM."""
    from dataclasses import replace

    from headstart.config import LLMConfig, ThreadPlan
    from headstart.llm.engine import LLMEngine
    from headstart.llm.eou import EOUEstimator
    from headstart.llm.eou_head import EOUHead

    llm_config = LLMConfig() if llm is None else LLMConfig(model=llm)
    if quantize is not None:
        llm_config = replace(llm_config, quantize=None if quantize == "none" else quantize)
    if llm_dtype is not None:
        llm_config = replace(llm_config, dtype=llm_dtype)
    engine = LLMEngine.from_config(llm_config, ThreadPlan(torch_threads=1))
    engine.warm_up()
    if head_path is not None and eou_kind != "head":
        raise ValueError("--eou-head needs --eou head")
    estimator: Any
    if head_path is not None:
        estimator = EOUHead(engine, head_weights(head_path, llm_config.model))
    else:
        estimator = EOUHead.load(engine, llm_config.model) if eou_kind == "head" else EOUEstimator(engine)
    messages = [{"role": "system", "content": llm_config.system_prompt}]
    # a session holds the system prompt in its KV cache already: so does the bench's first call
    estimator.estimate(messages, "Hello")
    return _EOUSignal(estimator, messages, llm_config, engine)


class _OneEOUModel:
    """The bench's EOU model where a session asks its components for one (`Components.eou_model`)."""

    def __init__(self, kind: str, model: Any) -> None:
        self._kind, self._model = kind, model

    def eou_model(self, kind: str) -> Any:
        return self._model if kind == self._kind else None


def endpoint_config(semantic: bool, eou_kind: str, eou_model: Any = None, head_thresholds: str = "trained",
                    acoustic_model: str | None = None, acoustic_mode: str | None = None,
                    acoustic_veto_below: float | None = None) -> Any:
    """The EndpointConfig the bench measures, resolved as a session resolves it (session/eou.py
    `resolve_eou`), so that the bench never measures an endpoint the server would not build.

    Args:
        semantic: `--endpointing semantic` (False: the fixed silence).
        eou_kind: "head" or "token", the scale of `eou_model`'s probabilities (`--eou`).
        eou_model: the EOU model (its trained head's calibrated thresholds apply), None: no signal.
        head_thresholds: "trained" (the head's calibration) or "config" (`--eou-thresholds`).
        acoustic_model: the acoustic end-of-turn model (None: the session's default; "none": off; off
            too without `semantic`), acoustic_mode, acoustic_veto_below: None keeps the default.
    """
    from dataclasses import replace

    from headstart.config import EndpointConfig, PipelineConfig, SessionConfig
    from headstart.session.eou import resolve_eou

    acoustic = acoustic_model or EndpointConfig().acoustic_model
    endpoint = EndpointConfig(semantic=semantic, eou_scorer=eou_kind, head_thresholds=head_thresholds,
                              acoustic_model=None if acoustic in (None, "none") or not semantic else acoustic)
    if acoustic_mode is not None:
        endpoint = replace(endpoint, acoustic_mode=acoustic_mode)
    if acoustic_veto_below is not None:
        endpoint = replace(endpoint, acoustic_veto_below=acoustic_veto_below)
    session = SessionConfig(eou=eou_kind if eou_model is not None else "none")
    return resolve_eou(_OneEOUModel(eou_kind, eou_model), PipelineConfig(endpoint=endpoint, session=session)).endpoint


@dataclass
class _Figures:
    """What the runs measured, gathered over the recordings (seconds unless named otherwise)."""

    pairs: list = field(default_factory=list)  # (reference text, final text)
    partial_lat: list = field(default_factory=list)
    final_delays: list = field(default_factory=list)
    eou_delays: list = field(default_factory=list)  # end of turn out, after the true speech end
    decision_delays: list = field(default_factory=list)  # the endpointer's decision, after it
    final_after_vad: list = field(default_factory=list)
    passes: int = 0
    stages: dict = field(default_factory=lambda: {k: [] for k in STAGES})
    complete_scores: list = field(default_factory=list)  # EOU probability each complete turn ended on
    pause_scores: list = field(default_factory=list)  # the one heard inside each pause
    asr_compute_s: float = 0.0
    audio_s: float = 0.0
    eou_costs: list = field(default_factory=list)
    acoustic_costs: list = field(default_factory=list)
    acoustic_ready: list = field(default_factory=list)  # complete turns: the pause's acoustic score, after the speech end
    # ... that came after both the VAD's end and the final's EOU and ended the turn then (on the critical path)
    acoustic_last: int = 0
    cutoffs: dict = field(default_factory=lambda: {"noise": [0, 0], "zero": [0, 0]})  # kind: [cut off, runs]


def _measure_complete(item: Item, audio: np.ndarray, res: RunResult, timer: Any, fig: _Figures) -> str:
    """Add one complete recording's run to `fig`; return its log line's tail."""
    fig.pairs.append((item.text, res.final_text))
    fig.passes += res.asr_passes
    fig.asr_compute_s += res.asr_compute_s
    fig.audio_s += audio.shape[0] / SR
    fig.eou_costs += res.eou_compute_s
    fig.acoustic_costs += [c for _, _, c in res.acoustic]
    words = list(timer.transcribe(item.audio).words) if res.final_text else []
    fig.partial_lat += _partial_latencies(res, words)
    if not res.turns:
        return " (no end of turn)"
    t_avail, eot = res.turns[0]
    final_ready = max((t for t, f in res.finals if f.text), default=t_avail)
    fig.final_delays.append(max(final_ready - eot.audio_s, 0.0))
    fig.eou_delays.append(t_avail - item.speech_end_s)
    fig.decision_delays.append(eot.audio_s - item.speech_end_s)
    # the final text's score (the turn may have ended before it came: the wait's maximum)
    final_text = next((f.text for _, f in reversed(res.finals) if f.text), "")
    scored = [score for _, text, score in res.scores if text == final_text]
    fig.complete_scores.append(scored[0] if scored else eot.eou_probability)
    times = _stage_times(res, t_avail)
    for key, t in times.items():
        fig.stages[key].append(t - item.speech_end_s)
    fig.final_after_vad.append(max(times["final"] - times["vad_end"], 0.0))
    scored_acoustic = [t for t, _p, _c in res.acoustic if t <= t_avail]
    if scored_acoustic:
        fig.acoustic_ready.append(scored_acoustic[-1] - item.speech_end_s)
        late = scored_acoustic[-1] > max(times["vad_end"], times["final_eou"]) + 1e-9
        fig.acoustic_last += int(late and times["decision"] <= scored_acoustic[-1] + FRAME_S + 1e-9)
    return (f" eot +{fig.eou_delays[-1]:.2f}s (decided +{fig.decision_delays[-1]:.2f}s, final +{fig.final_delays[-1]:.2f}s"
            f" after it, eou {fig.complete_scores[-1]:.3f})")


def _measure_pause(p: PauseItem, res: RunResult, fig: _Figures) -> str:
    """Add one pause-set run to `fig` (an end of turn decided inside the pause is a cut-off); return
    its log line."""
    cut = any(eot.audio_s < p.pause_end_s for _, eot in res.turns)
    at_pause = [score for t, _text, score in res.scores if p.pause_start_s < t < p.pause_end_s + 0.2]
    if at_pause:
        fig.pause_scores.append(at_pause[-1])
    fig.cutoffs[p.kind][0] += int(cut)
    fig.cutoffs[p.kind][1] += 1
    return (f"pause {p.kind} {p.pause_end_s - p.pause_start_s:.2f}s {p.item.name}: {'CUT OFF' if cut else 'ok'}"
            + (f" eou {at_pause[-1]:.3f}" if at_pause else ""))


def run(args: AsrBenchOptions, log=print) -> dict[str, Any]:
    """Run the benchmark; return the JSON-ready result."""
    from headstart.config import ASRConfig, PipelineConfig, VADConfig
    from headstart.voice.asr_engines import has_word_timestamps, load_asr
    from headstart.voice.endpoint import eou_thresholds

    eou_kind = args.eou
    load_before = _load_avg()
    items = load_items(args.input_dir)
    if args.limit:
        items = items[: args.limit]
    model = args.model or ASRConfig().model
    asr_config = ASRConfig(model=model, streaming=not args.no_streaming)
    asr = load_asr(asr_config, cpu_threads=args.threads)
    asr.warmup()
    # the pause set's gaps and the partial latency's word ends: Whisper's timestamps, whatever the engine
    # under test (Moonshine's word times are estimates), so that engines are compared on the same items
    timer = asr if has_word_timestamps(asr) else load_asr(ASRConfig(model="whisper-tiny.en"), cpu_threads=args.threads)
    eou = None
    if args.endpointing == "semantic":
        eou = _load_eou_signal(args.llm, args.quantize, args.llm_dtype, eou_kind,
                               args.eou_head)
    endpoint = endpoint_config(
        args.endpointing == "semantic", eou_kind, eou.estimator if eou is not None else None,
        head_thresholds="trained" if args.eou_thresholds == "head" else "config",
        acoustic_model=args.acoustic_model, acoustic_mode=args.acoustic_mode,
        acoustic_veto_below=args.acoustic_veto_below)
    acoustic = None
    if endpoint.acoustic_model:
        from headstart.voice.smart_turn import SmartTurn

        acoustic = SmartTurn.load(endpoint.acoustic_model, threads=1)
        acoustic.completion_probability(np.zeros(SR, np.float32))  # the first call pays set-up costs
    config = PipelineConfig(vad=VADConfig(), asr=asr_config, endpoint=endpoint)
    scorer_parts = (eou.estimator, eou.messages) if eou is not None else None
    noise_rng = np.random.default_rng(args.seed)
    timing = args.timing

    fig = _Figures()
    for n, item in enumerate([] if args.pauses_only else items, 1):
        audio = np.concatenate([item.audio, room_noise(item.audio, item.speech_start_s, TAIL_S, noise_rng)])
        res = asyncio.run(_stream(audio, asr, config, scorer_parts, timing, acoustic))
        log(f"[{n}/{len(items)}] {item.name}: {res.final_text!r}" + _measure_complete(item, audio, res, timer, fig))
    if not args.no_pauses:
        for p in pause_set(items, timer, args.seed):
            res = asyncio.run(_stream(
                np.concatenate([p.audio, room_noise(p.item.audio, p.item.speech_start_s, TAIL_S, noise_rng)]),
                asr, config, scorer_parts, timing, acoustic,
            ))
            log(_measure_pause(p, res, fig))
    out = _summary(fig, endpoint)
    out.update({
        "eou_quantize": getattr(eou.engine, "quantize", eou.llm_config.quantize) if eou is not None else None,
        "eou_thresholds": list(eou_thresholds(endpoint)) if eou is not None else None,
        "model": model,
        "endpointing": args.endpointing,
        "streaming": asr_config.streaming,
        "eou_llm": eou.llm_config.model if eou is not None else None,
        "eou_scorer": eou_kind if eou is not None else None,
        "eou_head": str(args.eou_head or "") or None,
        "utterances": len(items),
        "missing_end_of_turn": len(items) - len(fig.eou_delays),
        "targets": TARGETS,
        "load_avg_1m": [load_before, _load_avg()],
        "timing": f"audio-time simulation with measured {timing} compute (see module docstring)",
    })
    return out


def _summary(fig: _Figures, endpoint: Any) -> dict[str, Any]:
    """The figures of the JSON result (the run's settings are added by `run`)."""
    from headstart.corpus.wer import corpus_word_error_rate

    def r(x: float | None) -> float | None:
        return None if x is None else round(x, 4)

    cutoffs = fig.cutoffs
    total_cut = cutoffs["noise"][0] + cutoffs["zero"][0]
    total = cutoffs["noise"][1] + cutoffs["zero"][1]
    acoustic_name = endpoint.acoustic_model
    return {
        "bench": "asr",
        "wer": r(corpus_word_error_rate(fig.pairs)) if fig.pairs else None,
        "partial_p50_s": r(_percentile(fig.partial_lat, 50)),
        "partial_p90_s": r(_percentile(fig.partial_lat, 90)),
        "final_delay_p50_s": r(_percentile(fig.final_delays, 50)),
        "eou_delay_p50_s": r(_percentile(fig.eou_delays, 50)),
        "eou_delay_p90_s": r(_percentile(fig.eou_delays, 90)),
        "eou_decision_delay_p50_s": r(_percentile(fig.decision_delays, 50)),
        "false_cutoff_rate": r(total_cut / total) if total else None,
        "false_cutoff_noise": f"{cutoffs['noise'][0]}/{cutoffs['noise'][1]}",
        "false_cutoff_zero": f"{cutoffs['zero'][0]}/{cutoffs['zero'][1]}",
        "rtf": r(fig.asr_compute_s / fig.audio_s) if fig.audio_s else None,
        "eou_call_p50_s": r(_percentile(fig.eou_costs, 50)),
        "acoustic_model": acoustic_name,
        "acoustic_call_p50_s": r(_percentile(fig.acoustic_costs, 50)),
        "acoustic_mode": endpoint.acoustic_mode if acoustic_name else None,
        "acoustic_veto_below": endpoint.acoustic_veto_below if acoustic_name and endpoint.acoustic_mode == "veto" else None,
        # the pause's acoustic score on complete turns: p50 s after the true speech end, and how many
        # came after both the VAD's end and the final's EOU and ended the turn then (it delayed it)
        "acoustic_ready_p50_s": r(_percentile(fig.acoustic_ready, 50)),
        "acoustic_last": f"{fig.acoustic_last}/{len(fig.acoustic_ready)}" if fig.acoustic_ready else None,
        # where the end-of-turn delay goes (complete recordings, p50 seconds after the true speech end)
        "stages_p50_s": {k: r(_percentile(v, 50)) for k, v in fig.stages.items()},
        # the final transcript after the VAD's end of speech (the consumer's wait for it), and the
        # complete turns that ended within 0.6 s of the speech (the EOU scores are bimodal: the p50 sits
        # between the turns that end at once and those that wait max_silence_s)
        "final_after_vad_p50_s": r(_percentile(fig.final_after_vad, 50)),
        "final_after_vad_p90_s": r(_percentile(fig.final_after_vad, 90)),
        "turns_ended_within_0_6_s": f"{sum(d <= 0.6 for d in fig.eou_delays)}/{len(fig.eou_delays)}",
        "asr_passes": fig.passes,
        # the EOU probability a complete recording's turn ended on, and the one heard inside each pause
        "eou_scores": {"complete": sorted(round(x, 4) for x in fig.complete_scores),
                       "pause": sorted(round(x, 4) for x in fig.pause_scores)},
    }


def head_weights(path: str, model: str) -> Any:
    """The EOU head of file `path` (`--eou-head`) for LLM preset `model`.

    Raises:
        FileNotFoundError: no file at `path`.
        ValueError: not a head file, or a head trained for another LLM (its hidden states differ).
    """
    from headstart.llm.eou_head import EOUHeadWeights

    weights = EOUHeadWeights.load(path)
    if weights.model != model:
        raise ValueError(f"{path} is an EOU head for {weights.model!r}, the EOU LLM is {model!r}")
    return weights


def main(args: AsrBenchOptions) -> int:
    """Entry point of `headstart bench asr`. Returns the exit status (2: data or model missing)."""
    from headstart.models.store import ModelError

    log = (lambda *a, **k: None) if args.json else print
    try:
        out = run(args, log=log)
    except (FileNotFoundError, ValueError, ModelError) as exc:
        print(f"bench asr: {exc}")
        return 2
    if not args.json:
        print()
        for key in ("wer", "partial_p50_s", "partial_p90_s", "final_delay_p50_s", "final_after_vad_p50_s",
                    "final_after_vad_p90_s", "eou_delay_p50_s", "eou_delay_p90_s", "eou_decision_delay_p50_s",
                    "turns_ended_within_0_6_s", "false_cutoff_rate", "rtf", "asr_passes", "eou_call_p50_s"):
            target = TARGETS.get(key)
            print(f"  {key:26s} {out[key]!s:>8}" + (f"   (target <= {target})" if target is not None else ""))
    print(json.dumps(out))
    return 0
