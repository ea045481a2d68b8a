"""Self-speculative decoding: the model's own first L layers plus a trained proposal head draft k
tokens, the full model verifies them in one forward (`LLMEngine.verify` through `speculative.Decoder`),
so the output is exactly plain decoding's (greedy: token-identical; sampling: the same distribution).

The drafter needs no second model and no second KV cache: it runs layers 1..L for each draft position
on the target engine's own cache, whose first L layers already hold the whole context (they are the
same computation as the full model's first L layers), and crops those layers back when it is done,
so the engine's cache is exactly as it found it. Sources: Zhang et al. 2023, "Draft & Verify:
Lossless Large Language Model Acceleration via Self-Speculative Decoding"; Elhoushi et al. 2024,
"LayerSkip: Enabling Early Exit Inference and Self-Speculative Decoding".

Cost model (per verify step, in units of one full decode step t_full): k draft steps of c = t_draft /
t_full each, one verify of k + 1 positions (v = t_verify / t_full), expected tokens per step
E = (1 - a^(k+1)) / (1 - a) for per-token acceptance a (Leviathan et al. 2023). Speedup = E / (k c + v).
`predicted_speedup` computes it; the bench measures c, v and a.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from headstart.llm.engine import LLMEngine
from headstart.llm.proposal import HeadRunner, LayerStack, ProposalHead, default_head_path, load_head

__all__ = ["SelfSpeculativeDrafter", "expected_tokens_per_step", "load_self_drafter", "predicted_speedup"]


class SelfSpeculativeDrafter:
    """Drafts through layers 1..L of `engine`'s model and a proposal head (the `Drafter` protocol of
    speculative.py). Greedy over the head's vocabulary; stops early at an end token or when the head's
    top probability falls below `min_confidence` (0: never), since a draft that will likely be rejected
    only costs time. Proposes nothing (the decoder then decodes plainly) when the engine's cache does
    not hold `context[:-1]`, so it never drafts from a stale cache."""

    name = "self_speculative"

    def __init__(self, engine: LLMEngine, head: ProposalHead, min_confidence: float = 0.0) -> None:
        """ValueError when the model is not Llama-style with full attention, or the head was trained for
        another shape of model."""
        if not 0.0 <= min_confidence < 1.0:
            raise ValueError(f"min_confidence must be in [0, 1), got {min_confidence!r}")
        self.engine = engine
        self.stack = LayerStack(engine.model)
        self.runner = HeadRunner(head, self.stack)
        self.exit_layer = head.exit_layer
        self.min_confidence = min_confidence
        self.draft_steps = 0  # partial forwards run (for cost accounting)

    def propose(self, context: Sequence[int], k: int) -> list[int]:
        import torch

        engine = self.engine
        base = engine.num_tokens
        if k < 1 or len(context) != base + 1 or not _tail_matches(engine.tokens, context):
            return []
        raw = engine.raw_cache
        out: list[int] = []
        token = int(context[-1])
        try:
            with torch.inference_mode():
                for i in range(k):
                    hidden = self.stack.run(self.stack.embed_ids([token]), raw, 0, self.exit_layer, base + i)
                    self.draft_steps += 1
                    logits = self.runner.logits(hidden)[-1]
                    if self.min_confidence > 0.0:
                        probs = torch.softmax(logits.float(), dim=-1)
                        conf, index = probs.max(-1)
                        if float(conf) < self.min_confidence and out:
                            break
                        index = int(index)
                    else:
                        index = int(logits.argmax())
                    token = self.runner.to_token(index)
                    out.append(token)
                    if token in engine.eos_token_ids:
                        break
        finally:
            crop_layers(raw, self.exit_layer, base)
        return out

    def reset(self) -> None:
        pass


def crop_layers(raw: Any, num_layers: int, num_tokens: int) -> None:
    """Keep the first `num_tokens` positions of the first `num_layers` layers of a transformers
    DynamicCache (5.x: `raw.layers[i].keys/values`, shape [batch, heads, positions, head_dim]).
    RuntimeError for a cache without per-layer tensors (another transformers generation)."""
    layers = getattr(raw, "layers", None)
    if layers is None:
        raise RuntimeError("this transformers cache has no per-layer key/value tensors; partial-layer drafting "
                           "needs transformers >= 5.0")
    for layer in layers[:num_layers]:
        if getattr(layer, "is_initialized", True) and getattr(layer, "keys", None) is not None:
            if layer.keys.shape[-2] > num_tokens:
                layer.keys = layer.keys[..., :num_tokens, :]
                layer.values = layer.values[..., :num_tokens, :]


def _tail_matches(tokens: Sequence[int], context: Sequence[int], n: int = 8) -> bool:
    m = min(n, len(tokens))
    return list(tokens[len(tokens) - m :]) == [int(t) for t in context[len(tokens) - m : len(tokens)]]


def load_self_drafter(engine: LLMEngine, exit_layer: int, head_path: str | Path | None = None,
                      model_folder: str | Path | None = None, min_confidence: float = 0.0) -> SelfSpeculativeDrafter:
    """A drafter with the head trained for `exit_layer` (from `head_path`, or the default place for the
    model folder; see proposal.default_head_path). FileNotFoundError names the training command."""
    if head_path is None:
        if model_folder is None:
            from headstart.models.store import resolve_model

            model_folder = resolve_model(engine.config.model)
        head_path = default_head_path(model_folder, exit_layer)
    param = next(engine.model.parameters())
    head = load_head(head_path, dtype=param.dtype, device=str(param.device))
    if head.exit_layer != exit_layer:
        raise ValueError(f"{head_path} holds a head for exit layer {head.exit_layer}, not {exit_layer}")
    return SelfSpeculativeDrafter(engine, head, min_confidence)


def expected_tokens_per_step(acceptance: float, k: int) -> float:
    """Expected tokens yielded per verify step for i.i.d. per-token acceptance `acceptance` and k
    drafts: 1 + a + ... + a^k (Leviathan et al. 2023, eq. 1)."""
    if not 0.0 <= acceptance <= 1.0 or k < 0:
        raise ValueError(f"need acceptance in [0, 1] and k >= 0, got {acceptance}, {k}")
    return float(k + 1) if acceptance == 1.0 else (1 - acceptance ** (k + 1)) / (1 - acceptance)


def predicted_speedup(acceptance: float, k: int, draft_cost: float, verify_cost: float) -> float:
    """Decode speedup over plain greedy: E / (k * draft_cost + verify_cost), costs relative to one full
    decode step."""
    if draft_cost < 0 or verify_cost <= 0:
        raise ValueError("costs must be positive")
    return expected_tokens_per_step(acceptance, k) / (k * draft_cost + verify_cost)
