"""End-of-utterance (EOU) head: logistic regression on the chat LLM's last hidden state.

The probability that the user's turn is complete after `text` is read off the same forward that
`headstart/llm/eou.py` runs (the prompt up to the user's text, right before the chat template's
end-of-turn token, prefilled on top of the KV cache the session already holds): instead of the
end-of-turn token's probability, a linear probe on the final-norm hidden state of the text's last token
decides (logistic regression, `p = sigmoid(w . (h - mean) / scale + b)`). A call costs the prefill of the
few new tokens plus one dot product. Idea: a probe on a frozen LM's hidden state (as in linear probing;
turn detectors such as LiveKit's and Pipecat's Smart Turn train a whole model instead).

Training is self-supervised from text (`train`): each complete utterance (trailing punctuation stripped,
as Whisper adds periods whether the speaker finished or not) is a positive; the same utterance cut at
each word boundary is a negative (one forward per utterance gives the hidden state at every cut). The
text is this package's own `eou_heads/sentences.txt` (written for the project, not the bench set); the
training set is built by `headstart/llm/eou_data.py` (other labellings and synthetic short turns as
options; no text that overlaps the bench transcripts).

Weights are tiny (3 x hidden_size float32: ~7 KB for SmolLM2-135M, ~11 KB for Qwen2.5-0.5B) and ship in
the package (`headstart/llm/eou_heads/NAME.npz`); `headstart llm train-eou --model NAME` trains them
again into the cache (`<cache>/eou_heads/NAME.npz`, which wins over the packaged file) in about a
minute. `load_weights` never downloads or trains: no hidden work at first use.

Not thread-safe: call it on the thread that owns the engine (the "llm" executor).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from headstart.llm.eou import EOUEstimator, EOUResult

__all__ = [
    "EOUHead", "EOUHeadWeights", "HeadFeatures", "auc", "calibrate_thresholds", "cut_examples", "expected_cutoff",
    "load_weights", "packaged_sentences", "silence_for", "train", "weights_path",
]

_PACKAGE_DIR = Path(__file__).resolve().parent / "eou_heads"
_TRAILING = ".!?,;:…"


@dataclass(frozen=True)
class EOUHeadWeights:
    """A trained head. `mean`, `scale`, `weight`: float32 arrays of shape (hidden_size,); `bias`: float;
    `model`: the LLM preset it was trained on (a head only fits that model's hidden states);
    `info`: training facts (examples, held-out AUC, ...)."""

    model: str
    mean: np.ndarray
    scale: np.ndarray
    weight: np.ndarray
    bias: float
    info: dict = field(default_factory=dict)

    @property
    def hidden_size(self) -> int:
        return int(self.weight.shape[0])

    @property
    def thresholds(self) -> tuple[float, float] | None:
        """(eou_low, eou_high) calibrated for this head at training (`calibrate_thresholds` on
        out-of-fold scores), for `EndpointConfig`; None for a head trained without calibration."""
        low, high = self.info.get("eou_low"), self.info.get("eou_high")
        return None if low is None or high is None else (float(low), float(high))

    def probability(self, hidden: np.ndarray) -> np.ndarray | float:
        """sigmoid of the logit for hidden states of shape (hidden_size,) or (n, hidden_size)."""
        z = ((np.asarray(hidden, np.float64) - self.mean) / self.scale) @ self.weight.astype(np.float64) + self.bias
        p = 1.0 / (1.0 + np.exp(-np.clip(z, -60, 60)))
        return float(p) if np.ndim(p) == 0 else p

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez(tmp, mean=self.mean.astype(np.float32), scale=self.scale.astype(np.float32),
                 weight=self.weight.astype(np.float32), bias=np.float32(self.bias),
                 meta=np.array(json.dumps({"model": self.model, "info": self.info})))
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> EOUHeadWeights:
        """Raises FileNotFoundError (missing) or ValueError (not a head file / inconsistent shapes)."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no EOU head at {path}")
        try:
            with np.load(path, allow_pickle=False) as data:
                meta = json.loads(str(data["meta"]))
                out = cls(meta["model"], data["mean"], data["scale"], data["weight"], float(data["bias"]), meta.get("info", {}))
        except (KeyError, ValueError, OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path} is not an EOU head file: {exc}") from exc
        d = out.weight.shape
        if len(d) != 1 or out.mean.shape != d or out.scale.shape != d or not np.all(out.scale > 0):
            raise ValueError(f"{path}: inconsistent EOU head arrays")
        return out


def weights_path(model: str, *, packaged: bool = False) -> Path:
    """Where the head for LLM preset `model` lives: the cache copy (`headstart llm train-eou`) or,
    with packaged=True, the one shipped in the package."""
    safe = model.replace("/", "--")
    if packaged:
        return _PACKAGE_DIR / f"{safe}.npz"
    from headstart.models import cache_dir

    return cache_dir() / "eou_heads" / f"{safe}.npz"


def load_weights(model: str) -> EOUHeadWeights:
    """The head for LLM preset `model`: the cache's trained copy if there is one, else the packaged one.

    Raises:
        FileNotFoundError: no head for this model (names the training command).
    """
    for path in (weights_path(model), weights_path(model, packaged=True)):
        if path.is_file():
            return EOUHeadWeights.load(path)
    raise FileNotFoundError(
        f"no EOU head for {model!r}: run `headstart llm train-eou --model {model}` (or use the raw "
        "end-of-turn token probability, EndpointConfig(eou_scorer='token'))"
    )


def _final_norm(model: Any) -> Any:
    """The module whose output is the last hidden state (the final norm before the LM head)."""
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else getattr(model, "model", None)
    for name in ("norm", "final_layernorm", "ln_f"):
        module = getattr(decoder, name, None)
        if module is not None:
            return module
    raise ValueError(f"cannot find the final norm of {type(model).__name__} (looked for norm, final_layernorm, ln_f)")


@dataclass(frozen=True, slots=True)
class HeadFeatures:
    """One forward's outputs: `hidden` float32 (n, hidden_size) for the positions computed up to the
    text's last token (the last row); `token_probability` the raw end-of-turn token probability (None
    when the forward went on past the text: the logits are then the reply's, not the text's)."""

    hidden: np.ndarray
    token_probability: float | None
    num_computed: int


class EOUHead:
    """P(the user's turn is complete | the chat so far and the user's current text), from a trained
    linear head on the LLM's last hidden state. Same interface as `EOUEstimator` (`probability`,
    `estimate`); the raw end-of-turn token probability of the same forward is kept in
    `last_token_probability`.

    Args:
        engine: the session's loaded `LLMEngine` (its KV cache is reused and extended).
        weights: the head (`load_weights(model)`); its hidden size must match the model's.
        strip_punctuation: drop trailing punctuation from the text first (the head was trained so).

    Raises:
        ValueError: the head does not fit the model (hidden size), the model has no final norm to
            read, or the chat template puts no end-of-turn token after a user message.
    """

    def __init__(self, engine: Any, weights: EOUHeadWeights, strip_punctuation: bool = True) -> None:
        self.engine = engine
        self.weights = weights
        self._token = EOUEstimator(engine, strip_punctuation=strip_punctuation)
        self._norm = _final_norm(engine.model)
        size = int(getattr(engine.model.config, "hidden_size", weights.hidden_size))
        if size != weights.hidden_size:
            raise ValueError(
                f"the EOU head was trained on {weights.model!r} (hidden size {weights.hidden_size}); this model's "
                f"hidden size is {size}"
            )
        self.last_token_probability: float | None = None

    @classmethod
    def load(cls, engine: Any, model: str) -> EOUHead:
        """The head for LLM preset `model` (see `load_weights`) on `engine`."""
        return cls(engine, load_weights(model))

    def features(
        self, messages_before: Sequence[Mapping[str, str]], text: str, reply_ids: Sequence[int] | None = None,
    ) -> HeadFeatures:
        """Prefill the prompt up to `text` (reusing the cache) and return the hidden states computed.

        With `reply_ids` (the whole reply prompt for this text: the chat, the user's message and the
        assistant header), the same forward runs on to its end when it extends the head's prompt
        (trailing punctuation, end of message, header), so a reply to this text starts without a
        prefill of its own (the engine keeps the logits after the last token). The hidden state the
        head reads is the same: a position does not attend to later ones. Otherwise, as without it."""
        import torch

        from headstart.llm.engine import common_prefix_len

        ids, end_id = self._token.prompt_ids(messages_before, text)
        run = ids
        if reply_ids is not None and len(reply_ids) > len(ids) and list(reply_ids[: len(ids)]) == ids:
            run = [int(t) for t in reply_ids]
        # the text's last position must be computed: a cache holding it (and maybe more) is cut back
        self.engine.rollback_to(min(common_prefix_len(self.engine.tokens, run), len(ids) - 1))
        captured: list[Any] = []
        handle = self._norm.register_forward_hook(lambda _m, _i, out: captured.append(out[0].detach()))
        try:
            logits = self.engine.prefill(run)
        finally:
            handle.remove()
        if not captured:
            raise RuntimeError("the model's final norm did not run during the prefill")
        computed = captured[-1].float().cpu().numpy()  # positions len(run) - n .. len(run) - 1
        hidden = computed[: len(ids) - (len(run) - computed.shape[0])]
        probability = None
        if run is ids:
            probability = min(max(float(torch.softmax(logits.float(), dim=-1)[end_id]), 0.0), 1.0)
        return HeadFeatures(hidden, probability, int(hidden.shape[0]))

    def estimate(
        self, messages_before: Sequence[Mapping[str, str]], text: str, reply_ids: Sequence[int] | None = None,
    ) -> EOUResult:
        """The head's probability with the cost of the call. Empty text gives 0.0. `reply_ids`: see
        `features` (the reply prompt prefilled in the same forward)."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a str, got {text!r}")
        if not text.strip(_TRAILING + " \t\n"):
            return EOUResult(0.0, 0, 0.0)
        started = time.perf_counter()
        feats = self.features(messages_before, text, reply_ids)
        self.last_token_probability = feats.token_probability
        probability = self.weights.probability(feats.hidden[-1])
        return EOUResult(float(probability), feats.num_computed, time.perf_counter() - started)

    def probability(
        self, messages_before: Sequence[Mapping[str, str]], text: str, reply_ids: Sequence[int] | None = None,
    ) -> float:
        return self.estimate(messages_before, text, reply_ids).probability


# -- training --------------------------------------------------------------------------------------
def packaged_sentences() -> list[str]:
    """The training utterances shipped with the package (comments and blank lines skipped)."""
    lines = (_PACKAGE_DIR / "sentences.txt").read_text(encoding="utf-8").splitlines()
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
    from headstart.llm.eou_data import Utterance, prefix_text

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
    from headstart.llm.eou_data import Utterance, all_cuts

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


# -- command line: `headstart llm train-eou --model NAME` (also `python -m headstart.llm.eou_head`) ------
def add_arguments(parser: Any) -> None:
    """The `train-eou` options."""
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", help="LLM preset (or folder) the head is for")
    parser.add_argument("--sentences", default=None,
                        help="a text file of complete utterances, one per line (default: the packaged set)")
    parser.add_argument("--quantize", choices=("auto", "int8", "none"), default=None,
                        help="the LLM's quantisation while training (default: LLMConfig.quantize, as the session loads it; "
                             "int8 changes the hidden states a little)")
    parser.add_argument("--labels", choices=("all-cuts", "pause-points"), default="all-cuts",
                        help="negatives: every cut of a sentence (all-cuts, the shipped heads) or only cuts that read cut off "
                             "(pause-points, llm/eou_data.py label_cuts; measured in docs/listening.md, session 4)")
    parser.add_argument("--synthetic", type=int, default=0,
                        help="short complete turns generated from templates (llm/eou_data.py) added to the sentences (default 0)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic turns and of the splits (default 0)")
    parser.add_argument("--max-cutoff", type=float, default=0.03,
                        help="calibrate eou_low/eou_high for at most this expected false cut-off rate (default 0.03)")
    parser.add_argument("--out", default=None, help="where to write the head (default: the cache, which wins over the packaged head)")
    parser.add_argument("--evaluate-bench", action="store_true",
                        help="also report AUC on the bench transcripts (complete vs cut), head vs raw token probability")


def run_from_args(args: Any, bench_texts: Any = None) -> int:
    """Train (and save) a head; prints progress, then one JSON line. Returns the exit status.

    `bench_texts`: a callable returning the evaluation texts for `--evaluate-bench` (the CLI passes the
    packaged bench transcripts; llm/ does not import bench/)."""
    from headstart.config import LLMConfig, ThreadPlan
    from headstart.llm.eou_data import training_utterances
    from headstart.llm.engine import LLMEngine
    from headstart.models import ModelError

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
        utterances, dropped = training_utterances(sentences, labels=labels, seed=seed, synthetic=synthetic, exclude=held_out)
        print(f"train-eou: {len(utterances)} utterances ({synthetic} synthetic asked), "
              f"{dropped} labelled texts dropped for overlap with {len(held_out)} bench transcripts")
        engine = LLMEngine.from_config(config, ThreadPlan(torch_threads=1))
        weights = train(engine, args.model, utterances, config.system_prompt, log=print, seed=seed,
                        max_cutoff=getattr(args, "max_cutoff", 0.03))
        weights.info["quantize"] = getattr(engine, "quantize", None) or config.quantize
        weights.info.update(labels=labels, synthetic=synthetic, overlap_dropped=dropped, held_out_texts=len(held_out))
    except (FileNotFoundError, ValueError, ModelError) as exc:
        print(f"train-eou: {exc}")
        return 2
    out = weights.save(args.out or weights_path(args.model))
    result: dict[str, Any] = {"model": args.model, "path": str(out), **weights.info}
    if args.evaluate_bench:
        if bench_texts is None:
            print("train-eou: --evaluate-bench needs the bench transcripts: run it as `headstart llm train-eou`")
            return 2
        result.update(evaluate(EOUHead(engine, weights), list(bench_texts()), config.system_prompt))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    import argparse
    import sys

    _parser = argparse.ArgumentParser(prog="python -m headstart.llm.eou_head", description="train the EOU head")
    add_arguments(_parser)
    sys.exit(run_from_args(_parser.parse_args()))
