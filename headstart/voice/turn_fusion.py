"""End-of-turn fusion: one probability that the user has finished, from what was said (the text EOU
head), how it sounded at the first short pause (Smart Turn v3.2, headstart/voice/smart_turn.py) and the
marks whisper writes when speech trails off ("...", a dash, a comma where a sentence should end).

    p = sigmoid(text * logit(p_text) + acoustic * logit(p_acoustic) + trailing * [trailing-off mark]
                + unpunctuated * [no sentence-end mark] + bias)

The endpointer maps `p` to the silence it waits exactly as it maps the text head's probability alone
(`min_silence_s` at or above `eou_high`, `max_silence_s` at or below `eou_low`, log-linear between), with
the thresholds fitted together with the weights (`FusionWeights`). The text head strips punctuation before
it reads the text (headstart/llm/eou_head.py), so the marks are a signal it never sees.

`headstart.bench.turn_fusion_fit.fit` trains the weights (class-balanced L2 logistic regression) and
picks the pair, on rows of scored examples (scripts/fit_turn_fusion.py makes them from the packaged recordings:
complete turns and the same cut mid-sentence, split by recording); `evaluate` reports a split.
`FITTED` is what that script fitted (its figures: docs/listening.md).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field


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


# `scripts/fit_turn_fusion.py` (fitting: headstart/bench/turn_fusion_fit.py) on the training split (26 complete recordings, 48 mid-sentence cuts; text
# head of qwen2.5-coder-0.5b, float32 + int8 layers) on whisper-tiny.en's text (8 s window); its figures on both splits:
# docs/listening.md. Moonshine writes no trailing-off marks, so `trailing` never fires with it (a refit on its text
# was not better than the head alone: docs/listening.md)
FITTED = FusionWeights(
    text=0.1983, acoustic=0.296, trailing=-1.6604, unpunctuated=-0.4812, bias=0.4479, eou_low=0.7392, eou_high=0.7705,
    info={"rows": 74, "complete": 26, "cut": 48, "l2": 0.05, "after_s": 0.2, "max_cutoff": 0.02,
          "llm": "qwen2.5-coder-0.5b", "acoustic_model": "smart-turn-v3.2"},
)
