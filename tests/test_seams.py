"""The typed seams (headstart/seams.py): the local engine (SmolLM2-135M, the small real LLM, as
llm/local.py `LocalLLM`) and the remote one are both an `LLMBackend` the session calls the same way;
every synthesiser and recogniser offers what `Synthesizer` and `Transcriber` ask."""

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
    from headstart.llm.local import LocalLLM

    engine = smollm2_engine
    llm = LocalLLM(engine)  # no speculative decoder: plain decoding
    # a system prompt of the test's own: the default one asks for short replies, and under it the
    # greedy reply to MESSAGES is "Hello." (2 tokens, then EOS): too short to compare 4 decode steps
    config = replace(LLMConfig(model="smollm2-135m"), max_new_tokens=4, system_prompt="You are a helpful assistant.")
    assert isinstance(llm, LLMBackend) and not isinstance(engine, LLMBackend)  # the engine builds no streams
    assert isinstance(llm.max_positions, int) and llm.max_positions > 0
    text = "The quick brown fox."
    assert llm.count_tokens(text) == len(engine.tokenizer(text, add_special_tokens=False)["input_ids"]) > 0

    async def main():
        stream = llm.reply_stream(MESSAGES, config, llm_pool, FakeClock())
        assert isinstance(stream, LLMReplyStream)
        direct = await collect(stream)
        turn = llm.live_turn([], config, llm_pool, FakeClock())
        assert isinstance(turn, LLMTurn)
        turn.update("Say")
        via_turn = await collect(turn.reply("Say hello."))
        return direct, via_turn

    direct, via_turn = asyncio.run(main())
    for events in (direct, via_turn):
        assert isinstance(events[-1], ReplyDone) and all(isinstance(e, TokenDelta) for e in events[:-1])
    # the same greedy reply whichever way the session asks (the turn prefilled the user's words first)
    assert direct[-1].text == via_turn[-1].text and direct[-1].num_tokens == 4 and direct[-1].reason == "max_tokens"


def test_the_local_backend_decodes_with_its_decoder_unless_the_config_says_none(smollm2_engine, llm_pool):
    """`LocalLLM` holds the process's speculative decoder: a reply or turn on a config that asks for
    speculative decoding goes through it, one on speculative="none" decodes plainly, to the same text."""
    from headstart.llm.local import LocalLLM
    from headstart.llm.speculative import Decoder, PromptLookupDrafter

    engine = smollm2_engine
    with pytest.raises(ValueError, match="same engine"):
        LocalLLM(engine, Decoder(object()))  # type: ignore[arg-type]
    decoder = Decoder(engine, PromptLookupDrafter(), speculate_k=4)
    llm = LocalLLM(engine, decoder)
    base = replace(LLMConfig(model="smollm2-135m"), max_new_tokens=8, system_prompt="You are a helpful assistant.")
    speculative, plain = replace(base, speculative="prompt_lookup"), replace(base, speculative="none")
    assert llm.decoder_for(speculative) is decoder and llm.decoder_for(plain) is None
    assert llm.max_positions == engine.max_positions

    async def reply(config, turn: bool) -> tuple[str, int]:
        before = decoder.stats.generated_tokens
        if turn:
            live = llm.live_turn([], config, llm_pool, FakeClock())
            live.update("Say")
            stream = live.reply("Say hello.")
        else:
            stream = llm.reply_stream(MESSAGES, config, llm_pool, FakeClock())
        events = await collect(stream)
        return events[-1].text, decoder.stats.generated_tokens - before

    for turn in (False, True):
        spec_text, spec_tokens = asyncio.run(reply(speculative, turn))
        plain_text, plain_tokens = asyncio.run(reply(plain, turn))
        assert spec_tokens > 0 and plain_tokens == 0, turn
        assert spec_text == plain_text, turn  # exact speculative decoding: the plain greedy reply


def test_the_remote_engine_is_an_llm_backend():
    from headstart.llm.history import approx_token_count
    from headstart.llm.remote import RemoteLLM

    llm = RemoteLLM.from_url("openai://127.0.0.1:9/some-model")
    assert isinstance(llm, LLMBackend)
    assert llm.max_positions is None and llm.count_tokens("The quick brown fox.") == approx_token_count("The quick brown fox.")
    for name in ("reply_stream", "live_turn"):  # called with the same arguments as the local engine
        seam = list(inspect.signature(getattr(LLMBackend, name)).parameters)[1:]
        params = inspect.signature(getattr(llm, name)).parameters
        assert list(params) == seam, name


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
