"""`headstart bench eot`: eot-bench's definitions on hand-made spans (what is a cut-off, a latency,
which holds count), the intervals, the sweep against the policies' own fire times, the operating
points, and the bench's small form on a hand-made trace file (no model)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from headstart.bench import eot
from headstart.bench.eot_spans import Span, load_spans, save_spans, split_of
from headstart.cli import build_parser
from headstart.voice.wait_policy import RESCORE_S, ContinuousMap, WaitPolicy


def span(label: str, duration_s: float | None, p: float | tuple[float, ...] = 0.5, *, after: bool | None = None,
         split: str = "train", name: str = "r", acoustic: float = 0.5) -> Span:
    times = tuple(t for t in RESCORE_S if duration_s is None or t < duration_s)
    scores = p if isinstance(p, tuple) else tuple(p for _ in times)
    return Span(f"{name}/{label}/{duration_s}/{random.random()}", name, split, label, "inserted" if label == "hold" else "end",
                "", after if label == "hold" else None, 1.0, duration_s, "text", times, scores[: len(times)],
                tuple(acoustic for _ in times))


def test_a_hold_is_cut_off_when_the_policy_fires_before_it_is_over():
    assert eot.cut_off(0.4, 0.5)
    assert not eot.cut_off(0.5, 0.5)  # the speech resumes as it fires: not heard as a cut
    assert not eot.cut_off(0.8, 0.5)


def test_the_outcome_counts_holds_by_kind_and_latency_on_ends():
    spans = [span("hold", 0.5, after=True), span("hold", 1.0, after=False), span("hold", 0.15),
             span("hold", 6.0), span("end", None), span("end", None)]
    fires = [0.4, 1.2, 0.1, 0.3, 0.6, 1.0]
    out = eot.outcome(fires, spans)
    # the 0.15 s and 6 s holds are outside eot-bench's scored range (0.2-5 s)
    assert (out.cut, out.holds) == (1, 2)
    assert (out.cut_after, out.holds_after, out.cut_inside, out.holds_inside) == (1, 1, 0, 1)
    assert out.latencies_s == (0.6, 1.0)
    assert out.cutoff_rate == 0.5 and out.mean_latency_s == pytest.approx(0.8)


def test_a_policy_fire_time_follows_the_definition_on_a_span():
    policy = WaitPolicy(threshold=0.6, action_delay_s=0.3, timeout_s=1.0)
    hold = span("hold", 0.7, (0.1, 0.7, 0.7, 0.7))  # crosses at 0.35 -> fires at 0.4 < 0.7: cut off
    end = span("end", None, (0.1, 0.1, 0.1, 0.1, 0.1))  # never crosses -> the timeout
    fires = eot.fires(policy, [hold, end], [hold.p_text, end.p_text])
    assert fires == [0.4, 1.0]
    out = eot.outcome(fires, [hold, end])
    assert out.cut == 1 and out.latencies_s == (1.0,)


def test_wilson_interval():
    assert eot.wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert eot.wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert eot.wilson(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        eot.wilson(3, 2)


def test_bootstrap_interval_is_seeded_and_brackets_the_mean():
    values = [0.2, 0.2, 0.4, 1.0, 2.0, 0.3]
    low, high = eot.bootstrap_ci(values, lambda x: x.mean(axis=1))
    assert low <= float(np.mean(values)) <= high
    assert (low, high) == eot.bootstrap_ci(values, lambda x: x.mean(axis=1))
    assert eot.bootstrap_ci([0.5] * 4, lambda x: x.mean(axis=1)) == (0.5, 0.5)


def _random_spans(n: int, seed: int) -> list[Span]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        duration = None if i % 4 == 0 else rng.uniform(0.1, 2.0)
        scores = tuple(round(rng.random(), 3) for _ in RESCORE_S)
        out.append(span("end" if duration is None else "hold", duration, scores, after=rng.random() < 0.3))
    return out


def test_the_sweep_scores_each_wait_policy_as_the_policy_itself():
    spans = _random_spans(80, seed=1)
    table = eot._Table.of(spans, [s.p_text for s in spans], RESCORE_S)
    candidates = eot.sweep_wait(table, [0.3, 0.6, 0.9], [0.2, 0.5], [0.6, 1.3], middle_delays_s=(0.8,))
    assert any(len(params) == 5 for params, _, _ in candidates)
    for params, rate, latency in candidates:
        out = eot.outcome(eot.fires(WaitPolicy(*params), spans, [s.p_text for s in spans]), spans)
        assert out.cutoff_rate == pytest.approx(rate) and out.mean_latency_s == pytest.approx(latency)


def test_the_vectorised_continuous_map_matches_its_fire_time():
    spans = _random_spans(60, seed=2)
    table = eot._Table.of(spans, [s.p_text for s in spans], RESCORE_S)
    for policy in (ContinuousMap(0.15, 0.75), ContinuousMap(0.3, 0.5, max_silence_s=1.0), ContinuousMap(0.8048, 0.8247)):
        expected = eot.fires(policy, spans, [s.p_text for s in spans])
        assert list(eot.continuous_fires(policy, table)) == pytest.approx(expected)


def test_pick_takes_the_best_point_within_each_budget():
    candidates = [("a", 0.10, 0.25), ("b", 0.05, 0.35), ("c", 0.01, 0.9), ("d", 0.0, 1.5)]
    assert eot.pick(candidates, max_latency_s=0.3) == "a"
    assert eot.pick(candidates, max_latency_s=0.6) == "b"
    assert eot.pick(candidates, max_cutoff=0.02) == "c"
    assert eot.pick(candidates, max_latency_s=0.1) is None


def test_the_fusion_learns_that_a_complete_text_means_an_end():
    spans = [span("end", None, 0.9, acoustic=0.8) for _ in range(10)]
    spans += [span("hold", 1.3, 0.1, acoustic=0.3, after=False) for _ in range(30)]
    fusion = eot.fit_fusion(spans)
    assert fusion.weights[0] > 0 or fusion.weights[1] > 0
    high, low = fusion.probability([0.9], [0.8], [0.2])[0], fusion.probability([0.1], [0.3], [0.2])[0]
    assert high > 0.5 > low


def _trace_file(tmp_path) -> str:
    rng = random.Random(3)
    spans = []
    for split in ("train", "heldout"):
        for i in range(12):
            spans.append(span("end", None, round(rng.uniform(0.5, 1.0), 3), split=split, name=f"{split}{i}",
                              acoustic=0.7))
            for _ in range(3):
                spans.append(span("hold", round(rng.uniform(0.2, 1.5), 2), round(rng.uniform(0.0, 0.7), 3),
                                  after=rng.random() < 0.3, split=split, name=f"{split}{i}", acoustic=0.4))
    return str(save_spans(spans, {"rescore_s": list(RESCORE_S)}, tmp_path / "traces.json"))


def test_the_small_bench_prints_a_table_and_one_json_line(tmp_path, capsys):
    args = build_parser().parse_args(["bench", "eot", "--traces", _trace_file(tmp_path), "--grid", "small"])
    assert args.func(args) == 0
    table, line = capsys.readouterr().out.strip().rsplit("\n", 1)
    result = json.loads(line)
    assert "wait-text" in table and "continuous-shipped" in table
    assert set(result["families"]) == set(eot.FAMILIES)
    shipped = result["families"]["continuous-shipped"]["latency_at_2%"]
    assert shipped["holds"] == 36 and shipped["ends"] == 12
    assert 0 <= shipped["cutoff_ci"][0] <= shipped["cutoff_rate"] <= shipped["cutoff_ci"][1] <= 1
    assert result["spans"]["heldout"] == {"ends": 12, "holds": 36, "holds_after_sentence": result["spans"]["heldout"]["holds_after_sentence"]}


def test_a_missing_trace_file_is_exit_2(tmp_path, capsys):
    args = build_parser().parse_args(["bench", "eot", "--traces", str(tmp_path / "none.json"), "--json"])
    assert args.func(args) == 2
    assert "bench eot" in capsys.readouterr().out


def test_the_committed_traces_cover_both_splits_of_every_recording():
    spans, header = load_spans()
    splits = split_of()
    assert {s.recording for s in spans} == set(splits)
    assert all(s.split == splits[s.recording] for s in spans)
    ends = [s for s in spans if s.label == "end"]
    assert len(ends) == len(splits)
    assert header["rescore_s"] == list(RESCORE_S)
    assert all(len(s.times_s) == len(s.p_text) == len(s.p_acoustic) for s in spans)
