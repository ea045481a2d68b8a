"""Fitting the end-of-turn fusion (headstart/voice/turn_fusion.py) offline: features of scored pause
rows, the class-balanced logistic fit and its thresholds, and the held-out figures. Used by
scripts/fit_turn_fusion.py and the tests; it borrows the text EOU head's fitting tools
(headstart/training/train_eou.py), so it lives outside voice/ (the package rule: stages import no other stage).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from headstart.voice.turn_fusion import FusionWeights, _logit, ending

__all__ = ["evaluate", "evaluate_veto", "features", "fit", "fit_text_thresholds", "fit_veto", "veto_silence"]


def features(rows: Sequence[Mapping], after: str = "0.2") -> tuple[np.ndarray, np.ndarray]:
    """(x float64 (n, 4), y int (n,)) from rows with p_text, p_acoustic[after], text and label (1: complete)."""
    x, y = [], []
    for r in rows:
        mark = ending(r["text"])
        x.append([_logit(r["p_text"]), _logit(r["p_acoustic"][after]), float(mark == "trailing"), float(mark == "none")])
        y.append(int(r["label"]))
    return np.asarray(x, np.float64), np.asarray(y, int)


def fit(rows: Sequence[Mapping], *, after: str = "0.2", l2: float = 0.05, max_cutoff: float = 0.02) -> FusionWeights:
    """Fit the weights (class-balanced L2 logistic regression, headstart/training/train_eou.py `fit_logistic`)
    and the thresholds (`calibrate_thresholds` of the same module: the least mean silence on complete
    rows with an expected cut-off rate <= `max_cutoff` on the others) on `rows` (see `features`).

    Raises:
        ValueError: rows of one class only.
    """
    from headstart.training.train_eou import calibrate_thresholds, fit_logistic

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


def fit_text_thresholds(rows: Sequence[Mapping], *, max_cutoff: float = 0.02) -> dict[str, float]:
    """The text head's own (eou_low, eou_high) recalibrated on `rows` (their p_text; label 1: complete),
    as `train-eou` calibrates a head (`calibrate_thresholds`): returns its dict, values rounded to 4 places.

    Raises:
        ValueError: rows of one class only.
    """
    from headstart.training.train_eou import calibrate_thresholds

    p = np.array([float(r["p_text"]) for r in rows])
    y = np.array([int(r["label"]) for r in rows])
    if y.size == 0 or y.min() == y.max():
        raise ValueError("fit_text_thresholds needs complete and cut rows")
    pair = calibrate_thresholds(p[y == 1], p[y == 0], max_cutoff=max_cutoff)
    return {k: round(float(v), 4) for k, v in pair.items()}


def evaluate(weights: FusionWeights, rows: Sequence[Mapping], *, after: str = "0.2",
             text_thresholds: tuple[float, float] = (0.805, 0.825)) -> dict:
    """Figures of the fusion on `rows`, beside the text head alone with `text_thresholds` (the trained
    qwen2.5-coder-0.5b head's own pair): AUCs, mean silence waited on complete rows, expected cut-off rate
    on the cut rows (pauses uniform in 0.6-1.5 s), and how many of each end at once (`min_silence_s`)."""
    from headstart.training.train_eou import auc, expected_cutoff, silence_for

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


# -- Smart Turn as a veto (EndpointConfig.acoustic_mode = "veto") ------------------------------------

def veto_silence(rows: Sequence[Mapping], veto_below: float, *, after: str = "0.2",
                 text_thresholds: tuple[float, float] = (0.805, 0.825), max_silence_s: float = 2.0) -> np.ndarray:
    """The silence (s, float64 (n,)) the endpointer waits for each row in veto mode: the text head's
    (`silence_for` with `text_thresholds`, 0 to `max_silence_s`), at least `max_silence_s` where the
    acoustic score at `after` s is below `veto_below` (headstart/voice/endpoint.py `required_silence_s`)."""
    from headstart.training.train_eou import silence_for

    low, high = text_thresholds
    text = np.array([float(r["p_text"]) for r in rows])
    acoustic = np.array([float(r["p_acoustic"][after]) for r in rows])
    silence = np.atleast_1d(silence_for(text, low, high, 0.0, max_silence_s))
    return np.where(acoustic < veto_below, np.maximum(silence, max_silence_s), silence)


def evaluate_veto(rows: Sequence[Mapping], veto_below: float, *, after: str = "0.2",
                  text_thresholds: tuple[float, float] = (0.805, 0.825)) -> dict:
    """Figures of the veto at `veto_below` on `rows` (label 1: complete): complete rows ended at once,
    median and mean silence on them (s), expected cut-off rate of the cut rows (pauses uniform in
    0.6-1.5 s, `expected_cutoff`) and the cut rows ended at once. `veto_below` 0: the text head alone."""
    from headstart.training.train_eou import expected_cutoff

    y = np.array([int(r["label"]) for r in rows])
    silence = veto_silence(rows, veto_below, after=after, text_thresholds=text_thresholds)
    complete, cut = silence[y == 1], silence[y == 0]
    return {"veto_below": veto_below, "at_once_complete": f"{int(np.sum(complete <= 1e-9))}/{complete.size}",
            "median_silence_complete_s": round(float(np.median(complete)), 3) if complete.size else None,
            "mean_silence_complete_s": round(float(np.mean(complete)), 3) if complete.size else None,
            "expected_cutoff": round(float(np.mean(expected_cutoff(cut))), 4) if cut.size else None,
            "at_once_cut": f"{int(np.sum(cut <= 1e-9))}/{cut.size}"}


def fit_veto(rows: Sequence[Mapping], *, after: str = "0.2", text_thresholds: tuple[float, float] = (0.805, 0.825),
             max_cutoff: float | None = None) -> float:
    """The veto threshold (`EndpointConfig.acoustic_veto_below`) chosen on `rows`, among the geometric
    midpoints between consecutive distinct acoustic scores of the rows the text head ends before
    `max_silence_s` (the only ones a veto changes), and 0 (no veto):

    * `max_cutoff` None: the one that buys the most expected cut-off reduction per second of mean
      silence it adds on complete rows, against no veto (the steepest step of the trade-off; a
      reduction that adds no silence counts as the steepest; equal rates: the larger reduction, then
      the smaller threshold);
    * `max_cutoff` a rate: the smallest threshold whose expected cut-off is at most it (least mean
      silence under that constraint, as `calibrate_thresholds`); 1.0 if none reaches it.

    Returns the threshold rounded to 4 places (0.0 when no threshold lowers the cut-off).

    Raises:
        ValueError: rows of one class only.
    """
    y = np.array([int(r["label"]) for r in rows])
    if y.size == 0 or y.min() == y.max():
        raise ValueError("fit_veto needs complete and cut rows")
    # only rows the text head ends before max_silence_s can be vetoed: the midpoints between their
    # scores keep a margin to both sides
    free = veto_silence(rows, 0.0, after=after, text_thresholds=text_thresholds) < 2.0
    scores = np.unique(np.clip([float(r["p_acoustic"][after]) for r, f in zip(rows, free) if f], 1e-6, 1.0))
    candidates = [0.0] + [float(np.sqrt(a * b)) for a, b in zip(scores[:-1], scores[1:])] + [1.0]

    def figures(v: float) -> tuple[float, float]:
        f = evaluate_veto(rows, v, after=after, text_thresholds=text_thresholds)
        return f["mean_silence_complete_s"], f["expected_cutoff"]

    if max_cutoff is not None:
        return next((round(v, 4) for v in candidates if figures(v)[1] <= max_cutoff + 1e-12), 1.0)
    mean0, cut0 = figures(0.0)
    best, best_key = 0.0, (0.0, 0.0)
    for v in candidates[1:]:
        mean, cut = figures(v)
        gain, cost = cut0 - cut, mean - mean0
        if gain <= 1e-12:
            continue
        # equal rates: the larger reduction (rounded: equal figures compare equal, the smaller v stays)
        key = (math.inf if cost <= 1e-12 else round(gain / cost, 9), round(gain, 9))
        if key > best_key:
            best, best_key = v, key
    return round(best, 4)
