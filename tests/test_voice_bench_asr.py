"""`headstart bench asr`: input folder handling and the pause set's fill (fast; the run itself is slow)."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from headstart.audio import write_wav
from headstart.bench import asr as bench


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
    from headstart.bench.data import recording

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
    bench.add_arguments(parser)
    args = parser.parse_args(["--json", "--input-dir", "x", "--endpointing", "silence", "--limit", "2"])
    assert args.json and args.input_dir == "x" and args.endpointing == "silence" and args.limit == 2


def test_no_streaming_switch():
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    assert parser.parse_args(["--no-streaming"]).no_streaming and not parser.parse_args([]).no_streaming
