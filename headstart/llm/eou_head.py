"""End-of-utterance (EOU) head: logistic regression on the chat LLM's last hidden state.

The probability that the user's turn is complete after `text` is read off the same forward that
`headstart/llm/eou.py` runs (the prompt up to the user's text, right before the chat template's
end-of-turn token, prefilled on top of the KV cache the session already holds): instead of the
end-of-turn token's probability, a linear probe on the final-norm hidden state of the text's last token
decides (logistic regression, `p = sigmoid(w . (h - mean) / scale + b)`). A call costs the prefill of the
few new tokens plus one dot product. Idea: a probe on a frozen LM's hidden state (as in linear probing;
turn detectors such as LiveKit's and Pipecat's Smart Turn train a whole model instead).

The head is trained offline from text by `headstart/training/train_eou.py` (`headstart llm train-eou`);
this module only loads and applies it.

Weights are tiny (3 x hidden_size float32: ~7 KB for SmolLM2-135M, ~11 KB for Qwen2.5-0.5B) and ship in
the package (`headstart/llm/eou_heads/NAME.npz`); `headstart llm train-eou --model NAME` trains them
again into the cache (`<cache>/eou_heads/NAME.npz`, which wins over the packaged file) in about a
minute. `load_weights` never downloads or trains: no hidden work at first use.

Not thread-safe: call it on the thread that owns the engine (the "llm" executor).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from headstart.llm.eou import EOUEstimator, EOUResult

if TYPE_CHECKING:
    from headstart.llm.engine import LLMEngine

__all__ = [
    "EOUHead", "EOUHeadWeights", "HEADS_DIR", "HeadFeatures", "load_weights", "weights_path",
]

# the shipped heads (NAME.npz) and their training text (sentences.txt)
HEADS_DIR = Path(__file__).resolve().parent / "eou_heads"
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
        """(eou_low, eou_high) calibrated for this head at training (`calibrate_thresholds` of
        headstart/training/train_eou.py, on out-of-fold scores), for `EndpointConfig`; None for a head
        trained without calibration."""
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
        return HEADS_DIR / f"{safe}.npz"
    from headstart.models.store import cache_dir

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

    def __init__(self, engine: LLMEngine, weights: EOUHeadWeights, strip_punctuation: bool = True) -> None:
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
    def load(cls, engine: LLMEngine, model: str) -> EOUHead:
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
