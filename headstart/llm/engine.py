"""Our own decode loop over a transformers causal LM with an explicit KV cache.

The engine holds one sequence: the KV cache and the token ids it was computed from. Every forward goes
through `prefill` / `decode` / `verify`, which keep the two in step, so a cache is never reused for
tokens it was not computed from (`generate(ids, cache=c)` in transformers silently skips as many
tokens as `c` holds). `generate` is a generator in the style of nanochat's engine: it
yields one token at a time, and stopping is simply not asking for the next one.

Not thread-safe: use one engine from one thread (the "llm" executor, see stream.py). The session reaches
it through llm/local.py `LocalLLM`, which builds the reply streams and user turns on top of it.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from headstart.config import LLMConfig, ThreadPlan
from headstart.llm.cache import KVCache, cache_keyword
from headstart.llm.chat_ids import render_chat_ids
from headstart.llm.precision import (
    check_quantize,
    resolve_dtype,
    resolve_precision,
    resolve_quantize,
)
from headstart.llm.sampling import Sampler, Sampling

if TYPE_CHECKING:
    import torch

__all__ = ["LLMEngine", "LLMError", "common_prefix_len", "prepare_model", "quantize_model", "resolve_dtype",
           "resolve_quantize"]


# End-of-turn tokens of the common chat templates (ChatML, Llama 3, Phi, Gemma); one counts as an
# end token when the tokenizer's chat template uses it.
_CHAT_END_MARKERS = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>")


class LLMError(RuntimeError):
    """The language model failed (a forward raised, or the cache and its tokens disagreed)."""


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix (LCP) of two token-id sequences."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class LLMEngine:
    """A causal LM, its tokenizer and one explicit KV cache.

    Logits are returned as float32 CPU-or-device tensors: shape [vocab] for `prefill`/`decode`,
    [k, vocab] for `verify`. Token ids are Python ints.
    """

    def __init__(self, model: Any, tokenizer: Any, config: LLMConfig, precision_note: str | None = None) -> None:
        """Wrap an already-loaded model (in eval mode) and tokenizer; most callers want `load`.
        `precision_note`: why the config's "auto" precision did not take the int8 path here, if so."""
        self.model = model
        self.tokenizer = tokenizer
        self.config = config
        self.precision_note = precision_note
        # the quantisation the model actually carries ("int8" or None), whatever the config asked
        self.quantize = "int8" if _has_dynamic_int8(model) else None
        self.dtype = next(model.parameters()).dtype
        self._cache_kw = cache_keyword(model)
        self._logits_to_keep = "logits_to_keep" in _forward_params(model)
        self._cache = KVCache(model.config)
        self._tokens: list[int] = []
        self._revision = 0  # bumped whenever positions are dropped (crop, reset)
        # the logits after the last cached token, keyed by (revision, num_tokens): a prefill of exactly
        # the cached sequence (e.g. the reply prompt an EOU estimate already ran) needs no forward
        self._last_logits: tuple[tuple[int, int], Any] | None = None
        self.vocab_size = int(model.get_input_embeddings().weight.shape[0])
        self.max_positions = int(getattr(model.config, "max_position_embeddings", 0) or 0) or None
        self.eos_token_ids = frozenset(_end_token_ids(model, tokenizer))
        if not self.eos_token_ids:
            raise ValueError("the tokenizer defines no end-of-sequence token; generation could not stop")

    @classmethod
    def load(cls, path: str | Path, config: LLMConfig, threads: ThreadPlan) -> LLMEngine:
        """Load a prepared model folder (safetensors weights + tokenizer files) on `config.device` in
        the dtype and quantisation `config.dtype` and `config.quantize` resolve to
        (`headstart.llm.precision.resolve_precision`: by default float32 with the project's int8
        Linear layers on CPU, see `quantize_model`), set torch's thread count from
        `threads.torch_threads`, and put the model in eval mode. Never downloads.

        Raises FileNotFoundError when `path` is not a folder with a config.json, ValueError for an
        unknown dtype, a quantisation that cannot run with that dtype, device or CPU, or a thread
        count < 1.
        """
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        folder = Path(path)
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(
                f"{folder} is not a prepared model folder (no config.json); "
                "prepare one with `python -m headstart models prepare NAME`"
            )
        precision = resolve_precision(config.dtype, config.quantize, config.device)
        dtype, quantize = precision.dtype, precision.quantize
        if threads.torch_threads < 1:
            raise ValueError(f"torch_threads must be >= 1, got {threads.torch_threads}")
        torch.set_num_threads(threads.torch_threads)
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, local_files_only=True)
        model = prepare_model(model, config.device, quantize)
        return cls(model, tokenizer, config, precision_note=precision.note)

    @classmethod
    def from_config(cls, config: LLMConfig, threads: ThreadPlan) -> LLMEngine:
        """`load` the model `config.model` names (a preset, a local folder or a prepared hub id).
        Raises headstart.models.store.ModelNotPreparedError (its message names the prepare command) or
        ModelError for an unknown name. Never downloads."""
        from headstart.models.store import resolve_model

        return cls.load(resolve_model(config.model), config, threads)

    # -- the sequence the cache holds ---------------------------------------------------------------

    @property
    def tokens(self) -> tuple[int, ...]:
        """The token ids whose keys/values the cache holds, in order."""
        return tuple(self._tokens)

    @property
    def num_tokens(self) -> int:
        return len(self._tokens)

    @property
    def raw_cache(self) -> Any:
        """The transformers cache object under `tokens`, for partial-layer drafting (selfspec.py): a
        caller that appends positions to some of its layers must crop them back before the next
        engine call (the engine checks the first layer's length against `tokens`)."""
        return self._cache.raw

    def note_appended(self, ids: Sequence[int]) -> None:
        """Record that a caller ran `ids` through every layer on `raw_cache` itself (early-exit
        emission, early_exit.py). LLMError (cache reset) when the cache did not grow by exactly them."""
        self._tokens.extend(int(t) for t in ids)
        if len(self._cache) != len(self._tokens):
            self.reset()
            raise LLMError("the KV cache did not grow by the tokens noted as appended; it was reset")

    @property
    def revision(self) -> int:
        """A counter bumped every time positions are dropped (crop, reset, a failed forward). A token
        loop that remembers (revision, num_tokens) knows the cache is still the one it extended
        when both are unchanged: positions are only ever appended in between."""
        return self._revision

    def crop(self, num_tokens: int) -> None:
        """Roll the cache back to its first `num_tokens` positions (0 empties it). ValueError for a
        count outside [0, self.num_tokens]: a rollback never grows the cache or counts from the end;
        RuntimeError (cache untouched) when a sliding-window layer cannot roll back that far."""
        self._cache.crop_to(num_tokens)
        if num_tokens < len(self._tokens):
            self._revision += 1
        del self._tokens[num_tokens:]

    def rollback_to(self, keep: int) -> int:
        """Crop to `keep` positions for reuse; a cache that cannot roll back that far exactly
        (sliding-window layers, see KVCache.can_crop_to) is emptied instead. Returns what is kept."""
        if keep < len(self._tokens):
            if not self._cache.can_crop_to(keep):
                keep = 0
            self.crop(keep)
        return keep

    def reset(self) -> None:
        """Empty the cache."""
        self._cache.reset()
        self._tokens.clear()
        self._revision += 1

    def sync_to(self, ids: Sequence[int]) -> int:
        """Bring the cache to hold exactly `ids`, computing no logits for the caller: keep the
        longest common prefix with what it holds, crop the rest, and run the missing tokens in one
        forward. Returns the number of positions computed (0 when the cache already held `ids`).
        The primitive of incremental prefill (turn.py). ValueError for ids outside the vocabulary or
        beyond the model's context."""
        ids = self._check_ids(ids, what="prefill ids")
        self._check_context(len(ids))
        keep = self.rollback_to(common_prefix_len(self._tokens, ids))
        if keep == len(ids):
            return 0
        self._forward(ids[keep:], logits_to_keep=1)
        return len(ids) - keep

    # -- forwards -----------------------------------------------------------------------------------

    def prefill(self, ids: Sequence[int]) -> torch.Tensor:
        """Bring the cache to exactly `ids` and return the logits after the last one, shape [vocab].

        Only what is new is computed: the cache keeps the longest common prefix of its tokens and
        `ids` (at most len(ids) - 1, so there is a position to take logits from) and the rest is run
        in one forward with `logits_to_keep=1`; when the cache holds exactly `ids` and its last forward
        left the logits after them (e.g. an EOU estimate that ran on through the reply prompt,
        eou_head.py), those are returned with no forward. Tokens that differ from the cached ones are
        detected and recomputed, never reused. ValueError for empty ids, ids outside the vocabulary or a
        sequence longer than the model's context.
        """
        ids = self._check_ids(ids, what="prefill ids")
        if not ids:
            raise ValueError("prefill needs at least one token id")
        self._check_context(len(ids))
        common = common_prefix_len(self._tokens, ids)
        memo = self._last_logits
        if common == len(ids) == len(self._tokens) == len(self._cache) and memo is not None and memo[0] == self._key():
            return memo[1].clone()  # the cache holds exactly `ids` and the logits after them are known
        keep = self.rollback_to(min(common, len(ids) - 1))
        return self._forward(ids[keep:], logits_to_keep=1)[-1]

    def decode(self, token_id: int) -> torch.Tensor:
        """Append one token to the cache and return the logits after it, shape [vocab]."""
        ids = self._check_ids([token_id], what="token id")
        self._check_context(len(self._tokens) + 1)
        return self._forward(ids, logits_to_keep=1)[-1]

    def verify(self, draft_ids: Sequence[int]) -> torch.Tensor:
        """Append k draft tokens in one forward; returns logits of shape [k, vocab], row i being the
        prediction after draft_ids[i] (the prediction for draft_ids[0] is the logits the caller
        already has). The caller crops the rejected tail (speculative decoding: Leviathan et al.
        2023, "Fast Inference from Transformers via Speculative Decoding")."""
        ids = self._check_ids(draft_ids, what="draft ids")
        if not ids:
            raise ValueError("verify needs at least one draft token")
        if not self._tokens:
            raise ValueError("verify needs a prefilled cache to extend")
        self._check_context(len(self._tokens) + len(ids))
        return self._forward(ids, logits_to_keep=len(ids))

    def _forward(self, new_ids: list[int], logits_to_keep: int) -> torch.Tensor:
        import torch

        if len(self._cache) != len(self._tokens):
            self.reset()
            raise LLMError("the KV cache no longer matches its tokens (changed outside the engine); it was reset")
        kwargs: dict[str, Any] = {self._cache_kw: self._cache.raw, "use_cache": True}
        if self._logits_to_keep:
            kwargs["logits_to_keep"] = logits_to_keep
        input_ids = torch.tensor([new_ids], dtype=torch.long, device=self.model.device)
        try:
            with torch.inference_mode():
                out = self.model(input_ids=input_ids, **kwargs)
        except BaseException:
            # Some layers may already hold the new positions: the cache is unusable, start clean.
            self.reset()
            raise
        self._tokens.extend(new_ids)
        if len(self._cache) != len(self._tokens):
            self.reset()
            raise LLMError("the model did not extend the KV cache by the tokens it was given")
        logits = out.logits[0, -logits_to_keep:].float()
        self._last_logits = (self._key(), logits[-1].clone())  # callers may edit theirs in place
        return logits

    def _key(self) -> tuple[int, int]:
        # positions are only appended while the revision holds, so (revision, length) names one sequence
        return self._revision, len(self._tokens)

    def _check_ids(self, ids: Sequence[int], what: str) -> list[int]:
        out = []
        for token in ids:
            try:  # ints, numpy and 0-d torch integers; not floats, not bools
                value = operator.index(token) if not isinstance(token, bool) else None
            except TypeError:
                value = None
            if value is None or not 0 <= value < self.vocab_size:
                raise ValueError(f"{what} must be ints in [0, {self.vocab_size}), got {token!r}")
            out.append(value)
        return out

    def _check_context(self, num_positions: int) -> None:
        if self.max_positions is not None and num_positions > self.max_positions:
            raise ValueError(
                f"{num_positions} positions would exceed the model's context of {self.max_positions}"
            )

    # -- generation ---------------------------------------------------------------------------------

    def generate(
        self,
        prompt_ids: Sequence[int],
        max_new_tokens: int | None = None,
        sampling: Sampling | None = None,
    ) -> Iterator[int]:
        """Yield reply tokens one at a time after prefilling `prompt_ids`.

        Ends without yielding it when the model picks an end token (`eos_token_ids`: the tokenizer's
        EOS and the chat template's end-of-turn token), or after `max_new_tokens` tokens (default
        `config.max_new_tokens`); so fewer than `max_new_tokens` tokens means the model ended its turn.
        A token enters the cache only when the next one is asked for: after an end token the cache
        holds the prompt and every yielded token; after `max_new_tokens`, or when the consumer stops
        asking, all but the last. `sampling` defaults to `Sampling.from_config(config)`.
        Arguments are checked at once (ValueError), before the first `next()`.
        """
        return self._generate(*self.generation_args(prompt_ids, max_new_tokens, sampling))

    def generation_args(
        self, prompt_ids: Sequence[int], max_new_tokens: int | None, sampling: Sampling | None
    ) -> tuple[list[int], int, Sampler]:
        """Check `generate`'s arguments (ValueError) and fill in the defaults from the config:
        returns (prompt ids, max_new_tokens, sampler). Shared by every decoder over this engine."""
        if max_new_tokens is None:
            max_new_tokens = self.config.max_new_tokens
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
        prompt = self._check_ids(prompt_ids, what="prefill ids")
        if not prompt:
            raise ValueError("generate needs a non-empty prompt")
        self._check_context(len(prompt))
        sampler = Sampler(sampling if sampling is not None else Sampling.from_config(self.config))
        return prompt, max_new_tokens, sampler

    def _generate(self, prompt: list[int], max_new_tokens: int, sampler: Sampler) -> Iterator[int]:
        if max_new_tokens == 0:
            return
        logits = self.prefill(prompt)
        for step in range(max_new_tokens):
            token = sampler(logits)
            if token in self.eos_token_ids:
                return
            yield token
            if step + 1 < max_new_tokens:
                logits = self.decode(token)

    # -- prompts ------------------------------------------------------------------------------------

    def render_prompt(self, messages: Sequence[Mapping[str, str]], add_generation_prompt: bool = True) -> list[int]:
        """Token ids of `messages` ([{"role": ..., "content": ...}, ...]) in the tokenizer's chat
        template; message text is always encoded as text, so "<|im_end|>" in a message cannot end a
        turn (`headstart.llm.chat_ids`). ValueError for malformed messages or a tokenizer without a
        chat template."""
        if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence) or not messages:
            raise ValueError("messages must be a non-empty list of {'role': str, 'content': str} dicts")
        clean = []
        for i, message in enumerate(messages):
            if not isinstance(message, Mapping) or not isinstance(message.get("role"), str) \
                    or not isinstance(message.get("content"), str):
                raise ValueError(f"message {i} must be a {{'role': str, 'content': str}} dict, got {message!r}")
            clean.append({"role": message["role"], "content": message["content"]})
        if not getattr(self.tokenizer, "chat_template", None):
            raise ValueError("this tokenizer has no chat template; pass token ids to generate() instead")
        return render_chat_ids(self.tokenizer, clean, add_generation_prompt)

    # -- tokenizer and start-up (llm/local.py LocalLLM offers them to the session) ----------------------

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` in this model's tokenizer (no special tokens)."""
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def warm_up(self) -> None:
        """Run one short prefill and decode so the first real request does not pay one-off costs,
        then empty the cache."""
        ids = self.tokenizer("Hello there.", add_special_tokens=False)["input_ids"] or [0]
        logits = self.prefill(ids)
        self.decode(int(logits.argmax()))
        self.reset()


def prepare_model(model: Any, device: str, quantize: str | None) -> Any:
    """Ready a loaded (or config-built) causal LM for the engine, as `LLMEngine.load` does: move it to
    `device`, eval mode, no gradients, then, for `quantize="int8"`, the project's int8 Linear layers
    (`quantize_model`) and row-wise attention, so multi-token forwards stay bit-identical to one-token
    steps. Returns the model (the same object, modules replaced in place). ValueError as
    `quantize_model` for a quantisation that cannot run on this model, device or CPU."""
    model.to(device).eval()
    model.requires_grad_(False)
    if quantize is not None:
        model = quantize_model(model, quantize)
        from headstart.llm.int8 import enable_rowwise_attention

        enable_rowwise_attention(model)
    return model


def quantize_model(model: Any, mode: str = "int8") -> Any:
    """Dynamic int8 quantisation of every torch.nn.Linear (the lm_head included; embeddings stay
    float32): int8 weights with one symmetric scale per output channel, activations quantised per
    token at call time, fbgemm kernels on CPU (`headstart.llm.int8.RowInt8Linear`). Decode on CPU is
    memory-bandwidth bound, so ~4x fewer weight bytes per token. Logits stay float32. Unlike
    `torch.ao.quantization.quantize_dynamic` (one activation scale per call), a token's output does
    not depend on the other tokens in the forward, so a k-token verify step and a chunked prefill
    compute each token exactly as one-token steps do, and speculative decoding and incremental
    prefill stay as exact as in float32. Replaces the modules in place and returns the model. The
    model must be float32 on CPU (ValueError otherwise, and for an unknown `mode`). A tied lm_head
    gets its own int8 copy; the input embeddings are untouched.
    """
    param = next(model.parameters())
    check_quantize(mode, param.dtype, param.device.type)
    from headstart.llm.int8 import quantize_linears

    return quantize_linears(model)


def _has_dynamic_int8(model: Any) -> bool:
    return any(type(m).__name__ == "RowInt8Linear" or type(m).__module__.startswith("torch.ao.nn.quantized")
               for m in model.modules())


def _forward_params(model: Any) -> set[str]:
    import inspect

    return set(inspect.signature(model.forward).parameters)


def _end_token_ids(model: Any, tokenizer: Any) -> set[int]:
    ids: set[int] = set()
    sources = [getattr(tokenizer, "eos_token_id", None)]
    generation_config = getattr(model, "generation_config", None)
    if generation_config is not None:
        sources.append(generation_config.eos_token_id)
    for source in sources:
        if isinstance(source, int):
            ids.add(source)
        elif isinstance(source, (list, tuple)):
            ids.update(t for t in source if isinstance(t, int))
    template = getattr(tokenizer, "chat_template", None) or ""
    unk = getattr(tokenizer, "unk_token_id", None)
    for marker in _CHAT_END_MARKERS:
        if marker in template:
            token_id = tokenizer.convert_tokens_to_ids(marker)
            if isinstance(token_id, int) and token_id != unk:
                ids.add(token_id)
    return ids
