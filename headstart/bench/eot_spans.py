"""The spans of `headstart bench eot` and their probability traces, built once with the real models.

A *span* is one silence inside or after a user turn (one packaged recording): every silence of at
least 0.1 s before the turn's true end of speech is a *hold*, the silence after it is the *end*
(eot-bench's labelling). Three kinds of hold:

* `natural`: the recording's own silences, found on the energy envelope the corpus index uses
  (`corpus/make_speech_index.py`: 10 ms RMS of the 200 Hz high-passed signal against its threshold):
  a run of sub-threshold windows of >= 0.1 s between the speech start and end;
* `pause_set`: `headstart bench asr`'s pause set (`bench/asr.py` `pause_set`, same seed): a 0.6-1.5 s
  pause at the word gap nearest the middle, once in room noise, once in digital zero;
* `inserted`: a pause at every other word gap (whisper-tiny.en word timestamps), in room noise, of a
  length drawn uniform in 0.2-1.5 s (seeded).

Each hold is *after a sentence* when the word before it ends a sentence in whisper's text (".", "?",
"!"), else *inside a sentence*. The end's silence is the recording's tail followed by 3 s of room noise.

The trace of a span: at each re-score point s (`voice/wait_policy.RESCORE_S`, below the hold's length)
the text head's probability of the transcript (the default ASR's transcript of the audio up to the
span start plus the VAD's 0.1 s padding, scored by the default LLM's trained head with the session's
system prompt; constant across a silence, as no word is added) and Smart Turn v3.2's probability of
the audio up to the span start + s. Written to a JSON file (`headstart/bench/data/eot_traces.json` is
the committed one) so the policy sweep needs no model.
"""

from __future__ import annotations

import csv
import json
import random
import time
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

SR = 16000
MIN_SILENCE_S = 0.1  # eot-bench's span set: every silence of at least 100 ms
END_TAIL_S = 3.0
INSERTED_PAUSE_S = (0.2, 1.5)
SENTENCE_END = (".", "?", "!")
SPLITS = ("train", "heldout")


@dataclass(frozen=True, slots=True)
class Span:
    """One silence of one user turn, with its trace.

    Attributes:
        id: unique, "<recording>/<source>/<index>".
        recording: the packaged recording's name.
        split: "train" or "heldout" (`headstart/bench/data/eot_split.tsv`, per recording).
        label: "hold" (the user goes on) or "end" (the turn's true end).
        source: "end", "natural", "pause_set" or "inserted".
        fill: what fills an inserted pause, "noise" or "zero" ("" for the recording's own audio).
        after_sentence: a hold after a complete sentence (None for the end).
        start_s: where the silence starts in the span's audio (s).
        duration_s: the hold's length (s); None for the end (it lasts until the agent speaks).
        text: the ASR's transcript of the turn up to the silence.
        times_s: the re-score points (s of silence), shape (n,).
        p_text: the text head's probability at each, shape (n,).
        p_acoustic: Smart Turn's probability at each, shape (n,).
    """

    id: str
    recording: str
    split: str
    label: str
    source: str
    fill: str
    after_sentence: bool | None
    start_s: float
    duration_s: float | None
    text: str
    times_s: tuple[float, ...]
    p_text: tuple[float, ...]
    p_acoustic: tuple[float, ...]


def split_of() -> dict[str, str]:
    """Recording name -> "train" / "heldout", from `headstart/bench/data/eot_split.tsv`.

    Raises:
        ValueError: a row names another split.
    """
    path = Path(str(resources.files("headstart.bench").joinpath("data", "eot_split.tsv")))
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    out = {row["recording"]: row["split"] for row in rows}
    bad = sorted({s for s in out.values() if s not in SPLITS})
    if bad:
        raise ValueError(f"{path}: unknown splits {bad}")
    return out


def traces_path() -> Path:
    """The committed trace file."""
    return Path(str(resources.files("headstart.bench").joinpath("data", "eot_traces.json")))


def load_spans(path: str | Path | None = None) -> tuple[list[Span], dict[str, Any]]:
    """The spans of a trace file (default: the committed one) and its header (models, date, commit).

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a trace file.
    """
    p = Path(path) if path is not None else traces_path()
    data = json.loads(p.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or "spans" not in data:
        raise ValueError(f"{p} is not an eot trace file (no 'spans')")
    spans = []
    for row in data["spans"]:
        spans.append(Span(**{**row, "times_s": tuple(row["times_s"]), "p_text": tuple(row["p_text"]),
                             "p_acoustic": tuple(row["p_acoustic"])}))
    header = {k: v for k, v in data.items() if k != "spans"}
    return spans, header


def save_spans(spans: list[Span], header: dict[str, Any], path: str | Path) -> Path:
    """Write spans and a header to a trace file (JSON, floats rounded to 4 decimals)."""
    rows = []
    for span in spans:
        row = asdict(span)
        for key in ("p_text", "p_acoustic"):
            row[key] = [round(float(x), 4) for x in row[key]]
        row["times_s"] = list(row["times_s"])
        row["start_s"] = round(span.start_s, 3)
        row["duration_s"] = None if span.duration_s is None else round(span.duration_s, 3)
        rows.append(row)
    p = Path(path)
    p.write_text(json.dumps({**header, "spans": rows}, indent=None, separators=(",", ":")) + "\n", encoding="utf-8")
    return p


def natural_silences(audio: np.ndarray, speech_start_s: float, speech_end_s: float,
                     min_silence_s: float = MIN_SILENCE_S) -> list[tuple[float, float]]:
    """(start, end) s of the silences of at least `min_silence_s` inside the speech, on the energy
    envelope of `corpus/make_speech_index.py` (10 ms windows below its threshold)."""
    from headstart.corpus import make_speech_index as index

    env = index.envelope(audio, index.vad_regions(audio))
    window = index.WINDOW_S
    first, last = int(round(speech_start_s / window)), int(round(speech_end_s / window))
    out = []
    previous = None
    for j in np.flatnonzero(env.active):
        if j < first or j >= last:
            continue
        if previous is not None and (j - previous - 1) * window >= min_silence_s - 1e-9:
            out.append(((previous + 1) * window, j * window))
        previous = int(j)
    return out


@dataclass
class _Hold:
    source: str
    fill: str
    audio: np.ndarray
    start_s: float
    duration_s: float
    after_sentence: bool


def _word_gaps(words: list) -> list[tuple[int, float]]:
    """(index of the word after the gap, the gap's midpoint s) for each gap between two words (not
    inside one: whisper splits "ill-disposed" into pieces without a leading space)."""
    return [(k, (words[k - 1].end_s + words[k].start_s) / 2) for k in range(1, len(words))
            if words[k].text.startswith(" ")]


def _ends_sentence(words: list, k: int) -> bool:
    return words[k - 1].text.strip().endswith(SENTENCE_END) if k > 0 else False


def _levels_db(audio: np.ndarray) -> np.ndarray:
    """10 ms RMS levels (dBFS) of the 200 Hz high-passed signal (the corpus index's envelope)."""
    from headstart.corpus import make_speech_index as index

    return index.rms_db(index.high_pass(audio), int(index.WINDOW_S * SR))


def _quietest(level_db: np.ndarray, gap_s: float, search_s: float = 0.12) -> int:
    """The sample to cut at: the middle of the quietest 10 ms window within `search_s` of a whisper gap
    (its word times are off by up to ~0.1 s, so a cut at the gap itself can split a word)."""
    lo = max(0, int((gap_s - search_s) / 0.01))
    hi = min(len(level_db), int((gap_s + search_s) / 0.01) + 1)
    if hi <= lo:
        return int(round(gap_s * SR))
    j = lo + int(np.argmin(level_db[lo:hi]))
    return int(round((j + 0.5) * 0.01 * SR))


def _holds(item: Any, words: list, pause_items: list, rng: random.Random, noise_rng: np.random.Generator) -> list[_Hold]:
    from headstart.bench.asr import room_noise

    out = []
    for start, end in natural_silences(item.audio, item.speech_start_s, item.speech_end_s):
        mid = (start + end) / 2
        before = sum(1 for w in words if w.end_s <= mid)
        out.append(_Hold("natural", "", item.audio, start, end - start, _ends_sentence(words, before)))
    middle = None
    for p in pause_items:
        if p.item.name == item.name:
            k = sum(1 for w in words if w.end_s <= p.pause_start_s)
            middle = k
            out.append(_Hold("pause_set", p.kind, p.audio, p.pause_start_s, p.pause_end_s - p.pause_start_s,
                             _ends_sentence(words, k)))
    level = _levels_db(item.audio)
    for k, gap_s in _word_gaps(words):
        if k == middle:
            continue
        pause_s = rng.uniform(*INSERTED_PAUSE_S)
        cut = _quietest(level, gap_s)
        fill = room_noise(item.audio, item.speech_start_s, pause_s, noise_rng)
        audio = np.concatenate([item.audio[:cut], fill, item.audio[cut:]])
        out.append(_Hold("inserted", "noise", audio, cut / SR, pause_s, _ends_sentence(words, k)))
    return out


def build_spans(seed: int = 0, limit: int | None = None, log: Any = print) -> tuple[list[Span], dict[str, Any]]:
    """Build every span of the packaged recordings and score its trace with the default models
    (`ASRConfig().model`, `LLMConfig().model` with its trained head, Smart Turn v3.2), one thread each.

    Args:
        seed: the pause set's seed (`headstart bench asr --seed`, 0) and the inserted pauses'.
        limit: only the first N recordings (a quick run).

    Raises:
        headstart.models.store.ModelNotPreparedError: a model is not prepared (names the command).
    """
    from headstart.bench.asr import _load_eou_signal, load_items, pause_set, room_noise
    from headstart.config import ASRConfig
    from headstart.voice.asr_engines import load_asr
    from headstart.voice.smart_turn import SmartTurn
    from headstart.voice.wait_policy import RESCORE_S

    started = time.perf_counter()
    splits = split_of()
    items = load_items(None)
    if limit:
        items = items[:limit]
    asr_config = ASRConfig()
    asr = load_asr(asr_config, cpu_threads=1)
    asr.warmup()
    timer = load_asr(ASRConfig(model="whisper-tiny.en"), cpu_threads=1)
    eou = _load_eou_signal(None, None, None, "head", None)
    acoustic = SmartTurn.load(threads=1)
    rng = random.Random(seed + 1)
    noise_rng = np.random.default_rng(seed + 1)
    tail_rng = np.random.default_rng(seed)
    pauses = pause_set(items, timer, seed)
    text_scores: dict[str, float] = {}

    def text_probability(text: str) -> float:
        if text not in text_scores:
            text_scores[text] = float(eou.estimator.estimate(eou.messages, text).probability)
        return text_scores[text]

    def trace(idx: str, item: Any, label: str, source: str, fill: str, after: bool | None, audio: np.ndarray,
              start_s: float, duration_s: float | None) -> Span:
        pad = int(round((start_s + 0.1) * SR))
        text = asr.transcribe(audio[:pad]).text.strip()
        times = tuple(t for t in RESCORE_S if duration_s is None or t < duration_s)
        p_text = text_probability(text)
        p_acoustic = tuple(acoustic.completion_probability(audio[: int(round((start_s + t) * SR))]) for t in times)
        return Span(f"{item.name}/{idx}", item.name, splits[item.name], label, source, fill, after, start_s,
                    duration_s, text, times, tuple(p_text for _ in times), p_acoustic)

    spans: list[Span] = []
    for n, item in enumerate(items, 1):
        words = list(timer.transcribe(item.audio).words)
        end_audio = np.concatenate([item.audio, room_noise(item.audio, item.speech_start_s, END_TAIL_S, tail_rng)])
        end = trace("end", item, "end", "end", "", None, end_audio, item.speech_end_s, None)
        spans.append(end)
        for i, hold in enumerate(_holds(item, words, pauses, rng, noise_rng)):
            spans.append(trace(f"{hold.source}-{i}", item, "hold", hold.source, hold.fill, hold.after_sentence,
                               hold.audio, hold.start_s, hold.duration_s))
        log(f"[{n}/{len(items)}] {item.name}: {sum(s.recording == item.name for s in spans)} spans, "
            f"end {end.text!r} p_text {end.p_text[0]:.3f}")
    header = {
        "about": "headstart bench eot traces: one row per silence span (headstart/bench/eot_spans.py)",
        "asr": asr_config.model,
        "eou_llm": eou.llm_config.model,
        "eou_head_thresholds": list(getattr(eou.estimator.weights, "thresholds", None) or []),
        "acoustic": "smart-turn-v3.2",
        "rescore_s": list(RESCORE_S),
        "seed": seed,
        "built": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "build_s": round(time.perf_counter() - started, 1),
    }
    return spans, header
