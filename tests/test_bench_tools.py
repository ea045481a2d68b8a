"""`headstart bench tools` in its small form: the real matcher over every fourth request; no tool runs
for a request that needs none, and nearly every tool request gets the right tool and arguments."""

from __future__ import annotations

import json

from headstart.bench import tools
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
