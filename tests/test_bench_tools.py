"""`headstart bench tools` in its small form: the real matcher over every fourth request; no tool runs
for a request that needs none, and nearly every tool request gets the right tool and arguments."""

from __future__ import annotations

import json

import pytest

from headstart.bench import tools
from headstart.bench.tools_spoken import several_sentences
from headstart.cli import build_parser


def test_the_request_set_is_large_and_half_needs_no_tool():
    everything = tools.requests()
    no_tool = [r for r in everything if r.tool is None]
    assert len(everything) >= 150 and len(no_tool) * 2 >= len(everything) - 10


def test_the_small_bench_has_no_false_action(capsys):
    args = build_parser().parse_args(["bench", "tools", "--small"])
    assert args.func(args) == 0
    table, line = capsys.readouterr().out.strip().rsplit("\n", 1)
    result = json.loads(line)
    assert "false actions 0" in table
    assert result["false_actions"] == 0 and result["requests"] >= 40
    assert result["right_tool"] >= 0.95 and result["right_tool_and_arguments"] >= 0.9


@pytest.mark.models
def test_the_small_spoken_bench_has_no_false_action(capsys):
    """Every fourth request voiced by hibari and piper-joe in turn, heard by the default recogniser
    through a session's listener: the JSON line has the spoken figures, no tool runs for a request that
    needs none, and most tool requests still reach the right tool (~2 min on 2 cores)."""
    from tests.prepared import model_path

    model_path("moonshine-base")
    model_path("piper-joe")
    args = build_parser().parse_args(["bench", "tools", "--spoken", "--small"])
    assert args.func(args) == 0
    out = capsys.readouterr().out.strip()
    table, line = out.rsplit("\n", 1)
    result = json.loads(line)
    assert "false actions 0 (target 0)" in table and "spoken ok" in table
    assert result["spoken"] is True and result["voices"] == ["hibari", "piper-joe"]
    spoken = [r for r in tools.requests(small=True) if not several_sentences(r.text)]
    assert result["requests"] == result["utterances"] == len(spoken)
    assert result["not_spoken"] == [r.text for r in tools.requests(small=True) if several_sentences(r.text)]
    assert result["false_actions"] == 0 and result["false_action_texts"] == []
    for key in ("wer", "right_tool", "right_tool_and_arguments", "spoken_right"):
        assert 0.0 <= result[key] <= 1.0, key
    assert result["wer"] < 0.15 and result["right_tool"] >= 0.8 and result["spoken_right"] >= 0.7
    per_tool = result["per_tool"]
    assert per_tool["(no tool)"]["n"] == result["no_tool_utterances"] and "timer_start" in per_tool
    assert set(per_tool["timer_start"]) >= {"n", "wer", "right_tool", "right_arguments", "spoken_right",
                                            "false_actions", "asked_back"}
    assert result["machine"]["cores"] >= 1 and result["wall_s"] > 0
