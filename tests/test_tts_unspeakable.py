"""A reply the voice cannot speak is never silence: text with words but nothing the English voices can
say (Japanese kana, Chinese) becomes a short spoken fallback, with the real default voice (hibari),
which made 0 s of audio from kana; a reply with some English speaks that English and no fallback."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from headstart.config import ThreadPlan, TTSConfig
from headstart.tts.base import UNSPEAKABLE_FALLBACK, is_speakable
from headstart.tts.chunker import ClauseChunker
from headstart.tts.stream import TTSStream
from tests.prepared import prepared


@pytest.fixture(scope="module")
def voice():
    from headstart.tts.engines import load_synthesizer

    return prepared(lambda: load_synthesizer(TTSConfig(), ThreadPlan(tts_threads=1)))


class Recorder:
    """Records what reaches the engine around the real voice."""

    def __init__(self, synth) -> None:
        self.synth, self.texts = synth, []
        self.sample_rate, self.name = synth.sample_rate, synth.name

    def synthesize(self, text):
        self.texts.append(text)
        return self.synth.synthesize(text)

    def warm_up(self) -> None:
        pass


def _speak(synth, reply: str, tts_executor, **kwargs) -> tuple[float, TTSStream]:
    async def main():
        stream = TTSStream(synth, ClauseChunker(), tts_executor, **kwargs)
        for word in reply.split(" "):
            stream.push_text(word + " ")
        stream.end_input()
        frames = await asyncio.wait_for(_collect(stream), 120)
        return sum(f.duration_s for f in frames), stream

    return asyncio.run(main())


async def _collect(stream):
    return [frame async for frame in stream]


def test_speakable_means_latin_letters_or_digits():
    assert is_speakable("Hello") and is_speakable("Café") and is_speakable("42") and is_speakable("東京 is big")
    assert not is_speakable("こんにちは") and not is_speakable("你好") and not is_speakable("Привет")
    assert not is_speakable("") and not is_speakable("... !")


def test_a_voice_of_another_language_may_say_any_script():
    from headstart.tts.engines import speakable_check

    for config in (TTSConfig(), TTSConfig(engine="piper-joe"), TTSConfig(engine="espeak")):
        assert not speakable_check(config)("こんにちは") and speakable_check(config)("Hello")
    for config in (TTSConfig(engine="espeak", espeak_voice="ja"), TTSConfig(engine="coqui", coqui_language="zh-cn")):
        assert speakable_check(config)("こんにちは") and not speakable_check(config)("...")


@pytest.mark.parametrize("reply", ["こんにちは、お元気ですか。", "你好，我是你的助手。今天天气很好。"])
def test_a_reply_in_another_script_is_heard_as_the_fallback(voice, tts_executor, reply):
    synth = Recorder(voice)
    audio_s, stream = _speak(synth, reply, tts_executor)
    assert synth.texts == [UNSPEAKABLE_FALLBACK]
    assert stream.fallback_spoken and stream.unspeakable
    assert audio_s > 1.0  # the fallback sentence, not silence
    assert [s.text for s in stream.spans()] == [UNSPEAKABLE_FALLBACK]


def test_a_reply_with_english_in_it_speaks_the_english_and_no_fallback(voice, tts_executor):
    synth = Recorder(voice)
    audio_s, stream = _speak(synth, "こんにちは。\nThat means hello.", tts_executor)
    assert synth.texts == ["That means hello."] and not stream.fallback_spoken  # the kana line passed over
    assert stream.unspeakable == ["こんにちは。"] and audio_s > 0.5
    synth.texts.clear()
    audio_s, stream = _speak(synth, "東京 is the capital of Japan.", tts_executor)  # one chunk: the voice says its English
    assert synth.texts == ["東京 is the capital of Japan."] and not stream.fallback_spoken and audio_s > 0.5


def test_without_a_fallback_or_without_words_a_reply_stays_silent(voice, tts_executor):
    synth = Recorder(voice)
    audio_s, stream = _speak(synth, "こんにちは。", tts_executor, fallback_text=None)
    assert (audio_s, synth.texts, stream.fallback_spoken) == (0.0, [], False)
    audio_s, stream = _speak(synth, "😊 👍 ...", tts_executor)  # no words at all: nothing to apologise for
    assert (audio_s, synth.texts, stream.fallback_spoken) == (0.0, [], False)


@pytest.mark.slow
def test_the_fallback_is_heard(voice, tts_executor):
    from headstart.audio import resample
    from tests.prepared import whisper

    asr = whisper()

    async def audio():
        stream = TTSStream(voice, ClauseChunker(), tts_executor)
        stream.push_text("ありがとうございます。")
        stream.end_input()
        return np.concatenate([f.samples for f in await _collect(stream)])

    samples = resample(asyncio.run(audio()), voice.sample_rate, 16_000).astype(np.float32)
    heard = asr.transcribe(np.concatenate([samples, np.zeros(8000, np.float32)])).text.lower()
    assert "sorry" in heard and "english" in heard, heard
