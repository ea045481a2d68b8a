"""`headstart bench memory`: what a long conversation remembers at a flat prompt size.

Spoken-style conversations written for this project (`bench/data/memory.json`, 40 of 8-40 user turns,
made by scripts/make_memory_bench.py): facts planted early (a name, a sister, where the car is parked,
an allergy, a day, a number), everyday requests in between, sometimes an update of a fact, then one
probe of six kinds: recall, multi (several facts at once), update (the newer value, never the old one),
order (the first request), abstain (a fact never given: the reply must say it does not know) and
control (no memory needed). The assistant's replies in the history are fixed text, so every method
compresses the same history; only the probe's reply is generated, greedily, on the session's reply
path (`generate_stream`: the system prompt, the soft token budget, the exact speculative decoder), and
scored with the answers bench's must / must-not phrases (`answers.content_faults`).

Methods, at equal token budgets (fractions of each conversation's full history, in the window's own
count: content tokens + MESSAGE_OVERHEAD_TOKENS per message):

- `full`: the whole history (the upper bound; the budget does not apply);
- `window`: the turn window (llm/history.py `TurnWindow`: whole old turns dropped; the lower bound);
- `summary`: compaction (llm/memory.py `CompactedHistory`: old turns summarised by the same LLM,
  greedy, frozen once written), run turn by turn as the session runs it, after each reply.

Per method and budget: accuracy by probe kind, the probe's TTFT (the chat before it prefilled, as the
session's prewarm leaves it: the probe's own words and the first token), the CPU seconds of each
compaction (`time.process_time`, the summariser's prefill and decode; the cache holding the
conversation first, as in a live session), the tokens prefilled between turns (the positions the next
turn's prompt no longer shares with the cache after the previous reply: 0 for the full history, one
re-prefill per eviction or compaction) and the prompt's tokens at the probe. Conversations are split
into halves by the number ending their id (answers.py `half`): A tunes the summary instruction, B is
reported (`--half`). Prints a table and ends with one JSON line.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from headstart.bench.answers import HALVES, Item, content_faults, half
from headstart.config import LLMConfig, ThreadPlan

__all__ = ["KINDS", "METHODS", "Conversation", "MemoryBenchOptions", "load_conversations", "main", "score"]

KINDS = ("recall", "multi", "update", "order", "abstain", "control")
METHODS = ("full", "window", "summary", "selective")
DEFAULT_METHODS = ("full", "window", "summary")
DATA_FILE = "memory.json"


@dataclass(frozen=True, slots=True)
class Conversation:
    """One bench conversation: `turns` ((user, assistant) pairs, oldest first, the replies fixed),
    the `probe` (the last user turn), the phrases its reply `must` (groups, one of each) and
    `must_not` say (answers.py's phrase rules)."""

    id: str
    kind: str
    turns: tuple[tuple[str, str], ...]
    probe: str
    must: tuple[tuple[str, ...], ...]
    must_not: tuple[str, ...] = ()

    def history(self) -> list[dict[str, str]]:
        """The turns as chat messages."""
        return [m for u, a in self.turns for m in ({"role": "user", "content": u}, {"role": "assistant", "content": a})]

    def item(self) -> Item:
        """The probe as an answers-bench `Item`, for its scorer."""
        return Item(self.id, self.kind, (self.probe,), self.must, self.must_not)


def load_conversations(path: str | Path | None = None) -> list[Conversation]:
    """The conversations in `path` (default: the packaged `bench/data/memory.json`). ValueError for
    malformed data (the message names the conversation); FileNotFoundError for a missing file."""
    if path is None:
        text = resources.files("headstart.bench").joinpath("data", DATA_FILE).read_text(encoding="utf-8")
    else:
        text = Path(path).read_text(encoding="utf-8")
    try:
        raw = json.loads(text)["items"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValueError(f"memory data: not a JSON object with 'items': {exc}") from None
    out, seen = [], set()
    for i, r in enumerate(raw):
        where = f"memory data item {i} ({r.get('id', '?') if isinstance(r, dict) else r!r})"
        if not isinstance(r, dict) or not isinstance(r.get("id"), str) or r["id"] in seen \
                or not re.search(r"\d$", r["id"]):
            raise ValueError(f"{where}: needs a unique string id ending in a number")
        if r.get("kind") not in KINDS:
            raise ValueError(f"{where}: kind must be one of {KINDS}")
        turns = r.get("turns")
        if not isinstance(turns, list) or not turns or not all(
                isinstance(t, dict) and isinstance(t.get("user"), str) and t["user"].strip()
                and isinstance(t.get("assistant"), str) and t["assistant"].strip() for t in turns):
            raise ValueError(f"{where}: turns must be a non-empty list of {{'user', 'assistant'}} texts")
        if not isinstance(r.get("probe"), str) or not r["probe"].strip():
            raise ValueError(f"{where}: needs a probe")
        must, must_not = r.get("must", []), r.get("must_not", [])
        if not isinstance(must, list) or not must or not all(isinstance(g, list) and g and all(isinstance(p, str) for p in g)
                                                             for g in must):
            raise ValueError(f"{where}: must must be a non-empty list of non-empty lists of phrases")
        if not isinstance(must_not, list) or not all(isinstance(p, str) for p in must_not):
            raise ValueError(f"{where}: must_not must be a list of phrases")
        seen.add(r["id"])
        out.append(Conversation(r["id"], r["kind"], tuple((t["user"], t["assistant"]) for t in turns), r["probe"],
                                tuple(tuple(g) for g in must), tuple(must_not)))
    return out


def score(conversation: Conversation, answer: str) -> list[str]:
    """What is wrong with `answer` to the probe (answers.py `content_faults`: "missing: ...", "says:
    ...", "empty reply"); empty: right."""
    return content_faults(conversation.item(), answer)


# -- one run ---------------------------------------------------------------------------------------

@dataclass
class _Run:
    """One (conversation, method, budget) run's figures."""

    id: str
    kind: str
    method: str
    fraction: float | None
    budget: int | None
    answer: str = ""
    faults: list[str] = field(default_factory=list)
    ttft_s: float | None = None
    probe_prompt_tokens: int = 0
    between_tokens: int = 0  # prefilled between turns, beyond what the cache held
    compaction_cpu_s: list[float] = field(default_factory=list)
    compaction_wall_s: list[float] = field(default_factory=list)
    compaction_tokens: list[int] = field(default_factory=list)  # the notes' tokens
    notes: list[str] = field(default_factory=list)
    forgotten: int = 0  # blocks the memory forgot (past its share of the budget)
    dropped_turns: int = 0

    @property
    def ok(self) -> bool:
        return not self.faults


def history_tokens(conversation: Conversation, count) -> int:
    """The full history's tokens in the window's count (content + MESSAGE_OVERHEAD_TOKENS a message)."""
    from headstart.llm.history import MESSAGE_OVERHEAD_TOKENS

    return sum(count(text) + MESSAGE_OVERHEAD_TOKENS for pair in conversation.turns for text in pair)


def _run_one(engine, decoder, config: LLMConfig, executor, conversation: Conversation, method: str,
             fraction: float | None, instruction: str) -> _Run:
    import asyncio

    from headstart.bench.answers import _reply
    from headstart.llm.engine import common_prefix_len
    from headstart.llm.history import TurnWindow, split_turns
    from headstart.llm.memory import CompactedHistory, summarise, surprisal_prune

    count = engine.count_tokens
    budget = None if fraction is None else max(1, round(fraction * history_tokens(conversation, count)))
    run = _Run(conversation.id, conversation.kind, method, fraction, budget)
    view: Any = None
    if method == "window":
        view = TurnWindow(budget, count)  # type: ignore[arg-type]
    elif method in ("summary", "selective"):
        view = CompactedHistory(budget, count, hard_max_tokens=None)  # type: ignore[arg-type]

    def select(chat: list[dict[str, str]]) -> list[dict[str, str]]:
        return chat if view is None else view.select(chat)

    def render(messages, generation: bool = False) -> list[int]:
        return engine.render_prompt(messages, add_generation_prompt=generation)

    system = {"role": "system", "content": config.system_prompt}
    history: list[dict[str, str]] = []
    for user, assistant in conversation.turns:
        turn = [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
        cached = render([*select([system, *history, turn[0]]), turn[1]])  # the cache after the reply
        history += turn
        chat = [system, *history]
        if method in ("summary", "selective"):
            plan = view.due(chat)
            if plan is not None:
                engine.sync_to(cached)  # a live session's cache holds the conversation
                messages = view.summary_messages(chat, plan, instruction)
                cpu0, wall0 = time.process_time(), time.perf_counter()
                if method == "selective":
                    _, turns = split_turns(chat)
                    notes = surprisal_prune(engine, turns[plan.start:plan.stop], plan.max_tokens)
                else:
                    notes = "" if messages is None else summarise(engine, messages, plan.max_tokens) or ""
                run.compaction_cpu_s.append(time.process_time() - cpu0)
                run.compaction_wall_s.append(time.perf_counter() - wall0)
                committed = view.commit(chat, plan, notes)
                run.forgotten += plan.forget if committed else 0
                if committed and notes.strip():
                    run.notes.append(view.blocks[-1].text)
                    run.compaction_tokens.append(count(view.blocks[-1].text))
        after = render(select(chat))
        run.between_tokens += len(after) - common_prefix_len(cached, after)
    run.dropped_turns = 0 if view is None else view.dropped_turns
    # the probe: the chat before it prefilled (the session's prewarm), then the reply
    engine.sync_to(render(select([system, *history, {"role": "user", "content": ""}])))
    messages = select([system, *history, {"role": "user", "content": conversation.probe}])
    run.probe_prompt_tokens = len(render(messages, generation=True))
    done, stats = asyncio.run(_reply(engine, messages, config, executor, decoder))
    run.answer = done.text.strip()
    run.ttft_s = stats.ttft_s
    run.faults = score(conversation, run.answer)
    return run


# -- the command -----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class MemoryBenchOptions:
    """The options of `headstart bench memory`; their meaning and defaults: its `--help` (headstart/cli/)."""

    model: str
    methods: str
    budgets: str
    half: str | None
    limit: int | None
    conversations: str | None
    items: str | None
    instruction: str | None
    max_new_tokens: int
    threads: int
    dtype: str
    quantize: str
    speculative: str
    all_answers: bool
    json: bool


def _instruction(spec: str | None) -> str:
    from headstart.llm.memory import SUMMARY_INSTRUCTION

    if spec is None:
        return SUMMARY_INSTRUCTION
    if spec.startswith("file:"):
        return Path(spec[5:]).read_text(encoding="utf-8").strip()
    return spec


def main(args: MemoryBenchOptions) -> int:
    def log(message: str) -> None:
        if not args.json:
            print(message, file=sys.stderr, flush=True)

    if args.threads < 1 or args.max_new_tokens < 1 or (args.limit is not None and args.limit < 1):
        print("error: --threads, --max-new-tokens and --limit must be >= 1", file=sys.stderr)
        return 2
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if not methods or any(m not in METHODS for m in methods):
        print(f"error: --methods takes a comma-separated subset of {','.join(METHODS)}", file=sys.stderr)
        return 2
    try:
        fractions = [int(b) / 100 for b in args.budgets.split(",") if b.strip()]
        if not fractions or not all(0 < f <= 1 for f in fractions):
            raise ValueError
    except ValueError:
        print("error: --budgets takes comma-separated percentages in (0, 100]", file=sys.stderr)
        return 2
    try:
        conversations = load_conversations(args.items)
        instruction = _instruction(args.instruction)
        if "{lines}" not in instruction:
            raise ValueError("--instruction needs a {lines} placeholder for the user's statements")
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.half is not None:
        conversations = [c for c in conversations if half(c.item()) == args.half]  # type: ignore[arg-type]
    if args.conversations:
        wanted = {w.strip() for w in args.conversations.split(",") if w.strip()}
        conversations = [c for c in conversations if c.id in wanted]
    if args.limit is not None:
        conversations = conversations[: args.limit]
    if not conversations:
        print("error: no conversation selected", file=sys.stderr)
        return 2

    from transformers.utils import logging as hf_logging

    from headstart.llm.engine import LLMEngine
    from headstart.llm.speculative import build_decoder
    from headstart.llm.stream import llm_executor
    from headstart.models.store import ModelError

    hf_logging.disable_progress_bar()
    quantize = None if args.quantize == "none" else args.quantize
    config = LLMConfig(model=args.model, dtype=args.dtype, quantize=quantize, max_new_tokens=args.max_new_tokens,
                       speculative=args.speculative)
    threads = ThreadPlan(torch_threads=args.threads)
    log(f"loading {args.model} ({args.dtype}, quantize {args.quantize})")
    try:
        engine = LLMEngine.from_config(config, threads)
    except (ModelError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    engine.warm_up()
    decoder = build_decoder(engine, config, threads)
    executor = llm_executor()
    plan = [(m, None) for m in methods if m == "full"] + [(m, f) for f in fractions for m in methods if m != "full"]
    runs: list[_Run] = []
    t0 = time.perf_counter()
    try:
        for n, conversation in enumerate(conversations, 1):
            for method, fraction in plan:
                run = _run_one(engine, decoder, config, executor, conversation, method, fraction, instruction)
                runs.append(run)
                label = method if fraction is None else f"{method}@{round(fraction * 100)}%"
                log(f"  [{n}/{len(conversations)}] {conversation.id} {conversation.kind:<8} {label:<12} "
                    f"{'ok  ' if run.ok else 'FAIL'} {run.answer!r}" + "".join(f"\n      note: {t!r}" for t in run.notes))
    finally:
        executor.shutdown(wait=True)
    summary = summarise_runs(runs, plan)
    result = {"bench": "memory", "model": args.model, "quantize": engine.quantize,
              "dtype": str(engine.dtype).removeprefix("torch."), "threads": args.threads,
              "conversations": len(conversations), "half": args.half, "speculative": args.speculative,
              "max_new_tokens": args.max_new_tokens, "instruction_chars": len(instruction),
              "seconds": round(time.perf_counter() - t0, 1), "results": summary}
    if not args.json:
        _print(summary, runs, args.all_answers)
    print(json.dumps(result))
    return 0


def summarise_runs(runs: Sequence[_Run], plan: Sequence[tuple[str, float | None]]) -> list[dict]:
    """One record per (method, budget) of `plan`: accuracy overall and by kind, the probe's TTFT,
    compactions and their CPU seconds, tokens prefilled between turns and at the probe."""
    out = []
    for method, fraction in plan:
        rs = [r for r in runs if r.method == method and r.fraction == fraction]
        if not rs:
            continue
        by_kind = {}
        for kind in KINDS:
            ks = [r for r in rs if r.kind == kind]
            if ks:
                by_kind[kind] = {"right": sum(r.ok for r in ks), "total": len(ks)}
        cpu = [s for r in rs for s in r.compaction_cpu_s]
        wall = [s for r in rs for s in r.compaction_wall_s]
        notes = [t for r in rs for t in r.compaction_tokens]
        ttft = [r.ttft_s for r in rs if r.ttft_s is not None]
        out.append({
            "method": method, "budget_pct": None if fraction is None else round(fraction * 100),
            "right": sum(r.ok for r in rs), "total": len(rs), "accuracy": round(sum(r.ok for r in rs) / len(rs), 4),
            "by_kind": by_kind,
            "probe_ttft_s_median": round(statistics.median(ttft), 4) if ttft else None,
            "probe_prompt_tokens_mean": round(statistics.mean(r.probe_prompt_tokens for r in rs), 1),
            "between_turn_prefill_tokens_mean": round(statistics.mean(r.between_tokens for r in rs), 1),
            "compactions": len(cpu),
            "compaction_cpu_s_median": round(statistics.median(cpu), 3) if cpu else None,
            "compaction_cpu_s_mean": round(statistics.mean(cpu), 3) if cpu else None,
            "compaction_wall_s_median": round(statistics.median(wall), 3) if wall else None,
            "note_tokens_mean": round(statistics.mean(notes), 1) if notes else None,
            "blocks_forgotten": sum(r.forgotten for r in rs),
            "failures": [{"id": r.id, "kind": r.kind, "answer": r.answer, "faults": r.faults} for r in rs if not r.ok],
        })
    return out


def _print(summary: list[dict], runs: Sequence[_Run], all_answers: bool) -> None:
    head = f"{'method':<10}{'budget':>7}{'right':>9}{'acc':>6}" + "".join(f"{k:>9}" for k in KINDS) + \
        f"{'TTFT ms':>9}{'probe tok':>10}{'between tok':>12}{'compact':>8}{'CPU s':>7}{'note tok':>9}"
    print("\nmemory: accuracy by probe kind (right/total), the probe's TTFT (median), prompt tokens at the probe "
          "and prefilled between turns (mean per conversation), compactions and CPU s each (median)")
    print(head)
    for s in summary:
        kinds = "".join(f"{(str(s['by_kind'][k]['right']) + '/' + str(s['by_kind'][k]['total'])) if k in s['by_kind'] else '-':>9}"
                        for k in KINDS)
        budget = "all" if s["budget_pct"] is None else f"{s['budget_pct']}%"
        ttft = s["probe_ttft_s_median"]
        print(f"{s['method']:<10}{budget:>7}{str(s['right']) + '/' + str(s['total']):>9}{s['accuracy']:>6.0%}{kinds}"
              f"{'-' if ttft is None else round(ttft * 1000):>9}{s['probe_prompt_tokens_mean']:>10.0f}"
              f"{s['between_turn_prefill_tokens_mean']:>12.0f}{s['compactions']:>8}"
              f"{'-' if s['compaction_cpu_s_median'] is None else s['compaction_cpu_s_median']:>7}"
              f"{'-' if s['note_tokens_mean'] is None else s['note_tokens_mean']:>9}")
    shown = [r for r in runs if all_answers or not r.ok]
    if shown:
        print("\nanswers:" if all_answers else "\nfailures:")
    for r in shown:
        label = r.method if r.fraction is None else f"{r.method}@{round(r.fraction * 100)}%"
        notes = "".join(f"\n      note: {n!r}" for n in r.notes)
        print(f"  {r.id} {r.kind} {label} [{'; '.join(r.faults) or 'ok'}]\n      reply: {r.answer!r}{notes}")
    print()


__all__ += ["HALVES", "history_tokens", "summarise_runs"]
