"""`headstart bench llm --llm openai://HOST:PORT/MODEL`: what the head start buys on an existing
serving engine (headstart/llm/remote.py), as TTFT after the end of the user's turn on the same
~300-token conversation as the local `bench llm`:

- cold: nothing of the prompt is in the engine's prefix cache (a new conversation);
- plain: the history is cached (the engine computed it last turn), the user's words are not: a
  plain request at end of turn, what any client of a prefix-caching engine gets;
- warm-up: partial transcripts (the user's text growing word by word) were sent as one-token
  warm-up requests while the user spoke, so only the tail is prefilled at end of turn;
- preemptive: after the warm-ups, the turn's reply was requested (streaming) `--lead-ms` before the
  end of turn, as the session's held reply is (`RemoteTurn.reply(hypothesis)`, released on a hit); the
  figure is end of turn -> first token (0 when it was already there).

Each repeat uses a fresh system prompt (a nonce) so nothing carries over between repeats, and a
one-token request on another user text before each measurement leaves the engine's cache holding
the history only. A table, then one JSON line. Run it against an engine nobody else is using.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
import uuid
from dataclasses import dataclass

from headstart.config import LLMConfig

__all__ = ["RemoteLLMBenchOptions", "main"]

OTHER_USER_TEXT = "Actually, never mind that. Could you remind me which tram goes past the cathedral?"


@dataclass(frozen=True, slots=True)
class RemoteLLMBenchOptions:
    """The options of `headstart bench llm --llm URL`; their meaning and defaults: its `--help` (headstart/cli/)."""

    llm: str
    lead_ms: float
    repeats: int
    decode_tokens: int
    json: bool


def _partials(text: str) -> list[str]:
    words = text.split(" ")
    return [" ".join(words[:i]) for i in range(1, len(words) + 1)]


async def _first_token(stream, max_tokens: int) -> tuple[float | None, float | None]:
    """Read `stream` up to `max_tokens` deltas, then cancel: (TTFT s, TPOT s) from its stats."""
    from headstart.events import TokenDelta

    count = 0
    async for event in stream:
        if isinstance(event, TokenDelta):
            count += 1
            if count >= max_tokens:
                stream.cancel()
    await stream.wait_finished()
    return stream.stats.ttft_s, stream.stats.tpot_s


async def _measure(llm, config: LLMConfig, repeats: int, lead_s: float, tokens: int, log) -> dict:
    from headstart.corpus.texts import CONVERSATION, FINAL_USER_TEXT
    from headstart.llm.remote import RemoteReplyStream

    cold, plain, warm, preemptive, held_ttft, tpot, warmups = [], [], [], [], [], [], []
    for r in range(repeats):
        system = {"role": "system", "content": f"{config.system_prompt} (bench run {uuid.uuid4().hex[:12]})"}
        history = [system, *CONVERSATION]
        final = [*history, {"role": "user", "content": FINAL_USER_TEXT}]
        other = [*history, {"role": "user", "content": OTHER_USER_TEXT}]

        ttft, step = await _first_token(llm.reply_stream(final, config), tokens)
        cold.append(ttft)

        await llm.warm_up_prompt(other, config)  # the cache now holds the history, not the user's words
        ttft, step = await _first_token(llm.reply_stream(final, config), tokens)
        plain.append(ttft)
        if step is not None:
            tpot.append(step)

        await llm.warm_up_prompt(other, config)
        turn = llm.live_turn(history, config)
        for text in _partials(FINAL_USER_TEXT):
            turn.update(text)
            await turn.wait_idle()  # partials arrive ~0.4 s apart; a warm-up of a few tokens is done by then
        warmups.append(turn.num_warmups)
        if turn.errors:
            raise turn.errors[0]
        ttft, _ = await _first_token(turn.reply(FINAL_USER_TEXT), tokens)
        warm.append(ttft)

        await llm.warm_up_prompt(other, config)
        turn = llm.live_turn(history, config)
        for text in _partials(FINAL_USER_TEXT):
            turn.update(text)
            await turn.wait_idle()
        stream: RemoteReplyStream = turn.reply(FINAL_USER_TEXT)  # the held reply, on the hypothesis
        await asyncio.sleep(lead_s)
        end_of_turn_s = time.perf_counter()  # a hit: the held request goes on
        ttft, _ = await _first_token(stream, tokens)
        first_at = stream.stats.first_token_at_s
        preemptive.append(None if first_at is None else max(0.0, first_at - end_of_turn_s))
        held_ttft.append(ttft)
        log(f"run {r + 1}/{repeats}: cold {cold[-1]:.3f} s, plain {plain[-1]:.3f} s, warm-up {warm[-1]:.3f} s, "
            f"preemptive {preemptive[-1]:.3f} s after end of turn")

    def median(values):
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    return {
        "ttft_cold_s": median(cold),
        "ttft_plain_s": median(plain),
        "ttft_warmup_s": median(warm),
        "ttft_preemptive_s": median(preemptive),
        "preemptive_request_ttft_s": median(held_ttft),
        "tpot_s": median(tpot),
        "warmups_per_turn": median(warmups),
    }


def main(args: RemoteLLMBenchOptions) -> int:
    """`bench llm --llm URL`: measure, print the table and the JSON line. Exit 1 when the engine
    cannot be reached (the message says why), 2 for bad arguments."""
    import os

    from headstart.llm.remote import RemoteLLM, RemoteLLMError
    from headstart.llm.remote_config import RetryPolicy, api_key_from_environ

    def log(message: str) -> None:
        if not args.json:
            print(message, file=sys.stderr, flush=True)

    if args.repeats < 1 or args.lead_ms < 0:
        print("error: --repeats must be >= 1 and --lead-ms >= 0", file=sys.stderr)
        return 2
    try:
        # a measurement waits for a slow engine rather than retrying it (a cold CPU prefill can take long)
        policy = RetryPolicy(first_token_timeout_s=120, stall_timeout_s=60, warmup_timeout_s=120,
                             first_token_deadline_s=240, max_attempts=1)
        llm = RemoteLLM.from_url(args.llm, api_key=api_key_from_environ(os.environ), policy=policy)
    except ValueError as exc:
        hint = "" if "://" in args.llm else f" (a local model is `--model {args.llm}`)"
        print(f"error: {exc}{hint}", file=sys.stderr)
        return 2
    problem = llm.check()
    if problem is not None:
        print(f"error: the LLM engine does not answer: {problem}", file=sys.stderr)
        return 1
    tokens = max(2, min(args.decode_tokens, 16))
    config = LLMConfig(model=args.llm, max_new_tokens=tokens, soft_max_tokens=None, temperature=0.0)
    log(f"measuring {llm.endpoint.base_url} model {llm.endpoint.model!r}, {args.repeats} repeat(s)")

    async def main() -> dict:
        try:
            return await _measure(llm, config, args.repeats, args.lead_ms / 1000, tokens, log)
        finally:
            await llm.aclose()

    try:
        figures = asyncio.run(main())
    except RemoteLLMError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    result = {"bench": "llm_remote", "base_url": llm.endpoint.base_url, "model": llm.endpoint.model,
              "repeats": args.repeats, "lead_s": args.lead_ms / 1000, "tokens_per_request": tokens,
              **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in figures.items()}}
    if not args.json:
        _print_table(result)
    print(json.dumps(result))
    return 0


def _print_table(result: dict) -> None:
    plain = result["ttft_plain_s"]
    print(f"\nremote LLM bench: {result['model']} at {result['base_url']} (median of {result['repeats']})")
    print(f"{'TTFT after end of turn':<34}{'seconds':>10}{'of plain':>10}")
    rows = (("cold (nothing cached)", "ttft_cold_s"), ("plain (history cached)", "ttft_plain_s"),
            ("warm-up from partials", "ttft_warmup_s"),
            (f"preemptive ({result['lead_s'] * 1000:.0f} ms lead)", "ttft_preemptive_s"))
    for name, key in rows:
        value = result[key]
        share = f"{value / plain:>10.1%}" if value is not None and plain else f"{'':>10}"
        print(f"{name:<34}{value if value is not None else float('nan'):>10.4f}{share}")
    tpot = result["tpot_s"]
    print(f"warm-ups per turn {result['warmups_per_turn']}, preemptive request's own TTFT "
          f"{result['preemptive_request_ttft_s']} s, TPOT {tpot if tpot is None else round(tpot, 4)} s\n")
