"""`headstart bench tts`: the table, the JSON last line, skipped engines, bad arguments."""

from __future__ import annotations

import argparse
import json
import shutil

import pytest

from headstart.bench import tts as bench_tts
from headstart.cli.bench import tts as bench_tts_cli


def _run(capsys, *argv: str) -> tuple[int, list[str]]:
    parser = argparse.ArgumentParser()
    bench_tts_cli.add_arguments(parser)
    rc = bench_tts_cli.run_from_args(parser.parse_args(list(argv)))
    return rc, capsys.readouterr().out.strip().splitlines()


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
def test_bench_prints_a_table_and_ends_with_one_json_line(capsys, tmp_path):
    rc, lines = _run(capsys, "--engines", "espeak,coqui", "--runs", "2", "--coqui-python", str(tmp_path / "python"))
    assert rc == 0
    result = json.loads(lines[-1])
    assert result["bench"] == "tts" and result["runs"] == 2
    espeak = result["engines"]["espeak"]
    assert 0 < espeak["ttfa_s"] < 5 and 0 < espeak["rtf"] < 5 and espeak["audio_s"] > 1
    assert espeak["sample_rate"] == 22_050
    assert 0 <= espeak["ttfa_cpu_s"] <= espeak["ttfa_s"] + 0.05 and 0 <= espeak["rtf_cpu"] < 5
    assert "make coqui-env" in result["engines"]["coqui"]["skipped"]  # missing env: reported, not fatal
    assert result["first_clause"] == "Sure," and len(result["first_clauses"]) == len(bench_tts.REPLIES)
    assert any(line.startswith("espeak") for line in lines[:-1]) and "skipped" in "\n".join(lines[:-1])


def test_bench_json_only_and_bad_arguments(capsys, tmp_path):
    rc, lines = _run(capsys, "--engines", "nope")
    assert rc == 2 and "unknown engine" in lines[-1]
    rc, lines = _run(capsys, "--runs", "0")
    assert rc == 2
    rc, lines = _run(capsys, "--json", "--engines", "coqui", "--coqui-python", str(tmp_path / "python"))
    assert rc == 1 and len(lines) == 1 and "skipped" in json.loads(lines[0])["engines"]["coqui"]


def test_measure_rejects_text_with_nothing_to_say():
    with pytest.raises(ValueError, match="nothing to speak"):
        bench_tts.measure(object(), [], runs=1)


def test_pseudo_tokens_join_back_and_chunks_carry_the_step_that_completed_them():
    text = "Sure, here is the plan. Meet Dr. Lee at 9:30 am."
    tokens = bench_tts.pseudo_tokens(text)
    assert "".join(tokens) == text and tokens[:3] == ["Sure", ",", " here"]
    chunks = bench_tts.stream_chunks(text)
    assert [c.spoken for c in chunks][0] == "Sure,"
    assert chunks[0].ready_step == 2  # "Sure," is certain once " here" arrives
    assert chunks[-1].ready_step == len(tokens)  # the last one at the end of the reply (flush)
    assert all(a.ready_step <= b.ready_step for a, b in zip(chunks, chunks[1:]))


def test_replay_stream_on_a_virtual_clock():
    chunk = bench_tts.StreamedChunk
    chunks = [chunk("Sure,", 2), chunk("here is the plan.", 8)]
    # token step 0.1 s; chunk 0 ready at 0.2 s, synthesised in 0.1 s, 0.5 s of audio -> plays 0.3..0.8;
    # chunk 1 ready at 0.8 s, synthesised in 0.3 s -> audio at 1.1 s: 0.3 s of stall, ends at 2.1 s
    r = bench_tts.replay_stream(chunks, [0.1, 0.3], [0.1, 0.3], [0.5, 1.0], tpot_s=0.1)
    assert r["first_audio_s"] == pytest.approx(0.3)
    assert r["stall_s"] == pytest.approx(0.3) and r["end_s"] == pytest.approx(2.1)
    # a fast LLM: chunk 1 ready early, synthesis waits for the engine, playback never stalls
    r = bench_tts.replay_stream([chunk("a", 0), chunk("b", 1)], [0.1, 0.1], [0.1, 0.1], [1.0, 1.0], tpot_s=0.01)
    assert r["stall_s"] == 0.0 and r["end_s"] == pytest.approx(2.1)
    with pytest.raises(ValueError, match="nothing to speak"):
        bench_tts.replay_stream([], [], [], [], tpot_s=0.1)


def test_compare_policies_parse_and_run(capsys):
    policies = bench_tts.parse_policies("4/8, off")
    assert policies["4/8"].first_chunk_min_words == 4 and policies["4/8"].first_chunk_max_words == 8
    assert policies["off"].first_clause is False and bench_tts.parse_policies(None) == {}
    with pytest.raises(ValueError, match="MIN/MAX"):
        bench_tts.parse_policies("4-8")
    rc, lines = _run(capsys, "--engines", "espeak", "--compare-policies", "x")
    assert rc == 2 and "bad policy" in lines[-1]


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
def test_compared_policies_are_timed_in_the_same_run(capsys):
    rc, lines = _run(capsys, "--engines", "espeak", "--runs", "1", "--compare-policies", "4/8,off", "--tpot-s", "0.2")
    assert rc == 0
    result = json.loads(lines[-1])
    main, old = result["engines"]["espeak"], result["compared_policies"]["4/8"]
    assert main["stream"]["tpot_s"] == 0.2 and old["engines"]["espeak"]["stream"]["tpot_s"] == 0.2
    assert result["first_clauses"][0] == "Sure," and old["first_clauses"][0] == "Sure, here is the plan for today."
    off = result["compared_policies"]["off"]
    assert off["first_clauses"][0] == "Sure, here is the plan for today."
    # the whole first sentence takes longer to be ready than "Sure,": first audio comes later
    assert off["engines"]["espeak"]["stream"]["first_audio_s"] > main["stream"]["first_audio_s"]


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
def test_engines_take_the_tts_flag_names_too(capsys):
    """`--engines espeak-ng` (as `--tts` spells it) is the espeak row of the JSON."""
    rc, lines = _run(capsys, "--json", "--engines", "espeak-ng", "--runs", "1")
    assert rc == 0 and list(json.loads(lines[-1])["engines"]) == ["espeak"]
