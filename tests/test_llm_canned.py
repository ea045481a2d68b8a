"""The prompt history leaves out the turns a fixed reply answered (headstart/llm/canned.py), so one
refusal does not make a small model refuse the rest of the conversation; the session's own history
keeps them."""

from __future__ import annotations

from headstart.config import LLMConfig
from headstart.llm.canned import ASK_BACK_TEXT, REFUSAL_TEXT, is_canned, without_canned_turns
from headstart.session.conversation import Conversation

SYSTEM = {"role": "system", "content": "Be brief."}


def chat(*pairs: tuple[str, str | None]) -> list[dict[str, str]]:
    out = [SYSTEM]
    for user, reply in pairs:
        out.append({"role": "user", "content": user})
        if reply is not None:
            out.append({"role": "assistant", "content": reply})
    return out


def test_the_default_system_prompt_quotes_the_fixed_replies_it_means():
    prompt = LLMConfig().system_prompt
    assert f'"{REFUSAL_TEXT}"' in prompt and f'"{ASK_BACK_TEXT}"' in prompt


def test_a_fixed_reply_is_recognised_whatever_its_case_spacing_or_punctuation():
    assert is_canned("sorry, I can't do that -- I can only talk")
    assert is_canned("Sorry,  could you say that again")
    assert not is_canned("Sorry, I can't do that, I can only talk. But Paris is the capital.")
    assert not is_canned("") and not is_canned("Paris.")


def test_turns_a_fixed_reply_answered_leave_the_prompt_and_nothing_else_does():
    messages = chat(("Turn off the lights.", REFUSAL_TEXT), ("What is the capital of France?", "Paris."),
                    ("Purple monkey, er", ASK_BACK_TEXT), ("How many legs does a spider have?", None))
    assert without_canned_turns(messages) == chat(("What is the capital of France?", "Paris."),
                                                  ("How many legs does a spider have?", None))
    # the turn in progress stays even when its text is a fixed reply's; an answered turn stays
    assert without_canned_turns(chat(("Sorry, could you say that again?", None))) == \
        chat(("Sorry, could you say that again?", None))
    assert without_canned_turns(chat(("Hi", "Hello!"))) == chat(("Hi", "Hello!"))


def test_the_conversation_keeps_every_turn_but_its_prompt_leaves_the_fixed_replies_out():
    conversation = Conversation("Be brief.")
    for user, reply in (("Play some jazz.", REFUSAL_TEXT), ("Who wrote Hamlet?", "Shakespeare.")):
        conversation.add_user(user)
        conversation.add_assistant(reply)
    conversation.add_user("And Macbeth?")
    assert len(conversation.history) == 5  # what the user said and heard
    assert conversation.messages() == chat(("Who wrote Hamlet?", "Shakespeare."), ("And Macbeth?", None))
    # the same history renders the same prompt: the KV cache's prefix stays put between turns
    assert conversation.messages() == conversation.messages()
