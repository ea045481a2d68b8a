"""Compacted history (headstart/llm/memory.py): when and which turns are compacted, frozen blocks, and a
prompt that stays a stable prefix between compactions."""

from __future__ import annotations

import pytest

from headstart.llm.history import MESSAGE_OVERHEAD_TOKENS
from headstart.llm.memory import (
    MEMORY_HEADER,
    CompactedHistory,
    Compaction,
    CompactionPolicy,
    clean_notes,
    parse_memory_setting,
    summary_messages,
)

SYSTEM = {"role": "system", "content": "You are terse."}


def words(text: str) -> int:
    return len(text.split())


def turn(i: int) -> list[dict]:
    return [{"role": "user", "content": f"question {i} " + "w " * 8},
            {"role": "assistant", "content": f"answer {i} " + "w " * 8}]


TURN = 2 * (10 + MESSAGE_OVERHEAD_TOKENS)  # one turn's tokens in the `words` count


def chat(n: int, open_user: str | None = None) -> list[dict]:
    msgs = [SYSTEM]
    for i in range(n):
        msgs += turn(i)
    if open_user is not None:
        msgs.append({"role": "user", "content": open_user})
    return msgs


# -- the policy ------------------------------------------------------------------------------------

def test_nothing_is_due_while_memory_and_turns_fit_the_budget():
    policy = CompactionPolicy(100)
    assert policy.plan([], [20, 30, 40]) is None
    assert policy.plan([10], [30, 30, 30]) is None


def test_past_the_budget_the_oldest_turns_are_compacted_down_to_the_low_water_mark():
    policy = CompactionPolicy(100, low_water=0.5, block_tokens=20)
    plan = policy.plan([], [30, 30, 30, 30])  # 120 > 100
    # memory 0 + the new block 20 + the kept turns must fit 50: keep one turn (20 + 30)
    assert plan == Compaction(0, 3, 20, 0, 0)


def test_the_newest_turn_always_stays_verbatim():
    policy = CompactionPolicy(100, low_water=0.5, block_tokens=20)
    assert policy.plan([], [200]) is None  # one huge turn: nothing to compact
    assert policy.plan([], [10, 200]) == Compaction(0, 1, 20, 0, 0)


def test_memory_past_its_share_forgets_its_oldest_blocks_first():
    policy = CompactionPolicy(100, low_water=0.5, block_tokens=20, memory_share=0.5)
    plan = policy.plan([20, 20], [30, 31])  # over 100; memory 40 + a new block 20 > 50
    assert plan is not None and plan.forget == 1 and plan.blocks == 2


def test_the_block_cap_is_a_quarter_of_a_small_budget():
    assert CompactionPolicy(80, block_tokens=64).block_cap == 20
    assert CompactionPolicy(40, block_tokens=64).block_cap == 16  # never below 16
    assert CompactionPolicy(1000, block_tokens=64).block_cap == 64


@pytest.mark.parametrize("kwargs", [{"max_tokens": 0}, {"max_tokens": 10, "low_water": 0.0},
                                    {"max_tokens": 10, "memory_share": 1.5}, {"max_tokens": 10, "keep_recent": -1}])
def test_bad_policy_settings_are_clear_errors(kwargs):
    with pytest.raises(ValueError):
        CompactionPolicy(**kwargs)


def test_the_memory_setting_is_checked():
    assert parse_memory_setting("Summary") == "summary"
    with pytest.raises(ValueError, match="off, window, summary"):
        parse_memory_setting("all")


# -- the history ----------------------------------------------------------------------------------

def compacted(budget: int = 4 * TURN) -> CompactedHistory:
    return CompactedHistory(budget, words, block_tokens=12)


def test_under_budget_the_messages_are_unchanged_and_nothing_is_due():
    history = compacted()
    msgs = chat(3, "now")
    assert history.select(msgs) == msgs
    assert history.due(chat(3)) is None


def test_a_compaction_replaces_old_turns_by_a_frozen_note_in_the_system_message():
    history = compacted()
    msgs = chat(6)
    plan = history.due(msgs)
    assert plan is not None and plan.start == 0 and plan.stop >= 1
    summary = history.summary_messages(msgs, plan, "Notes please:\n{lines}")
    assert [m["role"] for m in summary] == ["system", "user"]
    # the user's words of the compacted turns, oldest first, one line each; the replies are left out
    assert summary[1]["content"] == "Notes please:\n" + "\n".join(f"- question {i}" + " w" * 8 for i in range(plan.stop))
    assert history.commit(msgs, plan, "The user asked questions.\n")
    selected = history.select([*msgs, {"role": "user", "content": "next"}])
    assert selected[0] == {"role": "system", "content": SYSTEM["content"] + MEMORY_HEADER + "\nThe user asked questions."}
    assert selected[1:-1] == [m for i in range(plan.stop, 6) for m in turn(i)]
    assert history.dropped_turns == plan.stop and history.compactions == 1


def test_the_prompt_is_a_stable_prefix_across_turns_until_the_next_compaction():
    history = compacted()
    msgs, prompts, notes = chat(0), [], 0
    for i in range(40):
        msgs = [*msgs, *turn(i)]
        plan = history.due(msgs)
        if plan is not None:
            assert history.commit(msgs, plan, f"note {notes}.")
            notes += 1
            prompts.append(None)  # a compaction: the one place the prefix may change
        prompts.append(history.select([*msgs, {"role": "user", "content": "partial"}])[:-1])
    assert notes >= 3
    for before, after in zip(prompts, prompts[1:]):
        if before is not None and after is not None:
            assert after[: len(before)] == before  # the next turn's chat extends this one's exactly
    # earlier notes are never rewritten: each compaction only appends to the system message
    systems = [p[0]["content"] for p in prompts if p is not None]
    for before, after in zip(systems, systems[1:]):
        assert after.startswith(before) or "note 0." not in after  # appended, or the oldest was forgotten


def test_the_prompt_stays_flat_over_200_turns():
    history = compacted()
    msgs, sizes = chat(0), []
    for i in range(200):
        msgs = [*msgs, *turn(i)]
        plan = history.due(msgs)
        if plan is not None:
            assert history.commit(msgs, plan, "a short note of the old turns.")
        selected = history.select(msgs)
        sizes.append(sum(words(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in selected[1:])
                     + history.memory_tokens)
    assert max(sizes) <= 4 * TURN + 12 and max(sizes[100:]) <= max(sizes[:100])
    assert history.memory_tokens <= 0.5 * 4 * TURN  # old blocks are forgotten past the memory's share
    assert history.blocks[0].text == "a short note of the old turns." and history.compactions > len(history.blocks)


def test_a_result_for_a_history_that_moved_is_refused():
    history = compacted()
    msgs = chat(6)
    plan = history.due(msgs)
    assert plan is not None
    assert history.commit(msgs, plan, "first note.")
    assert not history.commit(msgs, plan, "the same plan again.")  # the memory moved on
    assert [b.text for b in history.blocks] == ["first note."]


def test_turns_with_nothing_to_note_leave_with_no_block_and_no_summariser_call():
    history = compacted()
    msgs = [SYSTEM]
    for i in range(6):
        msgs += [{"role": "user", "content": f"what is {i} plus " + "w " * 8 + "?"},
                 {"role": "assistant", "content": f"answer {i} " + "w " * 8}]
    plan = history.due(msgs)
    assert plan is not None and history.summary_messages(msgs, plan) is None  # questions only: no facts
    assert history.commit(msgs, plan, "")
    assert history.blocks == [] and history.dropped_turns == plan.stop


def test_a_cleared_history_forgets_the_memory():
    history = compacted()
    msgs = chat(6)
    plan = history.due(msgs)
    assert plan is not None and history.commit(msgs, plan, "note.")
    fresh = chat(1)
    fresh[1] = {"role": "user", "content": "a new conversation"}
    assert history.select(fresh) == fresh
    assert history.blocks == [] and history.dropped_turns == 0


def test_past_the_hard_limit_old_turns_are_dropped_unsummarised():
    history = CompactedHistory(2 * TURN, words, hard_max_tokens=3 * TURN)
    msgs = chat(10, "now")  # no compaction ever ran
    selected = history.select(msgs)
    assert selected[0] == SYSTEM and selected[-1]["content"] == "now"
    assert len(selected) == 1 + 2 * 3 + 1 and history.forced_drops == 7


def test_notes_are_cleaned_of_blank_lines_and_a_line_cut_by_the_cap():
    assert clean_notes("\n- Name: Ada.\n\n- Car: level 4.\n- Sister: Lu") == "- Name: Ada.\n- Car: level 4."
    assert clean_notes("Name: Ada") == "Name: Ada"
    assert summary_messages([turn(0)], "Go: {lines}")[-1] == {"role": "user", "content": "Go: - question 0" + " w" * 8}
    with pytest.raises(ValueError, match="lines"):
        summary_messages([turn(0)], "no placeholder")
    asked = [{"role": "user", "content": "Where is it?"}, {"role": "assistant", "content": "There."}]
    said = [{"role": "user", "content": "I parked on  level 4."}, {"role": "assistant", "content": "Okay."}]
    assert summary_messages([asked]) is None
    assert "- I parked on level 4." in summary_messages([asked, said])[1]["content"]  # type: ignore[index]
