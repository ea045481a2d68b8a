"""Exactness self-test: do multi-token forwards reproduce one-token steps on this model, dtype and CPU?

Speculative decoding (a k-token verify), incremental prefill (a chunked prefill) and the preemptive
hit are exact, i.e. they give plain greedy decoding's tokens, only when a forward over several tokens
computes each of them exactly as a one-token decode step does. That holds by construction on the
float32 + int8 path (`headstart.llm.int8`, rows independent of the batch), not for bf16 kernels
(measured: a chunked forward differs from a one-shot one), and it can change with the CPU, the torch
build or a model's attention kernel. So it is checked on the loaded model, not assumed: where it
fails, the pipeline turns speculative decoding off (`Components.load`) and says so, so that a reply
is never steered toward the drafts (prompt lookup's drafts are the user's own words).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from headstart.llm.engine import LLMEngine

__all__ = ["ExactnessReport", "check_exactness"]

# a fixed text: the test is the same on every run; any tokens would do
_PROBE_TEXT = "The weather today is mild and clear, so we could walk to the old harbour after lunch."


@dataclass(frozen=True, slots=True)
class ExactnessReport:
    """The self-test's outcome. `exact`: the verify and the chunked prefill logits are bit-identical
    to one-token steps (float32 logits compared with torch.equal). `verify_max_abs_diff`,
    `prefill_max_abs_diff`: the largest absolute logit difference of each (0.0 when identical).
    `first_divergence`: the first probed position whose greedy token differs, or None. `positions`:
    how many positions were compared."""

    exact: bool
    verify_max_abs_diff: float
    prefill_max_abs_diff: float
    first_divergence: int | None
    positions: int

    def summary(self) -> str:
        if self.exact:
            return (f"exact: a verify of {self.positions} positions and chunked prefill match one-token steps bit for "
                    "bit")
        where = ("greedy tokens still agree" if self.first_divergence is None
                 else f"the greedy token differs at probe position {self.first_divergence}")
        return (f"not exact: multi-token forwards differ from one-token steps (verify max |diff| "
                f"{self.verify_max_abs_diff:.3g}, chunked prefill {self.prefill_max_abs_diff:.3g}; {where})")

    def as_dict(self) -> dict:
        return {"exact": self.exact, "verify_max_abs_diff": self.verify_max_abs_diff,
                "prefill_max_abs_diff": self.prefill_max_abs_diff, "first_divergence": self.first_divergence}


def check_exactness(engine: LLMEngine, k: int = 4, prefix_tokens: int = 4) -> ExactnessReport:
    """Compare, on `engine`'s loaded model, the logits of (a) a one-shot prefill of `prefix_tokens`
    tokens and (b) a k-token verify after it with those of one-token steps over the same
    `prefix_tokens + k` tokens. Costs about prefix_tokens + k + 2 forwards; empties the engine's
    cache before and after. ValueError for k or prefix_tokens < 1.
    """
    import torch

    if k < 1 or prefix_tokens < 1:
        raise ValueError(f"k and prefix_tokens must be >= 1, got {k} and {prefix_tokens}")
    ids = list(engine.tokenizer(_PROBE_TEXT, add_special_tokens=False)["input_ids"])
    n = prefix_tokens + k
    while len(ids) < n:  # a tokenizer with very long tokens: repeat the text
        ids += ids or [0]
    ids = [int(t) for t in ids[:n]]
    engine.reset()
    try:
        steps = [engine.prefill(ids[:1])]
        steps += [engine.decode(t) for t in ids[1:]]
        step_logits = torch.stack(steps)  # [n, vocab]: row i is the prediction after ids[i]
        engine.reset()
        prefill_last = engine.prefill(ids[:prefix_tokens])  # one multi-token forward on an empty cache
        verify_rows = engine.verify(ids[prefix_tokens:])  # k tokens in one forward on that cache
    finally:
        engine.reset()
    chunked = torch.cat([prefill_last.unsqueeze(0), verify_rows])  # predictions after ids[p-1 .. n-1]
    stepped = step_logits[prefix_tokens - 1:]
    prefill_diff = float((prefill_last - stepped[0]).abs().max())
    verify_diff = float((verify_rows - stepped[1:]).abs().max())
    disagree = (chunked.argmax(-1) != stepped.argmax(-1)).nonzero()
    first = int(disagree[0, 0]) + prefix_tokens - 1 if disagree.numel() else None
    exact = bool(torch.equal(chunked, stepped))
    return ExactnessReport(exact, verify_diff, prefill_diff, first, n)
