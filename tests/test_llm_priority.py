"""LLMPriority (headstart/session/llm_lane.py): confirmed replies first on the shared llm thread; held work of
other owners is told, its own owner's is not; a reply that never ran stops counting."""

from __future__ import annotations

import threading

from headstart.session.components import Components
from headstart.config import PipelineConfig
from headstart.session.llm_lane import LLMPriority


def test_a_confirmed_reply_is_pending_until_its_llm_work_starts():
    priority = LLMPriority()
    assert not priority.confirmed_pending
    priority.confirm("session-a", "r1")
    assert priority.confirmed_pending and priority.num_waiting == 1
    priority.started("r1")
    assert not priority.confirmed_pending and priority.num_waiting == 0
    priority.started("r1")  # idempotent
    priority.started("unknown")
    assert not priority.confirmed_pending


def test_a_reply_cancelled_before_it_ran_no_longer_counts_and_is_forgotten():
    priority = LLMPriority()
    alive = {"r1": True}
    priority.confirm("a", "r1", lambda: alive["r1"])
    assert priority.confirmed_pending
    alive["r1"] = False  # its task was cancelled before it ever ran: `started` never comes
    assert not priority.confirmed_pending
    priority.confirm("a", "r2")
    assert priority.num_waiting == 1  # r1 was pruned when r2 came


def test_held_work_of_other_owners_is_told_in_order_and_can_unsubscribe():
    priority = LLMPriority()
    told: list[str] = []
    cancel_b = priority.subscribe("b", lambda: told.append("b"))
    priority.subscribe("c", lambda: told.append("c"))
    priority.subscribe("a", lambda: told.append("a"))
    priority.confirm("a", "r1")
    assert told == ["b", "c"]  # never the confirming owner's own held work
    cancel_b()
    cancel_b()  # idempotent
    priority.confirm("c", "r2")
    assert told == ["b", "c", "a"]


def test_a_subscriber_may_unsubscribe_from_its_callback():
    priority = LLMPriority()
    told: list[str] = []
    cancel = None

    def drop() -> None:
        told.append("dropped")
        cancel()

    cancel = priority.subscribe("b", drop)
    priority.confirm("a", "r1")
    priority.confirm("a", "r2")
    assert told == ["dropped"]


def test_pending_is_readable_from_another_thread_and_shared_by_components():
    priority = LLMPriority()
    priority.confirm("a", "r1")
    seen: list[bool] = []
    t = threading.Thread(target=lambda: seen.append(priority.confirmed_pending))
    t.start()
    t.join(5)
    assert seen == [True]
    components = Components(config=PipelineConfig(), asr=None, llm=None, tts=None)
    try:
        assert isinstance(components.llm_priority, LLMPriority)
        other = Components(config=PipelineConfig(), asr=None, llm=None, tts=None)
        assert other.llm_priority is not components.llm_priority  # one per process's Components
        other.close()
    finally:
        components.close()
