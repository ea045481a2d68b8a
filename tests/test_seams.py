"""The typed seams (headstart/seams.py): the local engine (SmolLM2-135M, the small real LLM) and the
remote one are both an `LLMBackend` the session calls the same way; every synthesiser and recogniser
offers what `Synthesizer` and `Transcriber` ask."""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import replace

import pytest

from headstart.clock import FakeClock
from headstart.config import LLMConfig
from headstart.events import ReplyDone, TokenDelta
from headstart.seams import LLMBackend, LLMReplyStream, LLMTurn, Synthesizer, Transcriber

MESSAGES = [{"role": "user", "content": "Say hello."}]


async def collect(stream) -> list:
    return [event async for event in stream]


def test_the_local_engine_is_an_llm_backend(smollm2_engine, llm_pool):
    engine = smollm2_engine
    # a system prompt of the test's own: the default one asks for short replies, and under it the
    # greedy reply to MESSAGES is "Hello." (2 tokens, then EOS): too short to compare 4 decode steps
    config = replace(LLMConfig(model="smollm2-135m"), max_new_tokens=4, system_prompt="You are a helpful assistant.")
    assert isinstance(engine, LLMBackend)
    assert isinstance(engine.max_positions, int) and engine.max_positions > 0
    text = "The quick brown fox."
    assert engine.count_tokens(text) == len(engine.tokenizer(text, add_special_tokens=False)["input_ids"]) > 0

    async def main():
        stream = engine.reply_stream(MESSAGES, config, llm_pool, FakeClock(), decoder=None)
        assert isinstance(stream, LLMReplyStream)
        direct = await collect(stream)
        turn = engine.live_turn([], config, llm_pool, FakeClock(), decoder=None)
        assert isinstance(turn, LLMTurn)
        turn.update("Say")
        via_turn = await collect(turn.reply("Say hello."))
        return direct, via_turn

    direct, via_turn = asyncio.run(main())
    for events in (direct, via_turn):
        assert isinstance(events[-1], ReplyDone) and all(isinstance(e, TokenDelta) for e in events[:-1])
    # the same greedy reply whichever way the session asks (the turn prefilled the user's words first)
    assert direct[-1].text == via_turn[-1].text and direct[-1].num_tokens == 4 and direct[-1].reason == "max_tokens"


def test_the_remote_engine_is_an_llm_backend():
    from headstart.llm.history import approx_token_count
    from headstart.llm.remote import RemoteLLM

    llm = RemoteLLM.from_url("openai://127.0.0.1:9/some-model")
    assert isinstance(llm, LLMBackend)
    assert llm.max_positions is None and llm.count_tokens("The quick brown fox.") == approx_token_count("The quick brown fox.")
    for name in ("reply_stream", "live_turn"):  # called with the same arguments as the local engine
        seam = list(inspect.signature(getattr(LLMBackend, name)).parameters)[1:]
        params = inspect.signature(getattr(llm, name)).parameters
        assert list(params) == seam and params["decoder"].kind is inspect.Parameter.KEYWORD_ONLY, name


@pytest.mark.parametrize("module, name", [
    ("headstart.tts.piper", "PiperSynthesizer"), ("headstart.tts.espeak", "EspeakSynthesizer"),
    ("headstart.tts.hibari", "HibariSynthesizer"), ("headstart.tts.coqui", "CoquiSynthesizer"),
])
def test_every_synthesizer_offers_the_seam(module, name):
    import importlib

    cls = getattr(importlib.import_module(module), name)
    for method in ("synthesize", "warm_up"):
        assert callable(getattr(cls, method, None)), f"{name}.{method}"
    assert list(inspect.signature(cls.synthesize).parameters) == ["self", "text"]
    assert {"sample_rate", "name"} <= {*dir(cls), *inspect.signature(cls.__init__).parameters,
                                      *_assigned_in_init(cls)}, name
    assert Synthesizer is __import__("headstart.tts.base", fromlist=["Synthesizer"]).Synthesizer  # one definition


@pytest.mark.parametrize("module, name", [("headstart.voice.asr", "WhisperASR"),
                                          ("headstart.voice.moonshine", "MoonshineASR")])
def test_every_recogniser_offers_the_seam(module, name):
    import importlib

    cls = getattr(importlib.import_module(module), name)
    assert callable(getattr(cls, "warmup", None))
    params = inspect.signature(cls.transcribe).parameters
    assert list(params)[:4] == ["self", "samples", "offset_s", "prompt"]
    assert Transcriber is __import__("headstart.voice.listener", fromlist=["Transcriber"]).Transcriber


def _assigned_in_init(cls) -> set[str]:
    """Attribute names `cls.__init__` assigns on self (instance attributes the class does not show)."""
    import re

    try:
        source = inspect.getsource(cls.__init__)
    except (OSError, TypeError):
        return set()
    return set(re.findall(r"self\.(\w+)\s*(?::[^=]*)?=", source))
