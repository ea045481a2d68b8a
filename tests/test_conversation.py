"""Conversation (headstart/session/conversation.py): the bounded chat the LLM sees, what an interrupted reply
leaves in the history, and when the next turn continues the last user message."""

from __future__ import annotations

import pytest

from headstart.session.conversation import CONTINUATION_GAP_S, CONTINUATION_MAX_HEARD_S, Conversation
from headstart.timeline import Continuation, TurnTimeline


def test_messages_start_with_the_system_prompt_and_the_window_is_made_once():
    made = []

    class KeepLastTwo:
        def select(self, messages):
            return [messages[0], *messages[1:][-2:]]

    chat = Conversation("be brief", window=lambda: made.append(1) or KeepLastTwo())
    assert made == []  # made on first use (it may count with the LLM's tokenizer)
    chat.add_user("hi")
    assert chat.add_assistant("hello") == 1
    chat.add_user("how are you?")
    assert chat.messages() == [{"role": "system", "content": "be brief"}, {"role": "assistant", "content": "hello"},
                               {"role": "user", "content": "how are you?"}]
    chat.messages()
    assert made == [1]
    unbounded = Conversation("s")
    unbounded.add_user("a")
    assert unbounded.messages() == [{"role": "system", "content": "s"}, {"role": "user", "content": "a"}]


def test_an_interrupted_reply_keeps_only_its_heard_text():
    chat = Conversation("s")
    chat.add_user("tell me a story")
    index = chat.add_assistant("Once upon a time there was a fox.")
    chat.interrupted(index, "Once upon a time")
    assert chat.history[-1] == {"role": "assistant", "content": "Once upon a time"}
    chat.interrupted(index, "")  # nothing heard: the message goes
    assert chat.history == [{"role": "user", "content": "tell me a story"}]
    chat.interrupted(None, "Sure")  # cut off before it finished: its heard part is appended
    assert chat.history[-1] == {"role": "assistant", "content": "Sure"}


def continued(first: str, gap_s: float, played_s: float, reason: str = "barge_in") -> tuple[list, TurnTimeline]:
    chat = Conversation("s")
    chat.add_user(first)
    chat.interrupted(None, "")  # the reply was cut off unheard
    chat.cut_off(10.0, 10.0 + gap_s, played_s, reason)
    turn = TurnTimeline(transcript="will message and then press the pound key.")
    chat.continue_turn(turn)
    return chat.history, turn


def test_speech_soon_after_an_unfinished_turn_continues_it():
    history, turn = continued("After the tone say you're unavailable...", gap_s=0.5, played_s=0.2)
    assert history == []  # the joined message is the turn's: the session adds it
    assert turn.transcript == "After the tone say you're unavailable will message and then press the pound key."
    assert turn.continuation == Continuation("After the tone say you're unavailable")


@pytest.mark.parametrize("first, gap_s, played_s, reason", [
    ("Go forward 10 meters.", 0.5, 0.2, "barge_in"),  # a finished sentence: a new turn
    ("After the tone say you're unavailable...", CONTINUATION_GAP_S + 0.1, 0.2, "barge_in"),  # too late
    ("After the tone say you're unavailable...", 0.5, CONTINUATION_MAX_HEARD_S + 0.1, "barge_in"),  # heard
    ("After the tone say you're unavailable...", 0.5, 0.2, "client"),  # a stop press, not speech
])
def test_otherwise_the_next_turn_is_its_own(first, gap_s, played_s, reason):
    history, turn = continued(first, gap_s, played_s, reason)
    assert history == [{"role": "user", "content": first}]
    assert turn.transcript == "will message and then press the pound key." and turn.continuation is None


def test_no_continuation_and_clear_forget_it():
    chat = Conversation("s")
    chat.add_user("After the tone say...")
    chat.cut_off(1.0, 1.5, 0.0, "new_turn")
    chat.no_continuation()  # the utterance that cut the reply off had no words
    turn = TurnTimeline(transcript="hello")
    chat.continue_turn(turn)
    assert turn.transcript == "hello" and len(chat.history) == 1
    chat.cut_off(1.0, 1.5, 0.0, "new_turn")
    chat.clear()
    chat.add_user("After the tone say...")
    chat.continue_turn(turn)
    assert turn.transcript == "hello" and chat.history == [{"role": "user", "content": "After the tone say..."}]


def test_the_history_window_fits_the_llms_context_and_counts_with_its_tokenizer_on_first_use():
    from dataclasses import replace

    from headstart.config import LLMConfig
    from headstart.session.conversation import history_window
    from headstart.llm.history import TurnWindow, history_budget

    class WordLLM:  # an LLMBackend's counting half: one token per word
        max_positions = 2048

        def __init__(self) -> None:
            self.counted: list[str] = []

        def count_tokens(self, text: str) -> int:
            self.counted.append(text)
            return len(text.split())

    llm, config = WordLLM(), replace(LLMConfig(), system_prompt="Be brief, please.", memory="window")
    make = history_window(llm, config)
    assert llm.counted == []  # nothing counted until the window is made
    window = make()
    assert isinstance(window, TurnWindow) and llm.counted == ["Be brief, please."]
    assert window.max_tokens == history_budget("auto", 2048, config.max_new_tokens, 3)
    assert history_window(llm, replace(config, max_history_tokens=None))() is None  # "none": everything
    assert history_window(llm, replace(config, max_history_tokens=300))().max_tokens == 300


def test_the_default_memory_compacts_within_the_context_and_falls_back_to_the_window_without_a_summariser():
    from headstart.config import LLMConfig
    from headstart.llm.history import TurnWindow, history_budget
    from headstart.llm.memory import CompactedHistory
    from headstart.session.conversation import history_window

    class WordLLM:
        max_positions = 2048

        def count_tokens(self, text: str) -> int:
            return len(text.split())

    config = LLMConfig(max_history_tokens=300)
    assert config.memory == "summary"  # chosen with `headstart bench memory` (docs/llm.md)
    memory = history_window(WordLLM(), config)()
    fits = history_budget("auto", 2048, config.max_new_tokens, len(config.system_prompt.split()))
    assert isinstance(memory, CompactedHistory) and memory.max_tokens == 300 and memory.hard_max_tokens == 600 <= fits
    assert isinstance(history_window(WordLLM(), config, can_summarise=False)(), TurnWindow)  # a remote LLM
    assert history_window(WordLLM(), LLMConfig(memory="off"))() is None
    with pytest.raises(ValueError, match="memory"):
        history_window(WordLLM(), LLMConfig(memory="everything"))


def test_dropped_turns_counts_what_the_window_left_out():
    from headstart.llm.history import TurnWindow

    chat = Conversation("s", window=lambda: TurnWindow(12, lambda text: len(text.split())))
    assert chat.dropped_turns == 0  # no window made yet
    for k in range(4):
        chat.add_user(f"question number {k} here")
        chat.add_assistant(f"answer number {k} here")
    kept = chat.messages()
    assert chat.dropped_turns >= 1 and len(kept) < 1 + len(chat.history)
    assert Conversation("s").dropped_turns == 0  # unbounded: nothing dropped
