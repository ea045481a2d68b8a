"""Exact speculative decoding: a drafter proposes k tokens, the target model checks them in one
forward (`LLMEngine.verify`), and the output is exactly what plain decoding would give.

Greedy: a draft token is kept while it equals the target's argmax; the first mismatch is replaced by
the target's own token, and when all k are kept the target's next token comes free (the "bonus"), so
the tokens are the plain greedy ones. Sampling: standard speculative rejection sampling (Leviathan
et al. 2023, "Fast Inference from Transformers via Speculative Decoding"; Chen et al. 2023,
"Accelerating Large Language Model Decoding with Speculative Sampling"). Our drafters propose
deterministically (q is one-hot at the draft token), so draft token x is kept with probability p(x)
and on rejection the token is drawn from p with x removed, renormalised; the output then has the
target distribution p exactly, whatever the drafter proposes.

Drafters: `PromptLookupDrafter` (n-grams of the conversation itself; Saxena 2023, "Prompt Lookup
Decoding") and `DraftModelDrafter` (a smaller model with the same tokenizer, e.g. qwen2.5-coder-0.5b
for qwen2.5-coder-1.5b). `DraftingPolicy` switches drafting off when its measured throughput falls
below plain decoding (break-even) and probes again later; the first token never waits for a draft.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from headstart.config import LLMConfig, ThreadPlan
from headstart.llm.engine import LLMEngine, LLMError
from headstart.llm.sampling import Sampler, Sampling

if TYPE_CHECKING:
    import torch

__all__ = [
    "Decoder",
    "Drafter",
    "DraftModelDrafter",
    "DraftingPolicy",
    "PromptLookupDrafter",
    "SpeculationStats",
    "accept_draft",
    "build_decoder",
]


class Drafter(Protocol):
    """Proposes up to k next tokens for a context (prompt + reply so far). Deterministic: the
    verification treats each proposal as certain (q one-hot)."""

    name: str

    def propose(self, context: Sequence[int], k: int) -> list[int]: ...

    def reset(self) -> None: ...


class PromptLookupDrafter:
    """Prompt lookup decoding: find the most recent earlier occurrence of the context's last n-gram
    (n from `max_ngram` down to `min_ngram`) and propose the tokens that followed it. Costs no
    forward; pays off when the reply repeats the conversation (names, numbers, quoted phrases)."""

    name = "prompt_lookup"

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1) -> None:
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(f"need 1 <= min_ngram <= max_ngram, got {min_ngram}, {max_ngram}")
        self.max_ngram, self.min_ngram = max_ngram, min_ngram

    def propose(self, context: Sequence[int], k: int) -> list[int]:
        ctx = list(context)
        n_ctx = len(ctx)
        for n in range(min(self.max_ngram, n_ctx - 1), self.min_ngram - 1, -1):
            tail = ctx[n_ctx - n :]
            # Most recent match first: the freshest context is the likeliest continuation.
            for start in range(n_ctx - n - 1, -1, -1):
                if ctx[start : start + n] == tail:
                    follow = ctx[start + n : start + n + k]
                    if follow:
                        return follow
        return []

    def reset(self) -> None:
        pass


class DraftModelDrafter:
    """A smaller causal LM with the same tokenizer proposes greedily. Its own engine keeps its own
    KV cache; each proposal reuses the longest common prefix with the previous context, so only the
    target's accepted tokens and its correction are prefilled anew."""

    name = "draft_model"

    def __init__(self, draft: LLMEngine, target: LLMEngine) -> None:
        """ValueError when the two tokenizers differ (token ids would mean different text)."""
        if draft.tokenizer.get_vocab() != target.tokenizer.get_vocab():
            raise ValueError("the draft model's tokenizer differs from the target's: they cannot share token ids")
        self.draft = draft
        self._vocab_size = min(draft.vocab_size, target.vocab_size)

    def propose(self, context: Sequence[int], k: int) -> list[int]:
        if k < 1:
            return []
        logits = self.draft.prefill(context)
        out: list[int] = []
        while True:
            token = int(logits[: self._vocab_size].argmax())
            out.append(token)
            if len(out) == k or token in self.draft.eos_token_ids:
                return out
            logits = self.draft.decode(token)

    def prime(self, context: Sequence[int]) -> None:
        """Prefill the draft model's cache with `context` (the prompt) ahead of the first proposal, so
        that proposal computes only the reply tokens; e.g. between replies or while the user speaks."""
        self.draft.sync_to(context)

    def reset(self) -> None:
        self.draft.reset()


@dataclass(slots=True)
class SpeculationStats:
    """Counters of one decoder (all replies): verify steps, drafted and accepted draft tokens, plain
    decode steps, tokens yielded, and how often drafting was switched off."""

    verify_steps: int = 0
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    plain_steps: int = 0
    generated_tokens: int = 0
    times_switched_off: int = 0

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted / drafted tokens; None before any draft."""
        return self.accepted_tokens / self.drafted_tokens if self.drafted_tokens else None

    @property
    def mean_accepted(self) -> float | None:
        """Mean accepted draft tokens per verify step (the step also yields one target token)."""
        return self.accepted_tokens / self.verify_steps if self.verify_steps else None


class DraftingPolicy:
    """Break-even switch for drafting (a plain synchronous policy, no I/O).

    Keeps exponential moving averages of seconds per token of plain decode steps and of speculative
    steps (draft + verify time / tokens yielded). Drafting starts only once a plain step has been
    timed, and is switched off when, after `min_spec_steps` steps, it yields fewer tokens per second
    than plain decoding times `margin`; after `probe_after_tokens` plain tokens it is tried again
    (the wait doubles each time, so a pair that never pays costs almost nothing). With
    `zero_accept_steps` set, drafting is also switched off as soon as that many speculative steps in a
    row accepted no draft token at all: such a step yields one token for more than a decode step's
    work, whatever the timings say (timings on a loaded machine are noisy; a count is not). For a
    drafter whose proposals are all-or-nothing (prompt lookup: either the reply repeats the
    conversation or it does not) this decides after 2 steps instead of 4; see `for_drafter`.
    """

    def __init__(self, min_spec_steps: int = 4, margin: float = 1.02, probe_after_tokens: int = 32,
                 smoothing: float = 0.3, zero_accept_steps: int | None = None) -> None:
        if zero_accept_steps is not None and zero_accept_steps < 1:
            raise ValueError(f"zero_accept_steps must be >= 1 or None, got {zero_accept_steps}")
        self.zero_accept_steps = zero_accept_steps
        self._zero_run = 0
        self.min_spec_steps = min_spec_steps
        self.margin = margin
        self.smoothing = smoothing
        self._probe_base = probe_after_tokens
        self._probe_after = probe_after_tokens
        self.plain_s_per_token: float | None = None
        self.spec_s_per_token: float | None = None
        self._spec_steps = 0
        self._off_tokens = 0
        self.enabled = True

    @classmethod
    def for_drafter(cls, drafter: Drafter | None) -> DraftingPolicy:
        """The default policy for a drafter: prompt lookup (free proposals, all-or-nothing acceptance)
        is switched off after 2 fruitless verify steps; model drafters keep the timing rule alone
        (their acceptance varies step to step)."""
        if drafter is not None and getattr(drafter, "name", None) == PromptLookupDrafter.name:
            return cls(zero_accept_steps=2)
        return cls()

    def _ema(self, old: float | None, new: float) -> float:
        return new if old is None else old + self.smoothing * (new - old)

    def should_draft(self) -> bool:
        return self.enabled and self.plain_s_per_token is not None

    def record_plain(self, seconds: float) -> None:
        self.plain_s_per_token = self._ema(self.plain_s_per_token, seconds)
        if not self.enabled:
            self._off_tokens += 1
            if self._off_tokens >= self._probe_after:
                self.enabled = True
                self.spec_s_per_token = None
                self._spec_steps = 0
                self._zero_run = 0

    def record_spec(self, seconds: float, num_tokens: int) -> bool:
        """Record one speculative step; returns True when this switched drafting off."""
        self.spec_s_per_token = self._ema(self.spec_s_per_token, seconds / max(1, num_tokens))
        self._spec_steps += 1
        self._zero_run = self._zero_run + 1 if num_tokens <= 1 else 0
        fruitless = self.zero_accept_steps is not None and self._zero_run >= self.zero_accept_steps
        if fruitless or self._spec_steps >= self.min_spec_steps and self.plain_s_per_token is not None \
                and self.spec_s_per_token * self.margin > self.plain_s_per_token:
            self.enabled = False
            self._off_tokens = 0
            self._probe_after *= 2
            return True
        if self._spec_steps >= 4 * self.min_spec_steps:
            self._probe_after = self._probe_base  # paying well: a later bad patch starts from the base
        return False


def accept_draft(sampler: Sampler, target_logits: torch.Tensor, draft: Sequence[int]) -> tuple[int, int]:
    """Check draft tokens against the target's logits (shape [k + 1, vocab]: row i is the target's
    prediction for draft position i, row k the one after all of them).

    Returns (number of draft tokens accepted m, the target's token at position m): the correction
    after the first rejection, or the bonus token when all k were accepted. Greedy: accept while the
    draft equals the argmax. Sampling: accept x with probability p(x), else draw from p without x
    (speculative rejection sampling with a one-hot proposal; the result is distributed as p).
    """
    import torch

    k = len(draft)
    if target_logits.shape[0] != k + 1:
        raise ValueError(f"need {k + 1} rows of target logits for {k} draft tokens, got {target_logits.shape[0]}")
    if sampler.sampling.greedy:
        choices = torch.argmax(target_logits, dim=-1).tolist()
        for i, token in enumerate(draft):
            if choices[i] != token:
                return i, int(choices[i])
        return k, int(choices[k])
    for i, token in enumerate(draft):
        p = sampler.probs(target_logits[i])
        if sampler.uniform() < float(p[token]):
            continue
        p[token] = 0.0
        return i, sampler.draw(p)
    return k, sampler.draw(sampler.probs(target_logits[k]))


class Decoder:
    """Generates reply tokens with the target engine, speculatively when a drafter is given.

    `generate` has the contract of `LLMEngine.generate` (same tokens at temperature 0, the same
    distribution when sampling; end tokens end the reply without being yielded; the same cache
    contents when it ends or is closed), so the two are interchangeable. Stats and the break-even
    policy persist across replies. One decoder per engine; not thread-safe.
    """

    def __init__(
        self,
        engine: LLMEngine,
        drafter: Drafter | None = None,
        speculate_k: int = 4,
        policy: DraftingPolicy | None = None,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        if speculate_k < 1:
            raise ValueError(f"speculate_k must be >= 1, got {speculate_k}")
        self.engine = engine
        self.drafter = drafter
        self.speculate_k = speculate_k
        self.policy = policy if policy is not None else DraftingPolicy.for_drafter(drafter)
        self.stats = SpeculationStats()
        self._timer = timer

    def generate(
        self,
        prompt_ids: Sequence[int],
        max_new_tokens: int | None = None,
        sampling: Sampling | None = None,
    ) -> Iterator[int]:
        """Yield reply tokens one at a time after prefilling `prompt_ids` (see `LLMEngine.generate`).
        Raises LLMError from the next step when the engine's cache was changed by anyone else in
        between (it is never silently extended)."""
        return self._generate(*self.engine.generation_args(prompt_ids, max_new_tokens, sampling))

    def _generate(self, prompt: list[int], max_new_tokens: int, sampler: Sampler) -> Iterator[int]:
        if max_new_tokens == 0:
            return
        engine, stats, policy = self.engine, self.stats, self.policy
        logits = engine.prefill(prompt)
        token = sampler(logits)  # the first token never waits for a draft
        if token in engine.eos_token_ids:
            return
        reply = [token]  # yielded tokens; the cache holds prompt + reply[:-1] between steps
        expected = (engine.revision, len(prompt))
        ended_by_eos = False
        try:
            stats.generated_tokens += 1
            yield token
            while len(reply) < max_new_tokens:
                if (engine.revision, engine.num_tokens) != expected:
                    raise LLMError("the KV cache was changed while this reply was being generated")
                remaining = max_new_tokens - len(reply)
                draft: list[int] = []
                start_s = self._timer()
                if self.drafter is not None and remaining > 1 and policy.should_draft():
                    k = min(self.speculate_k, remaining - 1)
                    try:
                        draft = list(self.drafter.propose(prompt + reply, k))[:k]
                    except ValueError:  # e.g. beyond the draft model's context: go on without it
                        draft, self.drafter = [], None
                if draft:
                    base = engine.num_tokens
                    rows = engine.verify([reply[-1], *draft])
                    accepted, token = accept_draft(sampler, rows, draft)
                    new = [*draft[:accepted], token]
                    stats.verify_steps += 1
                    stats.drafted_tokens += len(draft)
                    stats.accepted_tokens += accepted
                    engine.crop(base + 1 + accepted)  # keep the last reply token and the accepted drafts
                    if policy.record_spec(self._timer() - start_s, len(new)):
                        stats.times_switched_off += 1
                else:
                    logits = engine.decode(reply[-1])
                    token = sampler(logits)
                    new = [token]
                    stats.plain_steps += 1
                    policy.record_plain(self._timer() - start_s)
                expected = (engine.revision, engine.num_tokens)
                for token in new:
                    if token in engine.eos_token_ids:
                        ended_by_eos = True
                        # The cache holds the prompt and every yielded token, as after a plain end.
                        keep = len(prompt) + len(reply)
                        if engine.num_tokens > keep:
                            engine.crop(keep)
                        return
                    reply.append(token)
                    stats.generated_tokens += 1
                    yield token
                    if (engine.revision, engine.num_tokens) != expected:
                        raise LLMError("the KV cache was changed while this reply was being generated")
        finally:
            # Closed early or done: the cache holds the prompt and all yielded tokens but the last
            # (a verify step may have accepted tokens the consumer never asked for).
            if not ended_by_eos and (engine.revision, engine.num_tokens) == expected:
                keep = len(prompt) + len(reply) - 1
                if engine.num_tokens > keep:
                    engine.crop(keep)


def resolve_draft_quantize(config: LLMConfig) -> str | None:
    """The drafter's quantisation for `config.draft_quantize`: "auto" is "int8" where the drafter would
    run in float32 on CPU (dynamic int8 kernels exist only there) and None elsewhere; None and "none"
    are None; any other value is returned as is (LLMEngine checks it). See `resolve_quantize`."""
    from headstart.llm.engine import resolve_quantize

    return resolve_quantize(config.draft_quantize, config.dtype, config.device)


def build_decoder(engine: LLMEngine, config: LLMConfig, threads: ThreadPlan) -> Decoder:
    """The decoder `config.speculative` asks for: "none" (plain), "prompt_lookup", or "draft_model"
    (loads `config.draft_model` with the same dtype and device, quantised as `config.draft_quantize`
    resolves, see `resolve_draft_quantize`; never downloads). ValueError for an
    unknown method, a missing draft model name or a draft model with another tokenizer."""
    from dataclasses import replace

    method = config.speculative
    if method == "none":
        return Decoder(engine)
    if method == "prompt_lookup":
        return Decoder(engine, PromptLookupDrafter(), config.speculate_k)
    if method == "draft_model":
        if not config.draft_model:
            raise ValueError('speculative="draft_model" needs LLMConfig.draft_model (e.g. "qwen2.5-coder-0.5b")')
        draft = LLMEngine.from_config(
            replace(config, model=config.draft_model, quantize=resolve_draft_quantize(config)), threads
        )
        return Decoder(engine, DraftModelDrafter(draft, engine), config.speculate_k)
    raise ValueError(f'unknown speculative method {method!r}: use "none", "prompt_lookup" or "draft_model"')
