"""`headstart bench tts`: the table, the JSON last line, skipped engines, bad arguments."""

from __future__ import annotations

import argparse
import json
import shutil

import pytest

from headstart.bench import tts as bench_tts


def _run(capsys, *argv: str) -> tuple[int, list[str]]:
    parser = argparse.ArgumentParser()
    bench_tts.add_arguments(parser)
    rc = bench_tts.run_from_args(parser.parse_args(list(argv)))
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
