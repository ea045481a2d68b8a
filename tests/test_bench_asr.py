"""`headstart bench asr`: input folder handling and the pause set's fill (fast; the run itself is slow)."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from headstart.audio import write_wav
from headstart.bench import asr as bench
from headstart.cli.bench import asr as bench_cli


def test_input_dir_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="transcripts.tsv"):
        bench.load_items(str(tmp_path))
    (tmp_path / "transcripts.tsv").write_text("file\ttext\nmissing.wav\thello\n")
    with pytest.raises(FileNotFoundError, match="missing.wav"):
        bench.load_items(str(tmp_path))
    (tmp_path / "transcripts.tsv").write_text("file\n")
    with pytest.raises(ValueError, match="two columns"):
        bench.load_items(str(tmp_path))


def test_input_dir_reads_wavs_and_finds_the_speech_end(tmp_path):
    from headstart.corpus.recordings import recording

    rec = recording("librivox-0880")
    write_wav(tmp_path / "a.wav", rec.read(), 16000)
    (tmp_path / "transcripts.tsv").write_text("file\ttext\textra\na.wav\the was not an ill disposed young man\tx\n")
    (item,) = bench.load_items(str(tmp_path))
    assert item.text.startswith("he was") and abs(item.speech_end_s - rec.speech_end_s) < 0.15


def test_room_noise_is_quiet_but_not_digital_zero():
    audio = np.zeros(16000, np.float32)
    noise = bench.room_noise(audio, 0.5, 1.0, np.random.default_rng(0))
    rms = float(np.sqrt(np.mean(noise.astype(np.float64) ** 2)))
    assert noise.shape == (16000,) and 1e-4 < rms < 1e-2


def test_arguments():
    parser = argparse.ArgumentParser()
    bench_cli.add_arguments(parser)
    args = parser.parse_args(["--json", "--input-dir", "x", "--endpointing", "silence", "--limit", "2"])
    assert args.json and args.input_dir == "x" and args.endpointing == "silence" and args.limit == 2


def test_no_streaming_switch():
    parser = argparse.ArgumentParser()
    bench_cli.add_arguments(parser)
    assert parser.parse_args(["--no-streaming"]).no_streaming and not parser.parse_args([]).no_streaming


def test_eou_model_switches_default_to_the_session_and_the_heads_thresholds():
    parser = argparse.ArgumentParser()
    bench_cli.add_arguments(parser)
    args = parser.parse_args([])
    assert args.llm is None and args.quantize is None and args.eou_thresholds == "head"
    args = parser.parse_args(["--llm", "smollm2-135m", "--quantize", "none", "--eou-thresholds", "config"])
    assert (args.llm, args.quantize, args.eou_thresholds) == ("smollm2-135m", "none", "config")


def test_stage_times_follow_the_turn():
    from headstart.events import EndOfTurn, FinalTranscript, SpeechEnded

    res = bench.RunResult()
    res.speech_ends = [(1.3, SpeechEnded(1.2))]
    res.finals = [(1.6, FinalTranscript("go home", 1.2))]
    res.scores = [(1.1, "go", 0.1), (1.8, "go home", 0.9)]
    res.turns = [(1.8, EndOfTurn(1.8, 0.9))]
    assert bench._stage_times(res, 1.8) == {"vad_end": 1.3, "final": 1.6, "final_eou": 1.8, "decision": 1.8,
                                            "end_of_turn": 1.8}
    # the final repeats a text scored earlier (cached): its score was known when the final came
    res.scores = [(1.1, "go home", 0.9)]
    assert bench._stage_times(res, 1.8)["final_eou"] == 1.6


def test_cpu_timing_counts_process_cpu_time_one_job_at_a_time(monkeypatch):
    import types

    clocks = {"cpu": iter([10.0, 10.25]), "wall": iter([5.0, 5.75])}
    fake = types.SimpleNamespace(process_time=lambda: next(clocks["cpu"]), perf_counter=lambda: next(clocks["wall"]))
    monkeypatch.setattr(bench, "time", fake)
    sim = bench._Sim("cpu")
    held = []
    out, cost = sim.measure(lambda: held.append(sim.lock.locked()) or "x")
    assert (out, cost, held) == ("x", 0.25, [True]) and not sim.lock.locked()
    out, cost = bench._Sim("wall").measure(lambda: "y")
    assert (out, cost) == ("y", 0.75)
    parser = argparse.ArgumentParser()
    bench_cli.add_arguments(parser)
    assert parser.parse_args([]).timing == "wall" and parser.parse_args(["--timing", "cpu"]).timing == "cpu"


def test_a_turn_whose_speech_resumed_is_scored_on_its_last_final_only():
    """A turn's later FinalTranscript covers all of it (speech resumed after a pause); the
    bench joined every final, so "press one. press one. press two" was scored for "press one. press two"."""
    import asyncio

    from headstart.config import ASRConfig, EndpointConfig, PipelineConfig, VADConfig
    from headstart.voice.asr import ListeningDefaults, Transcription
    from headstart.voice.words import Word, join_words

    class BlockASR:  # one word per 0.25 s block with energy, named by the block's stream position
        listening = ListeningDefaults()

        def transcribe(self, samples, offset_s=0.0, prompt=None):
            words = []
            first = int(round(offset_s * 4))
            for k in range(samples.shape[0] // 4000):
                block = samples[k * 4000 : (k + 1) * 4000]
                if np.sqrt(np.mean(block**2)) > 0.01:
                    t = (first + k) / 4
                    words.append(Word(f" w{first + k}", t, t + 0.2))
            return Transcription(tuple(words), join_words(words), 0.0, -0.1, samples.shape[0] / 16000)

    rng = np.random.default_rng(0)
    from headstart.corpus.recordings import recording

    speech = recording("librivox-0880").read()
    audio = np.concatenate([speech, np.zeros(int(0.4 * 16000), np.float32), speech,
                            (rng.standard_normal(32000) * 1e-4).astype(np.float32)])
    config = PipelineConfig(vad=VADConfig(), asr=ASRConfig(), endpoint=EndpointConfig(semantic=False, silence_s=1.0))
    res = asyncio.run(bench._stream(audio, BlockASR(), config, None, timing="cpu"))
    finals = [f.text for _, f in res.finals if f.text]
    assert len(finals) >= 2 and len(res.turns) == 1, finals  # the pause gave a final, speech resumed
    assert res.final_text == finals[-1]


def test_the_bench_streams_each_engine_by_its_own_settings_and_counts_its_passes():
    """The bench wraps the engine (`_PacedASR`): the wrapper must carry the engine's `listening`
    settings, or every engine would be benchmarked with whisper's cadence and final pass."""
    import asyncio

    from headstart.config import ASRConfig, EndpointConfig, PipelineConfig, VADConfig
    from headstart.voice.asr import ListeningDefaults, Transcription
    from headstart.voice.words import Word, join_words

    class BlockASR:
        listening = ListeningDefaults()

        def transcribe(self, samples, offset_s=0.0, prompt=None):
            words = [Word(f" w{k}", offset_s + k / 4, offset_s + k / 4 + 0.2) for k in range(samples.shape[0] // 4000)]
            return Transcription(tuple(words), join_words(words), 0.0, -0.1, samples.shape[0] / 16000)

    class FrequentASR(BlockASR):
        listening = ListeningDefaults(partial_interval_s=0.1)

    from headstart.corpus.recordings import recording

    audio = np.concatenate([recording("librivox-0880").read(), np.zeros(16000, np.float32)])
    config = PipelineConfig(vad=VADConfig(), asr=ASRConfig(), endpoint=EndpointConfig(semantic=False))
    plain = asyncio.run(bench._stream(audio, BlockASR(), config, None, timing="cpu"))
    frequent = asyncio.run(bench._stream(audio, FrequentASR(), config, None, timing="cpu"))
    assert plain.asr_passes >= 5 and frequent.asr_passes >= 2 * plain.asr_passes, (plain.asr_passes, frequent.asr_passes)
    parser = argparse.ArgumentParser()
    bench_cli.add_arguments(parser)
    assert parser.parse_args([]).model is None  # ASRConfig.model, the session's default engine


def test_eou_head_file_option_reads_a_head_for_the_eou_llm_only(tmp_path):
    from headstart.llm.eou_head import weights_path

    parser = argparse.ArgumentParser()
    bench_cli.add_arguments(parser)
    assert parser.parse_args([]).eou_head is None
    path = str(weights_path("qwen2.5-coder-0.5b", packaged=True))
    assert parser.parse_args(["--eou-head", path]).eou_head == path
    assert bench.head_weights(path, "qwen2.5-coder-0.5b").thresholds is not None
    with pytest.raises(ValueError, match="smollm2-135m"):
        bench.head_weights(path, "smollm2-135m")
    with pytest.raises(FileNotFoundError):
        bench.head_weights(str(tmp_path / "none.npz"), "qwen2.5-coder-0.5b")
    (tmp_path / "bad.npz").write_bytes(b"not a head")
    with pytest.raises(ValueError, match="not an EOU head"):
        bench.head_weights(str(tmp_path / "bad.npz"), "qwen2.5-coder-0.5b")


class _Head:
    """An EOU model as the bench and the session see it: a trained head with calibrated thresholds."""

    def __init__(self, thresholds):
        import types

        self.weights = types.SimpleNamespace(thresholds=thresholds)


class _Components:
    def __init__(self, kind, model):
        self.kind, self.model = kind, model

    def eou_model(self, kind):
        return self.model if kind == self.kind else None


def _end_of_turn_s(endpoint, probability):
    """When the endpointer built on `endpoint` ends a turn whose speech ended at 1.0 s and whose text
    scored `probability` (10 ms steps)."""
    from headstart.events import SpeechEnded, SpeechStarted
    from headstart.voice.endpoint import Endpointer

    endpointer = Endpointer(endpoint)
    endpointer.push(SpeechStarted(0.0))
    endpointer.push(SpeechEnded(1.0))
    endpointer.push_eou(probability, "go home.")
    for step in range(100, 400):
        if endpointer.poll(step / 100) is not None:
            return step / 100
    return None


@pytest.mark.parametrize("kind, model, head_thresholds", [
    ("head", _Head((0.02, 0.7)), "trained"),  # the head's own calibration
    ("head", _Head((0.02, 0.7)), "config"),  # --eou-thresholds config: EndpointConfig's
    ("head", _Head(None), "trained"),  # a head trained without calibration
    ("token", object(), "trained"),
])
def test_the_bench_decides_the_end_of_turn_as_the_server_does_on_the_same_scores(kind, model, head_thresholds):
    """The bench measures the endpoint a session builds (session/eou.py resolve_eou): the same EOU
    probability ends the turn at the same time in both, over the whole range of scores."""
    from headstart.config import EndpointConfig, PipelineConfig, SessionConfig
    from headstart.session.eou import resolve_eou

    bench_endpoint = bench.endpoint_config(True, kind, model, head_thresholds=head_thresholds, acoustic_model="none")
    server = PipelineConfig(endpoint=EndpointConfig(eou_scorer=kind, head_thresholds=head_thresholds),
                            session=SessionConfig(eou="auto"))
    server_endpoint = resolve_eou(_Components(kind, model), server).endpoint
    probabilities = [None, 0.0, 0.001, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.99, 1.0]
    bench_times = [_end_of_turn_s(bench_endpoint, p) for p in probabilities]
    assert bench_times == [_end_of_turn_s(server_endpoint, p) for p in probabilities]
    assert len(set(bench_times)) > 2  # the scores did adapt the silence


def test_the_bench_without_a_semantic_signal_keeps_the_fixed_silence_and_no_acoustic_model():
    endpoint = bench.endpoint_config(False, "head", None, acoustic_model="smart-turn-v3.2")
    assert not endpoint.semantic and endpoint.acoustic_model is None
    assert {_end_of_turn_s(endpoint, p) for p in (None, 0.01, 0.99)} == {_end_of_turn_s(endpoint, None)}
    veto = bench.endpoint_config(True, "head", None, acoustic_model="smart-turn-v3.2", acoustic_mode="veto",
                                 acoustic_veto_below=0.1)
    assert (veto.acoustic_model, veto.acoustic_mode, veto.acoustic_veto_below) == ("smart-turn-v3.2", "veto", 0.1)


def test_the_bench_streams_through_the_listener_a_session_builds(monkeypatch):
    """`_stream` builds its listener with session/listening.py `build_listener` on the config's endpoint."""
    import asyncio

    from headstart.config import ASRConfig, EndpointConfig, PipelineConfig, VADConfig
    from headstart.session import listening
    from headstart.voice.asr import ListeningDefaults

    class SilentASR:
        listening = ListeningDefaults()

        def transcribe(self, samples, offset_s=0.0, prompt=None):
            raise AssertionError("no speech, no pass")

    built = []
    real = listening.build_listener

    def spy(config, asr, executor, endpoint, **scorers):
        built.append(endpoint)
        return real(config, asr, executor, endpoint, **scorers)

    monkeypatch.setattr(listening, "build_listener", spy)
    config = PipelineConfig(vad=VADConfig(), asr=ASRConfig(), endpoint=EndpointConfig(semantic=False, silence_s=0.7))
    res = asyncio.run(bench._stream(np.zeros(8000, np.float32), SilentASR(), config, None, timing="cpu"))
    assert built == [config.endpoint] and res.turns == []
