"""Listener with semantic endpointing, the wordless guard, long-utterance trimming and the frame sizes
the issue names; real recordings and the real Silero VAD, a fake ASR (fast)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from headstart.config import ASRConfig, EndpointConfig, VADConfig
from headstart.events import EndOfTurn, FinalTranscript, PartialTranscript, SpeechEnded
from headstart.voice.asr import Transcription
from headstart.voice.endpoint import Endpointer
from headstart.voice.listener import Listener
from headstart.voice.vad import SileroVAD
from headstart.voice.words import Word, join_words
from tests.prepared import speech
from tests.test_voice_listener import SR, EnergyASR, check_turn_shape, kinds, run_listener, silence, to_int16


def listener(asr, asr_executor, scorer=None, endpoint=EndpointConfig(), asr_config=ASRConfig()) -> Listener:
    return Listener(SileroVAD(VADConfig()), asr, Endpointer(endpoint), asr_config, asr_executor, eou_scorer=scorer)


def split_at_middle(audio: np.ndarray, pause_s: float, kind: str) -> tuple[np.ndarray, float]:
    """Insert a pause at the quietest 50 ms near the middle of the speech (a word gap)."""
    mid = audio.shape[0] // 2
    hop = SR // 20
    candidates = range(mid - SR // 2, mid + SR // 2, hop // 2)
    cut = min(candidates, key=lambda i: float(np.sqrt(np.mean(audio[i : i + hop] ** 2))))
    cut += hop // 2
    rng = np.random.default_rng(0)
    fill = np.zeros(int(pause_s * SR), np.float32) if kind == "zero" else (rng.standard_normal(int(pause_s * SR)) * 3e-4).astype(np.float32)
    return np.concatenate([audio[:cut], fill, audio[cut:], silence(3.0)]), cut / SR + pause_s


class WordCountScorer:
    """Fake EOU signal: 'complete' once the text has all `n` words of the sentence, else cut off."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.texts: list[str] = []

    async def __call__(self, text: str) -> float:
        self.texts.append(text)
        await asyncio.sleep(0)
        return 0.9 if len(text.split()) >= self.n else 1e-9  # the head scale: >= eou_high 0.75 is complete


@pytest.mark.parametrize("kind", ["noise", "zero"])
@pytest.mark.parametrize("pause_s", [0.6, 1.5])
def test_mid_sentence_pause_is_not_a_cut_off_with_semantic_endpointing(sentence, asr_executor, kind, pause_s):
    """Utterances split by a 0.6-1.5 s pause mid-sentence are not ended at the pause when
    semantic endpointing is on; with silence endpointing alone (0.5 s) the same input is cut."""
    audio, pause_end_s = split_at_middle(sentence, pause_s, kind)
    words = len(join_words(EnergyASR().transcribe(sentence).words).split())
    scorer = WordCountScorer(words)
    events = asyncio.run(run_listener(listener(EnergyASR(), asr_executor, scorer), audio))
    check_turn_shape(events)
    turns = [e for e in events if isinstance(e, EndOfTurn)]
    assert len(turns) == 1 and turns[0].audio_s > pause_end_s, kinds(events)
    assert turns[0].eou_probability == 0.9
    assert scorer.texts  # the partials and the final were scored
    events = asyncio.run(run_listener(listener(EnergyASR(), asr_executor), audio))
    cut = [e for e in events if isinstance(e, EndOfTurn) and e.audio_s < pause_end_s]
    assert cut, "without the semantic signal a 0.5 s silence ends the turn at the pause"


def test_complete_sentence_ends_sooner_than_with_fixed_silence(sentence, asr_executor):
    audio = np.concatenate([sentence, silence(3.0)])
    words = len(join_words(EnergyASR().transcribe(sentence).words).split())
    semantic = asyncio.run(run_listener(listener(EnergyASR(), asr_executor, WordCountScorer(words)), audio))
    fixed = asyncio.run(run_listener(listener(EnergyASR(), asr_executor), audio))
    t_sem = [e.audio_s for e in semantic if isinstance(e, EndOfTurn)]
    t_fix = [e.audio_s for e in fixed if isinstance(e, EndOfTurn)]
    assert len(t_sem) == len(t_fix) == 1
    # min_silence_s 0.0 vs silence_s 0.5; the final's score lands a few frames after the speech end
    assert t_sem[0] <= t_fix[0] - 0.25


def test_set_eou_probability_from_outside(sentence, asr_executor):
    async def main():
        lis = listener(EnergyASR(), asr_executor)
        lis.set_eou_probability(0.9)  # no turn open: ignored
        events = []

        async def consume():
            async for e in lis:
                events.append(e)

        task = asyncio.create_task(consume())
        step = SR // 50
        audio = np.concatenate([sentence, silence(2.0)])
        for start in range(0, audio.shape[0], step):
            await lis.push(__import__("headstart.audio", fromlist=["AudioFrame"]).AudioFrame(audio[start : start + step], SR))
            await lis.settle()
            await asyncio.sleep(0)
            if any(isinstance(e, PartialTranscript) for e in events):
                lis.set_eou_probability(1e-9)  # reads cut off: the turn waits max_silence_s
        await lis.end_input()
        await task
        return events

    events = asyncio.run(main())
    ended = [e.audio_s for e in events if isinstance(e, SpeechEnded)][-1]
    turns = [e for e in events if isinstance(e, EndOfTurn)]
    assert len(turns) == 1 and turns[0].audio_s == pytest.approx(ended + EndpointConfig().max_silence_s, abs=0.035)
    assert turns[0].eou_probability == pytest.approx(1e-9)


def test_scorer_failure_reaches_the_consumer(sentence, asr_executor):
    async def bad(text):
        raise RuntimeError("llm exploded")

    with pytest.raises(RuntimeError, match="failed"):
        asyncio.run(run_listener(listener(EnergyASR(), asr_executor, bad), np.concatenate([sentence, silence(1.0)])))


class SentenceASR(EnergyASR):
    """EnergyASR whose every 6th block word ends a sentence; records samples and prompts per call."""

    def __init__(self) -> None:
        super().__init__()
        self.lengths: list[float] = []
        self.prompts: list[str | None] = []

    def transcribe(self, samples, offset_s=0.0, prompt=None):
        self.lengths.append(samples.shape[0] / SR)
        self.prompts.append(prompt)
        t = super().transcribe(samples, offset_s)
        words = tuple(Word(w.text + ("." if int(w.text[2:]) % 6 == 5 else ""), w.start_s, w.end_s) for w in t.words)
        return Transcription(words, join_words(words), 0.0, -0.1, t.audio_s)


def test_long_utterance_buffer_is_trimmed_at_sentence_ends_and_cost_stays_flat(asr_executor):
    """A long input (several real recordings back to back, no pause long enough to end the
    turn) keeps each pass' audio bounded; committed text becomes the prompt; no word twice."""
    names = ["pocketsphinx_librivox/librivox-0870.wav", "pocketsphinx_librivox/librivox-0890.wav",
             "pocketsphinx_librivox/librivox-0920.wav", "pocketsphinx_librivox/librivox-0880.wav"]
    audio = np.concatenate([speech(n) for n in names] * 2 + [silence(2.0)])
    assert audio.shape[0] / SR > 35
    asr = SentenceASR()
    lis = listener(asr, asr_executor, endpoint=EndpointConfig(silence_s=2.0, max_turn_s=120.0),
                   asr_config=ASRConfig(trim_after_s=6.0))
    events = asyncio.run(run_listener(lis, audio))
    finals = [e for e in events if isinstance(e, FinalTranscript)]
    assert kinds(events).count("EndOfTurn") == 1  # one turn; a final per VAD speech end, the last covers all
    words = finals[-1].text.replace(".", "").split()
    assert len(words) == len(set(words)) > 60  # each block word once, in order
    assert [int(w[1:]) for w in words] == sorted(int(w[1:]) for w in words)
    assert max(asr.lengths) < 6.0 + 2 * 2.0  # bounded by trim_after_s (+ a sentence and the cadence)
    assert any(p for p in asr.prompts) and all(p is None or len(p) <= 200 for p in asr.prompts)
    for e in events:
        if isinstance(e, PartialTranscript):
            toks = e.text.replace(".", "").split()
            assert len(toks) == len(set(toks)), e.text


@pytest.mark.parametrize("frame_ms", [10, 25, 30, 45])
def test_frame_sizes_named_by_the_issue(sentence, asr_executor, frame_ms):
    audio = np.concatenate([sentence, silence(1.0)])
    events = asyncio.run(run_listener(listener(EnergyASR(), asr_executor), audio, frame_s=frame_ms / 1000, convert=to_int16))
    check_turn_shape(events)
    assert kinds(events).count("EndOfTurn") == 1
    final = [e for e in events if isinstance(e, FinalTranscript)][0]
    assert len(final.text.split()) >= 8


def test_wordless_speech_after_words_ends_the_turn(sentence, asr_executor):
    """cases.md: speech, then loud hum the VAD calls speech but the recogniser finds no word in:
    the turn ends max_wordless_s after the last word, not at max_turn_s."""

    class WordsUntil(EnergyASR):
        def transcribe(self, samples, offset_s=0.0):
            t = super().transcribe(samples, offset_s)
            words = tuple(w for w in t.words if w.start_s < 2.8)
            return Transcription(words, join_words(words), 0.0, -0.1, t.audio_s)

    hum = (0.3 * np.sin(2 * np.pi * 150 * np.arange(8 * SR) / SR) * (1 + 0.5 * np.sin(2 * np.pi * 4 * np.arange(8 * SR) / SR))).astype(np.float32)
    audio = np.concatenate([sentence, sentence[: int(0.3 * SR)] * 0, sentence, hum, silence(1.0)])
    # the second sentence and the hum are "speech" without words after 2.8 s
    events = asyncio.run(run_listener(listener(WordsUntil(), asr_executor, endpoint=EndpointConfig(max_turn_s=60.0)), audio))
    assert kinds(events)[:1] == ["SpeechStarted"]
    # later wordless "speech" may open an utterance that ends with an empty final and no end of turn
    assert all(not e.text for e in events[kinds(events).index("EndOfTurn"):] if isinstance(e, FinalTranscript))
    turns = [e.audio_s for e in events if isinstance(e, EndOfTurn)]
    assert turns and turns[0] < 2.8 + 2.0 + 0.5, turns
