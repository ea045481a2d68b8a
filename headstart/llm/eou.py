"""End-of-utterance (EOU) probability from the chat LLM the session already has loaded (no second model).

The probability that the user's turn is complete after `text` is read off the chat model itself: the
prompt is rendered with the user's message as the last one and cut right before the chat template's
end-of-turn token (`<|im_end|>` in ChatML); the model's next-token probability of that token is the
signal. Its logits come from a prefill that reuses the KV cache the session's incremental prefill
already holds (the longest common prefix), so a call computes only the last few tokens. Idea as in
LiveKit's turn detector (a small LM's end-of-turn token probability). Trailing punctuation is
stripped by default (`strip_punctuation=True`): Whisper writes a period whether the speaker finished
or not, and with it the signal separates complete from cut text much worse. How well it separates,
and what a call costs: docs/listening.md "The raw end-of-turn token probability".

Not thread-safe: call it on the thread that owns the engine (the "llm" executor).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from headstart.llm.engine import LLMEngine

__all__ = ["EOUEstimator", "EOUResult"]


@dataclass(frozen=True, slots=True)
class EOUResult:
    """One estimate: `probability` in [0, 1]; `num_computed` prompt positions the prefill ran;
    `compute_s` its wall time (seconds)."""

    probability: float
    num_computed: int
    compute_s: float


class EOUEstimator:
    """P(end-of-turn token | chat prompt up to and including the user's current text).

    Args:
        engine: the session's loaded `LLMEngine` (its KV cache is reused and extended; callers that
            prefill the same prompt afterwards keep the common prefix).
        strip_punctuation: drop trailing ".", "!", "?", "," and "..." from the text first. Whisper
            ends nearly every hypothesis with a period, cut off or not; without the period the model
            must judge from the words alone.

    Raises:
        ValueError: the tokenizer's chat template puts no end-of-turn token after a user message.
    """

    def __init__(self, engine: LLMEngine, strip_punctuation: bool = True) -> None:
        self.engine = engine
        self.strip_punctuation = strip_punctuation
        probe = engine.render_prompt([{"role": "user", "content": "hi"}], add_generation_prompt=False)
        if not any(t in engine.eos_token_ids for t in probe):
            raise ValueError("the chat template puts no end-of-turn token after a user message")

    def prompt_ids(self, messages_before: Sequence[Mapping[str, str]], text: str) -> tuple[list[int], int]:
        """(ids of the prompt up to the user's text, the end-of-turn token id that follows it)."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a str, got {text!r}")
        if self.strip_punctuation:
            text = text.rstrip().rstrip(".!?,…").rstrip()
        ids = self.engine.render_prompt([*messages_before, {"role": "user", "content": text}], add_generation_prompt=False)
        ends = self.engine.eos_token_ids
        cut = max(i for i, t in enumerate(ids) if t in ends)
        # trailing whitespace tokens between the text and the end marker are part of the template
        return ids[:cut], ids[cut]

    def probability(self, messages_before: Sequence[Mapping[str, str]], text: str) -> float:
        """The EOU probability of `text` as the user's message after `messages_before` (the system
        message and history as {"role", "content"} dicts). Empty text gives 0.0 (nothing said)."""
        return self.estimate(messages_before, text).probability

    def estimate(self, messages_before: Sequence[Mapping[str, str]], text: str) -> EOUResult:
        """`probability` with the cost of the call."""
        import torch

        if not isinstance(text, str):
            raise ValueError(f"text must be a str, got {text!r}")
        if not text.strip():
            return EOUResult(0.0, 0, 0.0)
        started = time.perf_counter()
        ids, end_id = self.prompt_ids(messages_before, text)
        held = self.engine.num_tokens
        before = min(held, _common_prefix(self.engine.tokens, ids))
        logits = self.engine.prefill(ids)
        log_probs = torch.log_softmax(logits.float(), dim=-1)
        probability = float(math.exp(float(log_probs[end_id])))
        return EOUResult(min(max(probability, 0.0), 1.0), len(ids) - min(before, len(ids) - 1),
                         time.perf_counter() - started)


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    from headstart.llm.engine import common_prefix_len

    return common_prefix_len(a, b)
