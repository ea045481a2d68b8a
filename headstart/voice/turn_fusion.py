"""End-of-turn fusion: one probability that the user has finished, from what was said (the text EOU
head), how it sounded at the first short pause (Smart Turn v3.2, headstart/voice/smart_turn.py) and the
marks whisper writes when speech trails off ("...", a dash, a comma where a sentence should end).

    p = sigmoid(text * logit(p_text) + acoustic * logit(p_acoustic) + trailing * [trailing-off mark]
                + unpunctuated * [no sentence-end mark] + bias)

The endpointer maps `p` to the silence it waits exactly as it maps the text head's probability alone
(`min_silence_s` at or above `eou_high`, `max_silence_s` at or below `eou_low`, log-linear between), with
the thresholds fitted together with the weights (`FusionWeights`). The text head strips punctuation before
it reads the text (headstart/llm/eou_head.py), so the marks are a signal it never sees.

`fit` trains the weights (class-balanced L2 logistic regression) and `calibrate_thresholds` picks the
pair, on rows of scored examples (scripts/fit_turn_fusion.py makes them from the packaged recordings:
complete turns and the same cut mid-sentence, split by recording); `evaluate` reports a split.
`FITTED` is what that script fitted (its figures: docs/listening.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

_TRAILING_MARKS = ("...", "…", "-", "—", "–", ",", ";", ":")
_SENTENCE_END = (".", "?", "!")


def ending(text: str) -> str:
    """How the recogniser ended `text`: "trailing" (a trailing-off mark: "...", "…", a dash, which is
    how whisper writes a cut word, or ",", ";", ":"), "terminal" (".", "?", "!") or "none" (no mark,
    or no text)."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {text!r}")
    t = text.rstrip().rstrip("\"')]")
    if not t:
        return "none"
    if t.endswith(_TRAILING_MARKS):
        return "trailing"
    if t.endswith(_SENTENCE_END):
        return "terminal"
    return "none"


def _logit(p: float) -> float:
    p = min(max(float(p), 1e-6), 1.0 - 1e-6)
    return math.log(p / (1.0 - p))


def _check_probability(name: str, p: float) -> None:
    if not 0.0 <= p <= 1.0:  # also rejects NaN
        raise ValueError(f"{name} must be in [0, 1], got {p}")


@dataclass(frozen=True)
class FusionWeights:
    """Weights of the fused end-of-turn probability (see the module docstring) and the endpointer's
    thresholds on it (0 < eou_low < eou_high <= 1). `info`: how they were fitted."""

    text: float
    acoustic: float
    trailing: float
    unpunctuated: float
    bias: float
    eou_low: float
    eou_high: float
    info: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for name in ("text", "acoustic", "trailing", "unpunctuated", "bias"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"FusionWeights.{name} must be finite, got {getattr(self, name)}")
        if not 0 < self.eou_low < self.eou_high <= 1:
            raise ValueError(f"FusionWeights needs 0 < eou_low < eou_high <= 1, got {self.eou_low}, {self.eou_high}")

    def probability(self, text_probability: float, acoustic_probability: float, text: str = "") -> float:
        """The fused P(turn complete) in [0, 1].

        Args:
            text_probability: the text EOU head's probability for the turn's final text, in [0, 1].
            acoustic_probability: Smart Turn's probability at the first pause, in [0, 1].
            text: the final text as the recogniser wrote it (punctuation kept), for its trailing marks.

        Raises:
            ValueError: a probability outside [0, 1] or NaN; text not a str.
        """
        _check_probability("text_probability", text_probability)
        _check_probability("acoustic_probability", acoustic_probability)
        mark = ending(text)
        z = (
            self.text * _logit(text_probability)
            + self.acoustic * _logit(acoustic_probability)
            + self.trailing * (mark == "trailing")
            + self.unpunctuated * (mark == "none")
            + self.bias
        )
        return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0

    def as_dict(self) -> dict:
        return asdict(self)


def features(rows: Sequence[Mapping], after: str = "0.2") -> tuple[np.ndarray, np.ndarray]:
    """(x float64 (n, 4), y int (n,)) from rows with p_text, p_acoustic[after], text and label (1: complete)."""
    x, y = [], []
    for r in rows:
        mark = ending(r["text"])
        x.append([_logit(r["p_text"]), _logit(r["p_acoustic"][after]), float(mark == "trailing"), float(mark == "none")])
        y.append(int(r["label"]))
    return np.asarray(x, np.float64), np.asarray(y, int)


def fit(rows: Sequence[Mapping], *, after: str = "0.2", l2: float = 0.05, max_cutoff: float = 0.02) -> FusionWeights:
    """Fit the weights (class-balanced L2 logistic regression, headstart/llm/eou_head.py `fit_logistic`)
    and the thresholds (`calibrate_thresholds` of the same module: the least mean silence on complete
    rows with an expected cut-off rate <= `max_cutoff` on the others) on `rows` (see `features`).

    Raises:
        ValueError: rows of one class only.
    """
    from headstart.llm.eou_head import calibrate_thresholds, fit_logistic

    x, y = features(rows, after)
    if y.min() == y.max():
        raise ValueError("fit needs complete and cut rows")
    mean, scale, w, b = fit_logistic(x, y.astype(np.float64), l2)
    raw = w.astype(np.float64) / scale
    bias = float(b - np.sum(raw * mean))
    unscaled = FusionWeights(*map(float, raw), bias, 0.5, 1.0)
    p = np.array([unscaled.probability(r["p_text"], r["p_acoustic"][after], r["text"]) for r in rows])
    pair = calibrate_thresholds(p[y == 1], p[y == 0], max_cutoff=max_cutoff)
    info = {"rows": len(rows), "complete": int(y.sum()), "cut": int((1 - y).sum()), "l2": l2, "after_s": float(after),
            "max_cutoff": max_cutoff, "mean_silence_complete_s": pair["mean_silence_complete_s"],
            "expected_cutoff": pair["expected_cutoff"]}
    return FusionWeights(*map(lambda v: round(float(v), 4), raw), round(bias, 4), pair["eou_low"], pair["eou_high"], info)


def evaluate(weights: FusionWeights, rows: Sequence[Mapping], *, after: str = "0.2",
             text_thresholds: tuple[float, float] = (0.805, 0.825)) -> dict:
    """Figures of the fusion on `rows`, beside the text head alone with `text_thresholds` (the trained
    qwen2.5-coder-0.5b head's own pair): AUCs, mean silence waited on complete rows, expected cut-off rate
    on the cut rows (pauses uniform in 0.6-1.5 s), and how many of each end at once (`min_silence_s`)."""
    from headstart.llm.eou_head import auc, expected_cutoff, silence_for

    _, y = features(rows, after)
    fused = np.array([weights.probability(r["p_text"], r["p_acoustic"][after], r["text"]) for r in rows])
    text = np.array([r["p_text"] for r in rows])
    acoustic = np.array([r["p_acoustic"][after] for r in rows])
    out = {"complete": int(y.sum()), "cut": int((1 - y).sum()),
           "auc_text": round(auc(text, y), 3), "auc_acoustic": round(auc(acoustic, y), 3), "auc_fused": round(auc(fused, y), 3)}
    for name, p, (low, high) in (("text", text, text_thresholds), ("fused", fused, (weights.eou_low, weights.eou_high))):
        silence = silence_for(p, low, high, 0.0, 2.0)
        out[f"{name}_mean_silence_complete_s"] = round(float(np.mean(silence[y == 1])), 3)
        out[f"{name}_median_silence_complete_s"] = round(float(np.median(silence[y == 1])), 3)
        out[f"{name}_expected_cutoff"] = round(float(np.mean(expected_cutoff(silence[y == 0]))), 4)
        out[f"{name}_at_once_complete"] = f"{int(np.sum(p[y == 1] >= high))}/{int(y.sum())}"
        out[f"{name}_at_once_cut"] = f"{int(np.sum(p[y == 0] >= high))}/{int((1 - y).sum())}"
    return out


# `scripts/fit_turn_fusion.py` on the training split (26 complete recordings, 48 mid-sentence cuts; text
# head of qwen2.5-coder-0.5b, float32 + int8 layers); its figures on both splits: docs/listening.md
FITTED = FusionWeights(
    text=0.1983, acoustic=0.296, trailing=-1.6604, unpunctuated=-0.4812, bias=0.4479, eou_low=0.7392, eou_high=0.7705,
    info={"rows": 74, "complete": 26, "cut": 48, "l2": 0.05, "after_s": 0.2, "max_cutoff": 0.02,
          "llm": "qwen2.5-coder-0.5b", "acoustic_model": "smart-turn-v3.2"},
)
