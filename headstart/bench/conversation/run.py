"""`headstart bench conversation`: voice-to-voice latency of whole conversations, every configuration side
by side, measured as a user would meet it.

For each configuration (`--configs`, headstart/bench/conversation/configs.py) a `headstart serve`
server is started in this process on loopback (the models load once and are shared; each
configuration gets its own server on a free port), or `--server ws://...` drives a running one. The
client (headstart/bench/conversation/client.py) is a websocket client exactly like the page and the mic
app: real recordings as 20 ms PCM16 frames at real-time pace, then room-level noise; reply audio is
played on a real-time player model that reports `playback.position`. Every event is stamped on one
client clock; voice-to-voice runs from the recording's true end of speech (`speech_end_s` of the
bench data) to the first reply audio byte received. Figures: headstart/bench/conversation/metrics.py.

Turns: the packaged real recordings (or `--input-dir`), interleaved with everyday questions spoken by
a TTS voice (`--synthetic espeak`, labelled synthetic in the records; `--synthetic none` leaves them out).

Scenarios (`--scenarios`):
  qa          one fresh session per turn (`--turns N` turns)
  history     the same recordings as turns of one session (the prompt grows with the history)
  pauses      the pause set of `headstart bench asr` (a 0.6-1.5 s pause at the word gap nearest the
              middle; room noise or digital zero): false cut-off rate
  bargein     a recording, then once the reply has played for 0.6 s another recording spoken over
              it: first word -> the reply silent at the client (`--bargein-items N`: the spoken
              recordings take turns, "Something is terribly wrong" first; `bargein_pairs`)
  concurrent  N sessions at once (`--sessions 1,2,4`, configurations in `--concurrent-configs`):
              capacity = the most sessions whose p90 voice-to-voice stays under 1 s
  tools       requests local tools serve (a timer, the time, arithmetic, a list) alternating with
              everyday questions for the LLM, all spoken by the `--synthetic` voice (hibari when
              none), one fresh session each (`--tool-items N` of each kind): the tool turns' v2v p50 /
              p90 beside the plain turns' (target: p50 within 0.1 s). With the in-process server the
              lists are kept in a temporary folder, not the user's

Between sessions the LLM's KV cache is cut back to the system prompt, so no configuration gets a
prompt another one has already prefilled (the same recordings are asked in every configuration).
`--simulate` runs the same client, server and sessions in this process on a virtual clock that skips
idle time (waits for real-time audio and playback) while compute runs at its real cost
(headstart/bench/conversation/simulate.py: the model and its limits); its output says so everywhere.

After the run each qa reply's received audio is transcribed (`--reply-asr`, default whisper-tiny.en) and
scored against the reply's text: `reply_wer`, the voice's intelligibility in the pipeline (the texts heard
are in records.json, `replies_heard`).

Output: a table (p50 / p90 / max per configuration and metric), PNG plots in `--out` (a per-turn
waterfall of stage timings, the voice-to-voice distribution per configuration), then one JSON line
with `configs: {name: {v2v_p50_s, v2v_p90_s, ttft_p50_s, eou_delay_p50_s, false_cutoff_rate,
bargein_stop_p50_s, preemptive_hit_rate, wer, reply_wer, turns, ...}}`, `speedup_v2v_p50` (baseline over
headstart), `unavailable` configurations and the effective configuration.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from headstart.bench.conversation.client import TurnRecord, UserTurn, run_session
from headstart.bench.conversation.configs import apply, effective, missing_switches, variants
from headstart.bench.conversation.data import (
    EVERYDAY_QUESTIONS,
    interleave,
    load_user_turns,
    pause_turns,
    room_rms,
    synthetic_turns,
    tool_scenario_turns,
)
from headstart.bench.conversation.metrics import (
    TABLE_METRICS,
    TOOL_GAP_TARGET_S,
    V2V_CAPACITY_P90_S,
    bargein_figures,
    capacity,
    fraction,
    is_cutoff,
    percentile,
    reply_audio,
    reply_wer,
    stats,
    summarize_config,
    tool_turn_figures,
    turn_figures,
)
from headstart.config import PipelineConfig

SCENARIOS = ("qa", "history", "pauses", "bargein", "concurrent", "tools")
DEFAULT_SCENARIOS = ("qa", "pauses", "bargein")
BARGE_IN_RECORDING = "tt-somethingwrong"  # "Something is terribly wrong": clear words to talk over a reply
REPLY_ASR = "whisper-tiny.en"  # the judge of the replies' intelligibility: a recogniser other than the default ASR (make test prepares it)
TARGETS = {"v2v_p50_s": 0.5, "speedup_v2v_p50": 3.0, "false_cutoff_rate": 0.05, "bargein_stop_p50_s": 0.3,
           "tools_v2v_p50_gap_s": TOOL_GAP_TARGET_S}


@dataclasses.dataclass(frozen=True, slots=True)
class ConversationBenchOptions:
    """The options of `headstart bench conversation`; their meaning and defaults: its `--help` (headstart/cli/).
    `pipeline`: the configuration the in-process server starts from (each `--configs` entry switches
    parts of it off)."""

    pipeline: PipelineConfig
    json: bool
    configs: str
    scenarios: str
    turns: int
    limit: int | None
    pause_items: int
    bargein_items: int
    sessions: str
    concurrent_configs: str
    input_dir: str | None
    synthetic: str
    server: str | None
    out: str
    no_plots: bool
    max_wait: float
    seed: int
    reply_asr: str
    simulate: bool
    tool_items: int = 4


# -- the in-process server --------------------------------------------------------------------------


class ServerThread:
    """A `headstart serve` server (VoiceServer) on its own event loop in a thread, on a free loopback
    port: the client's loop and timestamps stay apart from the server's."""

    def __init__(self, components: Any, max_sessions: int) -> None:
        from headstart.server.server import ServerConfig, VoiceServer

        self.server = VoiceServer(components, ServerConfig(host="127.0.0.1", port=0, max_sessions=max_sessions))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="bench-server", daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        port = asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(60)
        return f"ws://127.0.0.1:{port}/ws"

    def __exit__(self, *exc: object) -> None:
        async def close() -> None:
            await self.server.close()
            for connection in list(self.server.connections):
                await connection.ended.wait()
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in rest:  # the sessions' leftovers (a listener pass in flight)
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(close(), self.loop).result(60)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(30)
            self.loop.close()


def components_for(components: Any, config: Any, asr_by_model: dict[str, Any], log: Callable[[str], None]) -> Any:
    """The loaded `components` with a configuration's `config`, and its own ASR engine when its
    `asr.model` is not one already in `asr_by_model` (a `whisper-asr` variant): loaded, warmed up and
    kept there for the next configuration; it shares the components' ASR executor.

    Raises:
        headstart.models.store.ModelNotPreparedError: that ASR model is not prepared (names the command).
    """
    if config.asr.model not in asr_by_model:
        from headstart.voice.asr_engines import load_asr

        log(f"loading ASR {config.asr.model} for this configuration")
        asr = load_asr(config.asr, config.threads.asr_threads)
        asr.warmup()
        asr_by_model[config.asr.model] = asr
    return dataclasses.replace(components, config=config, asr=asr_by_model[config.asr.model])


def reset_llm_cache(components: Any) -> None:
    """Cut the LLM's KV cache back to the system prompt (on the LLM's own executor thread), so a
    recording asked again in the next configuration finds nothing of its prompt prefilled."""
    engine = components.local_engine if components is not None else None
    if engine is None:  # no components, or a remote engine: no cache of ours to cut
        return
    system = {"role": "system", "content": components.config.llm.system_prompt}

    def cut() -> None:
        from headstart.llm.engine import common_prefix_len

        a = engine.render_prompt([system, {"role": "user", "content": "a"}])
        b = engine.render_prompt([system, {"role": "user", "content": "b"}])
        engine.rollback_to(min(common_prefix_len(a, b), common_prefix_len(engine.tokens, a)))

    components.llm_executor.submit(cut).result(120)


@contextlib.contextmanager
def private_data_dir() -> Iterator[str]:
    """`$HEADSTART_DATA_DIR` set to a temporary folder while the block runs (restored after): sessions
    started then keep their lists there, not in the user's data folder."""
    from headstart.tools.lists import DATA_DIR_ENV

    before = os.environ.get(DATA_DIR_ENV)
    with tempfile.TemporaryDirectory(prefix="headstart-bench-") as folder:
        os.environ[DATA_DIR_ENV] = folder
        try:
            yield folder
        finally:
            if before is None:
                os.environ.pop(DATA_DIR_ENV, None)
            else:
                os.environ[DATA_DIR_ENV] = before


# -- scenarios --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class ConfigRun:
    name: str
    qa: list[TurnRecord] = dataclasses.field(default_factory=list)
    history: list[TurnRecord] = dataclasses.field(default_factory=list)
    pauses: list[TurnRecord] = dataclasses.field(default_factory=list)
    bargein: list[TurnRecord] = dataclasses.field(default_factory=list)
    concurrent: dict[int, list[TurnRecord]] = dataclasses.field(default_factory=dict)
    tools: list[TurnRecord] = dataclasses.field(default_factory=list)
    errors: list[str] = dataclasses.field(default_factory=list)


def bargein_pairs(turns: list[UserTurn], barge: UserTurn, items: int) -> list[tuple[UserTurn, UserTurn]]:
    """The barge-in items: (the turn whose reply is talked over, the utterance spoken over it), `items`
    of them. The spoken utterances take turns, `barge` (BARGE_IN_RECORDING) first, then the other real
    recordings, so the p50 is not one utterance's onset (Silero hears the weak "S" of "Something is
    terribly wrong" late on some frame alignments); each is spoken over a reply to a different turn.
    Synthetic turns are never used: the barge-in is a real voice."""
    real = [t for t in turns if not t.synthetic]
    spoken = [barge] + [t for t in real if t.name != barge.name]
    pairs = []
    for n in range(max(items, 0)):
        said = spoken[n % len(spoken)]
        over = [t for t in real if t.name != said.name]
        if not over:
            break
        pairs.append((over[n % len(over)], said))
    return pairs


async def run_config(name: str, url: str, components: Any, turns: list[UserTurn], pauses: list[UserTurn],
                     barge: UserTurn | None, scenarios: set[str], args: ConversationBenchOptions, log, *,
                     connect=None, clock=time.perf_counter, tool_turns: list[UserTurn] | None = None) -> ConfigRun:
    """Every chosen scenario against the server at `url` (one configuration). `connect` and `clock` go
    to `run_session` (`--simulate`: the in-memory connection and the virtual clock); `tool_turns`: the
    tools scenario's turns (`tool_scenario_turns`)."""
    run = ConfigRun(name)
    loop = asyncio.get_running_loop()
    rms = room_rms(turns[0])

    async def session(items, n=0, reset=True) -> list[TurnRecord]:
        if reset:
            await loop.run_in_executor(None, reset_llm_cache, components)
        try:
            return await run_session(url, items, noise_rms=rms, seed=args.seed + n, max_wait_s=args.max_wait,
                                     session=n, clock=clock, connect=connect)
        except Exception as exc:  # noqa: BLE001 - a refused or dropped connection is a result, not a crash
            run.errors.append(f"{type(exc).__name__}: {exc}")
            log(f"  {name}: session failed: {type(exc).__name__}: {exc}")
            return []

    qa_turns = turns[: args.turns]
    if "qa" in scenarios:
        for n, turn in enumerate(qa_turns):
            records = await session([(turn, "qa", None)], n)
            run.qa += records
            for r in records:
                f = turn_figures(r)
                log(f"  {name} qa {r.name}: v2v {_fmt_s(f['v2v_s'])} eou {_fmt_s(f['eou_s'])} "
                    f"ttft {_fmt_s(f['ttft_s'])} {f['preemptive']} | {f['transcript']!r} -> {f['reply_text']!r}")
    if "history" in scenarios and qa_turns:
        run.history = await session([(t, "qa", None) for t in qa_turns], 100)
        log(f"  {name} history: v2v " + " ".join(_fmt_s(turn_figures(r)["v2v_s"]) for r in run.history))
    if "pauses" in scenarios:
        for n, turn in enumerate(pauses):
            records = await session([(turn, "pause", None)], 200 + n)
            run.pauses += records
            for r in records:
                log(f"  {name} pause {r.name}: {'CUT OFF' if is_cutoff(r) else 'ok'}")
    if "bargein" in scenarios and barge is not None:
        for n, (turn, spoken) in enumerate(bargein_pairs(turns, barge, args.bargein_items)):
            records = await session([(turn, "bargein", spoken)], 300 + n)
            run.bargein += records
            for r in records:
                b = bargein_figures(r)
                log(f"  {name} barge-in {r.barge_name or spoken.name!r} over {r.name}: "
                    + (f"silent after {_fmt_s(b['bargein_stop_s'])}"
                       + (" (the reply ran out)" if b["ran_out"] else "")
                       + f", paused after {_fmt_s(b['bargein_pause_s'])}, interrupted {b['interrupted']}" if b
                       else "the reply was over before the barge-in"))
    if "tools" in scenarios:
        for n, turn in enumerate(tool_turns or []):
            records = await session([(turn, "qa", None)], 400 + n)
            run.tools += records
            for r in records:
                f = turn_figures(r)
                log(f"  {name} tools {r.name}: v2v {_fmt_s(f['v2v_s'])} eou {_fmt_s(f['eou_s'])} "
                    f"tts {_fmt_s(f['tts_ttfa_s'])} {f['preemptive']} tool {f['tool'] or '-'} | "
                    f"{f['transcript']!r} -> {f['reply_text']!r}")
    if "concurrent" in scenarios and name in args.concurrent_configs.split(","):
        for count in sorted({int(x) for x in args.sessions.split(",") if x.strip()}):
            await loop.run_in_executor(None, reset_llm_cache, components)
            groups = await asyncio.gather(*(
                session([(qa_turns[(i + k) % len(qa_turns)], "qa", None) for k in range(min(2, len(qa_turns)))],
                        1000 * count + i, reset=False)
                for i in range(count)
            ))
            run.concurrent[count] = [r for g in groups for r in g]
            v2v = [turn_figures(r)["v2v_s"] for r in run.concurrent[count]]
            log(f"  {name} {count} concurrent sessions: v2v p90 {_fmt_s(percentile(v2v, 90))}")
    return run


# -- the replies as heard -----------------------------------------------------------------------------------

ASR_RATE_HZ = 16_000
ASR_WINDOW_S = 30.0  # one Whisper window; a longer reply is heard in consecutive windows


def replies_heard(records: list[TurnRecord], transcribe) -> list[dict]:
    """Each turn's reply as a listener's ASR hears it: the audio the client received (`reply_audio`),
    resampled to 16 kHz (soxr) and transcribed in 30 s windows by `transcribe(float32 (n,) at 16 kHz)
    -> text`. Returns one {"name", "reply_text", "heard", "wer", "audio_s"} per turn with reply audio
    and text (turns without are left out)."""
    import soxr

    from headstart.corpus.wer import word_error_rate

    out = []
    window = int(ASR_WINDOW_S * ASR_RATE_HZ)
    for record in records:
        got = reply_audio(record)
        if got is None:
            continue
        samples, rate, text = got
        if rate != ASR_RATE_HZ:
            samples = soxr.resample(samples, rate, ASR_RATE_HZ).astype(np.float32)
        heard = " ".join(transcribe(np.ascontiguousarray(samples[i : i + window]))
                         for i in range(0, samples.shape[0], window)).strip()
        out.append({"name": record.name, "reply_text": text, "heard": heard,
                    "wer": round(word_error_rate(text, heard), 4), "audio_s": round(samples.shape[0] / ASR_RATE_HZ, 2)})
    return out


def hear_replies(runs: dict[str, ConfigRun], model: str, log) -> tuple[dict[str, list[dict]], str | None]:
    """`replies_heard` for every configuration's qa and history turns with the ASR `model` (a preset or
    folder, loaded after the run so it takes no CPU from it). Returns ({config: heard}, None), or ({},
    the reason) when the model is not prepared."""
    from headstart.config import ASRConfig
    from headstart.models.store import ModelError
    from headstart.voice.asr import WhisperASR

    try:
        asr = WhisperASR.load(ASRConfig(model=model), cpu_threads=1)
    except (ModelError, FileNotFoundError) as exc:
        return {}, f"the replies were not transcribed: {exc}"
    heard = {}
    for name, run in runs.items():
        heard[name] = replies_heard(run.qa + run.history, lambda samples: asr.transcribe(samples).text)
        for h in heard[name]:
            log(f"  {name} reply heard {h['name']}: wer {h['wer'] * 100:.0f} % | {h['reply_text']!r} -> {h['heard']!r}")
    return heard, None


# -- report ------------------------------------------------------------------------------------------------


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _fmt_s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def _fmt_cell(key: str, s: dict) -> str:
    if not s["n"]:
        return "-"
    if key.endswith("_s"):
        return f"{s['p50'] * 1000:.0f} / {s['p90'] * 1000:.0f} / {s['max'] * 1000:.0f}"
    return f"{s['p50']:.0f} / {s['p90']:.0f} / {s['max']:.0f}"


METRIC_TITLES = {
    "v2v_s": "voice-to-voice (ms)",
    "eou_s": "→ turn.end (ms)",
    "partial_s": "→ partial (ms)",
    "final_s": "→ final (ms)",
    "first_token_s": "→ first token (ms)",
    "ttft_s": "TTFT (ms)",
    "tpot_s": "TPOT (ms)",
    "tts_ttfa_s": "TTS TTFA (ms)",
    "reply_tokens": "reply tokens",
}


def print_table(figures_by_config: dict[str, list[dict]], summaries: dict[str, dict], simulated: bool = False) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=sys.stdout, width=200)
    if simulated:
        console.print(SIMULATED_LINE, markup=False)
    title = "per-turn figures, p50 / p90 / max, from the true end of speech (qa turns)"
    table = Table(title=("SIMULATED " + title) if simulated else title)
    table.add_column("metric")
    for name in figures_by_config:
        table.add_column(name, justify="right")
    for key in TABLE_METRICS:
        table.add_row(METRIC_TITLES[key], *(_fmt_cell(key, stats(f[key] for f in figs))
                                            for figs in figures_by_config.values()))

    def pct(x):
        return "-" if x is None else f"{x * 100:.0f} %"

    table.add_row("false cut-offs", *(pct(summaries[n]["false_cutoff_rate"]) + f" of {summaries[n]['pause_items']}"
                                      for n in figures_by_config))
    table.add_row("barge-in → silent p50 (ms)", *(
        "-" if summaries[n]["bargein_stop_p50_s"] is None else f"{summaries[n]['bargein_stop_p50_s'] * 1000:.0f}"
        for n in figures_by_config))
    table.add_row("barge-in → paused p50 (ms)", *(
        "-" if summaries[n]["bargein_pause_p50_s"] is None else f"{summaries[n]['bargein_pause_p50_s'] * 1000:.0f}"
        + (f" ({summaries[n]['bargein_ran_out']} ran out first)" if summaries[n]["bargein_ran_out"] else "")
        for n in figures_by_config))
    table.add_row("playback underruns", *(
        "-" if summaries[n]["underrun_rate"] is None
        else f"{pct(summaries[n]['underrun_rate'])}, max {summaries[n]['underrun_s_max'] * 1000:.0f} ms"
        for n in figures_by_config))
    table.add_row("preemptive hits / misses", *(f"{summaries[n]['preemptive_hits']} / {summaries[n]['preemptive_misses']}"
                                                for n in figures_by_config))
    table.add_row("WER", *(pct(summaries[n]["wer"]) for n in figures_by_config))
    if any("reply_wer" in summaries[n] for n in figures_by_config):
        table.add_row("reply WER (the reply audio heard by an ASR)", *(
            pct(summaries[n].get("reply_wer")) + f" of {summaries[n].get('reply_wer_turns', 0)}"
            for n in figures_by_config))
    table.add_row("turns (replies)", *(f"{summaries[n]['turns']} ({summaries[n]['replies']})" for n in figures_by_config))
    console.print(table)
    tools = {n: summaries[n]["tools"] for n in figures_by_config if "tools" in summaries[n]}
    if tools:
        title = (f"tools scenario: tool turns beside plain turns, the same voice and run (target: v2v p50 within "
                 f"{TOOL_GAP_TARGET_S:g} s)")
        t = Table(title=("SIMULATED " + title) if simulated else title)
        t.add_column("p50 (ms)")
        for n in tools:
            t.add_column(f"{n}: tool", justify="right")
            t.add_column(f"{n}: plain", justify="right")

        def ms(x):
            return "-" if x is None else f"{x * 1000:.0f}"

        for label, key in (("voice-to-voice", "v2v_p50_s"), ("voice-to-voice p90", "v2v_p90_s"),
                           ("→ turn.end", "eou_p50_s"), ("→ final", "final_p50_s"),
                           ("→ first token", "first_token_p50_s"), ("TTS TTFA", "tts_ttfa_p50_s")):
            t.add_row(label, *(ms(f[f"{kind}_{key}"]) for f in tools.values() for kind in ("tool", "plain")))
        t.add_row("turns", *(str(f[f"{kind}_turns"]) for f in tools.values() for kind in ("tool", "plain")))
        t.add_row("held reply released", *(str(f[f"{kind}_preemptive_hits"]) for f in tools.values()
                                           for kind in ("tool", "plain")))
        t.add_row("gap of the p50s (ms)", *(x for f in tools.values() for x in (
            "-" if f["v2v_p50_gap_s"] is None
            else f"{f['v2v_p50_gap_s'] * 1000:+.0f}" + (" ok" if f["within_target"] else " OVER"), "")))
        t.add_row("requests misheard / false actions", *(x for f in tools.values() for x in (
            f"{f['tool_requests_missed']} / {f['false_actions']}", "")))
        console.print(t)


def records_json(runs: dict[str, ConfigRun]) -> dict:
    def rec(r: TurnRecord) -> dict:
        d = dataclasses.asdict(r)
        d.pop("reply_audio")  # PCM bytes: the replies' WAVs are not kept
        d["events"] = [[round(t, 4), k, p] for t, k, p in r.events]
        return d

    return {name: {"qa": [rec(r) for r in run.qa], "history": [rec(r) for r in run.history],
                   "pauses": [rec(r) for r in run.pauses], "bargein": [rec(r) for r in run.bargein],
                   "concurrent": {str(k): [rec(r) for r in v] for k, v in run.concurrent.items()},
                   "tools": [rec(r) for r in run.tools]}
            for name, run in runs.items()}


def summarize(runs: dict[str, ConfigRun]) -> tuple[dict[str, dict], dict[str, list[dict]]]:
    """Per configuration: the JSON summary and the qa (and history) turn figures."""
    summaries, figures = {}, {}
    for name, run in runs.items():
        qa = [turn_figures(r) for r in run.qa + run.history]
        cutoffs = [bool(is_cutoff(r)) for r in run.pauses if is_cutoff(r) is not None]
        bargeins = [b for b in (bargein_figures(r) for r in run.bargein) if b is not None]
        summary = summarize_config(qa, cutoffs, bargeins)
        interrupt = percentile([b["bargein_interrupt_s"] for b in bargeins], 50)
        summary["bargein_interrupt_p50_s"] = None if interrupt is None else round(interrupt, 4)
        if run.history:
            hist = [turn_figures(r) for r in run.history]
            summary["history_v2v_p50_s"] = _round(percentile([f["v2v_s"] for f in hist], 50))
        if run.concurrent:
            by_n = {n: [turn_figures(r)["v2v_s"] for r in recs] for n, recs in run.concurrent.items()}
            summary["concurrent_v2v_p90_s"] = {str(n): _round(percentile(v, 90)) for n, v in by_n.items()}
            summary["capacity_sessions"] = capacity(by_n, V2V_CAPACITY_P90_S)
            gaps = {n: [turn_figures(r) for r in recs] for n, recs in run.concurrent.items()}
            summary["concurrent_underrun_rate"] = {
                str(n): _round(fraction(f["gaps"] > 0 for f in fs if f["gaps"] is not None)) for n, fs in gaps.items()}
        if run.tools:
            summary["tools"] = tool_turn_figures([turn_figures(r) for r in run.tools])
        summary["eou_probability_seen"] = any(f["eou_probability"] is not None for f in qa)
        if run.errors:
            summary["errors"] = run.errors
        summaries[name] = summary
        figures[name] = qa
    return summaries, figures


SIMULATED_LINE = ("SIMULATED (--simulate): in-process on a virtual clock, idle waits skipped, compute at its real "
                  "cost; not a real-time measurement (see headstart/bench/conversation/simulate.py)")


def run(args: ConversationBenchOptions, log=print) -> dict:
    """Run the benchmark; returns the JSON object. Raises ValueError for bad options."""
    scenarios = {s.strip() for s in args.scenarios.split(",") if s.strip()}
    unknown = scenarios - set(SCENARIOS)
    if unknown:
        raise ValueError(f"unknown scenario(s) {', '.join(sorted(unknown))}; choose from {', '.join(SCENARIOS)}")
    if args.turns < 1:
        raise ValueError("--turns must be >= 1")
    turns = load_user_turns(args.input_dir, args.limit)
    if not turns:
        raise ValueError("no recordings to send")
    base = args.pipeline
    simulate = bool(getattr(args, "simulate", False))
    if simulate:
        from headstart.llm.remote_config import is_remote_llm

        if args.server is not None:
            raise ValueError("--simulate runs the pipeline in this process; it cannot drive --server")
        if is_remote_llm(base.llm.model):
            raise ValueError("--simulate cannot time a remote LLM (its work is waiting on a socket, which the "
                             "virtual clock would skip); run it in real time")
    known = variants(base)
    names = [n.strip() for n in args.configs.split(",") if n.strip()]
    bad = [n for n in names if n not in known]
    if bad:
        raise ValueError(f"unknown configuration(s) {', '.join(bad)}; choose from {', '.join(known)}")
    unavailable = {n: missing_switches(known[n], base) for n in names if missing_switches(known[n], base)}
    runnable = [n for n in names if n not in unavailable]
    for n, missing in unavailable.items():
        log(f"configuration {n}: unavailable, this checkout has no {', '.join(missing)}")

    tool_turns: list[UserTurn] = []
    tool_items = int(getattr(args, "tool_items", 4))
    if args.synthetic != "none" or ("tools" in scenarios and tool_items > 0):
        from headstart.config import TTSConfig
        from headstart.tts.engines import load_synthesizer

        engine = args.synthetic if args.synthetic != "none" else TTSConfig().engine
        voice = load_synthesizer(dataclasses.replace(TTSConfig(), engine=engine), base.threads)
        try:
            if args.synthetic != "none":
                turns = interleave(turns, synthetic_turns(voice, EVERYDAY_QUESTIONS, room_rms(turns[0]), args.seed))
            if "tools" in scenarios:
                tool_turns = tool_scenario_turns(voice, tool_items, room_rms(turns[0]), args.seed)
        finally:
            close = getattr(voice, "close", None)
            if close is not None:
                close()
    barge = next((t for t in turns if t.name == BARGE_IN_RECORDING), None)
    if barge is None and len(turns) > 1:
        barge = turns[-1]
    components = None
    started = time.perf_counter()
    runs: dict[str, ConfigRun] = {}
    effective_configs: dict[str, dict] = {}
    simulation: dict[str, dict] = {}
    config_wall: dict[str, float] = {}  # the real time each configuration's scenarios took (no loading)
    # the tools scenario adds to a shopping list: the in-process server's sessions keep it in a folder of the run's
    scope = contextlib.ExitStack()
    try:
        if tool_turns and args.server is None:
            scope.enter_context(private_data_dir())
        if args.server is None:
            from headstart.session.components import Components

            components = Components.load(base, log=log)
            asr = components.asr
        elif "pauses" in scenarios:
            from headstart.voice.asr import WhisperASR

            asr = WhisperASR.load(base.asr, cpu_threads=1)  # word times for the pause set only
        pauses = pause_turns(turns, asr, args.pause_items, args.seed) if "pauses" in scenarios else []
        max_sessions = max([int(x) for x in args.sessions.split(",") if x.strip()] + [1]) + 1
        if args.server is not None:
            runs["server"] = asyncio.run(run_config("server", args.server, None, turns, pauses, barge,
                                                    scenarios, args, log, tool_turns=tool_turns))
            effective_configs["server"] = {"server": args.server}
        asr_by_model = {} if components is None else {base.asr.model: components.asr}
        for name in ([] if args.server else runnable):
            config = apply(known[name], base)
            effective_configs[name] = effective(config)
            log(f"configuration {name}: {known[name].description}")
            config_components = None if components is None else components_for(components, config, asr_by_model, log)
            config_started = time.perf_counter()
            if simulate:
                from headstart.bench.conversation.simulate import run_simulated

                async def simulated(server, clock, name=name):
                    return await run_config(name, "memory:///ws", server.server.components, turns, pauses, barge,
                                            scenarios, args, log, connect=server.connect, clock=clock.now,
                                            tool_turns=tool_turns)

                runs[name], simulation[name] = run_simulated(simulated, config_components, config, max_sessions)
                s = simulation[name]
                log(f"  {name}: simulated {s['virtual_s']:.1f} s of virtual time in {s['wall_s']:.1f} s "
                    f"(idle skipped {s['skipped_s']:.1f} s)")
                config_wall[name] = round(time.perf_counter() - config_started, 1)
                continue
            comps = config_components
            with ServerThread(comps, max_sessions) as url:
                runs[name] = asyncio.run(run_config(name, url, comps, turns, pauses, barge, scenarios, args, log,
                                                    tool_turns=tool_turns))
            config_wall[name] = round(time.perf_counter() - config_started, 1)
    finally:
        if components is not None:
            components.close()
        scope.close()

    errors = [e for r in runs.values() for e in r.errors]
    if errors and not any(r.qa or r.history or r.pauses or r.bargein or any(r.concurrent.values()) for r in runs.values()):
        raise ConnectionError(f"no session could run: {errors[0]}")
    summaries, figures = summarize(runs)
    reply_asr = getattr(args, "reply_asr", None)
    heard, heard_note = ({}, None) if reply_asr in (None, "none") else hear_replies(runs, reply_asr, log)
    for name, items in heard.items():
        wer = reply_wer(items)
        summaries[name]["reply_wer"] = None if wer is None else round(wer, 4)
        summaries[name]["reply_wer_turns"] = len(items)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    records = records_json(runs)
    for name, items in heard.items():
        records[name]["replies_heard"] = items
    (out_dir / "records.json").write_text(json.dumps(records, ensure_ascii=False))
    plots = []
    if not args.no_plots:
        from headstart.bench.conversation.plots import plot_v2v_distribution, plot_waterfall

        note = "SIMULATED (virtual clock)" if simulate else None
        plots.append(str(plot_waterfall(figures, out_dir / "waterfall.png", note=note)))
        plots.append(str(plot_v2v_distribution(figures, out_dir / "v2v.png", note=note)))
    if not args.json:
        print_table(figures, summaries, simulated=simulate)
    base_p50 = summaries.get("baseline", {}).get("v2v_p50_s")
    head_p50 = summaries.get("headstart", {}).get("v2v_p50_s")
    notes = []
    if args.server is not None:
        notes.append("--server: the remote server's KV cache and history are its own (not reset between sessions), "
                     "and its configuration is not known here")
    if simulate:
        notes.append(SIMULATED_LINE)
    if heard_note:
        notes.append(heard_note)
    if summaries.get("headstart") and summaries["headstart"]["turns"] and not summaries["headstart"]["eou_probability_seen"]:
        notes.append("no EOU probability reached the endpointer (no EOU scorer wired into the server's "
                     "sessions): semantic endpointing had no effect in this run")
    out = {
        "bench": "conversation",
        "simulated": simulate,
        "configs": summaries,
        "speedup_v2v_p50": round(base_p50 / head_p50, 3) if base_p50 and head_p50 else None,
        "unavailable": unavailable,
        "scenarios": sorted(scenarios),
        "effective": {"models": {"asr": base.asr.model, "llm": base.llm.model, "tts": base.tts.engine,
                                 "vad": base.vad.engine, "reply_asr": reply_asr}, "configs": effective_configs,
                      "server": args.server or ("in-process (in-memory websocket)" if simulate
                                                else "in-process (loopback)"),
                      "pace": "simulated" if simulate else "realtime",
                      "turn_recordings": [t.name for t in turns[: args.turns]],
                      "synthetic_voice": None if args.synthetic == "none" else args.synthetic,
                      "barge_in_recording": barge.name if barge else None,
                      "barge_in_recordings": ([said.name for _, said in bargein_pairs(turns, barge, args.bargein_items)]
                                              if barge else [])},
        "targets": TARGETS,
        "notes": notes,
        "plots": plots,
        "records": str(out_dir / "records.json"),
        "wall_s": round(time.perf_counter() - started, 1),
        "config_wall_s": config_wall,
    }
    if simulate:
        from headstart.bench.conversation.simulate import SIMULATION_MODEL

        out["simulation"] = {
            "model": SIMULATION_MODEL,
            "virtual_s": round(sum(s["virtual_s"] for s in simulation.values()), 1),
            "run_wall_s": round(sum(s["wall_s"] for s in simulation.values()), 1),
            "skipped_s": round(sum(s["skipped_s"] for s in simulation.values()), 1),
            "configs": simulation,
        }
    return out


def main(args: ConversationBenchOptions) -> int:
    """Entry point of `headstart bench conversation`. 2: bad options or data; 1: a model is missing or
    no session could run (e.g. `--server` unreachable)."""
    from headstart.models.store import ModelError
    from headstart.tts.base import TTSError

    log = (lambda *a, **k: None) if args.json else (lambda *a, **k: print(*a, **k, flush=True))
    try:
        out = run(args, log=log)
    except (FileNotFoundError, ValueError) as exc:
        print(f"bench conversation: {exc}", file=sys.stderr)
        return 2
    except (ModelError, TTSError, ConnectionError) as exc:
        print(f"bench conversation: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(out, ensure_ascii=False))
    return 0
