"""`headstart bench answers`: are the replies worth hearing?

Spoken-style user turns written for this project (`bench/data/answers.json`, single items in nine
kinds: one-fact questions, small arithmetic, requests the assistant cannot carry out, how-to questions,
small talk, follow-ups that need the earlier turns, ASR-garbled or half-heard input, plain statements
that ask nothing and must not be refused, requests a local tool serves ("tool": the time, a timer,
arithmetic, a unit conversion, a reminder); and a tenth kind, "mixed": conversations where a request it cannot
carry out or half-heard words come first and answerable turns follow, each turn scored on its own, so
that one refusal does not lock the conversation) are answered the way the session answers them:

- with tools on (the default; `--no-tools` as `headstart serve` takes it) the deterministic matcher
  goes first (`Toolbox.route`, headstart/tools/): a turn it serves gets the tool's spoken answer, the
  tool really runs (on a fresh temporary list store and timers per conversation: nothing reaches the
  user's data folder);
- every other turn goes to the project's own LLMEngine through the session's reply path
  (`generate_stream`: the chat template, the soft token budget `SentenceBudget`, the session's
  speculative decoder, which is exact), greedy, on the prompt the session's `Conversation` renders
  (the system prompt first, the turns a fixed reply answered left out).

A dialogue's earlier turns are answered (by a tool or the model) and kept in a `Conversation` as the
session keeps them, a tool turn included (the user's words and the spoken answer); only its last reply
is scored (a mixed conversation is one item per turn).

Every scored reply is checked twice (`check`):

- content (`content_faults`): each `must` group needs one of its phrases, no `must_not` phrase may
  appear, `expect` asks for a first-person refusal that claims no action ("refusal") or a question
  back ("question"), and no run of 4 words may be copied from the system prompt (`prompt_copy`: a
  small model pieces replies together from its instructions or worked examples);
- spoken form (`spoken_form_faults`): at most two sentences, no list, markdown, code or emoji, and
  not the question restated as the answer (no content word beyond the user's own words).

An item that names a `tool` also needs that tool to have run for its last turn with the expected
arguments (`tool_faults`; its spoken answer is then checked as above, without the prompt-copy rule);
one that names none fails when a tool ran (a false action: the target is 0).

An item is right when all hold. Items are split into two stable halves by the number that ends their
id (`half`: odd A, even B): choose a prompt on A, report it on B (`--half`). Prints a table per model, prompt and kind, the failures in full,
the tool items right, the false actions and the LLM-only items' score (with tools on, also what the
same items score without tools: the few whose conversation had a tool turn are answered again with
tools off, the others' prompts are the same), a summary with decode speed, the system prompt's one-off
prefill per session and a turn's TTFT with that prefill cached (`_turn_ttft`: what the prompt's length
costs per turn), then one JSON line.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from headstart.bench.answer_prompts import PROMPTS  # re-exported: the --prompt names
from headstart.config import LLMConfig, ThreadPlan
from headstart.timeline import ToolUse

if TYPE_CHECKING:
    from headstart.tools.toolbox import Toolbox

__all__ = [
    "HALVES",
    "HISTORY_MODES",
    "KINDS",
    "PROMPTS",
    "AnswersBenchOptions",
    "Item",
    "Verdict",
    "check",
    "content_faults",
    "half",
    "item_overlap",
    "load_items",
    "main",
    "normalize",
    "prompt_copy",
    "sentences",
    "spoken_form_faults",
    "tool_faults",
]

KINDS = ("fact", "arithmetic", "cannot", "howto", "smalltalk", "followup", "garbled", "statement", "tool", "mixed")
HALVES = ("A", "B")
EXPECTS = ("answer", "refusal", "question")
# "prompt": earlier turns as the session's prompt holds them (the turns a fixed reply answered left out,
# llm/canned.py); "full": every earlier turn
HISTORY_MODES = ("prompt", "full")
DATA_FILE = "answers.json"


# -- the items -------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Item:
    """One scored turn. `turns`: the user's turns of one conversation (the model answers each; the
    last reply is scored). `must`: groups of phrases, each group needs one; `must_not`: phrases;
    `expect`: the reply kinds that fit ("answer", "refusal", "question"). Phrases match whole words
    on `normalize`d text; a phrase starting with "re:" is a regular expression over that text.
    `tool`: the local tool the last turn must run (None: no tool may run), with `arguments` as
    `headstart.bench.tools.arguments_match` reads them ({"value": 391} for "calculate")."""

    id: str
    kind: str
    turns: tuple[str, ...]
    must: tuple[tuple[str, ...], ...] = ()
    must_not: tuple[str, ...] = ()
    expect: tuple[str, ...] = ("answer",)
    note: str = ""
    echo_ok: bool = False  # a greeting or goodbye may be answered in the user's own words ("Good night!")
    tool: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)

    @property
    def question(self) -> str:
        return self.turns[-1]


def half(item: Item) -> str:
    """The item's half: "A" for an id that ends in an odd number ("fact-01"), "B" for an even one (a
    split that adding items does not move); a turn of a mixed conversation ("mixed-03.2") is in its
    conversation's half. ValueError for an id without a final number."""
    number = re.search(r"(\d+)(?:\.\d+)?$", item.id)
    if number is None:
        raise ValueError(f"answers item {item.id!r}: the id needs a final number for its half")
    return "A" if int(number.group(1)) % 2 else "B"


def load_items(path: str | Path | None = None) -> list[Item]:
    """The bench items from `path` (default: the packaged `bench/data/answers.json`). ValueError for
    malformed data (the message names the item); FileNotFoundError for a missing file."""
    if path is None:
        text = resources.files("headstart.bench").joinpath("data", DATA_FILE).read_text(encoding="utf-8")
    else:
        text = Path(path).read_text(encoding="utf-8")
    try:
        raw = json.loads(text)["items"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValueError(f"answers data: not a JSON object with 'items': {exc}") from None
    items: list[Item] = []
    seen: set[str] = set()
    for i, r in enumerate(_expand_mixed(raw)):
        where = f"answers data item {i} ({r.get('id', '?') if isinstance(r, dict) else r!r})"
        if not isinstance(r, dict) or not isinstance(r.get("id"), str) or r["id"] in seen:
            raise ValueError(f"{where}: needs a unique string id")
        if r.get("kind") not in KINDS:
            raise ValueError(f"{where}: kind must be one of {KINDS}")
        turns = r.get("turns")
        if not isinstance(turns, list) or not turns or not all(isinstance(t, str) and t.strip() for t in turns):
            raise ValueError(f"{where}: turns must be a non-empty list of non-empty strings")
        expect = r.get("expect", "answer")
        expect = (expect,) if isinstance(expect, str) else tuple(expect)
        if not expect or any(e not in EXPECTS for e in expect):
            raise ValueError(f"{where}: expect must be one or more of {EXPECTS}")
        must = r.get("must", [])
        if not isinstance(must, list) or not all(isinstance(g, list) and g and all(isinstance(p, str) for p in g)
                                                 for g in must):
            raise ValueError(f"{where}: must must be a list of non-empty lists of phrases")
        must_not = r.get("must_not", [])
        if not isinstance(must_not, list) or not all(isinstance(p, str) for p in must_not):
            raise ValueError(f"{where}: must_not must be a list of phrases")
        for phrase in [p for g in must for p in g] + must_not:
            try:
                _phrase_re(phrase)
            except re.error as exc:
                raise ValueError(f"{where}: bad regular expression {phrase!r}: {exc}") from None
        seen.add(r["id"])
        if not isinstance(r.get("echo_ok", False), bool):
            raise ValueError(f"{where}: echo_ok must be true or false")
        tool, arguments = r.get("tool"), r.get("arguments", {})
        if r["kind"] == "tool" and not (isinstance(tool, str) and tool):
            raise ValueError(f"{where}: a tool item names its tool")
        if tool is not None and (not isinstance(tool, str) or r["kind"] not in ("tool", "mixed")):
            raise ValueError(f"{where}: only a tool item or a mixed turn may name a tool (a string)")
        if not isinstance(arguments, dict) or (arguments and tool is None):
            raise ValueError(f"{where}: arguments must be an object, given with a tool")
        items.append(Item(r["id"], r["kind"], tuple(turns), tuple(tuple(g) for g in must), tuple(must_not),
                          expect, r.get("note", ""), r.get("echo_ok", False), tool, dict(arguments)))
    return items


def _expand_mixed(raw: list) -> list:
    """A "mixed" conversation (`checks`: one check per user turn, each with its own must / must_not /
    expect) becomes one item per turn, "ID.K" for turn K, holding the turns up to K: every turn is
    scored on its own, after the model's own replies to the turns before it. Other items pass as they
    are. ValueError when `checks` does not give one object per turn."""
    out = []
    for r in raw:
        if not isinstance(r, dict) or r.get("kind") != "mixed":
            out.append(r)
            continue
        turns, checks = r.get("turns"), r.get("checks")
        if not isinstance(turns, list) or not isinstance(checks, list) or len(checks) != len(turns) \
                or not all(isinstance(c, dict) for c in checks):
            raise ValueError(f"answers data item {r.get('id', '?')!r}: a mixed conversation needs 'checks', "
                             "one object per turn")
        for k, check_ in enumerate(checks, 1):
            out.append({**check_, "id": f"{r.get('id')}.{k}", "kind": "mixed", "turns": turns[:k],
                        **({"note": r["note"]} if "note" in r and "note" not in check_ else {})})
    return out


# -- the checker -----------------------------------------------------------------------------------

def normalize(text: str) -> str:
    """Lowercase, curly apostrophes straight, hyphens between word characters as spaces ("forty-two"
    -> "forty two"), thousands separators dropped ("2,800,000" -> "2800000"), whitespace collapsed."""
    text = text.lower().replace("\u2019", "'").replace("\u2018", "'")
    text = re.sub(r"(?<=\w)[-\u2010\u2011\u2013](?=\w)", " ", text)
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)
    return " ".join(text.split())


def _phrase_re(phrase: str) -> re.Pattern:
    if phrase.startswith("re:"):
        return re.compile(phrase[3:])
    # whole words; a number does not match inside a longer number or a decimal ("5" not in "2.5", "25")
    return re.compile(r"(?<![\w.])" + re.escape(normalize(phrase)) + r"(?!\w|\.\d)")


def _has(phrase: str, normalized: str) -> bool:
    return _phrase_re(phrase).search(normalized) is not None


# Saying, in the first person, that it cannot do something (on normalized text): "You can't." is no refusal.
REFUSAL = re.compile(
    r"\b(?:i|i'm|i am|i've)\s+(?:\w+\s+){0,2}?(?:can't|cannot|can not|couldn't|unable|not|don't|do not|have no|"
    r"never)\b|\bnot something i can\b|\bbeyond (?:my|what i)\b|\b(?:i'm|i am) (?:just|only) (?:a|an)\b")
# Claiming to have done (or to be doing) what it cannot do.
ACTION_CLAIM = re.compile(
    r"\b(?:i've|i have|i'll|i will|i can|i'm|i am|i)\s+(?:now\s+|just\s+|already\s+)?"
    r"(?:set|setting|turn|turned|turning|call|called|calling|send|sent|sending|order|ordered|ordering|play|"
    r"played|playing|lock|locked|locking|start|started|starting|move|moved|moving|remind|reminded|add|added|"
    r"book|booked|open|opened|dial|dialing|dialed|go|going)\b"
    r"|\b(?:lights? (?:are|is) (?:now )?(?:on|turned on|switched on)|timer (?:is )?(?:now )?set|door is (?:now )?locked|"
    r"reminder (?:is )?(?:now )?set|order (?:is|has been) placed|here's some|here is some)\b")
# Asking the user back (a question, or asking to repeat).
QUESTION_BACK = re.compile(
    r"\?|\b(?:repeat|say (?:that|it) again|(?:didn't|did not|couldn't|could not) (?:quite )?(?:catch|hear|"
    r"understand|get)|not sure what you mean|clarify|finish (?:your|the) (?:question|sentence))\b")

_ABBREVIATIONS = {"mr", "mrs", "ms", "dr", "st", "mt", "vs", "etc", "e.g", "i.e", "approx", "u.s", "u.k", "no"}
_SENTENCE_END = re.compile(r"[.!?\u2026]+[\"'\u201d\u2019)\]]*(?=\s|$)|\n")
_LIST_LINE = re.compile(r"^\s*(?:[-*\u2022\u00b7]\s*|\d+[.)]\s+)\S", re.M)
_INLINE_LIST = re.compile(r"(?:^|\s)1[.)]\s.+\s2[.)]\s")
_MARKDOWN = re.compile(r"\*\*|__|^\s*#{1,6}\s|\[[^\]]+\]\([^)]*\)|^\s*>\s|\|\s*-{3}|(?<![\w*])\*[^*\s][^*\n]*\*(?![\w*])",
                       re.M)
_CODE = re.compile(r"`|[{}]|</?[a-z]+>|\b(?:print|printf|def|console\.log)\s*\(|\b[a-z_]+\.[a-z_]+\(|;\s*$", re.M)
_EMOJI = re.compile("[\U0001F000-\U0001FAFF\u2600-\u27BF\u2B00-\u2BFF\uFE0F\u200D]")
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
# Function words that carry no answer ("yes", "no" and negations are content: they answer).
_STOP = set("""a an the is are was were be been am do does did what what's whats which who who's how how's
many much there there's in on of to for and or it it's its i i'm you you're your my me that that's this at by
with can could would will please um uh er so then now if as from about our we us hi hey okay ok well just
like some any one tell say said again sure let let's here thing things""".split())


def sentences(text: str) -> list[str]:
    """`text` split into sentences: at terminal punctuation followed by a space or the end, and at
    line breaks; not at a "." after an abbreviation or a one-letter initial or before a lowercase word.
    A list number ("1.") stays with the sentence it opens; pieces without a letter or digit are dropped."""
    out, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        if m.group() != "\n" and m.group()[0] == ".":
            word = re.search(r"(\S+)$", text[start:m.start()])
            token = word.group(1).lower().lstrip("(\"'") if word else ""
            if token in _ABBREVIATIONS or re.fullmatch(r"[a-z]", token) or re.match(r"\s+[a-z]", text[m.end():]):
                continue  # "Dr.", "J.", or a lowercase word next ("1. boil"): not an end
        piece = text[start:m.end()].strip()
        if re.fullmatch(r"\d+[.)]", piece):  # a list number ("1."), not a sentence
            continue
        if re.search(r"\w", piece):
            out.append(piece)
        start = m.end()
    tail = text[start:].strip()
    if re.search(r"\w", tail):
        out.append(tail)
    return out


def _content_words(text: str) -> set[str]:
    return {w.removesuffix("s") if len(w) > 3 else w for w in _WORD.findall(normalize(text)) if w not in _STOP}


def spoken_form_faults(answer: str, question: str, asks_back: bool = False, echo_ok: bool = False) -> list[str]:
    """What makes `answer` (a reply to the user's `question`) unfit to be read aloud: "N sentences"
    (more than two), "list", "markdown", "code", "emoji", "restates the question" (no content word
    beyond the question's own). `asks_back`: the item wants a question back, and a reply that asks
    one may reuse the user's words; `echo_ok`: any reply may (a greeting answered in kind). Empty
    list: fine. An empty answer has no form faults (content scoring fails it)."""
    faults = []
    if not answer.strip():
        return faults
    n = len(sentences(answer))
    if n > 2:
        faults.append(f"{n} sentences")
    lines = answer.strip().splitlines()
    if _INLINE_LIST.search(answer) or (_LIST_LINE.search(answer) and (len(lines) > 1 or _LIST_LINE.match(lines[0]))):
        faults.append("list")
    if _MARKDOWN.search(answer):
        faults.append("markdown")
    if _CODE.search(answer):
        faults.append("code")
    if _EMOJI.search(answer):
        faults.append("emoji")
    if not (echo_ok or _content_words(answer) - _content_words(question)
            or (asks_back and QUESTION_BACK.search(answer))):
        faults.append("restates the question")
    return faults


def prompt_copy(answer: str, system_prompt: str, user_turns: Sequence[str] = (), n: int = 4) -> str | None:
    """The first run of `n` words of `answer` that also stands in `system_prompt`, outside its quoted
    replies ("..."), but in none of the user's turns (a reply pieced together from the instructions:
    "You can't when asked."), or None. A reply the prompt quotes may be used as it is."""
    prompt = " ".join(_WORD.findall(normalize(re.sub(r'"[^"]*"', " | ", system_prompt))))
    users = [" ".join(_WORD.findall(normalize(t))) for t in user_turns]
    words = _WORD.findall(normalize(answer))
    for i in range(len(words) - n + 1):
        run = " ".join(words[i:i + n])
        if re.search(rf"(?<!\S){re.escape(run)}(?!\S)", prompt) and not any(run in u for u in users):
            return run
    return None


def item_overlap(system_prompt: str, items: Sequence[Item], n: int = 5) -> str | None:
    """The first run of `n` words that `system_prompt` shares with a user turn of `items`, as "id: run",
    or None: a candidate prompt whose worked examples copy or closely paraphrase bench items would
    score what it was tuned on (quoted text counts too; `n` 5 lets a shared template such as "what's
    the capital of" through)."""
    prompt = " " + " ".join(_WORD.findall(normalize(system_prompt))) + " "
    for item in items:
        for turn in item.turns:
            words = _WORD.findall(normalize(turn))
            for i in range(len(words) - n + 1):
                run = " ".join(words[i:i + n])
                if f" {run} " in prompt:
                    return f"{item.id}: {run}"
    return None


def content_faults(item: Item, answer: str, system_prompt: str = "") -> list[str]:
    """What is wrong with what `answer` says for `item`: "empty reply", "missing: a | b" (a `must`
    group), "says: x" (a `must_not` phrase), "no refusal", "claims to act", "no question back",
    "copies the system prompt: ..." (`prompt_copy`, with `system_prompt` given). With several
    `expect` kinds the reply needs to fit one of them."""
    text = normalize(answer)
    if not text:
        return ["empty reply"]
    copied = prompt_copy(answer, system_prompt, item.turns) if system_prompt else None
    faults = [f"missing: {' | '.join(group)}" for group in item.must if not any(_has(p, text) for p in group)]
    faults += [f"says: {p}" for p in item.must_not if _has(p, text)]
    fits = {"answer": []}
    if "refusal" in item.expect:
        fits["refusal"] = ([] if REFUSAL.search(text) else ["no refusal"]) + \
                          (["claims to act"] if ACTION_CLAIM.search(text) else [])
    if "question" in item.expect:
        fits["question"] = [] if QUESTION_BACK.search(text) else ["no question back"]
    options = [fits[e] for e in item.expect]
    if not any(not f for f in options):
        faults += min(options, key=len)
    if copied:
        faults.append(f"copies the system prompt: {copied!r}")
    return faults


def tool_faults(item: Item, ran: ToolUse | None) -> list[str]:
    """What is wrong with the tool that ran for `item`'s last turn (`ran`; None: the LLM replied):
    "no tool ran (expected X)", "ran Y (expected X)", "arguments {...} (expected {...})", "ran a
    tool: Y (none expected)" (a false action), "the tool failed". Empty list: fine."""
    from headstart.bench.tools import arguments_match

    if item.tool is None:
        return [] if ran is None else [f"ran a tool: {ran.name} (none expected)"]
    if ran is None:
        return [f"no tool ran (expected {item.tool})"]
    if ran.name != item.tool:
        return [f"ran {ran.name} (expected {item.tool})"]
    faults = [] if arguments_match(ran.name, item.arguments, dict(ran.arguments)) else \
        [f"arguments {ran.arguments} (expected {item.arguments})"]
    return faults + ([] if ran.ok else ["the tool failed"])


@dataclass(frozen=True, slots=True)
class Verdict:
    """One scored reply: its content faults (the tool's among them) and spoken-form faults (both
    empty: right)."""

    item: Item
    answer: str
    content: tuple[str, ...]
    form: tuple[str, ...]
    context: tuple[str, ...] = ()  # the replies to the dialogue's earlier turns (the model's or a tool's)
    tools: tuple[ToolUse | None, ...] = ()  # per turn, the tool that answered it (None: the LLM)

    @property
    def ok(self) -> bool:
        return not self.content and not self.form

    @property
    def tool(self) -> ToolUse | None:
        """The tool that answered the scored (last) turn, or None."""
        return self.tools[-1] if self.tools else None

    @property
    def false_action(self) -> bool:
        """A tool ran for the scored turn of an item that expects none."""
        return self.item.tool is None and self.tool is not None

    @property
    def tool_in_history(self) -> bool:
        """A tool answered one of the earlier turns (so the LLM's prompt differs from a run without tools)."""
        return any(t is not None for t in self.tools[:-1])


def check(item: Item, answer: str, context: Sequence[str] = (), system_prompt: str = "",
          tools: Sequence[ToolUse | None] = ()) -> Verdict:
    """Score `answer`, the reply to `item`'s last turn under `system_prompt`; `tools`: per turn, the
    tool that answered it (None: the LLM; empty: no tools for any turn). A tool's answer is held to
    neither the prompt-copy rule (the LLM did not write it) nor the restated-question one (a
    confirmation says what was asked: "Timer set for ten minutes.")."""
    ran = tools[-1] if tools else None
    content = tool_faults(item, ran) + content_faults(item, answer, system_prompt if ran is None else "")
    return Verdict(item, answer, tuple(content),
                   tuple(spoken_form_faults(answer, item.question, asks_back="question" in item.expect,
                                            echo_ok=item.echo_ok or ran is not None)),
                   tuple(context), tuple(tools))


# -- running the models ----------------------------------------------------------------------------

@dataclass
class _RunStats:
    decode_tokens: int = 0
    decode_s: float = 0.0
    reply_tokens: list[int] = field(default_factory=list)
    ttft_s: list[float] = field(default_factory=list)


async def _reply(engine, messages, config, executor, decoder):
    from headstart.events import ReplyDone
    from headstart.llm.stream import generate_stream

    stream = generate_stream(engine, messages, config, executor, decoder=decoder)
    done = None
    async for event in stream:
        if isinstance(event, ReplyDone):
            done = event
    return done, stream.stats


@contextmanager
def bench_toolbox() -> Iterator[Toolbox]:
    """A fresh session's tools for one conversation: the built-in ones on a fake clock (a timer never
    fires during the bench) with their lists in a temporary folder, removed afterwards (nothing reaches
    the user's data folder); closed on exit."""
    import tempfile

    from headstart.clock import FakeClock
    from headstart.tools.lists import ListStore
    from headstart.tools.toolbox import Toolbox

    with tempfile.TemporaryDirectory(prefix="headstart-bench-answers-") as folder:
        toolbox = Toolbox(FakeClock(), lists=ListStore(Path(folder) / "lists.sqlite3"), user="bench")
        try:
            yield toolbox
        finally:
            toolbox.close()


def run_tool_turn(toolbox: Toolbox, text: str) -> tuple[str, ToolUse] | None:
    """The session's tool reply to the user's `text`: the matched call run once (`Toolbox.route`,
    `Toolbox.run`), as (its spoken answer, the `ToolUse` the session records); None when no tool
    serves `text` (the LLM answers)."""
    import asyncio

    call = toolbox.route(text) if text.strip() else None
    if call is None:
        return None
    outcome = asyncio.run(toolbox.run(call))
    return outcome.spoken.strip(), ToolUse(name=call.tool.name, arguments=dict(call.arguments), ok=outcome.ok)


def _answer(engine, decoder, config: LLMConfig, executor, item: Item, stats: _RunStats,
            history_mode: str = "prompt", tools: bool = True) -> Verdict:
    """Each turn of `item` as the session answers it: a tool's reply when `tools` and the matcher
    serves the turn, else the LLM's on the session's reply path. The history is a session
    `Conversation` (the user's turns, the replies, a tool turn as the user's words and the spoken
    answer). `history_mode` "prompt": the prompt the session renders (`Conversation.messages`: the
    turns a fixed reply answered left out, llm/canned.py); "full": every turn."""
    import asyncio

    from headstart.session.conversation import Conversation

    conversation = Conversation(config.system_prompt)
    replies: list[str] = []
    used: list[ToolUse | None] = []
    with bench_toolbox() if tools else _no_toolbox() as toolbox:
        for text in item.turns:
            conversation.add_user(text)
            served = run_tool_turn(toolbox, text) if toolbox is not None else None
            if served is not None:
                reply, tool = served
            else:
                tool = None
                messages = conversation.messages() if history_mode == "prompt" else \
                    [{"role": "system", "content": config.system_prompt}, *conversation.history]
                done, reply_stats = asyncio.run(_reply(engine, messages, config, executor, decoder))
                reply = done.text.strip()
                times = reply_stats.token_times_s
                stats.reply_tokens.append(len(times))
                if reply_stats.ttft_s is not None:
                    stats.ttft_s.append(reply_stats.ttft_s)
                if len(times) > 1:
                    stats.decode_tokens += len(times) - 1
                    stats.decode_s += times[-1] - times[0]
            conversation.add_assistant(reply)
            replies.append(reply)
            used.append(tool)
    return check(item, replies[-1], replies[:-1], config.system_prompt, used if tools else ())


@contextmanager
def _no_toolbox() -> Iterator[None]:
    yield None


def _session_prefill(engine, system_prompt: str) -> tuple[int, float]:
    """Tokens and seconds (best of 2) of prefilling what a session prefills once before the first
    user word (the system prompt and the user's message header), from an empty cache."""
    from headstart.llm.stream import with_system_prompt

    ids = engine.render_prompt(with_system_prompt([{"role": "user", "content": ""}], system_prompt),
                               add_generation_prompt=False)
    best = float("inf")
    for _ in range(2):
        engine.reset()
        t0 = time.perf_counter()
        engine.sync_to(ids)
        best = min(best, time.perf_counter() - t0)
    engine.reset()
    return len(ids), best


# A conversation that is not a bench item, for `_turn_ttft`: one earlier exchange, then the turn.
_TTFT_HISTORY = ({"role": "user", "content": "Hello there."},
                 {"role": "assistant", "content": "Hello, what can I do for you?"})
_TTFT_TURN = {"role": "user", "content": "Could you tell me a fun fact about owls?"}


def _turn_ttft(engine, system_prompt: str, repeats: int = 5) -> float:
    """Median seconds (of `repeats`) from a user turn's end to the logits of its first reply token, with
    what the session prefills while the agent is silent already in the cache (the system prompt, the
    earlier exchange, the user's message header): the per-turn cost of the system prompt's length. The
    turn's own words are not prefilled beforehand (no incremental prefill, the slow case)."""
    from headstart.llm.stream import with_system_prompt

    prefix = engine.render_prompt(with_system_prompt([*_TTFT_HISTORY, {"role": "user", "content": ""}], system_prompt),
                                  add_generation_prompt=False)
    full = engine.render_prompt(with_system_prompt([*_TTFT_HISTORY, _TTFT_TURN], system_prompt))
    times = []
    for _ in range(repeats):
        engine.reset()
        engine.sync_to(prefix)
        t0 = time.perf_counter()
        int(engine.prefill(full).argmax())
        times.append(time.perf_counter() - t0)
    engine.reset()
    return statistics.median(times)


def _prompt_text(spec: str) -> tuple[str, str]:
    """(name, text) for --prompt: a name in PROMPTS or file:PATH. ValueError otherwise."""
    if spec.startswith("file:"):
        path = Path(spec[5:])
        text = path.read_text(encoding="utf-8").strip()
        if not text:
            raise ValueError(f"--prompt {spec}: the file is empty")
        return path.stem, text
    if spec not in PROMPTS:
        raise ValueError(f"unknown --prompt {spec!r}: use one of {', '.join(PROMPTS)} or file:PATH")
    return spec, PROMPTS[spec]


@dataclass(frozen=True, slots=True)
class AnswersBenchOptions:
    """The options of `headstart bench answers`; their meaning and defaults: its `--help` (headstart/cli/)."""

    model: tuple[str, ...] | None
    prompt: tuple[str, ...] | None
    soft_max_tokens: tuple[int | None, ...] | None
    max_new_tokens: int
    kinds: str
    limit: int | None
    half: str | None
    items: str | None
    threads: int
    dtype: str
    quantize: str
    speculative: str
    all_answers: bool
    json: bool
    history: tuple[str, ...] | None = None
    tools: bool | None = None  # None: on (the session's default)


def main(args: AnswersBenchOptions) -> int:
    def log(message: str) -> None:
        if not args.json:
            print(message, file=sys.stderr, flush=True)

    if args.threads < 1 or args.max_new_tokens < 1 or (args.limit is not None and args.limit < 1):
        print("error: --threads, --max-new-tokens and --limit must be >= 1", file=sys.stderr)
        return 2
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    if not kinds or any(k not in KINDS for k in kinds):
        print(f"error: --kinds takes a comma-separated subset of {','.join(KINDS)}", file=sys.stderr)
        return 2
    try:
        prompts = [_prompt_text(p) for p in (args.prompt or ["current"])]
        items = [i for i in load_items(args.items) if i.kind in kinds]
        if args.half is not None:
            items = [i for i in items if half(i) == args.half]
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.limit is not None:
        items = [i for i in items if [j.kind for j in items[:items.index(i) + 1]].count(i.kind) <= args.limit]
    models = args.model or [LLMConfig().model]
    histories = list(args.history or ["prompt"])
    if any(h not in HISTORY_MODES for h in histories):
        print(f"error: --history takes {' or '.join(HISTORY_MODES)}", file=sys.stderr)
        return 2
    softs = args.soft_max_tokens or [LLMConfig().soft_max_tokens]
    threads = ThreadPlan(torch_threads=args.threads)
    use_tools = args.tools is not False
    if use_tools:
        from headstart.tools.toolbox import warm_up

        warm_up()  # the templates and the unit registry, before the first timed reply

    from transformers.utils import logging as hf_logging

    from headstart.llm.engine import LLMEngine
    from headstart.llm.speculative import build_decoder
    from headstart.llm.stream import llm_executor
    from headstart.models.store import ModelError

    hf_logging.disable_progress_bar()
    quantize = None if args.quantize == "none" else args.quantize
    runs = []
    executor = llm_executor()
    try:
        for model in models:
            base = LLMConfig(model=model, dtype=args.dtype, quantize=quantize, max_new_tokens=args.max_new_tokens,
                             speculative=args.speculative)
            log(f"loading {model} ({args.dtype}, quantize {args.quantize})")
            try:
                engine = LLMEngine.from_config(base, threads)
            except (ModelError, FileNotFoundError, ValueError) as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
            engine.warm_up()
            decoder = build_decoder(engine, base, threads)
            for name, text in prompts:
                prompt_tokens, prefill_s = _session_prefill(engine, text)
                turn_ttft_s = _turn_ttft(engine, text)
                for soft, mode in [(soft, mode) for soft in softs for mode in histories]:
                    config = replace(base, system_prompt=text, soft_max_tokens=soft)
                    log(f"{model} / prompt {name} / soft_max_tokens {soft} / history {mode}: {len(items)} items")
                    stats, verdicts, t0 = _RunStats(), [], time.perf_counter()
                    without: dict[str, Verdict] = {}  # LLM-only items whose conversation had a tool turn
                    for n, item in enumerate(items, 1):
                        verdict = _answer(engine, decoder, config, executor, item, stats, mode, use_tools)
                        verdicts.append(verdict)
                        tool = f" [{verdict.tool.name}]" if verdict.tool is not None else ""
                        log(f"  [{n}/{len(items)}] {'ok  ' if verdict.ok else 'FAIL'} {item.id}{tool}: "
                            f"{verdict.answer!r}")
                        if item.tool is None and any(t is not None for t in verdict.tools):
                            # its prompt (or its reply) differs without tools: answer it again that way
                            without[item.id] = _answer(engine, decoder, config, executor, item, _RunStats(), mode,
                                                       tools=False)
                            log(f"      without tools {'ok  ' if without[item.id].ok else 'FAIL'}: "
                                f"{without[item.id].answer!r}")
                    runs.append(_summary(model, name, text, soft, prompt_tokens, prefill_s, verdicts, stats,
                                         time.perf_counter() - t0, engine, turn_ttft_s)
                                | {"history": mode} | _tool_summary(verdicts, use_tools, without))
            del engine, decoder
    finally:
        executor.shutdown(wait=True)
    result = {"bench": "answers", "items": len(items), "kinds": kinds, "tools": use_tools, "threads": args.threads,
              "dtype": args.dtype, "quantize": args.quantize, "speculative": args.speculative,
              "max_new_tokens": args.max_new_tokens, "runs": [{k: v for k, v in r.items()
                                                               if k not in ("verdicts", "without_verdicts")}
                                                              for r in runs]}
    if not args.json:
        _print_tables(runs, kinds, args.all_answers)
    print(json.dumps(result))
    return 0


def _summary(model, prompt_name, prompt_text, soft, prompt_tokens, prefill_s, verdicts, stats, seconds, engine,
             turn_ttft_s=None):
    by_kind, by_half = {}, {}
    for v in verdicts:
        h = by_half.setdefault(half(v.item), {"right": 0, "total": 0, "form_faults": 0})
        h["total"] += 1
        h["right"] += v.ok
        h["form_faults"] += bool(v.form)
        k = by_kind.setdefault(v.item.kind, {"right": 0, "total": 0, "content_ok": 0, "form_faults": 0})
        k["total"] += 1
        k["right"] += v.ok
        k["content_ok"] += not v.content
        k["form_faults"] += bool(v.form)
    total = len(verdicts)
    form_faults = sum(bool(v.form) for v in verdicts)
    return {
        "model": model, "prompt": prompt_name, "prompt_chars": len(prompt_text), "soft_max_tokens": soft,
        "quantize": engine.quantize, "dtype": str(engine.model.dtype).removeprefix("torch."),
        "score": round(sum(v.ok for v in verdicts) / total, 4) if total else None,
        "right": sum(v.ok for v in verdicts), "total": total,
        "content_score": round(sum(not v.content for v in verdicts) / total, 4) if total else None,
        "form_violations": form_faults, "form_violation_rate": round(form_faults / total, 4) if total else None,
        "by_kind": by_kind, "by_half": by_half,
        "decode_tok_per_s": round(stats.decode_tokens / stats.decode_s, 2) if stats.decode_s else None,
        "reply_tokens_mean": round(statistics.mean(stats.reply_tokens), 1) if stats.reply_tokens else None,
        "ttft_s_median": round(statistics.median(stats.ttft_s), 3) if stats.ttft_s else None,
        "session_prefill_tokens": prompt_tokens, "session_prefill_s": round(prefill_s, 3),
        "turn_ttft_s": None if turn_ttft_s is None else round(turn_ttft_s, 4),
        "seconds": round(seconds, 1),
        "failures": [{"id": v.item.id, "answer": v.answer, "faults": [*v.content, *v.form]}
                     for v in verdicts if not v.ok],
        "verdicts": verdicts,
    }


def _share(verdicts: Sequence[Verdict]) -> dict[str, Any]:
    right = sum(v.ok for v in verdicts)
    return {"right": right, "total": len(verdicts), "score": round(right / len(verdicts), 4) if verdicts else None}


def _tool_summary(verdicts: list[Verdict], tools: bool, without: dict[str, Verdict]) -> dict[str, Any]:
    """The tool figures of a run: the tool items right (all and per tool), the false actions (a tool
    ran for the scored turn of an item that expects none: the target is 0), the LLM-only items' score
    and, with tools on, the same items' score without tools (`without`: those answered again with
    tools off because a tool answered one of their turns; the others' prompts were the same)."""
    tool_items = [v for v in verdicts if v.item.tool is not None]
    per_tool: dict[str, dict[str, int]] = {}
    for v in tool_items:
        row = per_tool.setdefault(str(v.item.tool), {"right": 0, "total": 0})
        row["total"] += 1
        row["right"] += v.ok
    llm_only = [v for v in verdicts if v.item.tool is None]
    out: dict[str, Any] = {
        "tools": tools, "tool_items": _share(tool_items), "tool_items_per_tool": per_tool,
        "false_actions": sum(v.false_action for v in verdicts),
        "false_action_ids": [v.item.id for v in verdicts if v.false_action],
        "llm_only": _share(llm_only),
    }
    if tools:
        out["llm_only_without_tools"] = _share([without.get(v.item.id, v) for v in llm_only]) | {
            "answered_again": sorted(without), "changed": sorted(i for i, w in without.items()
                                                                 if w.ok != next(v.ok for v in llm_only
                                                                                 if v.item.id == i))}
        out["without_verdicts"] = without
    return out


def _print_tables(runs: list[dict], kinds: list[str], all_answers: bool) -> None:
    for r in runs:
        print(f"\nanswers: {r['model']} ({r['dtype']}, {r['quantize'] or 'no quantisation'}), prompt "
              f"{r['prompt']}, soft_max_tokens {r['soft_max_tokens']}, history {r.get('history', 'prompt')}")
        print(f"{'kind':<12}{'items':>6}{'right':>7}{'score':>8}{'content':>9}{'form faults':>13}")
        for kind in kinds:
            k = r["by_kind"].get(kind)
            if k:
                print(f"{kind:<12}{k['total']:>6}{k['right']:>7}{k['right'] / k['total']:>8.0%}"
                      f"{k['content_ok'] / k['total']:>9.0%}{k['form_faults']:>13}")
        print(f"{'all':<12}{r['total']:>6}{r['right']:>7}{r['score']:>8.0%}{r['content_score']:>9.0%}"
              f"{r['form_violations']:>13}")
        for name, h in sorted(r["by_half"].items()):
            print(f"{'half ' + name:<12}{h['total']:>6}{h['right']:>7}{h['right'] / h['total']:>8.0%}{'':>9}"
                  f"{h['form_faults']:>13}")
        _print_tool_lines(r)
        shown = [v for v in r["verdicts"] if all_answers or not v.ok]
        if shown:
            print("answers:" if all_answers else "failures:")
        for v in shown:
            turns = " / ".join(v.item.turns)
            before = "".join(f"\n      earlier reply: {c!r}" for c in v.context)
            faults = "; ".join([*v.content, *v.form]) or "ok"
            tools = "".join(f"\n      turn {k} tool: {t.name} {t.arguments}" for k, t in enumerate(v.tools, 1) if t)
            print(f"  {v.item.id} [{faults}]\n      user: {turns}{before}{tools}\n      reply: {v.answer!r}")
    print(f"\n{'model':<22}{'prompt':<10}{'history':>8}{'soft':>5}{'tools':>6}{'score':>7}{'content':>9}{'form':>6}"
          f"{'tool items':>11}{'false act':>10}{'LLM-only':>9}{'tok/s':>7}"
          f"{'reply tok':>10}{'sys tok':>8}{'sys prefill s':>14}{'turn TTFT s':>12}")
    for r in runs:
        tool_items, llm_only = r["tool_items"], r["llm_only"]
        print(f"{r['model']:<22}{r['prompt']:<10}{r.get('history', 'prompt'):>8}{str(r['soft_max_tokens']):>5}"
              f"{'on' if r['tools'] else 'off':>6}{r['score']:>7.0%}"
              f"{r['content_score']:>9.0%}{r['form_violation_rate']:>6.0%}"
              f"{tool_items['right']:>6}/{tool_items['total']:<4}{r['false_actions']:>10}"
              f"{(llm_only['score'] or 0):>9.0%}{r['decode_tok_per_s'] or 0:>7.2f}"
              f"{r['reply_tokens_mean'] or 0:>10.1f}{r['session_prefill_tokens']:>8}{r['session_prefill_s']:>14.3f}"
              f"{r['turn_ttft_s'] or 0:>12.3f}")
    print()


def _print_tool_lines(r: dict) -> None:
    """The run's tool figures under its table (`_tool_summary`)."""
    t, llm = r["tool_items"], r["llm_only"]
    per_tool = ", ".join(f"{name} {row['right']}/{row['total']}" for name, row in sorted(r["tool_items_per_tool"].items()))
    print(f"tools {'on' if r['tools'] else 'off (--no-tools)'}: tool items right {t['right']} of {t['total']}"
          + (f" ({per_tool})" if per_tool else "") + f"; false actions {r['false_actions']} (target 0)"
          + (f": {', '.join(r['false_action_ids'])}" if r["false_action_ids"] else ""))
    line = f"LLM-only items right {llm['right']} of {llm['total']}" + (f" ({llm['score']:.0%})" if llm["total"] else "")
    off = r.get("llm_only_without_tools")
    if off is not None:
        line += (f"; without tools {off['right']} of {off['total']}" + (f" ({off['score']:.0%})" if off["total"] else "")
                 + f", {len(off['answered_again'])} answered again (a tool answered one of their turns)"
                 + (f", changed: {', '.join(off['changed'])}" if off["changed"] else ""))
    print(line)
    for item_id, w in sorted(r.get("without_verdicts", {}).items()):
        faults = "; ".join([*w.content, *w.form]) or "ok"
        print(f"  {item_id} without tools [{faults}]: {w.answer!r}")
