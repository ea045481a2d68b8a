"""`headstart bench eot`: the end of turn scored by eot-bench's definitions (LiveKit's open end-of-turn
benchmark, github.com/livekit/eot-bench; our own code).

Definitions (as eot-bench's; the spans: `bench/eot_spans.py`):

* every silence of >= 0.1 s inside a user turn is a *hold*, the last one, after the turn, the *end*;
  holds shorter than `MIN_HOLD_S` (0.2 s) or longer than `MAX_HOLD_S` (5 s) are left out of the
  figures (eot-bench's metric defaults: no policy decides before the first score at 0.2 s);
* a policy's *fire time* on a span: max(action delay, first time its probability crosses the
  threshold), on a grid of 0.1 s, at the latest the timeout (`voice/wait_policy.py`);
* a hold is *cut off* when the policy fires before it is over (fire time < the hold's length);
* *latency*: the fire time on the ends (the silence the user hears before the agent takes the floor,
  decision only: no ASR, LLM or TTS time).

Figures, per policy family: the policy is chosen on the training split by a sweep
(`headstart/bench/data/eot_split.tsv`: whole recordings, alternately per source folder), then scored on
the held-out split: the cut-off rate at the least latency budgets (mean latency <= 0.3 s and 0.6 s on
the training split) and the latency (mean, p50, p90) at the cut-off budgets (<= 2 % and 5 %), with 95 %
confidence intervals (Wilson for rates, bootstrap for latencies); cut-offs after a complete sentence
and inside a sentence apart.

Families: `continuous-shipped` (today's endpointer: the head's calibrated pair 0.8048 / 0.8247, 0-2 s
log-linear; not swept), `continuous` (the same map, its thresholds and ceiling swept), `wait-text`
(the field's threshold / action delay / timeout and a middle level on the text head's probability),
`wait-fused` (the same on a logistic fusion of the text head, Smart Turn and the silence so far, fitted
on the training split), `silence` (a fixed timeout: the VAD baseline).

The last line printed is one JSON object.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from headstart.bench.eot_spans import Span, load_spans
from headstart.voice.wait_policy import GRID_S, ContinuousMap, WaitPolicy, on_grid

MIN_HOLD_S = 0.2
MAX_HOLD_S = 5.0
LATENCY_BUDGETS_S = (0.3, 0.6)
CUTOFF_BUDGETS = (0.02, 0.05)
SHIPPED = ContinuousMap(eou_low=0.8048, eou_high=0.8247)  # the qwen2.5-coder-0.5b head's calibrated pair
TARGETS = {"cutoff_at_0.3_s": 0.10, "latency_mean_at_2%_s": 0.9}
FAMILIES = ("continuous-shipped", "continuous", "wait-text", "wait-fused", "silence")
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class EotBenchOptions:
    """The options of `headstart bench eot`; their meaning: its `--help` (headstart/cli/bench/eot.py)."""

    json: bool = False
    traces: str | None = None
    rebuild: str | None = None
    limit: int | None = None
    grid: str = "full"
    seed: int = 0


# -- statistics ------------------------------------------------------------------------------------
def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a rate k/n (95 % at z 1.96); (0, 1) when n is 0.

    Raises:
        ValueError: k outside [0, n].
    """
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got {k}, {n}")
    if n == 0:
        return 0.0, 1.0
    p = k / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def bootstrap_ci(values: Sequence[float], statistic: Callable[[np.ndarray], np.ndarray], resamples: int = 2000,
                 seed: int = 0) -> tuple[float, float]:
    """95 % percentile bootstrap interval of `statistic` over `values` (seeded); (nan, nan) when empty.
    `statistic` maps resamples of shape (resamples, n) to one value per row, e.g.
    `lambda x: x.mean(axis=1)`."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    stats = statistic(x[rng.integers(0, x.size, (resamples, x.size))])
    return float(np.percentile(stats, 2.5)), float(np.percentile(stats, 97.5))


# -- scoring ---------------------------------------------------------------------------------------
def scored(span: Span) -> bool:
    """Whether a span counts in the figures: every end, and holds of MIN_HOLD_S to MAX_HOLD_S."""
    if span.label == "end":
        return True
    assert span.duration_s is not None
    return MIN_HOLD_S - _EPS <= span.duration_s <= MAX_HOLD_S + _EPS


def cut_off(fire_s: float, hold_s: float) -> bool:
    """A hold of `hold_s` is cut off by a policy that fires at `fire_s` (both s of silence)."""
    return fire_s < hold_s - _EPS


@dataclass(frozen=True, slots=True)
class Outcome:
    """A policy on a set of spans: the holds it cut off and its latencies on the ends.

    Attributes:
        cut, holds: holds cut off / scored.
        cut_after, holds_after: the same for holds after a complete sentence.
        cut_inside, holds_inside: and inside a sentence.
        latencies_s: the fire time on each end (s).
    """

    cut: int
    holds: int
    cut_after: int
    holds_after: int
    cut_inside: int
    holds_inside: int
    latencies_s: tuple[float, ...]

    @property
    def cutoff_rate(self) -> float:
        return self.cut / self.holds if self.holds else 0.0

    @property
    def mean_latency_s(self) -> float:
        return float(np.mean(self.latencies_s)) if self.latencies_s else math.nan


def outcome(fires_s: Sequence[float], spans: Sequence[Span]) -> Outcome:
    """Score fire times (one per span, s) by the definitions above; spans outside `scored` are skipped."""
    cut = holds = cut_after = holds_after = cut_inside = holds_inside = 0
    latencies = []
    for fire, span in zip(fires_s, spans, strict=True):
        if not scored(span):
            continue
        if span.label == "end":
            latencies.append(float(fire))
            continue
        assert span.duration_s is not None
        c = int(cut_off(fire, span.duration_s))
        cut += c
        holds += 1
        if span.after_sentence:
            cut_after += c
            holds_after += 1
        else:
            cut_inside += c
            holds_inside += 1
    return Outcome(cut, holds, cut_after, holds_after, cut_inside, holds_inside, tuple(latencies))


# -- signals ---------------------------------------------------------------------------------------
def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-4, 1 - 1e-4)
    return np.log(p / (1 - p))


@dataclass(frozen=True, slots=True)
class SilenceFusion:
    """P(end) = sigmoid(w . [logit p_text, logit p_acoustic, silence_s, 1]): the text head, Smart Turn
    and the silence so far in one score (logistic regression, fitted by `fit_fusion`)."""

    weights: tuple[float, float, float, float]

    def probability(self, p_text: Sequence[float], p_acoustic: Sequence[float], times_s: Sequence[float]) -> np.ndarray:
        x = _features(np.asarray(p_text, float), np.asarray(p_acoustic, float), np.asarray(times_s, float))
        return 1.0 / (1.0 + np.exp(-(x @ np.asarray(self.weights))))


def _features(p_text: np.ndarray, p_acoustic: np.ndarray, times_s: np.ndarray) -> np.ndarray:
    return np.stack([_logit(p_text), _logit(p_acoustic), times_s, np.ones_like(times_s)], axis=-1)


def fit_fusion(spans: Sequence[Span], l2: float = 1e-2, iterations: int = 30) -> SilenceFusion:
    """Fit `SilenceFusion` on every re-score point of `spans` (label 1 on the ends), class-balanced,
    by Newton's method with an L2 penalty on the three slopes.

    Raises:
        ValueError: no end or no hold point to fit on.
    """
    rows, labels = [], []
    for span in spans:
        if not span.times_s:
            continue
        rows.append(_features(np.asarray(span.p_text), np.asarray(span.p_acoustic), np.asarray(span.times_s)))
        labels += [1.0 if span.label == "end" else 0.0] * len(span.times_s)
    y = np.asarray(labels)
    if not rows or y.min() == y.max():
        raise ValueError("the fusion needs re-score points of both ends and holds")
    x = np.concatenate(rows)
    sample = np.where(y == 1, 0.5 / y.mean(), 0.5 / (1 - y.mean()))
    penalty = np.diag([l2, l2, l2, 0.0])
    w = np.zeros(4)
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        gradient = x.T @ (sample * (p - y)) + penalty @ w
        hessian = (x * (sample * p * (1 - p))[:, None]).T @ x + penalty
        w = w - np.linalg.solve(hessian, gradient)
    return SilenceFusion((float(w[0]), float(w[1]), float(w[2]), float(w[3])))


def signal(spans: Sequence[Span], kind: str, fusion: SilenceFusion | None = None) -> list[tuple[float, ...]]:
    """Each span's scores at its re-score points: "text" (the head), "acoustic" (Smart Turn) or "fused"."""
    if kind == "text":
        return [s.p_text for s in spans]
    if kind == "acoustic":
        return [s.p_acoustic for s in spans]
    if kind == "fused":
        if fusion is None:
            raise ValueError("the fused signal needs a fusion")
        return [tuple(float(v) for v in fusion.probability(s.p_text, s.p_acoustic, s.times_s)) if s.times_s else ()
                for s in spans]
    raise ValueError(f"unknown signal {kind!r}")


def fires(policy: FirePolicy, spans: Sequence[Span], scores: Sequence[Sequence[float]]) -> list[float]:
    """The policy's fire time on each span (its own `fire_s`, the reference the sweep is checked on).
    A span with no re-score point (a hold shorter than the first) is never decided inside: the
    continuous map then fires at its ceiling, the wait policy at its timeout."""
    out = []
    for span, p in zip(spans, scores, strict=True):
        if not span.times_s and isinstance(policy, ContinuousMap):
            out.append(on_grid(policy.ceiling_s))
        else:
            out.append(policy.fire_s(span.times_s, p))
    return out


@dataclass(frozen=True, slots=True)
class SilenceOnly:
    """The VAD baseline: the turn ends after `timeout_s` of silence, whatever the scores."""

    timeout_s: float

    def fire_s(self, times_s: Sequence[float], probabilities: Sequence[float]) -> float:
        return on_grid(self.timeout_s)


class FirePolicy(Protocol):
    def fire_s(self, times_s: Sequence[float], probabilities: Sequence[float]) -> float: ...


# -- the sweep ---------------------------------------------------------------------------------------
@dataclass
class _Table:
    """Traces as arrays: scores (spans, points) with -1 past a span's last point."""

    times: np.ndarray
    scores: np.ndarray
    is_end: np.ndarray
    duration: np.ndarray  # inf on the ends
    mask: np.ndarray  # scored spans

    @classmethod
    def of(cls, spans: Sequence[Span], scores: Sequence[Sequence[float]], rescore_s: Sequence[float]) -> _Table:
        table = -np.ones((len(spans), len(rescore_s)))
        for i, (span, p) in enumerate(zip(spans, scores, strict=True)):
            for t, v in zip(span.times_s, p, strict=True):
                table[i, list(rescore_s).index(t)] = v
        return cls(np.asarray(rescore_s, float), table, np.asarray([s.label == "end" for s in spans]),
                   np.asarray([math.inf if s.duration_s is None else s.duration_s for s in spans]),
                   np.asarray([scored(s) for s in spans]))

    def crossing(self, thresholds: np.ndarray) -> np.ndarray:
        """First crossing time per (threshold, span); inf where none."""
        above = self.scores[None, :, :] >= thresholds[:, None, None]
        first = np.argmax(above, axis=2)
        return np.where(above.any(axis=2), self.times[first], np.inf)

    def score(self, fire: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(cut-off rate, mean latency) per row of fire times (..., spans)."""
        holds = ~self.is_end & self.mask
        cut = (fire < self.duration - _EPS) & holds
        rate = cut.sum(axis=-1) / max(int(holds.sum()), 1)
        ends = self.is_end & self.mask
        latency = np.where(ends, fire, 0.0).sum(axis=-1) / max(int(ends.sum()), 1)
        return rate, latency


def _grid_up(x: np.ndarray) -> np.ndarray:
    return np.round(GRID_S * np.maximum(1, np.ceil(x / GRID_S - _EPS)), 6)


Params = tuple[float, ...]


def sweep_wait(table: _Table, thresholds: Sequence[float], delays_s: Sequence[float], timeouts_s: Sequence[float],
               middle: bool = True, middle_delays_s: Sequence[float] = (0.5, 0.8, 1.2)) -> list[tuple[Params, float, float]]:
    """Every WaitPolicy of the grid as (its arguments, cut-off rate, mean latency) on `table`
    (`WaitPolicy(*arguments)` is the policy); the middle level takes every pair of thresholds
    (lower, higher) with each middle delay between the action delay and the timeout."""
    th = np.asarray(sorted(set(thresholds)), float)
    crossing = table.crossing(th)  # (thresholds, spans)
    out: list[tuple[Params, float, float]] = []
    for delay, timeout in itertools.product(delays_s, timeouts_s):
        if delay > timeout + _EPS:
            continue
        high = np.minimum(_grid_up(np.maximum(delay, crossing)), on_grid(timeout))  # (th, spans)
        rate, latency = table.score(high)
        out += [((float(t), delay, timeout), float(r), float(lat)) for t, r, lat in zip(th, rate, latency, strict=True)]
        if not middle:
            continue
        for middle_delay in middle_delays_s:
            if not delay < middle_delay < timeout:
                continue
            low = _grid_up(np.maximum(middle_delay, crossing))  # (th_mid, spans)
            both = np.minimum(high[:, None, :], low[None, :, :])  # (th, th_mid, spans)
            rate2, latency2 = table.score(both)
            for i, j in zip(*np.nonzero(th[None, :] < th[:, None]), strict=True):
                out.append(((float(th[i]), delay, timeout, float(th[j]), middle_delay),
                            float(rate2[i, j]), float(latency2[i, j])))
    return out


def continuous_fires(policy: ContinuousMap, table: _Table) -> np.ndarray:
    """`ContinuousMap.fire_s` on every span of `table` at once, shape (spans,): on each stretch between
    two re-score points the map fires at the first grid point at or past both the stretch's start and
    the silence its score requires, if that comes before the next score; no score: the ceiling."""
    config = policy.endpoint_config
    low, high = config.eou_low, config.eou_high
    p = table.scores
    valid = p >= 0
    x = (np.log(np.clip(p, 1e-12, 1)) - math.log(low)) / (math.log(high) - math.log(low))
    required = policy.max_silence_s + x * (policy.min_silence_s - policy.max_silence_s)
    required = np.where(p >= high, policy.min_silence_s, np.where(p <= low, policy.max_silence_s, required))
    candidate = _grid_up(np.maximum(table.times[None, :], policy.speech_pad_s + required))
    following = np.append(table.times[1:], np.inf)[None, :]
    next_valid = np.concatenate([valid[:, 1:], np.zeros((len(p), 1), bool)], axis=1)
    in_time = ~next_valid | (candidate < following - _EPS)
    fire = np.where(valid & in_time, candidate, np.inf).min(axis=1)
    return np.where(np.isinf(fire), on_grid(policy.ceiling_s), fire)


def sweep_continuous(table: _Table, thresholds: Sequence[float], ceilings_s: Sequence[float]) -> list[tuple[Params, float, float]]:
    """Every ContinuousMap of the grid (low < high from `thresholds`, max_silence_s from `ceilings_s`) as
    ((low, high, ceiling), cut-off rate, mean latency) on `table`."""
    th = sorted(set(float(t) for t in thresholds if 0 < t <= 1))
    out: list[tuple[Params, float, float]] = []
    for low, high in itertools.combinations(th, 2):
        for ceiling in ceilings_s:
            rate, latency = table.score(continuous_fires(ContinuousMap(low, high, max_silence_s=ceiling), table))
            out.append(((low, high, ceiling), float(rate), float(latency)))
    return out


def pick(candidates: Sequence[tuple[Any, float, float]], *, max_latency_s: float | None = None,
         max_cutoff: float | None = None) -> Any | None:
    """The operating point of a sweep: the least cut-off rate with mean latency <= `max_latency_s`, or
    the least mean latency with cut-off rate <= `max_cutoff` (ties: the other figure, then the order);
    None when no candidate meets the budget."""
    if max_latency_s is not None:
        ok = [c for c in candidates if c[2] <= max_latency_s + _EPS]
        return min(ok, key=lambda c: (c[1], c[2]))[0] if ok else None
    if max_cutoff is not None:
        ok = [c for c in candidates if c[1] <= max_cutoff + _EPS]
        return min(ok, key=lambda c: (c[2], c[1]))[0] if ok else None
    raise ValueError("pick needs max_latency_s or max_cutoff")


# -- the report ------------------------------------------------------------------------------------
def describe(policy: Any) -> str:
    """A policy's settings in a few words."""
    if isinstance(policy, ContinuousMap):
        return f"map {policy.eou_low:.3g}/{policy.eou_high:.3g} 0-{policy.max_silence_s:g}s"
    if isinstance(policy, SilenceOnly):
        return f"timeout {policy.timeout_s:g}s"
    text = f"th {policy.threshold:.3g} delay {policy.action_delay_s:g}s timeout {policy.timeout_s:g}s"
    if policy.middle_threshold is not None:
        text += f" mid {policy.middle_threshold:.3g}@{policy.middle_delay_s:g}s"
    return text


def figures(result: Outcome, seed: int = 0) -> dict[str, Any]:
    """The JSON figures of one policy on one split: rates with Wilson intervals, latencies with
    bootstrap intervals."""

    def r(x: float) -> float | None:
        return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), 4)

    lat = result.latencies_s
    mean_ci = bootstrap_ci(lat, lambda x: x.mean(axis=1), seed=seed)
    p90_ci = bootstrap_ci(lat, lambda x: np.percentile(x, 90, axis=1), seed=seed)
    return {
        "cutoff_rate": r(result.cutoff_rate), "cutoff_ci": [r(v) for v in wilson(result.cut, result.holds)],
        "cut": result.cut, "holds": result.holds,
        "after_sentence": f"{result.cut_after}/{result.holds_after}",
        "inside_sentence": f"{result.cut_inside}/{result.holds_inside}",
        "latency_mean_s": r(result.mean_latency_s), "latency_mean_ci": [r(v) for v in mean_ci],
        "latency_p50_s": r(float(np.percentile(lat, 50))) if lat else None,
        "latency_p90_s": r(float(np.percentile(lat, 90))) if lat else None,
        "latency_p90_ci": [r(v) for v in p90_ci], "ends": len(lat),
    }


def _grids(kind: str, values: np.ndarray) -> tuple[list[float], list[float], list[float]]:
    """(thresholds, action delays, timeouts) of the sweep: thresholds at quantiles of the training scores."""
    n = 40 if kind == "full" else 8
    qs = np.unique(np.round(np.quantile(values, np.linspace(0, 1, n + 1)), 4)) if values.size else np.asarray([0.5])
    thresholds = sorted(set(float(q) for q in qs if q > 0))
    delays = [0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0] if kind == "full" else [0.2, 0.5]
    timeouts = [round(0.4 + 0.2 * k, 1) for k in range(14)] if kind == "full" else [0.6, 1.0, 2.0]
    return thresholds, delays, timeouts


def run(options: EotBenchOptions, log: Callable[..., None] = print) -> dict[str, Any]:
    """Run the bench on a trace file (or rebuild one first); return the JSON-ready result.

    Raises:
        FileNotFoundError, ValueError: no or a bad trace file; models missing when rebuilding.
    """
    if options.rebuild is not None:
        from headstart.bench.eot_spans import build_spans, save_spans

        spans, header = build_spans(seed=options.seed, limit=options.limit, log=log)
        save_spans(spans, header, options.rebuild)
        log(f"wrote {len(spans)} spans to {options.rebuild}")
        spans, header = load_spans(options.rebuild)
    else:
        spans, header = load_spans(options.traces)
    rescore = tuple(header.get("rescore_s") or sorted({t for s in spans for t in s.times_s}))
    train = [s for s in spans if s.split == "train"]
    heldout = [s for s in spans if s.split == "heldout"]
    if not train or not heldout:
        raise ValueError("the trace file needs spans of both splits (train, heldout)")
    fusion = fit_fusion(train)
    small_middle = options.grid != "full"
    shipped_train = outcome(fires(SHIPPED, train, signal(train, "text")), train)
    points = _points(shipped_train)

    families: dict[str, Any] = {}
    for family in FAMILIES:
        if family == "continuous-shipped":
            candidates = None
            chosen = dict.fromkeys(points, SHIPPED)
            kind = "text"
        else:
            kind = {"continuous": "text", "wait-text": "text", "wait-fused": "fused", "silence": "text"}[family]
            table = _Table.of(train, signal(train, kind, fusion), rescore)
            values = table.scores[(table.scores >= 0) & table.mask[:, None]]
            thresholds, delays, timeouts = _grids(options.grid, values)
            if family == "continuous":
                candidates = [(ContinuousMap(low, high, max_silence_s=ceiling), r, lat) for (low, high, ceiling), r, lat
                              in sweep_continuous(table, thresholds[:: 2 if options.grid == "full" else 1], (1.0, 1.5, 2.0))]
            elif family == "silence":
                candidates = []
                for timeout in timeouts:
                    rate, latency = table.score(np.full(len(train), on_grid(timeout)))
                    candidates.append((SilenceOnly(timeout), float(rate), float(latency)))
            else:
                candidates = sweep_wait(table, thresholds, delays, timeouts, middle=True,
                                        middle_delays_s=(0.5, 0.8, 1.2) if not small_middle else (0.8,))
            chosen = {name: pick(candidates, **budget) for name, budget in points.items()}
            if family.startswith("wait"):
                chosen = {name: None if params is None else WaitPolicy(*params) for name, params in chosen.items()}
        held_scores = signal(heldout, kind, fusion)
        train_scores = signal(train, kind, fusion)
        entry: dict[str, Any] = {"signal": kind, "swept": 0 if candidates is None else len(candidates)}
        for name, policy in chosen.items():
            if policy is None:
                entry[name] = None
                continue
            on_train = outcome(fires(policy, train, train_scores), train)
            on_held = outcome(fires(policy, heldout, held_scores), heldout)
            entry[name] = {"policy": describe(policy), "train_cutoff_rate": round(on_train.cutoff_rate, 4),
                           "train_latency_mean_s": round(on_train.mean_latency_s, 4), **figures(on_held, options.seed)}
        families[family] = entry

    counts = {split: {"ends": sum(s.label == "end" for s in group),
                      "holds": sum(s.label == "hold" and scored(s) for s in group),
                      "holds_after_sentence": sum(s.label == "hold" and scored(s) and bool(s.after_sentence) for s in group)}
              for split, group in (("train", train), ("heldout", heldout))}
    best = families["wait-fused"], families["wait-text"]
    return {
        "bench": "eot",
        "families": families,
        "fusion_weights": [round(w, 4) for w in fusion.weights],
        "spans": counts,
        "traces": header,
        "targets": TARGETS,
        "targets_met": {name: _met(entry) for name, entry in zip(("wait-fused", "wait-text"), best, strict=True)},
        "definitions": {"min_hold_s": MIN_HOLD_S, "max_hold_s": MAX_HOLD_S, "grid_s": GRID_S, "rescore_s": list(rescore)},
    }


def _points(shipped: Outcome | None = None) -> dict[str, dict[str, float]]:
    """The operating points: eot-bench's budgets, and (given the shipped map's figures on the training
    split) the least cut-offs at its mean latency and the least latency at its cut-off rate."""
    points: dict[str, dict[str, float]] = {}
    for budget in LATENCY_BUDGETS_S:
        points[f"cutoff_at_{budget:g}_s"] = {"max_latency_s": budget}
    for budget in CUTOFF_BUDGETS:
        points[f"latency_at_{budget:.0%}"] = {"max_cutoff": budget}
    if shipped is not None:
        points["cutoff_at_shipped_latency"] = {"max_latency_s": shipped.mean_latency_s}
        points["latency_at_shipped_cutoff"] = {"max_cutoff": shipped.cutoff_rate}
    return points


def _met(entry: dict[str, Any]) -> dict[str, bool | None]:
    cut = entry.get("cutoff_at_0.3_s")
    lat = entry.get("latency_at_2%")
    return {"cutoff_at_0.3_s": None if cut is None else cut["cutoff_rate"] <= TARGETS["cutoff_at_0.3_s"],
            "latency_mean_at_2%_s": None if lat is None else lat["latency_mean_s"] <= TARGETS["latency_mean_at_2%_s"]}


def table_lines(out: dict[str, Any]) -> list[str]:
    """The human-readable table of a result (held-out figures)."""
    lines = [f"{'family':19s} {'point':25s} {'policy (chosen on train)':44s} {'cut-off held-out [95% CI]':27s} "
             f"{'after/inside':13s} {'latency mean [CI] / p50 / p90 (s)':34s}"]
    for family, entry in out["families"].items():
        for name in [k for k, v in entry.items() if isinstance(v, dict) or (v is None and k not in ("signal", "swept"))]:
            e = entry.get(name)
            if e is None:
                lines.append(f"{family:19s} {name:25s} (no policy meets the budget on train)")
                continue
            ci = e["cutoff_ci"]
            mean_ci = e["latency_mean_ci"]
            lines.append(
                f"{family:19s} {name:25s} {e['policy']:44s} "
                f"{e['cutoff_rate']:6.1%} [{ci[0]:.1%}, {ci[1]:.1%}] {e['cut']:>3}/{e['holds']:<3} "
                f"{e['after_sentence']:>5} {e['inside_sentence']:<7} "
                f"{e['latency_mean_s']:.2f} [{mean_ci[0]:.2f}, {mean_ci[1]:.2f}] / {e['latency_p50_s']:.2f} / {e['latency_p90_s']:.2f}")
    return lines


def main(options: EotBenchOptions) -> int:
    """Entry point of `headstart bench eot`. Returns the exit status (2: traces or models missing)."""
    from headstart.models.store import ModelError

    log = (lambda *a, **k: None) if options.json else print
    try:
        out = run(options, log=log)
    except (FileNotFoundError, ValueError, ModelError) as exc:
        print(f"bench eot: {exc}")
        return 2
    if not options.json:
        for line in table_lines(out):
            print(line)
        print(f"spans: {out['spans']}")
    print(json.dumps(out))
    return 0
