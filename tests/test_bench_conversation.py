"""`headstart bench conversation`: the figures from scripted client event logs (pure functions), the
configurations, the data loading, and one end-to-end run with the small models over real websockets."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from headstart.bench.conversation.client import Player, TurnRecord
from headstart.bench.conversation.configs import Switch, Variant, apply, missing_switches, variants
from headstart.bench.conversation.metrics import (
    bargein_figures,
    capacity,
    is_cutoff,
    playback_gaps,
    reply_audio,
    reply_silent_at,
    reply_wer,
    stats,
    summarize_config,
    turn_figures,
)
from headstart.config import PipelineConfig

RATE = 22_050


def audio(seconds: float) -> dict:
    return {"bytes": int(round(seconds * RATE)) * 2, "reply_id": "r1"}


def scripted_turn() -> TurnRecord:
    """A turn whose true end of speech was sent at t=10.0 (stream position 2.0 s)."""
    r = TurnRecord("goforward", "go forward ten meters", offset_s=0.0, speech_end_at_s=10.0, speech_end_stream_s=2.0)
    r.events = [
        (8.5, "vad.speech_started", {"audio_ms": 400.0}),
        (9.6, "transcript.partial", {"text": "go forward", "audio_ms": 1600.0}),  # before the end: not counted
        (10.3, "transcript.partial", {"text": "go forward ten", "audio_ms": 2000.0}),
        (10.4, "vad.speech_stopped", {"audio_ms": 2300.0}),
        (10.6, "transcript.final", {"text": "", "audio_ms": 2300.0}),  # an empty final does not count
        (10.7, "transcript.final", {"text": "Go forward 10 meters.", "audio_ms": 2300.0}),
        (10.9, "turn.end", {"audio_ms": 2500.0, "eou_probability": 0.3}),
        (10.95, "reply.started", {"reply_id": "r1", "transcript": "Go forward 10 meters."}),
        (11.2, "reply.text.delta", {"reply_id": "r1", "text": "Sure"}),
        (11.5, "reply.audio.start", {"reply_id": "r1", "sample_rate": RATE}),
        (11.6, "audio", audio(0.1)),
        (13.0, "reply.done", {"reply_id": "r1"}),
        (13.0, "metrics.turn", {"transcript": "Go forward 10 meters.", "reply": "Sure, walking.", "ttft_ms": 250.0,
                                "tpot_ms": 120.5, "tts_ttfa_ms": 180.0, "num_tokens": 5, "reply_audio_ms": 900.0,
                                "preemptive": "hit"}),
    ]
    return r


def test_playback_gaps_are_underruns_of_the_clients_buffer():
    """The reply's audio at 16 kHz: 0.4 s at t=1.0 runs dry at 1.4; the next frame at 2.0 is a 0.6 s
    gap; frames that arrive before the buffer runs out, and jitter under 40 ms, are none."""
    sec = lambda s: {"bytes": int(s * 16000) * 2, "reply_id": "r1"}  # noqa: E731
    r = TurnRecord("q", "question", speech_end_at_s=0.5)
    r.events = [(1.0, "reply.audio.start", {"type": "reply.audio.start", "reply_id": "r1", "sample_rate": 16000}),
                (1.0, "audio", sec(0.4)), (2.0, "audio", sec(0.2)), (2.1, "audio", sec(0.2)),
                (2.42, "audio", sec(0.2))]  # dry at 2.4: a 20 ms stutter is jitter
    gaps = playback_gaps(r)
    assert gaps["gaps"] == 1 and gaps["gap_s"] == pytest.approx(0.6) and gaps["max_gap_s"] == pytest.approx(0.6)
    assert turn_figures(r)["gaps"] == 1
    # a barge-in pauses and flushes: what follows is not an underrun
    r.events += [(2.5, "reply.paused", {"reply_id": "r1"}), (3.5, "audio", sec(0.2))]
    assert playback_gaps(r)["gaps"] == 1
    # no reply audio: no figure
    assert playback_gaps(TurnRecord("q", "question"))["gaps"] is None
    summary = summarize_config([turn_figures(r), turn_figures(TurnRecord("p", "plain"))], [], [])
    assert summary["underrun_rate"] == 1.0 and summary["underrun_s_max"] == pytest.approx(0.6)


def test_turn_figures_from_a_scripted_log():
    f = turn_figures(scripted_turn())
    assert f["partial_s"] == pytest.approx(0.3)
    assert f["final_s"] == pytest.approx(0.7)
    assert f["eou_s"] == pytest.approx(0.9)
    assert f["first_token_s"] == pytest.approx(1.2)
    assert f["v2v_s"] == pytest.approx(1.6)
    assert f["ttft_s"] == pytest.approx(0.25) and f["tpot_s"] == pytest.approx(0.1205)
    assert f["tts_ttfa_s"] == pytest.approx(0.18) and f["reply_tokens"] == 5
    assert f["preemptive"] == "hit" and f["wer"] == 0.0 and f["reply"] is True


def test_a_turn_nothing_answered_has_no_figures_and_full_wer():
    r = TurnRecord("noise", "hello there", speech_end_at_s=5.0, speech_end_stream_s=1.0)
    r.events = [(4.0, "vad.speech_started", {"audio_ms": 100.0}), (5.5, "transcript.final", {"text": ""})]
    f = turn_figures(r)
    assert f["v2v_s"] is None and f["eou_s"] is None and f["ttft_s"] is None and f["reply"] is False
    assert f["wer"] == 1.0


def replied_turn(samples: np.ndarray, rate: int, text: str) -> TurnRecord:
    """A turn whose reported reply r2 was received as PCM16 `samples` at `rate` Hz, after an
    interrupted reply r1 (its audio must not be taken for r2's)."""
    pcm = (np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()
    r = TurnRecord("q", "question", speech_end_at_s=1.0)
    r.events = [(1.1, "reply.audio.start", {"reply_id": "r1", "sample_rate": 16_000}),
                (1.1, "audio", {"bytes": 3200, "reply_id": "r1"}),
                (1.2, "reply.interrupted", {"reply_id": "r1"}),
                (1.5, "reply.audio.start", {"reply_id": "r2", "sample_rate": rate}),
                (1.5, "audio", {"bytes": len(pcm), "reply_id": "r2"}),
                (3.0, "metrics.turn", {"reply_id": "r2", "reply": text})]
    r.reply_audio = {"r1": bytearray(b"\x00\x10" * 1600), "r2": bytearray(pcm)}
    return r


def test_reply_audio_is_the_reported_reply_at_its_own_rate_and_stays_out_of_records_json():
    from headstart.bench.conversation.run import ConfigRun, records_json

    tone = (0.5 * np.sin(np.arange(2400) / 24_000 * 2 * np.pi * 440)).astype(np.float32)
    r = replied_turn(tone, 24_000, "A tone.")
    samples, rate, text = reply_audio(r)
    assert rate == 24_000 and text == "A tone." and samples.dtype == np.float32
    np.testing.assert_allclose(samples, tone, atol=1 / 16_000)  # r2's PCM16, not r1's
    assert reply_audio(TurnRecord("q", "question")) is None  # no metrics.turn
    r.reply_audio = {}
    assert reply_audio(r) is None  # no audio received
    records = json.loads(json.dumps(records_json({"headstart": ConfigRun("headstart", qa=[r])})))
    assert "reply_audio" not in records["headstart"]["qa"][0]
    assert reply_wer([]) is None
    assert reply_wer([{"reply_text": "one two three four", "heard": "one two three"},
                      {"reply_text": "five six", "heard": "five six"}]) == pytest.approx(1 / 6)


def test_the_client_keeps_each_replys_audio_bytes():
    import asyncio

    from headstart.bench.conversation.client import _Conn

    class _WS:
        def __init__(self, messages):
            self.messages = messages

        def __aiter__(self):
            return self._gen()

        async def _gen(self):
            for m in self.messages:
                yield m

    start = json.dumps({"type": "reply.audio.start", "reply_id": "r1", "sample_rate": 24_000})
    conn = _Conn(_WS([start, b"\x01\x00" * 10, b"\x02\x00" * 5]), clock=lambda: 0.0)
    conn.record = TurnRecord("q", "question")
    asyncio.run(conn.receive())
    assert bytes(conn.record.reply_audio["r1"]) == b"\x01\x00" * 10 + b"\x02\x00" * 5
    assert [p["bytes"] for _, k, p in conn.record.events if k == "audio"] == [20, 10]


@pytest.mark.slow
def test_replies_heard_by_whisper_score_the_voices_intelligibility():
    """hibari's 24 kHz audio of a reply, received as PCM16, is resampled and heard by whisper-tiny.en
    nearly word for word; the same audio played backwards (no words in it) is not."""
    from headstart.bench.conversation.run import replies_heard
    from headstart.tts.hibari import HibariSynthesizer

    from tests.prepared import whisper

    text = "The capital of Australia is Canberra, not Sydney."
    voice = HibariSynthesizer(threads=1)
    samples = np.concatenate(list(voice.synthesize(text)))
    asr = whisper()
    heard = replies_heard([replied_turn(samples, voice.sample_rate, text)], lambda s: asr.transcribe(s).text)
    assert len(heard) == 1 and heard[0]["reply_text"] == text
    assert heard[0]["audio_s"] == pytest.approx(samples.shape[0] / 24_000, abs=0.01)
    assert heard[0]["wer"] <= 0.15, heard
    garbled = replies_heard([replied_turn(samples[::-1].copy(), voice.sample_rate, text)],
                            lambda s: asr.transcribe(s).text)
    assert garbled[0]["wer"] >= 0.5, garbled


def test_cutoff_is_a_turn_end_inside_the_pause():
    r = TurnRecord("x+pause", "a b c d", pause_end_s=3.0)
    r.events = [(1.0, "turn.end", {"audio_ms": 2500.0})]
    assert is_cutoff(r) is True
    r.events = [(1.0, "turn.end", {"audio_ms": 4200.0})]
    assert is_cutoff(r) is False
    r.events = []
    assert is_cutoff(r) is False  # no end of turn at all: not cut off
    assert is_cutoff(TurnRecord("plain", "a")) is None


def test_player_plays_in_real_time_pauses_and_flushes():
    p = Player()
    p.start("r1", RATE, 0.0)
    p.audio(audio(1.0)["bytes"], 0.0)
    assert p.position(0.4) == pytest.approx(0.4)
    p.pause(0.5)
    assert p.position(2.0) == pytest.approx(0.5) and not p.playing(2.0)
    p.resume(2.0)
    assert p.position(2.25) == pytest.approx(0.75) and p.dry_at() == pytest.approx(2.5)
    assert p.position(9.0) == pytest.approx(1.0) and not p.playing(9.0)  # ran dry: no more than received
    p.audio(audio(0.5)["bytes"], 10.0)  # an underrun: playback restarts when audio arrives
    assert p.position(10.2) == pytest.approx(1.2)
    p.flush(10.3)
    assert not p.playing(10.3) and p.position(11.0) == pytest.approx(1.3)


def barge_log(stop_event: str | None) -> TurnRecord:
    r = TurnRecord("q", "question", mode="bargein", barge_name="b", barge_speech_start_at_s=20.5)
    r.events = [(20.0, "reply.audio.start", {"reply_id": "r1", "sample_rate": RATE}), (20.0, "audio", audio(1.0))]
    if stop_event:
        r.events.append((20.7, stop_event, {"reply_id": "r1"}))
    return r


@pytest.mark.parametrize(("stop_event", "stop_s"), [("reply.paused", 0.2), ("reply.interrupted", 0.2), (None, 0.5)])
def test_bargein_stop_is_when_the_client_falls_silent(stop_event, stop_s):
    b = bargein_figures(barge_log(stop_event))
    assert b["bargein_stop_s"] == pytest.approx(stop_s)
    assert b["interrupted"] is (stop_event == "reply.interrupted")
    # the server's own pause/interrupt; a reply that simply ran out says nothing about the barge-in
    assert b["bargein_pause_s"] == (None if stop_event is None else pytest.approx(0.2))
    assert b["ran_out"] is (stop_event is None)


def test_a_reply_that_runs_out_before_the_pause_is_flagged():
    r = barge_log("reply.paused")
    r.events[-1] = (21.2, "reply.paused", {"reply_id": "r1"})  # played out at 21.0, paused later
    b = bargein_figures(r)
    assert b["bargein_stop_s"] == pytest.approx(0.5) and b["bargein_pause_s"] == pytest.approx(0.7)
    assert b["ran_out"] is True
    out = summarize_config([], [], [b, bargein_figures(barge_log("reply.interrupted"))])
    assert out["bargein_pause_p50_s"] == pytest.approx(0.45) and out["bargein_ran_out"] == 1


def test_bargein_after_the_reply_ended_is_no_figure_and_a_silent_player_is_silent_at_once():
    r = barge_log(None)
    r.barge_speech_start_at_s = None
    assert bargein_figures(r) is None
    assert reply_silent_at(barge_log(None).events, 25.0) == 25.0  # played out by then


def test_bargein_pairs_take_turns_with_the_spoken_utterance_never_over_its_own_reply():
    from headstart.bench.conversation.run import bargein_pairs
    from headstart.bench.conversation.client import UserTurn

    def turn(name, synthetic=False):
        return UserTurn(name, np.zeros(16, np.float32), 0.0, 0.001, synthetic=synthetic)

    turns = [turn("gf"), turn("syn", synthetic=True), turn("vm"), turn("lib"), turn("tt")]
    pairs = [(over.name, said.name) for over, said in bargein_pairs(turns, turns[4], 5)]
    assert pairs == [("gf", "tt"), ("lib", "gf"), ("tt", "vm"), ("gf", "lib"), ("vm", "tt")]
    assert bargein_pairs(turns, turns[4], 0) == [] and bargein_pairs([turns[4]], turns[4], 3) == []


def test_stats_and_capacity():
    s = stats([0.1, None, 0.3, 0.2])
    assert s["n"] == 3 and s["p50"] == pytest.approx(0.2) and s["max"] == pytest.approx(0.3)
    assert stats([None])["p50"] is None
    assert capacity({1: [0.4, 0.5], 2: [0.6, 0.9], 4: [1.5, 2.0]}) == 2
    assert capacity({1: [1.2]}) == 0
    assert capacity({1: [0.4, None]}) == 0  # a turn without a reply is infinitely late
    assert capacity({1: [0.4], 2: [3.0], 4: [0.5]}) == 1  # counts above a failed one do not count


def test_summarize_config_rates():
    f = turn_figures(scripted_turn())
    miss = dict(f, preemptive="miss", v2v_s=2.6)
    out = summarize_config([f, miss, dict(f, preemptive="none", v2v_s=None)], [True, False, False, False],
                           [{"bargein_stop_s": 0.25}, {"bargein_stop_s": 0.35}])
    assert out["v2v_p50_s"] == pytest.approx(2.1) and out["turns"] == 3
    assert out["false_cutoff_rate"] == 0.25 and out["bargein_stop_p50_s"] == pytest.approx(0.3)
    assert out["preemptive_hit_rate"] == 0.5 and out["wer"] == 0.0
    empty = summarize_config([], [], [])
    assert empty["false_cutoff_rate"] is None and empty["preemptive_hit_rate"] is None and empty["v2v_p50_s"] is None


def test_baseline_and_ablations_set_their_switches():
    base = PipelineConfig()
    known = variants(base)
    baseline = apply(known["baseline"], base)
    assert baseline.session.head_start is False and baseline.tts.first_clause is False
    assert baseline.endpoint.silence_s + base.vad.speech_pad_s == pytest.approx(0.8)
    assert apply(known["headstart"], base) == base
    assert apply(known["no-first-clause"], base).tts.first_clause is False
    assert apply(known["no-pause-preempt"], base).session.preempt_on_pause is False
    assert apply(known["whisper-asr"], base).asr.model == "whisper-tiny.en" != base.asr.model
    for name, variant in known.items():
        if not missing_switches(variant, base):
            changed = apply(variant, base)
            assert (changed == base) is (name == "headstart")


def test_a_switch_this_checkout_lacks_makes_the_configuration_unavailable():
    fake = Variant("no-magic", "x", (Switch("session", "magic_feature", False),))
    assert missing_switches(fake) == ["session.magic_feature"]
    with pytest.raises(ValueError, match="magic_feature"):
        apply(fake, PipelineConfig())


def test_input_dir_and_bad_options(tmp_path):
    from headstart.audio import write_wav
    from headstart.bench.conversation.data import load_user_turns
    from headstart.corpus.recordings import default_recording

    rec = default_recording()
    write_wav(tmp_path / "q.wav", rec.read(), 16_000)
    (tmp_path / "transcripts.tsv").write_text("file\ttext\nq.wav\tgo forward ten meters\n")
    turns = load_user_turns(str(tmp_path), None)
    assert [t.name for t in turns] == ["q"] and turns[0].text == "go forward ten meters"
    assert abs(turns[0].speech_end_s - rec.speech_end_s) < 0.3  # found by Silero, close to the index's
    with pytest.raises(FileNotFoundError, match="transcripts.tsv"):
        load_user_turns(str(tmp_path / "missing"), None)
    assert load_user_turns(None, 2)[0].name == "goforward"

    cmd = [sys.executable, "-m", "headstart", "bench", "conversation"]
    bad = subprocess.run([*cmd, "--scenarios", "qa,dance"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "dance" in bad.stderr
    bad = subprocess.run([*cmd, "--configs", "fastest"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "fastest" in bad.stderr


@pytest.mark.slow
def test_end_to_end_small_models(tmp_path):
    """Two configurations, one turn each and one barge-in, over real websockets with the small models."""
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "headstart", "bench", "conversation", "--json", "--llm", "smollm2-135m",
         "--tts", "espeak", "--configs", "baseline,headstart", "--scenarios", "qa,bargein", "--turns", "1",
         "--bargein-items", "1", "--max-new-tokens", "12", "--out", str(out)],
        capture_output=True, text=True, timeout=400,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(result["configs"]) == {"baseline", "headstart"}
    assert result["simulated"] is False and result["effective"]["pace"] == "realtime" and "simulation" not in result
    for name, c in result["configs"].items():
        assert c["turns"] == 1 and c["replies"] == 1, (name, c)
        assert 0.0 < c["v2v_p50_s"] < 60.0 and c["ttft_p50_s"] >= 0.0
        # headstart's reply may be a held one whose first token was out before the end of turn (TTFT 0,
        # and the EOU estimate prefills the reply prompt); the baseline prefills the whole prompt after it
        assert c["ttft_p50_s"] > 0.0 or name == "headstart", (name, c)
        assert c["wer"] <= 0.25  # "go forward ten meters"
        # the reply's audio as received, heard by whisper-tiny.en: espeak's voice is understood
        assert c["reply_wer_turns"] == 1 and c["reply_wer"] <= 0.5, (name, c)
        assert c["bargeins"] == 1 and c["bargein_stop_p50_s"] is not None and 0.0 <= c["bargein_stop_p50_s"] < 5.0
    assert result["speedup_v2v_p50"] == pytest.approx(
        result["configs"]["baseline"]["v2v_p50_s"] / result["configs"]["headstart"]["v2v_p50_s"], rel=1e-2)
    assert result["effective"]["configs"]["baseline"]["session.head_start"] is False
    for plot in result["plots"]:
        data = Path(plot).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    records = json.loads(Path(result["records"]).read_text())
    assert records["headstart"]["qa"][0]["events"] and "reply_audio" not in records["headstart"]["qa"][0]
    assert records["headstart"]["replies_heard"][0]["heard"].strip()
    assert not math.isnan(result["configs"]["headstart"]["v2v_p90_s"])


def test_synthetic_questions_have_true_speech_bounds_and_room_noise():
    from headstart.bench.conversation.data import LEAD_S, interleave, synthetic_turns
    from headstart.config import ThreadPlan, TTSConfig
    from headstart.tts.engines import load_synthesizer

    voice = load_synthesizer(TTSConfig(engine="espeak"), ThreadPlan())
    turns = synthetic_turns(voice, ["Why is the sky blue?", "How long should I boil an egg?"], noise_rms=1e-3)
    for t in turns:
        assert t.synthetic and t.audio.dtype == np.float32
        assert LEAD_S <= t.speech_start_s < t.speech_end_s <= t.audio.shape[0] / 16_000
        assert 0.5 < t.speech_end_s - t.speech_start_s < 4.0
        lead = t.audio[: int(LEAD_S * 16_000)]
        assert 5e-4 < float(np.sqrt(np.mean(lead**2))) < 2e-3  # room noise, not digital zero
        tail = t.audio[int(t.speech_end_s * 16_000) + 160 :]
        assert float(np.abs(tail).max(initial=0.0)) < 0.01 + 6e-3  # nothing loud after the true end
    mixed = interleave(turns[:1] * 3, turns[1:])
    assert [t.synthetic for t in mixed] == [True] * 4 and mixed[1] is turns[1]


class _Silent:
    sample_rate = 16_000

    def synthesize(self, text):
        yield np.zeros(1600, np.float32)


def test_a_silent_synthesiser_is_a_clear_error():
    from headstart.bench.conversation.data import synthetic_turns

    with pytest.raises(ValueError, match="no speech"):
        synthetic_turns(_Silent(), ["hello"], noise_rms=1e-3)


@pytest.mark.models
def test_pause_set_takes_one_recording_per_item_first():
    from headstart.bench.conversation.data import load_user_turns, pause_turns
    from headstart.config import ASRConfig
    from headstart.voice.asr import WhisperASR

    asr = WhisperASR.load(ASRConfig(model="whisper-tiny.en"), cpu_threads=1)
    turns = load_user_turns(None, 4)
    pauses = pause_turns(turns, asr, 2, seed=0)
    assert len(pauses) == 2
    assert pauses[0].name.startswith("goforward+pause") and pauses[0].name.endswith("-noise")
    assert pauses[1].name.endswith("-zero") and not pauses[1].name.startswith("goforward")
    for p in pauses:
        rec = next(t for t in turns if p.name.startswith(t.name + "+"))
        start, end = p.pause
        assert 0.6 <= end - start <= 1.5 and rec.speech_start_s < start < rec.speech_end_s
        assert p.speech_end_s == pytest.approx(rec.speech_end_s + end - start)
        assert p.audio.shape[0] == pytest.approx(rec.audio.shape[0] + (end - start) * 16_000, abs=2)


def test_an_unreachable_server_is_a_clear_error():
    import socket

    with socket.socket() as s:  # a free port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.run(
        [sys.executable, "-m", "headstart", "bench", "conversation", "--server", f"ws://127.0.0.1:{port}/ws",
         "--scenarios", "qa", "--turns", "1", "--synthetic", "none", "--no-plots", "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "no session could run" in proc.stderr and "Traceback" not in proc.stderr


def test_a_configuration_with_another_asr_runs_that_asr():
    """`whisper-asr` ran the loaded (Moonshine) engine under whisper's name until each configuration got
    its own ASR: the components a configuration runs hold the engine its `asr.model` names."""
    from headstart.bench.conversation.run import components_for
    from headstart.session.components import Components
    from headstart.voice.asr import WhisperASR
    from headstart.voice.moonshine import MoonshineASR
    from tests.prepared import prepared

    base = PipelineConfig()
    default_asr = prepared(lambda: MoonshineASR.load(base.asr, cpu_threads=1))
    # the ASR is what this test is about: no LLM or voice is loaded (components_for only copies them)
    components = Components(config=base, asr=default_asr, llm=None, tts=None)
    loaded = {base.asr.model: default_asr}
    logs: list[str] = []
    known = variants(base)
    headstart = components_for(components, apply(known["headstart"], base), loaded, logs.append)
    assert headstart.asr is default_asr and not logs
    whisper_run = components_for(components, apply(known["whisper-asr"], base), loaded, logs.append)
    assert isinstance(whisper_run.asr, WhisperASR) and whisper_run.config.asr.model == "whisper-tiny.en"
    assert components_for(components, apply(known["whisper-asr"], base), loaded, logs.append).asr is whisper_run.asr
    assert len(logs) == 1  # loaded once


class _Tone:
    sample_rate = 16_000

    def synthesize(self, text):
        yield (0.1 * np.sin(np.arange(8000) * 0.2)).astype(np.float32)


def test_the_tools_scenario_alternates_tool_requests_and_plain_questions_in_one_voice():
    from headstart.bench.conversation.data import EVERYDAY_QUESTIONS, TOOL_REQUESTS, tool_scenario_turns

    turns = tool_scenario_turns(_Tone(), 3, noise_rms=1e-3)
    assert [t.name for t in turns] == ["tool-1", "plain-1", "tool-2", "plain-2", "tool-3", "plain-3"]
    assert [t.tool_request for t in turns] == [True, False] * 3
    assert [t.text for t in turns[::2]] == list(TOOL_REQUESTS[:3])
    assert [t.text for t in turns[1::2]] == list(EVERYDAY_QUESTIONS[:3])
    assert all(t.synthetic and t.speech_end_s > t.speech_start_s for t in turns)
    assert tool_scenario_turns(_Tone(), 0, noise_rms=1e-3) == []


def _tools_turn(name: str, tool_request: bool, v2v_s: float, tool: str | None) -> TurnRecord:
    r = TurnRecord(name, "", speech_end_at_s=10.0, speech_end_stream_s=2.0, tool_request=tool_request)
    r.events = [(10.3, "turn.end", {"audio_ms": 2300.0}), (10.31, "reply.started", {"reply_id": "r1"})]
    if tool is not None:
        r.events.append((10.32, "tool.call", {"reply_id": "r1", "call_id": "c1", "name": tool, "arguments": {}}))
    r.events += [(10.0 + v2v_s, "audio", audio(0.1)),
                 (12.0, "metrics.turn", {"transcript": name, "reply": "ok", "tts_ttfa_ms": 50.0, "preemptive": "hit"})]
    return r


def test_tool_turns_are_compared_with_plain_turns_and_misheard_requests_kept_apart():
    from headstart.bench.conversation.metrics import TOOL_GAP_TARGET_S, tool_turn_figures

    records = [_tools_turn("tool-1", True, 0.40, "timer_start"), _tools_turn("plain-1", False, 0.35, None),
               _tools_turn("tool-2", True, 0.50, "get_time"), _tools_turn("plain-2", False, 0.45, None),
               _tools_turn("tool-3", True, 0.30, None),  # misheard: the LLM answered
               _tools_turn("plain-3", False, 0.20, "calculate")]  # a plain question that ran a tool
    figures = [turn_figures(r) for r in records]
    assert [f["tool"] for f in figures[:2]] == ["timer_start", None] and figures[0]["tool_request"] is True
    t = tool_turn_figures(figures)
    assert t["tool_turns"] == 2 and t["plain_turns"] == 2
    assert t["tool_requests_missed"] == 1 and t["false_actions"] == 1
    assert t["tool_v2v_p50_s"] == pytest.approx(0.45) and t["plain_v2v_p50_s"] == pytest.approx(0.40)
    assert t["v2v_p50_gap_s"] == pytest.approx(0.05) and t["within_target"] is (0.05 <= TOOL_GAP_TARGET_S)
    assert t["tool_eou_p50_s"] == pytest.approx(0.3) and t["tool_preemptive_hits"] == 2
    assert tool_turn_figures([])["within_target"] is None
