"""scripts/make_fit_speech.py without the network: the prompt-text parsing, the pairing with audio files,
the filter that keeps the bench held out, the G.722 decoder, and the error when apt is missing."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).resolve().parents[1] / "scripts" / "make_fit_speech.py"
_spec = importlib.util.spec_from_file_location("make_fit_speech", _PATH)
mfs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mfs)

TEXTS = """; Core Asterisk Sounds in English

activated: Activated.
beep: [this is a simple beep tone]
conf-full: The conference is full.
conf-lockednow: The conference is now locked
vm-goodbye: Goodbye.
dictate/forhelp: press 0 for help
silence/1: (1 second of silence)
auth-thankyou: Thank you.
press-5: Press 5 to repeat.
""".splitlines()


def test_parse_prompt_texts_keeps_spoken_texts_with_subfolders():
    texts = mfs.parse_prompt_texts(TEXTS)
    assert texts["activated"] == "Activated."
    assert texts["dictate/forhelp"] == "press 0 for help"
    assert "beep" not in texts and "silence/1" not in texts  # descriptions of sounds, not words
    assert len(texts) == 7


def test_normalize_case_punctuation_digits():
    assert mfs.normalize("Press 5, then 42!") == ["press", "five", "then", "forty", "two"]
    assert mfs.normalize("Call-Forward on Busy.") == ["call", "forward", "on", "busy"]
    assert mfs.normalize("press five then forty two") == mfs.normalize("Press 5, then 42!")


def test_overlaps_equal_or_a_shared_run_of_three_words():
    bench = ["This conference is full.", "5 5", "Press 1 to listen to the message."]
    assert mfs.overlaps("this conference is full", bench)  # equal after normalising
    assert mfs.overlaps("five five", bench)  # equal, digits as words (two words: equality only)
    assert mfs.overlaps("Please press one to listen again.", bench)  # "press one to"
    assert not mfs.overlaps("The conference is now locked", bench)  # shares two-word runs only
    assert not mfs.overlaps("Five.", bench)
    assert not mfs.overlaps("Goodbye.", [])


def test_select_prompts_pairs_and_drops_the_bench():
    texts = mfs.parse_prompt_texts(TEXTS)
    audio = ["activated", "conf-full", "conf-lockednow", "vm-goodbye", "dictate/forhelp", "no-text-here", "press-5"]
    bench_texts = ["That conference is full.", "Press 5 to repeat the menu."]
    kept, dropped = mfs.select_prompts(texts, audio, bench_texts, held_out_names=["conf-full"])
    assert kept == [("activated", "Activated."), ("conf-lockednow", "The conference is now locked"),
                    ("dictate/forhelp", "press 0 for help"), ("vm-goodbye", "Goodbye.")]  # sorted by name
    assert dropped == {"no_text": 1, "bench_name": 1, "overlap": 1}


def test_select_prompts_against_the_real_bench():
    from headstart.corpus.recordings import recordings

    bench = recordings()
    texts = {"conf-full": "That conference is full.", "new-prompt": "Your call is important to us.",
             "echo": "there might be prudently in his power"}  # a run of the LibriVox sentence
    kept, dropped = mfs.select_prompts(texts, texts, [r.text for r in bench], [r.name for r in bench])
    assert kept == [("new-prompt", "Your call is important to us.")]
    assert dropped["bench_name"] == 1 and dropped["overlap"] == 1


def test_decode_g722_round_trip(tmp_path):
    av = pytest.importorskip("av")
    t = np.arange(16000) / 16000
    pcm = (0.3 * np.sin(2 * np.pi * 440 * t) * 32767).astype(np.int16)
    path = tmp_path / "tone.g722"
    with av.open(str(path), "w", format="g722") as out:
        stream = out.add_stream("g722", rate=16000)
        stream.layout = "mono"
        frame = av.AudioFrame.from_ndarray(pcm[None, :], format="s16", layout="mono")
        frame.rate = 16000
        for packet in stream.encode(frame):
            out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    samples = mfs.decode_g722(path)
    assert samples.dtype == np.float32 and samples.ndim == 1
    assert abs(len(samples) - 16000) <= 320
    rms = float(np.sqrt(np.mean(samples[2000:14000] ** 2)))
    assert 0.15 < rms < 0.28  # the tone (RMS 0.21) survives the codec


def test_fetch_packages_without_apt_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(mfs.shutil, "which", lambda tool: None)
    with pytest.raises(SystemExit, match="apt-get not found"):
        mfs.fetch_packages(tmp_path)
