"""Compaction keeps the LLM exact (headstart/llm/memory.py with the real smollm2-135m): after a
compaction has rewritten the system message, the turn's incremental prefill (partials, then the final)
on a cache that still holds the old, uncompacted prompt, the held reply, and speculative decoding
(prompt lookup) give the tokens of plain greedy decoding from an empty cache."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from headstart.clock import FakeClock
from headstart.config import LLMConfig
from headstart.llm.memory import MEMORY_HEADER, CompactedHistory
from headstart.llm.stream import ReplyDone, with_system_prompt

pytestmark = pytest.mark.models

FACTS = ["My name is Ada.", "My car is on level four.", "I am allergic to cats.", "My sister is called Lu.",
         "I grew up in Leeds.", "My dog is called Rex.", "I work at the bakery.", "Tomorrow is my birthday."]
NOTES = "The user is called Ada. Her car is on level four. She is allergic to cats."
QUESTION = "What is my name and where is my car?"


async def _text(stream) -> tuple[str, int]:
    last = None
    async for event in stream:
        last = event
    assert isinstance(last, ReplyDone)
    return last.text, last.num_tokens


def test_after_a_compaction_the_live_turn_and_speculative_decoding_equal_plain_greedy(smollm2_engine, llm_pool):
    from headstart.llm.local import LocalLLM
    from headstart.llm.speculative import Decoder, PromptLookupDrafter

    engine = smollm2_engine
    llm = LocalLLM(engine, Decoder(engine, PromptLookupDrafter(), speculate_k=4))
    base = replace(LLMConfig(model="smollm2-135m"), max_new_tokens=16, soft_max_tokens=None,
                   system_prompt="You are a helpful assistant. Answer in one sentence.")
    speculative, plain = replace(base, speculative="prompt_lookup"), replace(base, speculative="none")
    chat = with_system_prompt([m for i, fact in enumerate(FACTS)
                               for m in ({"role": "user", "content": fact},
                                         {"role": "assistant", "content": f"Noted, fact {i + 1}."})],
                              base.system_prompt)
    history = CompactedHistory(120, engine.count_tokens)
    before = history.select(chat)
    plan = history.due(chat)
    assert plan is not None and history.commit(chat, plan, NOTES)
    after = history.select(chat)
    assert MEMORY_HEADER in after[0]["content"] and len(after) < len(before)

    async def main() -> dict[str, tuple[str, int]]:
        out = {}
        # the previous turn ran on the uncompacted chat: the cache holds that prompt
        old = llm.live_turn(before, speculative, llm_pool, FakeClock())
        old.update("Where do I")
        out["old"] = await _text(old.reply("Where do I work?"))
        # the next turn opens on the compacted chat: partials prefill, the reply is held, then released
        live = llm.live_turn(after, speculative, llm_pool, FakeClock())
        live.update("")
        live.update("What is my")
        live.update("What is my name and where")
        out["live"] = await _text(live.reply(QUESTION))
        engine.reset()
        out["plain"] = await _text(llm.reply_stream([*after, {"role": "user", "content": QUESTION}], plain,
                                                    llm_pool, FakeClock()))
        engine.reset()
        out["speculative"] = await _text(llm.reply_stream([*after, {"role": "user", "content": QUESTION}],
                                                          speculative, llm_pool, FakeClock()))
        return out

    replies = asyncio.run(main())
    assert replies["plain"][1] >= 4, replies  # a reply long enough to compare
    assert replies["live"] == replies["plain"], replies
    assert replies["speculative"] == replies["plain"], replies
