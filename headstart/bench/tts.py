"""`headstart bench tts [--json]`: time to first audio of the first clause, RTF and a streamed reply's
first audio and stalls, per TTS engine.

The text is a set of typical assistant replies (`REPLIES`; `--text` replaces them with one). Each reply
is streamed into the real ClauseChunker as an LLM would stream it, one pseudo-token at a time (a word or
a run of punctuation with its leading space, `pseudo_tokens`), so the chunks are the ones a live session
speaks; each chunk is normalised as in a session. Then, `--runs` times, every chunk of every reply is
synthesised and timed:
  - TTFA: wall time from calling `synthesize(first chunk)` to its first audio array (Piper: the whole
    chunk, it synthesises a chunk in one call); the median over runs, then over replies;
  - RTF: time to synthesise all the replies' chunks (each chunk's median over runs, summed) / seconds
    of audio produced;
  - stream: a replay of each reply with tokens arriving every `--tpot-s` seconds (0.1 s: the default
    LLM, int8 qwen2.5-coder-0.5b, measured 90 ms) and the measured per-chunk synthesis times on one
    synthesis thread: `first_audio_s` (first token -> first audio) and `stall_s` (silence inside the
    reply while playback waits for the next chunk), medians over replies.
Each figure also comes as the calling thread's CPU time (`ttfa_cpu_s`, `rtf_cpu`): on a shared machine
the wall times grow with the load, the CPU time of an engine that computes on the calling thread
(Piper with one onnxruntime thread) much less; for espeak (a subprocess) and coqui (a worker process)
it is ~0 and means nothing. Engines load (and warm up) before timing; their load time is shown apart. `--compare-policies 4/8,off`
also times other first-chunk policies (MIN/MAX words, or off: whole sentences) in the same runs,
interleaved, so they share the machine's load alike (JSON `compared_policies`).

coqui has no real checkpoint here: without `--coqui-model` a tiny VITS with random weights is built in
the coqui venv (`make coqui-env`) and timed; its row is marked `"random_weights": true` (its speed says
nothing about a real model's, only about the worker path's overhead).

The last line printed is one JSON object:
    {"bench": "tts", "engines": {"piper": {"ttfa_s", "rtf", "stream": {...}, ...}, "coqui": {...,
     "random_weights": true}, "espeak": {...}, "hibari": {...}}, "targets": {...}, "first_clauses": [...],
     ...}
An engine that is not available gets {"skipped": "<why>"} instead of figures.
"""

from __future__ import annotations

import json
import re
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENGINES = ("piper", "coqui", "espeak", "hibari")
# Typical replies of a voice assistant: openings with and without an interjection, a comma late or
# never, a number in the first words.
REPLIES = (
    "Sure, here is the plan for today. First, we meet Dr. Lee at 9:30 am, and lunch costs about $12.50. "
    "After that we walk to the park by the river, and we should be home by six.",
    "The capital of Australia is Canberra, not Sydney as many people think. It was chosen as a compromise "
    "between Sydney and Melbourne.",
    "I think the best way to learn a new language is to practise a little every day. Start with common "
    "words, then read short stories out loud.",
    "You can reset your password from the settings page. Open Account, choose Security, and follow the "
    "steps there.",
    "Good question! Water boils at 100 degrees Celsius at sea level, but at a lower temperature in the "
    "mountains.",
    "Tomorrow will be mostly sunny with a high of 24 degrees and a light breeze from the west.",
    "Of course, I can help you with that. What would you like to know first?",
)
DEFAULT_TEXT = REPLIES[0]
TARGETS = {"piper": {"ttfa_s": 0.2, "rtf": 0.15}}
_PSEUDO_TOKEN_RE = re.compile(r"\s*(?:\w+|[^\w\s]+)|\s+")


@dataclass(frozen=True, slots=True)
class TTSBenchOptions:
    """The options of `headstart bench tts`; their meaning and defaults: its `--help` (headstart/cli/)."""

    json: bool
    engines: str
    runs: int
    threads: int
    text: str | None
    tpot_s: float
    first_chunk_min_words: int
    first_chunk_max_words: int
    compare_policies: str | None
    coqui_model: str | None
    coqui_config: str | None
    coqui_python: str | None


def pseudo_tokens(text: str) -> list[str]:
    """Split `text` the way an LLM streams it, roughly: a word or a run of punctuation, each with its
    leading whitespace ("Sure, here" -> ["Sure", ",", " here"]). Joined, they give `text` back."""
    return _PSEUDO_TOKEN_RE.findall(text)


@dataclass(frozen=True, slots=True)
class StreamedChunk:
    """One chunk of a streamed reply: its spoken (normalised) text and the token step that emitted it
    (0 = the first token; len(tokens) = the end of the reply)."""

    spoken: str
    ready_step: int


def stream_chunks(text: str, config: Any = None) -> list[StreamedChunk]:
    """Stream `text` pseudo-token by pseudo-token into a ClauseChunker(config) and normalise each chunk;
    chunks that normalise to nothing are left out."""
    from headstart.tts.chunker import ClauseChunker
    from headstart.tts.normalize import normalize_text

    chunker = ClauseChunker(config)
    tokens = pseudo_tokens(text)
    out: list[StreamedChunk] = []
    for step, token in enumerate(tokens):
        out += [StreamedChunk(normalize_text(c), step) for c in chunker.push(token)]
    out += [StreamedChunk(normalize_text(c), len(tokens)) for c in chunker.flush()]
    return [c for c in out if c.spoken]


def _chunks(text: str) -> list[str]:
    return [c.spoken for c in stream_chunks(text)]


def replay_stream(
    chunks: list[StreamedChunk], synth_s: list[float], first_audio_s: list[float], audio_s: list[float], tpot_s: float
) -> dict[str, float]:
    """Replay one streamed reply on a virtual clock (no sleeping): token k arrives at k * tpot_s, chunks
    are synthesised in order on one thread (chunk i takes `synth_s[i]`, its first audio after
    `first_audio_s[i]`) and played back to back (chunk i lasts `audio_s[i]`).

    Returns `first_audio_s` (first token -> first audio), `stall_s` (playback waiting for audio after
    the first audio), `end_s` (first token -> end of playback), all in seconds.
    """
    if not chunks:
        raise ValueError("nothing to speak: the reply normalises to no chunks")
    synth_free = 0.0
    play_end: float | None = None
    first: float | None = None
    stall = 0.0
    for chunk, syn, fa, dur in zip(chunks, synth_s, first_audio_s, audio_s, strict=True):
        start = max(chunk.ready_step * tpot_s, synth_free)
        synth_free = start + syn
        audio_at = start + fa
        if play_end is None:
            first = audio_at
            play_end = audio_at + dur
            continue
        stall += max(0.0, audio_at - play_end)
        play_end = max(audio_at, play_end) + dur
    assert first is not None and play_end is not None
    return {"first_audio_s": first, "stall_s": stall, "end_s": play_end}


def measure(synth: Any, chunks: list[str], runs: int) -> dict[str, float]:
    """Time `synth` on one reply's `chunks` `runs` times. Returns median `ttfa_s` (first chunk, call ->
    first array), `rtf` (whole reply: the chunks' median synthesis s summed / audio s), `audio_s`."""
    if not chunks:
        raise ValueError("nothing to speak: the text normalises to no chunks")
    per = measure_chunks(synth, [chunks], runs)[0]
    total_audio = sum(c["audio_s"] for c in per)
    return {"ttfa_s": per[0]["first_audio_s"], "rtf": sum(c["synth_s"] for c in per) / total_audio,
            "audio_s": total_audio}


def measure_chunks(synth: Any, replies: list[list[str]], runs: int) -> list[list[dict[str, float]]]:
    """Synthesise every chunk of every reply, `runs` times (interleaved: run 1 of all, then run 2...).

    Returns per reply, per chunk: median `first_audio_s` (call -> first array), median `synth_s`
    (call -> last array), the same as CPU time of the calling thread (`first_audio_cpu_s`,
    `synth_cpu_s`: load-independent for an engine computing on that thread, as Piper with one
    onnxruntime thread does; ~0 for espeak's subprocess and coqui's worker), `audio_s`. Raises ValueError for a reply with no chunks, RuntimeError if the
    engine gives no audio for a chunk.
    """
    if not replies or any(not chunks for chunks in replies):
        raise ValueError("nothing to speak: the text normalises to no chunks")
    firsts: dict[tuple[int, int], list[float]] = {}
    walls: dict[tuple[int, int], list[float]] = {}
    cpu_firsts: dict[tuple[int, int], list[float]] = {}
    cpus: dict[tuple[int, int], list[float]] = {}
    audio: dict[tuple[int, int], float] = {}
    for _ in range(max(1, runs)):
        for r, chunks in enumerate(replies):
            for i, chunk in enumerate(chunks):
                num_samples = 0
                first: float | None = None
                cpu_first = 0.0
                start, cpu_start = time.perf_counter(), time.thread_time()
                for array in synth.synthesize(chunk):
                    if first is None:
                        first = time.perf_counter() - start
                        cpu_first = time.thread_time() - cpu_start
                    num_samples += int(array.shape[0])
                wall = time.perf_counter() - start
                cpu = time.thread_time() - cpu_start
                if first is None or num_samples == 0:
                    raise RuntimeError(f"{synth.name} produced no audio for the chunk {chunk!r}")
                firsts.setdefault((r, i), []).append(first)
                walls.setdefault((r, i), []).append(wall)
                cpu_firsts.setdefault((r, i), []).append(cpu_first)
                cpus.setdefault((r, i), []).append(cpu)
                audio[(r, i)] = num_samples / synth.sample_rate
    return [
        [
            {"first_audio_s": statistics.median(firsts[(r, i)]), "synth_s": statistics.median(walls[(r, i)]),
             "first_audio_cpu_s": statistics.median(cpu_firsts[(r, i)]),
             "synth_cpu_s": statistics.median(cpus[(r, i)]), "audio_s": audio[(r, i)]}
            for i in range(len(chunks))
        ]
        for r, chunks in enumerate(replies)
    ]


def summarize(streamed: list[list[StreamedChunk]], timed: list[list[dict[str, float]]], tpot_s: float) -> dict[str, Any]:
    """The engine's figures from `measure_chunks` output: `ttfa_s` (median over replies of the first
    chunk's TTFA), `ttfa_max_s`, `rtf` (all chunks: synthesis s / audio s), `audio_s`, and `stream`
    (median `first_audio_s`, `stall_s` over replies at `tpot_s`)."""
    ttfas = [t[0]["first_audio_s"] for t in timed]
    synth_total = sum(c["synth_s"] for t in timed for c in t)
    cpu_total = sum(c.get("synth_cpu_s", 0.0) for t in timed for c in t)
    audio_total = sum(c["audio_s"] for t in timed for c in t)
    replays = [
        replay_stream(chunks, [c["synth_s"] for c in t], [c["first_audio_s"] for c in t],
                      [c["audio_s"] for c in t], tpot_s)
        for chunks, t in zip(streamed, timed, strict=True)
    ]
    return {
        "ttfa_s": statistics.median(ttfas),
        "ttfa_max_s": max(ttfas),
        "rtf": synth_total / audio_total,
        "ttfa_cpu_s": statistics.median(t[0].get("first_audio_cpu_s", 0.0) for t in timed),
        "rtf_cpu": cpu_total / audio_total,
        "audio_s": audio_total,
        "first_clause_audio_s": statistics.median(t[0]["audio_s"] for t in timed),
        "stream": {
            "tpot_s": tpot_s,
            "first_audio_s": statistics.median(r["first_audio_s"] for r in replays),
            "stall_s": statistics.median(r["stall_s"] for r in replays),
            "stall_max_s": max(r["stall_s"] for r in replays),
        },
    }


def _load(engine: str, args: TTSBenchOptions, workdir: Path) -> tuple[Any, dict[str, Any]]:
    from headstart.config import ThreadPlan, TTSConfig
    from headstart.tts.engines import load_synthesizer

    threads = ThreadPlan(tts_threads=args.threads)
    if engine == "piper":
        return load_synthesizer(TTSConfig(engine="piper-joe"), threads), {}
    if engine == "espeak":
        return load_synthesizer(TTSConfig(engine="espeak"), threads), {}
    if engine == "hibari":
        return load_synthesizer(TTSConfig(engine="hibari"), threads), {}
    if engine == "coqui":
        extra: dict[str, Any] = {"random_weights": args.coqui_model is None}
        model, config = args.coqui_model, args.coqui_config
        if model is None:
            model, config = _tiny_vits(workdir, args.coqui_python)
        cfg = TTSConfig(engine="coqui", coqui_model=model, coqui_config=config, coqui_python=args.coqui_python)
        return load_synthesizer(cfg, threads), extra
    raise ValueError(f"unknown engine {engine!r}: use {', '.join(ENGINES)}")


def _tiny_vits(workdir: Path, python: str | None) -> tuple[str, str]:
    import subprocess

    from headstart.tts.base import EngineNotAvailableError, TTSError
    from headstart.tts.coqui import WORKER_PATH, default_coqui_python

    interpreter = Path(python) if python else default_coqui_python()
    if not interpreter.is_file():
        raise EngineNotAvailableError(f"the coqui-tts environment is missing ({interpreter}): `make coqui-env`")
    out = workdir / "tiny-vits"
    builder = WORKER_PATH.with_name("coqui_tiny.py")
    proc = subprocess.run(
        [str(interpreter), "-I", str(builder), "vits", str(out), "--sample-rate", "22050"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        raise TTSError(f"building the tiny coqui VITS failed: {proc.stderr[-500:]}")
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    return info["model"], info["config"]


def run(args: TTSBenchOptions) -> dict[str, Any]:
    """Run the benchmark; returns the JSON-able result (see the module docstring).

    Raises:
        ValueError: an unknown engine, a bad chunker setting, or a text with nothing to say.
    """
    from headstart.config import TTSConfig

    # the JSON keys are engine families; `--tts` names ("piper-joe", "espeak-ng") are accepted too
    aliases = {"piper-joe": "piper", "espeak-ng": "espeak"}
    engines = [aliases.get(e.strip(), e.strip()) for e in args.engines.split(",") if e.strip()]
    unknown = [e for e in engines if e not in ENGINES]
    if unknown:
        raise ValueError(f"unknown engine(s) {', '.join(unknown)}: use {', '.join(ENGINES)}")
    config = TTSConfig(first_chunk_min_words=args.first_chunk_min_words,
                       first_chunk_max_words=args.first_chunk_max_words)
    others = parse_policies(getattr(args, "compare_policies", None))
    texts = [args.text] if args.text is not None else list(REPLIES)
    policies = {"main": config, **others}
    streamed_by = {name: [stream_chunks(text, cfg) for text in texts] for name, cfg in policies.items()}
    streamed = streamed_by["main"]
    if any(not chunks for chunks in streamed):
        raise ValueError("nothing to speak: the text normalises to no chunks")
    replies = [[c.spoken for c in chunks] for chunks in streamed]
    # every policy's chunks in one measure_chunks call: runs interleave, so the load is shared alike
    all_replies = [[c.spoken for c in chunks] for name in policies for chunks in streamed_by[name]]
    compared: dict[str, dict[str, Any]] = {name: {} for name in others}
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="headstart-bench-tts-") as tmp:
        for engine in engines:
            t0 = time.perf_counter()
            try:
                synth, extra = _load(engine, args, Path(tmp))
            except Exception as exc:  # an engine that is not installed/prepared is reported, not fatal
                results[engine] = {"skipped": f"{type(exc).__name__}: {exc}"}
                continue
            load_s = time.perf_counter() - t0
            try:
                timed = measure_chunks(synth, all_replies, args.runs)
                figures = summarize(streamed, timed[: len(texts)], args.tpot_s)
                for k, name in enumerate(others, start=1):
                    part = timed[k * len(texts) : (k + 1) * len(texts)]
                    compared[name][engine] = _rounded(summarize(streamed_by[name], part, args.tpot_s))
            except Exception as exc:
                results[engine] = {"skipped": f"{type(exc).__name__}: {exc}"}
                continue
            finally:
                close = getattr(synth, "close", None)
                if close is not None:
                    close()
            results[engine] = {
                **_rounded(figures),
                "load_s": round(load_s, 2),
                "sample_rate": synth.sample_rate,
                "name": synth.name,
                **extra,
            }
    result: dict[str, Any] = {
        "bench": "tts",
        "engines": results,
        "targets": TARGETS,
        "first_clause": replies[0][0],
        "first_clauses": [chunks[0] for chunks in replies],
        "replies": len(replies),
        "chunks": sum(len(chunks) for chunks in replies),
        "first_chunk_min_words": config.first_chunk_min_words,
        "first_chunk_max_words": config.first_chunk_max_words,
        "runs": args.runs,
        "threads": args.threads,
    }
    if others:
        result["compared_policies"] = {
            name: {"first_clauses": [chunks[0].spoken for chunks in streamed_by[name]], "engines": compared[name]}
            for name in others
        }
    piper = results.get("piper", {})
    if "ttfa_s" in piper:
        result["piper_meets_targets"] = piper["ttfa_s"] <= TARGETS["piper"]["ttfa_s"] and piper["rtf"] <= TARGETS["piper"]["rtf"]
    return result


def parse_policies(spec: str | None) -> dict[str, Any]:
    """`--compare-policies` "4/8,2/5,off" -> {"4/8": TTSConfig(min 4, max 8 words), ..., "off":
    TTSConfig(first_clause=False)}. Raises ValueError for anything else."""
    from headstart.config import TTSConfig

    out: dict[str, Any] = {}
    for item in (spec or "").split(","):
        item = item.strip()
        if not item:
            continue
        if item == "off":
            out[item] = TTSConfig(first_clause=False)
            continue
        match = re.fullmatch(r"(\d+)/(\d+)", item)
        if match is None:
            raise ValueError(f"bad policy {item!r} in --compare-policies: use MIN/MAX words (e.g. 4/8) or off")
        out[item] = TTSConfig(first_chunk_min_words=int(match[1]), first_chunk_max_words=int(match[2]))
    return out


def _rounded(figures: dict[str, Any]) -> dict[str, Any]:
    return {k: _rounded(v) if isinstance(v, dict) else round(v, 4) for k, v in figures.items()}


def format_table(result: dict[str, Any]) -> str:
    """The human-readable table of a `run` result."""
    lines = [
        f"TTS bench: {result['replies']} replies, {result['chunks']} chunks, first chunk policy "
        f"min {result['first_chunk_min_words']} / max {result['first_chunk_max_words']} words, "
        f"median of {result['runs']} runs, {result['threads']} thread(s)",
        "first clauses: " + " | ".join(repr(c) for c in result["first_clauses"]),
        f"{'engine':<8} {'TTFA s':>7} {'max s':>6} {'RTF':>6} {'audio s':>8} {'load s':>7} {'rate Hz':>8} "
        f"{'stream 1st audio s':>18} {'stall s':>8} {'cpu TTFA':>8} {'cpu RTF':>7}  note",
    ]
    for engine, r in result["engines"].items():
        if "skipped" in r:
            lines.append(f"{engine:<8} {'-':>7} {'-':>6} {'-':>6} {'-':>8} {'-':>7} {'-':>8} {'-':>18} {'-':>8}"
                         f" {'-':>8} {'-':>7}  skipped: {r['skipped'][:90]}")
            continue
        note = "random weights (noise): worker path only" if r.get("random_weights") else ""
        target = result["targets"].get(engine)
        if target:
            ok = r["ttfa_s"] <= target["ttfa_s"] and r["rtf"] <= target["rtf"]
            note = f"target TTFA <= {target['ttfa_s']} s, RTF <= {target['rtf']}: {'met' if ok else 'MISSED'}"
        stream = r["stream"]
        lines.append(
            f"{engine:<8} {r['ttfa_s']:>7.3f} {r['ttfa_max_s']:>6.3f} {r['rtf']:>6.3f} {r['audio_s']:>8.2f} "
            f"{r['load_s']:>7.2f} {r['sample_rate']:>8} {stream['first_audio_s']:>18.3f} {stream['stall_s']:>8.3f} "
            f"{r['ttfa_cpu_s']:>8.3f} {r['rtf_cpu']:>7.3f}  {note}"
        )
    for name, comp in result.get("compared_policies", {}).items():
        for engine, r in comp["engines"].items():
            stream = r["stream"]
            lines.append(
                f"  policy {name:<6} {engine:<8} TTFA {r['ttfa_s']:.3f} (max {r['ttfa_max_s']:.3f})  RTF {r['rtf']:.3f}"
                f"  stream 1st audio {stream['first_audio_s']:.3f}  stall {stream['stall_s']:.3f}"
                f"  cpu TTFA {r['ttfa_cpu_s']:.3f}  cpu RTF {r['rtf_cpu']:.3f}"
            )
    if result["engines"]:
        tpot = next((r["stream"]["tpot_s"] for r in result["engines"].values() if "stream" in r), None)
        if tpot is not None:
            lines.append(f"stream: tokens every {tpot} s; first audio from the first token, stalls inside the reply "
                         "(medians over replies)")
    return "\n".join(lines)


def main(args: TTSBenchOptions) -> int:
    """Entry point for `headstart bench tts`: prints the table (unless --json) and the JSON line.
    Returns 0, or 1 if no engine could be measured, 2 for bad arguments."""
    if args.runs < 1 or args.threads < 1:
        print("error: --runs and --threads must be >= 1")
        return 2
    if args.tpot_s <= 0:
        print("error: --tpot-s must be > 0")
        return 2
    try:
        result = run(args)
    except ValueError as exc:
        print(f"error: {exc}")
        return 2
    if not args.json:
        print(format_table(result))
    print(json.dumps(result))
    return 0 if any("ttfa_s" in r for r in result["engines"].values()) else 1

