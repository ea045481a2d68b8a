"""Asking back: a final transcript the recogniser was unsure of (its mean word probability under
`SessionConfig.ask_back_below`) gets "Sorry, could you say that again?" instead of the LLM's answer,
held or confirmed; a confident one gets the answer. Through the Session with a scripted listener, LLM
and voice (tests/fakes.py, the rig of tests/test_session_tools.py)."""

from __future__ import annotations

import pytest
from test_session_tools import Rig, run, turn_script

from headstart.events import FinalTranscript
from headstart.session.ask_back import ASK_BACK_TEXT, asks_back

QUESTION = "What is the opposite of heart?"


def script(confidence: float | None) -> list:
    """The turn of tests/test_session_tools.py with the final's confidence set."""
    out = []
    for at_s, event in turn_script(QUESTION, words=("What is the", "opposite of heart?")):
        if isinstance(event, FinalTranscript):
            event = FinalTranscript(event.text, event.audio_end_s, confidence)
        out.append((at_s, event))
    return out


def test_the_policy_asks_back_only_under_the_threshold_with_words():
    assert asks_back(0.5, "What is the opposite of heart?", 0.7)
    assert not asks_back(0.9, "What is the opposite of heart?", 0.7)
    assert not asks_back(None, "What is the opposite of heart?", 0.7)  # unknown: answer
    assert not asks_back(0.5, "What is the opposite of heart?", None)  # off
    assert not asks_back(0.5, "um, uh", 0.7)  # no words: no turn at all


@pytest.mark.parametrize("head_start", [True, False])
def test_an_unsure_final_gets_the_ask_back_not_the_llm_answer(tmp_path, head_start):
    rig = Rig(tmp_path, script(0.55), answers={QUESTION: "Brain."}, head_start=head_start)
    run(rig, 2.0)
    assert rig.spoken() == ASK_BACK_TEXT
    (turn,) = rig.turns()
    assert turn.timeline.asr_confidence == 0.55
    assert rig.session.history[-2:] == [{"role": "user", "content": QUESTION},
                                        {"role": "assistant", "content": ASK_BACK_TEXT}]
    if head_start:  # the reply held on the pause's partial was the LLM's; the final held the ask-back
        assert turn.timeline.head_start is not None and turn.timeline.head_start.preemptive == "hit"


@pytest.mark.parametrize("confidence", [0.93, None])
def test_a_sure_or_unknown_final_gets_the_answer(tmp_path, confidence):
    rig = Rig(tmp_path, script(confidence), answers={QUESTION: "Cold."})
    run(rig, 2.0)
    assert rig.spoken() == "Cold."
