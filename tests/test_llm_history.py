"""The bounded chat-history policy (headstart/llm/history.py): whole turns, between turns, flat."""

from __future__ import annotations

import pytest

from headstart.llm.history import MESSAGE_OVERHEAD_TOKENS, TurnWindow, split_turns

SYSTEM = {"role": "system", "content": "You are terse."}


def words(text: str) -> int:
    return len(text.split())


def chat(n_turns: int, open_user: str | None = None) -> list[dict]:
    msgs = [SYSTEM]
    for i in range(n_turns):
        msgs.append({"role": "user", "content": f"question {i} " + "w " * 10})
        msgs.append({"role": "assistant", "content": f"answer {i} " + "w " * 20})
    if open_user is not None:
        msgs.append({"role": "user", "content": open_user})
    return msgs


def turn_cost() -> int:
    return (12 + MESSAGE_OVERHEAD_TOKENS) + (22 + MESSAGE_OVERHEAD_TOKENS)


def test_split_turns_groups_replies_with_their_user_message():
    sinks, turns = split_turns([SYSTEM, {"role": "assistant", "content": "hi"}, {"role": "user", "content": "a"},
                                {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"},
                                {"role": "user", "content": "d"}])
    assert sinks == [SYSTEM]
    assert [[m["content"] for m in t] for t in turns] == [["hi"], ["a", "b"], ["c"], ["d"]]


def test_under_budget_everything_is_kept_unchanged():
    window = TurnWindow(10_000, words)
    msgs = chat(5, "now")
    assert window.select(msgs) == msgs
    assert window.evictions == 0


def test_over_budget_drops_whole_old_turns_keeps_system_and_current_turn():
    window = TurnWindow(4 * turn_cost(), words, low_water=0.5)
    msgs = chat(6, "the question in progress")
    kept = window.select(msgs)
    assert kept[0] == SYSTEM
    assert kept[-1] == msgs[-1]
    # whole turns only: user/assistant alternate after the system prompt and come from the newest turns
    body = kept[1:-1]
    assert [m["role"] for m in body] == ["user", "assistant"] * (len(body) // 2)
    assert body == msgs[len(msgs) - 1 - len(body) : -1]
    assert sum(words(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in body) <= 0.5 * 4 * turn_cost()
    assert window.evictions == 1


def test_current_turn_growth_never_moves_the_cut_within_a_turn():
    window = TurnWindow(3 * turn_cost(), words)
    base = chat(8)
    prefixes = set()
    for partial in ["what", "what is the", "what is the time " + "x " * 500]:  # even a huge partial
        kept = window.select([*base, {"role": "user", "content": partial}])
        prefixes.add(tuple(m["content"] for m in kept[:-1]))
    assert len(prefixes) == 1


def test_cut_moves_only_forward_and_only_when_over_budget():
    window = TurnWindow(6 * turn_cost(), words, low_water=0.5)
    firsts, evictions = [], []
    for n in range(1, 40):
        kept = window.select(chat(n, "next"))
        firsts.append(kept[1]["content"])
        evictions.append(window.evictions)
    dropped = [int(f.split()[1]) for f in firsts]
    assert dropped == sorted(dropped)  # monotone
    # the prefix changes only at an eviction (so incremental prefill reuses the cache in between)
    changes = sum(1 for a, b in zip(firsts, firsts[1:]) if a != b)
    assert changes == window.evictions
    assert 3 <= window.evictions <= 15  # with low water 0.5: about every 3 turns, not every turn


def test_memory_flat_over_200_turns():
    budget = 5 * turn_cost()
    window = TurnWindow(budget, words)
    sizes = []
    for n in range(1, 201):
        kept = window.select(chat(n, "next"))
        sizes.append(sum(words(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in kept[1:-1]))
    assert max(sizes) <= budget
    assert max(sizes[100:]) == max(sizes[20:40])  # no growth after warm-up: flat


def test_a_cleared_history_starts_the_window_again():
    window = TurnWindow(2 * turn_cost(), words)
    window.select(chat(10, "q"))
    assert window.dropped_turns > 0
    fresh = chat(1, "hello again")
    fresh[1] = {"role": "user", "content": "a different first question"}
    assert window.select(fresh) == fresh
    assert window.dropped_turns == 0


def test_an_oversized_single_turn_is_dropped_but_the_current_turn_stays():
    window = TurnWindow(50, words)
    msgs = [SYSTEM, {"role": "user", "content": "x " * 200}, {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "y " * 200}]
    assert window.select(msgs) == [SYSTEM, msgs[-1]]


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, None])
def test_bad_budget_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="max_tokens"):
        TurnWindow(bad, words)


@pytest.mark.parametrize("bad", [0.0, 1.5, -1])
def test_bad_low_water_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="low_water"):
        TurnWindow(100, words, low_water=bad)


def test_session_messages_are_bounded_when_configured():
    import asyncio
    from dataclasses import replace

    from headstart.clock import FakeClock
    from headstart.session.components import Components
    from headstart.config import LLMConfig, PipelineConfig
    from headstart.llm.history import approx_token_count
    from fakes import ScriptedListener
    from headstart.session.session import Session

    class NoTokenizerEngine:  # e.g. a remote engine: the window counts with the 4-characters estimate
        max_positions = None

        def count_tokens(self, text: str) -> int:
            return approx_token_count(text)

        def reply_stream(self, messages, config, executor, clock=None):
            raise AssertionError("no reply in this test")

        def live_turn(self, messages_before, config, executor, clock=None):
            raise AssertionError("no turn in this test")

        def warm_up(self) -> None:
            pass

    def messages_after(n_turns: int, budget: int | None) -> list[dict]:
        config = replace(PipelineConfig(), llm=LLMConfig(max_history_tokens=budget))
        components = Components(config=config, asr=None, llm=NoTokenizerEngine(), tts=None)

        async def main():
            session = Session(components, clock=FakeClock(), listener=lambda *scorers: ScriptedListener([], *scorers))
            out = []
            for i in range(n_turns):
                session.history += [{"role": "user", "content": f"question {i} about something"},
                                    {"role": "assistant", "content": f"answer {i}, a sentence or so long."}]
                out.append(session.conversation.messages())  # the chat the next prompt renders
            await session.aclose()
            return out

        return asyncio.run(main())

    unbounded = messages_after(200, None)
    assert len(unbounded[-1]) == 401  # unchanged default: everything
    bounded = messages_after(200, 300)
    sizes = [sum(approx_token_count(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in msgs[1:]) for msgs in bounded]
    assert max(sizes) <= 300 and max(sizes[100:]) <= max(sizes[:50])
    assert all(msgs[0]["role"] == "system" for msgs in bounded)
    assert bounded[-1][-1] == unbounded[-1][-1]  # the newest turn is always there


def test_the_default_budget_is_the_context_minus_the_reply_and_the_turn_in_progress():
    from headstart.config import LLMConfig
    from headstart.llm.history import (
        FALLBACK_CONTEXT_TOKENS,
        TURN_HEADROOM_TOKENS,
        history_budget,
        parse_history_setting,
    )

    assert LLMConfig().max_history_tokens == "auto"  # bounded by default
    room = MESSAGE_OVERHEAD_TOKENS + TURN_HEADROOM_TOKENS
    assert history_budget("auto", 8192, 60, 40) == 8192 - 60 - 40 - room
    assert history_budget("auto", None, 60, 40) == FALLBACK_CONTEXT_TOKENS - 60 - 40 - room  # a remote engine
    assert history_budget("auto", 300, 60, 40) == 64  # a tiny context still keeps the last turn or so
    assert history_budget(512, 8192, 60, 40) == 512 and history_budget(None, 8192, 60, 40) is None
    assert [parse_history_setting(v) for v in ("auto", "AUTO", "none", None, "512", 512)] == \
        ["auto", "auto", None, None, 512, 512]
    for bad in ("0", "-5", "many", 1.5, True, ""):
        with pytest.raises(ValueError, match="max history tokens"):
            parse_history_setting(bad)
