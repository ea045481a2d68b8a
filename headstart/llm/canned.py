"""The assistant's fixed replies, and the prompt history without the turns they answered.

A small model copies what its context shows: after one "Sorry, I can't do that, I can only talk." in
the history, qwen2.5-coder 0.5b and 1.5b refused every later turn of the conversation, questions they
answer in a fresh one included (`headstart bench answers --kinds mixed`: docs/llm.md "No lock-in").
A turn answered with a fixed reply tells the model nothing it needs later, so the prompt's history
leaves it out; the session's own history (what the user sees) keeps it.

A plain function of the messages: the same history gives the same prompt, so the KV cache's prefix
and the held reply's check (the chat it was conditioned on) stay exact.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from headstart.llm.history import split_turns

__all__ = ["ASK_BACK_TEXT", "CANNED_REPLIES", "REFUSAL_TEXT", "is_canned", "without_canned_turns"]

# the refusal the default system prompt quotes (LLMConfig.system_prompt) and the ask-back it quotes,
# which the session also speaks itself when the recogniser was unsure (session/ask_back.py)
REFUSAL_TEXT = "Sorry, I can't do that, I can only talk."
ASK_BACK_TEXT = "Sorry, could you say that again?"
CANNED_REPLIES = (REFUSAL_TEXT, ASK_BACK_TEXT)

_NOT_WORD = re.compile(r"[^a-z0-9']+")


def _key(text: str) -> str:
    return _NOT_WORD.sub(" ", text.lower().replace("\u2019", "'")).strip()


def is_canned(text: str, canned: Iterable[str] = CANNED_REPLIES) -> bool:
    """Whether the reply `text` is one of the `canned` replies, case, spacing and punctuation aside."""
    key = _key(text)
    return bool(key) and any(key == _key(c) for c in canned)


def without_canned_turns(messages: Sequence[Mapping[str, str]],
                         canned: Iterable[str] = CANNED_REPLIES) -> list[dict[str, str]]:
    """`messages` without the completed turns (a user message and its replies) whose only reply is a
    canned one (`is_canned`). System messages and the turn in progress (a user message with no reply
    yet) always stay; the order is kept."""
    canned = tuple(canned)
    sinks, turns = split_turns(messages)
    out = [*sinks]
    for turn in turns:
        replies = [m for m in turn if m.get("role") == "assistant"]
        if turn[0].get("role") == "user" and len(replies) == 1 and len(turn) == 2 \
                and is_canned(replies[0].get("content", ""), canned):
            continue
        out.extend(turn)
    return out
