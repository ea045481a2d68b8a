"""`headstart bench ask-back`: the packaged turns, the classes and the sweep (fast), and a small real run
(the default ASR through the session's listener on one espeak-ng question and the shortest recording)."""

from __future__ import annotations

import argparse
import json
import shutil

import numpy as np
import pytest

from headstart.bench import ask_back as bench
from headstart.cli.bench import ask_back as bench_cli


def _run(capsys, *argv: str) -> tuple[int, list[str]]:
    parser = argparse.ArgumentParser()
    bench_cli.add_arguments(parser)
    rc = bench_cli.run_from_args(parser.parse_args(list(argv)))
    return rc, capsys.readouterr().out.strip().splitlines()


def _heard(wer: float, confidences: tuple[float | None, ...], texts: tuple[str, ...] | None = None,
           source: str = "synthetic") -> bench.Heard:
    utterance = bench.Utterance("x", source, "en-us", "what is the capital of japan", np.zeros(1, np.float32), 0.0)
    return bench.Heard(utterance, texts if texts is not None else ("some words",) * len(confidences),
                       confidences, wer)


def test_the_packaged_turns_are_about_forty_distinct_sentences():
    turns = bench.questions()
    assert 38 <= len(turns) <= 45 and len(set(turns)) == len(turns)
    assert not any(t.startswith("#") for t in turns) and all(len(t.split()) >= 3 for t in turns)


def test_classes_follow_the_wer_and_no_words_is_unheard():
    assert _heard(0.0, (0.9,)).kind == "clean"
    assert _heard(0.2, (0.9,)).kind == "partly_wrong"
    assert _heard(0.5, (0.9,)).kind == "garbled"
    assert _heard(1.0, (), texts=()).kind == "unheard"


def test_a_turn_is_asked_back_by_the_sessions_rule_and_a_split_turn_by_its_lower_part():
    assert _heard(0.0, (0.69,)).asked_back(0.70) and not _heard(0.0, (0.70,)).asked_back(0.70)
    assert not _heard(0.0, (0.1,)).asked_back(None)  # None: the session never asks back
    assert not _heard(0.0, (None,)).asked_back(0.70)  # unknown confidence: answered
    split = _heard(0.6, (0.95, 0.6))
    assert split.confidence == 0.6 and split.asked_back(0.65) and not split.asked_back(0.6)


def test_the_sweep_counts_each_class_in_all_and_per_source():
    heard = [_heard(0.0, (0.8,)), _heard(0.0, (0.95,), source="real"), _heard(0.7, (0.5,)),
             _heard(0.7, (0.85,), source="real"), _heard(0.25, (0.72,)), _heard(1.0, (), texts=())]
    low, high = bench.sweep(heard, (0.6, 0.9))
    assert (low["clean_asked_back"], low["garbled_asked_back"], low["partly_wrong_asked_back"]) == (0, 1, 0)
    assert (high["clean_asked_back"], high["garbled_asked_back"], high["partly_wrong_asked_back"]) == (1, 2, 1)
    assert (high["clean"], high["garbled"], high["partly_wrong"]) == (2, 2, 1)  # the unheard turn is in no class
    assert high["by_source"]["real"] == {"clean": 1, "clean_asked_back": 0, "partly_wrong": 0,
                                         "partly_wrong_asked_back": 0, "garbled": 1, "garbled_asked_back": 1}


class _ScriptedListener:
    """Takes any audio; its events: a final superseded when the speech resumed, the one the first turn
    ended on, a final without an end of turn (none follows), and the second turn's."""

    def __init__(self) -> None:
        from headstart.events import EndOfTurn, FinalTranscript

        self.events = [FinalTranscript("At the tone", 1.0, 0.5), FinalTranscript("At the tone please record", 2.0, 0.9),
                       EndOfTurn(2.1), FinalTranscript("", 3.0, None), FinalTranscript("Thanks", 4.0, 0.8), EndOfTurn(4.1)]

    async def push(self, frame) -> None:
        pass

    async def settle(self) -> None:
        pass

    async def end_input(self) -> None:
        pass

    async def __aiter__(self):
        for event in self.events:
            yield event


def test_a_turn_is_the_final_its_end_of_turn_came_after():
    import asyncio

    finals = asyncio.run(bench._turn_finals(_ScriptedListener(), np.zeros(1600, np.float32)))
    assert [(f.text, f.confidence) for f in finals] == [("At the tone please record", 0.9), ("Thanks", 0.8)]


def test_the_default_threshold_is_in_the_sweep():
    from headstart.config import SessionConfig

    assert SessionConfig().ask_back_below in bench.THRESHOLDS
    assert bench.THRESHOLDS[0] == 0.5 and bench.THRESHOLDS[-1] == 0.9


def test_arguments_and_a_bad_limit(capsys):
    parser = argparse.ArgumentParser()
    bench_cli.add_arguments(parser)
    args = parser.parse_args([])
    assert args.asr is None and args.limit is None and args.voices == "en-us,en-us+f3,en-gb" and not args.json
    rc, lines = _run(capsys, "--limit", "0")
    assert rc == 2 and "--limit" in lines[-1]


@pytest.mark.models
@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
def test_a_small_run_prints_the_turns_the_table_and_one_json_line(capsys):
    rc, lines = _run(capsys, "--limit", "1", "--voices", "en-us")
    assert rc == 0
    result = json.loads(lines[-1])
    assert result["bench"] == "ask-back" and result["synthetic"] == 1 and result["real"] == 1
    assert result["default_below"] == 0.70 and result["default"]["below"] == 0.70
    assert [r["below"] for r in result["thresholds"]] == list(bench.THRESHOLDS)
    first, shortest = result["utterances"]
    # espeak's en-us voice is understood; its confidence is the listener's mean word probability
    assert first["source"] == "synthetic" and first["wer"] == 0 and first["kind"] == "clean"
    assert 0.7 < first["confidence"] <= 1 and first["finals"] == 1
    assert shortest["source"] == "real" and 0 < shortest["confidence"] <= 1
    assert sum(result["turns"].values()) == 2 and result["machine"]["cores"] >= 1
    assert any("clean asked back" in line for line in lines[:-1]) and lines[0].startswith("[1/2] q01-en-us")


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
def test_an_unknown_voice_is_a_clear_error_not_espeaks_silent_default(capsys):
    assert bench.unknown_voices(bench.VOICES) == []
    assert bench.unknown_voices(("en-us+zz", "no-such-voice", "en-gb")) == ["en-us+zz", "no-such-voice"]
    rc, lines = _run(capsys, "--voices", "en-us+zz", "--limit", "1", "--asr", "/nonexistent")
    assert rc == 2 and "no voice en-us+zz" in lines[-1]
