"""Early-exit emission (lossy, off by default): emit a token as soon as the proposal head at exit layer L
is confident enough, then finish layers L+1..N for that position so the KV cache stays the full
model's; below the threshold the full model's token is emitted as usual.

Each step runs layers 1..L on the new position, reads the head's top probability p; with p >= threshold
the head's token is yielded at once (before the deeper layers run, and the LM head is skipped), and the
remaining layers are completed when the next token is asked for. The cache is therefore always the
full model's cache for the tokens emitted, so a later exact decode or a rollback works as usual; only
the emitted tokens can differ from greedy. Sources: Schuster et al. 2022, "Confident Adaptive Language
Modeling" (CALM); Elhoushi et al. 2024, "LayerSkip". Not thread-safe (one engine, one thread).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from headstart.llm.engine import LLMEngine
from headstart.llm.proposal import HeadRunner, LayerStack, ProposalHead

__all__ = ["EarlyExitDecoder", "EarlyExitStats"]


@dataclass(slots=True)
class EarlyExitStats:
    """Counters over all replies: tokens emitted at the exit layer vs by the full model, and (when
    `check` is on) how many early tokens equal the full model's argmax at the same position; emission
    times in seconds from the start of each step."""

    early_tokens: int = 0
    full_tokens: int = 0
    checked: int = 0
    agreed: int = 0
    emit_s: list[float] = field(default_factory=list)

    @property
    def early_fraction(self) -> float | None:
        total = self.early_tokens + self.full_tokens
        return self.early_tokens / total if total else None

    @property
    def agreement(self) -> float | None:
        """Early tokens equal to the full model's token at the same position (teacher-forced)."""
        return self.agreed / self.checked if self.checked else None


class EarlyExitDecoder:
    """Greedy decoding with early-exit emission over `engine` (see the module docstring).

    `threshold` in (0, 1]: the head's top probability needed to emit early (1.0 never exits early in
    practice). `check=True` also computes the full model's token for early positions (the LM head is
    run anyway) to measure agreement; it costs time, so benchmarks time with it off.
    """

    def __init__(self, engine: LLMEngine, head: ProposalHead, threshold: float, check: bool = False,
                 timer: Callable[[], float] = time.perf_counter) -> None:
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")
        self.engine = engine
        self.stack = LayerStack(engine.model)
        self.runner = HeadRunner(head, self.stack)
        self.exit_layer = head.exit_layer
        self.threshold = threshold
        self.check = check
        self.stats = EarlyExitStats()
        self._timer = timer

    def generate(self, prompt_ids: Sequence[int], max_new_tokens: int | None = None) -> Iterator[int]:
        """Yield reply tokens (greedy, early where confident). Ends at an end token (not yielded) or after
        `max_new_tokens`. The engine's cache then holds the prompt and the yielded tokens but the last,
        as after `LLMEngine.generate`. ValueError for bad arguments (at once)."""
        from headstart.llm.sampling import Sampling

        prompt, limit, _ = self.engine.generation_args(prompt_ids, max_new_tokens, Sampling())
        return self._generate(prompt, limit)

    def _generate(self, prompt: list[int], limit: int) -> Iterator[int]:
        import torch

        engine, stack, stats = self.engine, self.stack, self.stats
        if limit == 0:
            return
        # The prompt minus its last token goes through the engine as usual (incremental prefill).
        engine.sync_to(prompt[:-1])
        pending = [prompt[-1]]
        for step in range(limit):
            start_s = self._timer()
            base = engine.num_tokens
            raw = engine.raw_cache
            q = len(pending)
            with torch.inference_mode():
                mask = None if q == 1 else stack.causal_mask(q, base, stack.lm_head.weight.dtype, stack.lm_head.weight.device)
                try:
                    hidden = stack.run(stack.embed_ids(pending), raw, 0, self.exit_layer, base, mask)
                    probs = torch.softmax(self.runner.logits(hidden[:, -1:])[-1].float(), dim=-1)
                    conf, index = probs.max(-1)
                    early = float(conf) >= self.threshold
                    token = self.runner.to_token(int(index)) if early else None
                    if not early:
                        hidden = stack.run(hidden, raw, self.exit_layer, stack.num_layers, base, mask)
                        token = int(stack.lm_head(stack.norm(hidden[:, -1]))[0].argmax())
                except BaseException:
                    engine.reset()
                    raise
            if not early:
                engine.note_appended(pending)
            if token in engine.eos_token_ids:
                if early:
                    self._finish(hidden, base, mask, pending, check=False)
                return
            stats.emit_s.append(self._timer() - start_s)
            if early:
                stats.early_tokens += 1
            else:
                stats.full_tokens += 1
            yield token
            if early:  # the rest of the layers for this position, after the emission
                full = self._finish(hidden, base, mask, pending, check=self.check)
                if full is not None:
                    stats.checked += 1
                    stats.agreed += int(full == token)
            if step + 1 == limit:
                return
            pending = [token]

    def _finish(self, hidden, base: int, mask, pending: list[int], check: bool) -> int | None:
        import torch

        stack = self.stack
        with torch.inference_mode():
            try:
                deep = stack.run(hidden, self.engine.raw_cache, self.exit_layer, stack.num_layers, base, mask)
            except BaseException:
                self.engine.reset()
                raise
            full = int(stack.lm_head(stack.norm(deep[:, -1]))[0].argmax()) if check else None
        self.engine.note_appended(pending)
        return full
