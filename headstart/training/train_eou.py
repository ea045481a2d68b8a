"""Training of the EOU head (headstart/llm/eou_head.py): `headstart llm train-eou --model NAME`,
and the threshold calibration the endpointer's `eou_low` / `eou_high` come from.

Training is self-supervised from text (`train`): each complete utterance (trailing punctuation stripped,
as Whisper adds periods whether the speaker finished or not) is a positive; the same utterance cut at
each word boundary is a negative (one forward per utterance gives the hidden state at every cut). The
text is the package's own `headstart/llm/eou_heads/sentences.txt` (written for the project, not the
bench set); the training set is built by `headstart/training/eou_data.py` (other labellings and
synthetic short turns as options; no text that overlaps the bench transcripts, which are the held-out
measure). The trained weights go to the cache (`<cache>/eou_heads/NAME.npz`), which wins over the
packaged file.

Offline only: a running pipeline never imports this module.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from headstart.llm.eou_head import HEADS_DIR, EOUHead, EOUHeadWeights, weights_path

__all__ = [
    "auc", "bench_transcripts", "calibrate_thresholds", "cut_examples", "evaluate", "expected_cutoff", "fit_logistic",
    "packaged_sentences", "silence_for", "train",
]

_TRAILING = ".!?,;:…"


# -- training --------------------------------------------------------------------------------------
def packaged_sentences() -> list[str]:
    """The training utterances shipped with the package (comments and blank lines skipped)."""
    lines = (HEADS_DIR / "sentences.txt").read_text(encoding="utf-8").splitlines()
    return [s.strip() for s in lines if s.strip() and not s.lstrip().startswith("#")]


def _strip(text: str) -> str:
    return text.strip().rstrip(_TRAILING).strip()


def cut_examples(text: str) -> list[tuple[str, int]]:
    """(text, label) pairs from one complete utterance: itself (label 1) and its cuts after each word
    but the last (label 0), trailing punctuation stripped from all. "Go home now." ->
    [("Go", 0), ("Go home", 0), ("Go home now", 1)]."""
    words = _strip(text).split()
    out = [(_strip(" ".join(words[:k])), 0) for k in range(1, len(words))]
    out = [(t, label) for t, label in out if t]
    if words:
        out.append((" ".join(words), 1))
    return out


def _sentence_features(head: EOUHead, messages: Sequence[Mapping[str, str]], text: Any) -> list[tuple[np.ndarray, float, int]]:
    """(hidden state, raw token probability, label) for each labelled prefix of `text` (an
    `eou_data.Utterance`, or a str: every cut, `cut_examples`), from one forward of the whole
    utterance where the tokenisation allows (a prefix whose prompt is not a token prefix of the whole
    one gets its own forward)."""
    from headstart.training.eou_data import Utterance, prefix_text

    if isinstance(text, Utterance):
        examples = [(prefix_text(text.text, k), label) for k, label in text.cuts]
        examples = [(t, label) for t, label in examples if t]
        full_text = _strip(text.text)
    else:
        examples = cut_examples(text)
        full_text = examples[-1][0] if examples else ""
    if not examples:
        return []
    full_ids, _ = head._token.prompt_ids(messages, full_text)
    feats = head.features(messages, full_text)
    first = len(full_ids) - feats.num_computed  # position of hidden row 0
    out = []
    for cut, label in examples:
        ids, _ = head._token.prompt_ids(messages, cut)
        pos = len(ids) - 1
        if cut != full_text and full_ids[: len(ids)] == ids and pos >= first:
            out.append((feats.hidden[pos - first], math.nan, label))
        else:
            f = feats if cut == full_text else head.features(messages, cut)
            out.append((f.hidden[-1], f.token_probability, label))
    return out


def auc(scores: Sequence[float], labels: Sequence[int]) -> float:
    """Area under the ROC curve (the probability that a random positive outscores a random negative;
    ties count half). NaN when one class is missing."""
    s = np.asarray(scores, np.float64)
    y = np.asarray(labels, bool)
    pos, neg = s[y], s[~y]
    if pos.size == 0 or neg.size == 0:
        return math.nan
    order = np.argsort(np.concatenate([pos, neg]), kind="mergesort")
    ranks = np.empty(order.size, np.float64)
    allv = np.concatenate([pos, neg])[order]
    # average ranks over ties
    i = 0
    while i < allv.size:
        j = i
        while j + 1 < allv.size and allv[j + 1] == allv[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return float((ranks[: pos.size].sum() - pos.size * (pos.size + 1) / 2) / (pos.size * neg.size))


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float, steps: int = 200) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Class-balanced L2-regularised logistic regression on standardised features (torch L-BFGS).
    Returns (mean, scale, weight, bias)."""
    import torch

    mean = x.mean(axis=0)
    scale = x.std(axis=0) + 1e-6
    xs = torch.tensor((x - mean) / scale, dtype=torch.float64)
    yt = torch.tensor(y, dtype=torch.float64)
    n_pos = max(float(yt.sum()), 1.0)
    n_neg = max(float(len(yt) - yt.sum()), 1.0)
    sample_w = torch.where(yt > 0, 0.5 / n_pos, 0.5 / n_neg)
    w = torch.zeros(x.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], lr=1.0, max_iter=steps, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        z = xs @ w + b
        loss = (sample_w * torch.nn.functional.binary_cross_entropy_with_logits(z, yt, reduction="none")).sum()
        loss = loss + l2 * (w @ w) / 2
        loss.backward()
        return loss

    opt.step(closure)
    return mean.astype(np.float32), scale.astype(np.float32), w.detach().numpy().astype(np.float32), float(b.item())


def train(
    engine: Any,
    model: str,
    sentences: Iterable[Any],
    system_prompt: str,
    *,
    l2_values: Sequence[float] = (1e-3, 1e-2, 1e-1),
    seed: int = 0,
    max_cutoff: float = 0.03,
    folds: int = 5,
    log=lambda *_: None,
) -> EOUHeadWeights:
    """Train a head for `engine`'s model on labelled utterances (see module docstring).

    `sentences`: `eou_data.Utterance`s (a text and its labelled prefixes: `eou_data.training_utterances`)
    or complete utterances as str (each with all its cuts as negatives, `eou_data.all_cuts`). The L2
    strength is chosen on a held-out fifth of the utterances (split by utterance), then the head is
    refit on all. The chat context is [system_prompt, user text], as in a first turn.

    Thresholds: `folds`-fold out-of-fold probabilities (split by utterance) of the hand-written
    utterances (source "sentences") of four words or more and of their labelled cuts go to
    `calibrate_thresholds(max_cutoff=...)`; the result is stored in `info` (`eou_low`, `eou_high`:
    `EOUHeadWeights.thresholds`).

    Raises:
        ValueError: fewer than 10 utterances.
    """
    from headstart.training.eou_data import Utterance, all_cuts

    started = time.perf_counter()
    utterances = [s if isinstance(s, Utterance) else all_cuts(s) for s in sentences if _strip(getattr(s, "text", s))]
    if len(utterances) < 10:
        raise ValueError(f"need at least 10 training sentences, got {len(utterances)}")
    head = EOUHead(engine, _placeholder(engine, model))
    messages = [{"role": "system", "content": system_prompt}]
    rows: list[tuple[int, np.ndarray, int]] = []
    long_enough: list[bool] = []  # a hand-written utterance of >= 4 words or one of its cuts (calibration set)
    for i, utt in enumerate(utterances):
        feats = _sentence_features(head, messages, utt)
        hand = utt.source == "sentences" and len(_strip(utt.text).split()) >= 4
        for hidden, _p, label in feats:
            rows.append((i, hidden, label))
            long_enough.append(hand)
        if (i + 1) % 100 == 0:
            log(f"  features: {i + 1}/{len(utterances)} utterances ({time.perf_counter() - started:.0f} s)")
    group = np.array([g for g, _, _ in rows])
    x = np.stack([h for _, h, _ in rows]).astype(np.float64)
    y = np.array([lab for _, _, lab in rows], np.float64)
    rng = np.random.default_rng(seed)
    held = rng.permutation(len(utterances))[: max(len(utterances) // 5, 2)]
    is_held = np.isin(group, held)
    best = None
    for l2 in l2_values:
        mean, scale, w, b = fit_logistic(x[~is_held], y[~is_held], l2)
        heldout = EOUHeadWeights(model, mean, scale, w, b).probability(x[is_held])
        score = auc(heldout, y[is_held])
        log(f"  l2={l2:g}: held-out AUC {score:.3f}")
        if best is None or score > best[1]:
            best = (l2, score)
    # out-of-fold probabilities for the thresholds (a head scores its own training text too well)
    oof = np.empty(len(y))
    fold_of = rng.permutation(len(utterances)) % max(folds, 2)
    for f in range(max(folds, 2)):
        test = fold_of[group] == f
        mean, scale, w, b = fit_logistic(x[~test], y[~test], best[0])
        oof[test] = EOUHeadWeights(model, mean, scale, w, b).probability(x[test])
    use = np.asarray(long_enough)
    if not (use & (y > 0)).any() or not (use & (y == 0)).any():  # no hand-written utterance of >= 4 words
        use = np.ones(len(y), bool)
    calibration = calibrate_thresholds(oof[use & (y > 0)], oof[use & (y == 0)], max_cutoff=max_cutoff)
    log(f"  out-of-fold AUC {auc(oof, y):.3f}; thresholds {calibration}")
    mean, scale, w, b = fit_logistic(x, y, best[0])
    info = {
        "sentences": len(utterances), "examples": int(len(y)), "positives": int(y.sum()), "l2": best[0],
        "heldout_auc": round(best[1], 4), "system_prompt_chars": len(system_prompt),
        "oof_auc": round(auc(oof, y), 4), **calibration,
        "max_cutoff": max_cutoff, "seed": seed, "train_s": round(time.perf_counter() - started, 1),
    }
    return EOUHeadWeights(model, mean, scale, w, b, info)


def _placeholder(engine: Any, model: str) -> EOUHeadWeights:
    d = int(engine.model.config.hidden_size)
    return EOUHeadWeights(model, np.zeros(d, np.float32), np.ones(d, np.float32), np.zeros(d, np.float32), 0.0)


# -- thresholds from data ----------------------------------------------------------------------------
def silence_for(probability, low: float, high: float, min_silence_s: float, max_silence_s: float):
    """The endpointer's adaptive silence (headstart/voice/endpoint.py `required_silence_s`, vectorised):
    `min_silence_s` at or above `high`, `max_silence_s` at or below `low`, log-linear in between.
    `probability`: float or array; returns the same shape (seconds)."""
    p = np.clip(np.asarray(probability, np.float64), 1e-12, 1.0)
    low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
    x = np.clip((np.log(p) - np.log(low)) / (np.log(high) - np.log(low)), 0.0, 1.0)
    out = max_silence_s + x * (min_silence_s - max_silence_s)
    return float(out) if np.ndim(out) == 0 else out


def expected_cutoff(silence_s, pause_s: tuple[float, float] = (0.6, 1.5), pad_s: float = 0.1):
    """The chance that a mid-sentence pause of a length uniform in `pause_s` outlasts the required
    silence: the VAD's end is padded by `pad_s`, so the turn ends inside the pause when
    pad_s + silence_s < pause. Float or array in [0, 1]."""
    a, b = pause_s
    out = np.clip((b - (np.asarray(silence_s, np.float64) + pad_s)) / (b - a), 0.0, 1.0)
    return float(out) if np.ndim(out) == 0 else out


def calibrate_thresholds(
    complete: Sequence[float],
    cut: Sequence[float],
    *,
    min_silence_s: float = 0.0,
    max_silence_s: float = 2.0,
    max_cutoff: float = 0.03,
    pause_s: tuple[float, float] = (0.6, 1.5),
    pad_s: float = 0.1,
) -> dict[str, float]:
    """(eou_low, eou_high) for the endpointer from a scorer's probabilities on complete utterances and
    on the same utterances cut mid-sentence: among threshold pairs taken from the scores themselves,
    the one with the least mean silence on `complete` whose expected cut-off rate on `cut` (each cut
    followed by a pause uniform in `pause_s`, `expected_cutoff`) is at most `max_cutoff`.

    Returns {"eou_low", "eou_high", "mean_silence_complete_s", "expected_cutoff"}.

    Raises:
        ValueError: an empty set, a probability outside [0, 1], or max_cutoff outside [0, 1].
    """
    c = np.asarray(complete, np.float64)
    x = np.asarray(cut, np.float64)
    if c.size == 0 or x.size == 0:
        raise ValueError("calibrate_thresholds needs complete and cut scores")
    for arr in (c, x):
        if not np.all((arr >= 0) & (arr <= 1)):  # also rejects NaN
            raise ValueError("scores must be probabilities in [0, 1]")
    if not 0.0 <= max_cutoff <= 1.0:
        raise ValueError(f"max_cutoff must be in [0, 1], got {max_cutoff}")
    # candidates: quantiles of the scores themselves plus a log grid (the silence is log-linear)
    pooled = np.concatenate([c, x])
    grid = np.unique(np.clip(np.concatenate([np.quantile(pooled, np.linspace(0, 1, 121)), np.geomspace(1e-4, 0.999, 41)]),
                             1e-4, 0.999))
    best: tuple[float, float, float, float] | None = None
    for high in grid:
        # the most careful `low` for this `high` is just below it (a step: below high, the longest wait)
        step = np.where(x >= high, min_silence_s, max_silence_s)
        if float(np.mean(expected_cutoff(step, pause_s, pad_s))) > max_cutoff + 1e-12:
            continue  # no `low` keeps the cut-off rate down with this `high`
        lows = grid[grid < high]
        if lows.size == 0:
            continue
        rates = np.mean(expected_cutoff(silence_for(x[None, :], lows[:, None], high, min_silence_s, max_silence_s),
                                        pause_s, pad_s), axis=1)
        waits = np.mean(silence_for(c[None, :], lows[:, None], high, min_silence_s, max_silence_s), axis=1)
        ok = np.flatnonzero(rates <= max_cutoff + 1e-12)
        if ok.size == 0:
            continue
        i = ok[np.argmin(waits[ok])]
        if best is None or waits[i] < best[2] - 1e-12:
            best = (float(lows[i]), float(high), float(waits[i]), float(rates[i]))
    if best is None:  # nothing meets the bound: always wait the longest
        best = (0.998, 0.999, float(max_silence_s), float(np.mean(expected_cutoff(max_silence_s, pause_s, pad_s))))
    low, high, mean_c, rate = best
    return {"eou_low": round(low, 4), "eou_high": round(high, 4), "mean_silence_complete_s": round(mean_c, 4),
            "expected_cutoff": round(rate, 4)}


def evaluate(head: EOUHead, texts: Iterable[str], system_prompt: str) -> dict[str, Any]:
    """Separation on complete `texts` (>= 4 words) vs their cuts: AUC of the head and of the raw
    end-of-turn token probability, for the cut at the middle word gap (what the bench's pause set
    does) and for all cuts."""
    messages = [{"role": "system", "content": system_prompt}]
    mid_head, mid_token, mid_y, all_head, all_token, all_y = [], [], [], [], [], []
    for text in texts:
        words = _strip(text).split()
        if len(words) < 4:
            continue
        for k, (cut, label) in enumerate(cut_examples(text), 1):
            h = head.estimate(messages, cut).probability
            t = head.last_token_probability
            all_head.append(h)
            all_token.append(t)
            all_y.append(label)
            if label or k == len(words) // 2:
                mid_head.append(h)
                mid_token.append(t)
                mid_y.append(label)
    return {
        "utterances": int(sum(mid_y)),
        "auc_head_middle_cut": round(auc(mid_head, mid_y), 4),
        "auc_token_middle_cut": round(auc(mid_token, mid_y), 4),
        "auc_head_all_cuts": round(auc(all_head, all_y), 4),
        "auc_token_all_cuts": round(auc(all_token, all_y), 4),
    }


# -- the run of `headstart llm train-eou --model NAME` (its flags: headstart/cli/train.py) -------------


@dataclass(frozen=True, slots=True)
class TrainEOUOptions:
    """The options of `headstart llm train-eou`; their meaning and defaults: its `--help` (headstart/cli/)."""

    model: str
    sentences: str | None
    quantize: str | None
    labels: str
    synthetic: int
    seed: int
    extra_rows: str | None
    max_cutoff: float
    out: str | None
    evaluate_bench: bool


def bench_transcripts() -> list[str]:
    """The packaged bench transcripts: held out of the training text, and `--evaluate-bench`'s set."""
    from headstart.corpus.recordings import recordings

    return [r.text for r in recordings()]


def main(args: TrainEOUOptions, bench_texts: Any = bench_transcripts) -> int:
    """Train (and save) a head; prints progress, then one JSON line. Returns the exit status.

    `bench_texts`: a callable returning the held-out texts (default: the packaged bench transcripts);
    None holds nothing out (then `--evaluate-bench` is refused)."""
    from headstart.config import LLMConfig, ThreadPlan
    from headstart.llm.engine import LLMEngine
    from headstart.models.store import ModelError
    from headstart.training.eou_data import load_extra_rows, training_utterances

    try:
        sentences = (
            [s.strip() for s in Path(args.sentences).read_text(encoding="utf-8").splitlines() if s.strip() and not s.startswith("#")]
            if args.sentences else packaged_sentences()
        )
        if len([t for t in sentences if _strip(t)]) < 10:
            raise ValueError(f"need at least 10 training sentences, got {len(sentences)}")
        from dataclasses import replace

        config = LLMConfig(model=args.model)
        quantize = getattr(args, "quantize", None)
        if quantize is not None:
            config = replace(config, quantize=None if quantize == "none" else quantize)
        seed = getattr(args, "seed", 0)
        synthetic = getattr(args, "synthetic", 0)
        labels = getattr(args, "labels", "all-cuts")
        if synthetic < 0:
            raise ValueError(f"--synthetic must be >= 0, got {synthetic}")
        # the bench transcripts are the held-out measure: no training text may equal one, a prefix of one
        # (the pause set's cuts) or a run of three of its words
        held_out = list(bench_texts()) if bench_texts is not None else []
        extra_path = getattr(args, "extra_rows", None)
        extra = load_extra_rows(extra_path) if extra_path else []
        utterances, dropped = training_utterances(sentences, labels=labels, seed=seed, synthetic=synthetic, exclude=held_out,
                                                  extra=extra)
        extra_kept = sum(u.source == "extra" for u in utterances)
        print(f"train-eou: {len(utterances)} utterances ({synthetic} synthetic asked, {extra_kept} of {len(extra)} extra rows), "
              f"{dropped} labelled texts dropped for overlap with {len(held_out)} bench transcripts")
        engine = LLMEngine.from_config(config, ThreadPlan(torch_threads=1))
        weights = train(engine, args.model, utterances, config.system_prompt, log=print, seed=seed,
                        max_cutoff=getattr(args, "max_cutoff", 0.03))
        weights.info["quantize"] = getattr(engine, "quantize", None) or config.quantize
        weights.info.update(labels=labels, synthetic=synthetic, overlap_dropped=dropped, held_out_texts=len(held_out))
        if extra_path:
            weights.info.update(extra_rows=extra_kept, extra_rows_file=Path(extra_path).name)
    except (FileNotFoundError, ValueError, ModelError) as exc:
        print(f"train-eou: {exc}")
        return 2
    out = weights.save(args.out or weights_path(args.model))
    result: dict[str, Any] = {"model": args.model, "path": str(out), **weights.info}
    if args.evaluate_bench:
        if bench_texts is None:
            print("train-eou: --evaluate-bench needs the bench transcripts (bench_texts)")
            return 2
        result.update(evaluate(EOUHead(engine, weights), list(bench_texts()), config.system_prompt))
    print(json.dumps(result))
    return 0
