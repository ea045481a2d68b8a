"""The final transcript without waiting: a pass started at the silence onset serves as the final
(ASRConfig.early_final_s / final_slack_s), EOU scores are not asked twice for one text, and the
endpointer reads the thresholds of its EOU scorer. Real Silero VAD on a real recording, fake ASR."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from headstart.config import ASRConfig, EndpointConfig
from headstart.events import EndOfTurn, FinalTranscript, SpeechEnded
from headstart.voice.endpoint import Endpointer, eou_thresholds, required_silence_s
from tests.test_voice_listener import EnergyASR, check_turn_shape, run_listener, silence
from tests.test_voice_listener_eou import WordCountScorer, listener


def run(sentence, asr_executor, **asr_kwargs):
    asr = EnergyASR()
    # min_new_audio_s 30: no cadence passes, only the early one and the final
    config = ASRConfig(min_new_audio_s=30.0, **asr_kwargs)
    audio = np.concatenate([sentence, silence(2.0)])
    events = asyncio.run(run_listener(listener(asr, asr_executor, endpoint=EndpointConfig(semantic=False), asr_config=config), audio))
    check_turn_shape(events)
    return asr, events


def test_a_pass_started_at_the_silence_onset_is_the_final(sentence, asr_executor):
    asr, events = run(sentence, asr_executor)
    ended = next(e for e in events if isinstance(e, SpeechEnded))
    final = next(e for e in events if isinstance(e, FinalTranscript))
    # early passes also start at word gaps (the speech might end there); none after the VAD confirmed
    # the end: the last one, started at the real silence onset, is the final
    stops = [offset_s + length_s for offset_s, length_s, _ in asr.calls]
    assert all(stop < ended.audio_s for stop in stops)
    stop_s = stops[-1]
    # it heard everything but (part of) the VAD's 0.1 s padding, and started before the VAD's
    # min_silence_s (0.25 s) confirmed the end
    assert ended.audio_s - 0.05 - 1e-6 <= stop_s < ended.audio_s
    assert final.audio_end_s == pytest.approx(ended.audio_s) and final.text


def test_without_the_early_pass_the_final_pass_starts_at_the_confirmed_end(sentence, asr_executor):
    asr, events = run(sentence, asr_executor, early_final_s=None)
    ended = next(e for e in events if isinstance(e, SpeechEnded))
    assert len(asr.calls) == 1
    offset_s, length_s, _ = asr.calls[0]
    assert offset_s + length_s == pytest.approx(ended.audio_s, abs=1e-3)
    early_asr, early_events = run(sentence, asr_executor)
    texts = [next(e for e in ev if isinstance(e, FinalTranscript)).text for ev in (events, early_events)]
    assert texts[0] == texts[1]


def test_no_slack_means_the_early_pass_is_only_a_partial(sentence, asr_executor):
    asr, events = run(sentence, asr_executor, final_slack_s=0.0)
    ended = next(e for e in events if isinstance(e, SpeechEnded))
    assert len(asr.calls) >= 2
    assert asr.calls[-1][0] + asr.calls[-1][1] == pytest.approx(ended.audio_s, abs=1e-3)


def test_the_final_repeating_the_last_partial_is_not_scored_again(sentence, asr_executor):
    scorer = WordCountScorer(100)
    audio = np.concatenate([sentence, silence(3.0)])
    events = asyncio.run(run_listener(listener(EnergyASR(), asr_executor, scorer=scorer), audio))
    check_turn_shape(events)
    final = next(e for e in events if isinstance(e, FinalTranscript))
    assert final.text in scorer.texts
    assert len(scorer.texts) == len(set(scorer.texts)), scorer.texts
    eot = next(e for e in events if isinstance(e, EndOfTurn))
    assert eot.eou_probability == pytest.approx(1e-9)  # the cached score of the final text was used


def test_thresholds_follow_the_eou_scorer():
    head, token = EndpointConfig(), EndpointConfig(eou_scorer="token")
    assert eou_thresholds(head) == (head.eou_low, head.eou_high)
    assert eou_thresholds(token) == (token.token_eou_low, token.token_eou_high)
    # a raw token probability of 1e-4 reads complete on the token scale, cut off on the head's
    assert required_silence_s(token, 1e-4) == token.min_silence_s
    assert required_silence_s(head, 1e-4) == head.max_silence_s
    assert required_silence_s(head, 0.9) == head.min_silence_s
    assert head.min_silence_s < required_silence_s(head, 0.4) < head.max_silence_s
    with pytest.raises(ValueError, match="eou_scorer"):
        Endpointer(EndpointConfig(eou_scorer="magic"))
    with pytest.raises(ValueError, match="token_eou_low"):
        Endpointer(EndpointConfig(token_eou_low=0.5, token_eou_high=0.1))


@pytest.mark.parametrize("kwargs", [{"early_final_s": 0.0}, {"early_final_s": -1.0}, {"final_slack_s": -0.01}])
def test_bad_early_final_settings(asr_executor, kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        listener(EnergyASR(), asr_executor, asr_config=ASRConfig(**kwargs))


def test_a_stale_score_does_not_end_the_turn_while_the_final_text_is_scored():
    from headstart.events import SpeechStarted

    config = EndpointConfig(min_silence_s=0.0, max_silence_s=2.0)
    ep = Endpointer(config)
    ep.push(SpeechStarted(0.0))
    ep.push_eou(0.95)  # a partial read complete
    ep.push(SpeechEnded(1.0))
    ep.await_eou()  # the listener: that score did not hear the speech end
    assert ep.awaiting_eou and ep.required_silence_s == 2.0
    assert ep.poll(1.5) is None
    ep.push_eou(0.01)  # the final text reads cut off
    assert not ep.awaiting_eou and ep.poll(2.5) is None
    eot = ep.poll(3.0)
    assert eot is not None and eot.eou_probability == 0.01
    # complete final text: ends at once; awaiting is forgotten with the turn
    ep.push(SpeechStarted(4.0))
    ep.push(SpeechEnded(5.0))
    ep.await_eou()
    assert ep.poll(5.2) is None
    ep.push_eou(0.9)
    assert ep.poll(5.22) is not None and not ep.awaiting_eou
    # semantic off: awaiting changes nothing
    fixed = Endpointer(EndpointConfig(semantic=False, silence_s=0.5))
    fixed.push(SpeechStarted(0.0))
    fixed.push(SpeechEnded(1.0))
    fixed.await_eou()
    assert fixed.poll(1.5) is not None


def test_no_cadence_pass_starts_in_the_first_moments_of_a_silence(sentence, asr_executor):
    """A pass started right as the speech may be ending would stop just short of its end and keep the
    ASR busy when the pass that hears it all should start: the cadence holds back for early_final_s."""
    from headstart.config import VADConfig
    from headstart.voice.vad import SileroVAD

    audio = np.concatenate([sentence, silence(1.0)])
    # where the listener's VAD sees a silence run younger than early_final_s (the same VAD, same frames)
    vad, young, step = SileroVAD(VADConfig()), set(), 320
    for start in range(0, audio.shape[0], step):
        vad.push(audio[start : start + step])
        since = vad.silence_since_s
        end = min(start + step, audio.shape[0])
        if since is not None and end - round(since * 16000) < round(0.06 * 16000):
            young.add(end)
    assert young, "the recording has silence runs inside speech"
    asr = EnergyASR()
    # min_new_audio_s 0: without the hold-back a pass would start at every frame the ASR is free
    config = ASRConfig(min_new_audio_s=0.0, early_final_s=0.06)
    events = asyncio.run(run_listener(listener(asr, asr_executor, endpoint=EndpointConfig(semantic=False), asr_config=config), audio))
    check_turn_shape(events)
    stops = {round((offset_s + length_s) * 16000) for offset_s, length_s, _ in asr.calls}
    assert len(stops) > 20 and not stops & young


def test_silence_pending_is_the_unconfirmed_silence_after_speech(sentence, asr_executor):
    """`Listener.silence_pending` (the session scores partials heard then): True from the VAD's first
    silent windows after speech until the SpeechEnded; False during speech and after the end."""
    from headstart.audio import AudioFrame

    lst = listener(EnergyASR(), asr_executor, endpoint=EndpointConfig(semantic=False))
    seen: list[tuple[bool, bool]] = []  # (silence_pending, the speech end was emitted)
    events: list[object] = []

    async def main():
        async def consume():
            async for event in lst:
                events.append(event)

        consumer = asyncio.create_task(consume())
        audio = np.concatenate([sentence, silence(1.0)])
        step = 320
        for start in range(0, audio.shape[0], step):
            await lst.push(AudioFrame(audio[start : start + step], 16000))
            while lst._task is not None:  # an ASR much faster than real time (as listener_driver does):
                await lst._task  # without this the pass' timing followed the machine's load
            await asyncio.sleep(0)
            seen.append((lst.silence_pending, any(isinstance(e, SpeechEnded) for e in events)))
            pauses.append((lst.pause_s, lst.in_speech))
            heard.append(lst.pause_heard)
        await lst.end_input()
        await asyncio.wait_for(consumer, 10)

    pauses: list[tuple[float | None, bool]] = []  # (pause_s, in_speech) after each frame
    heard: list[bool] = []  # pause_heard after each frame
    asyncio.run(main())
    # the early final pass (early_final_s into the pause) hears the speech up to it before the end
    assert all(pause is not None for (pause, _), h in zip(pauses, heard) if h)
    first_end_frame = next(i for i, (_, ended) in enumerate(seen) if ended)
    assert any(heard[first_end_frame - 12 : first_end_frame])
    # pause_s is the unconfirmed pause's length so far (None exactly when nothing is pending); the VAD
    # is in a speech segment throughout it, and no longer after its SpeechEnded
    assert all((pause is None) == (not p) for (pause, _), (p, _) in zip(pauses, seen))
    assert all(speaking for pause, speaking in pauses if pause is not None)
    assert max(pause for pause, _ in pauses if pause is not None) < 0.25 + 0.04  # VADConfig.min_silence_s
    assert not pauses[-1][1]
    speech_frames = sentence.shape[0] // 320
    pending = [i for i, (p, _) in enumerate(seen) if p]
    assert pending, "no silence was ever pending"
    assert sum(p for p, _ in seen[:speech_frames]) < speech_frames / 2  # word gaps only while speaking
    first_end = next(i for i, (_, ended) in enumerate(seen) if ended)
    assert any(first_end - 20 <= i < first_end for i in pending)  # pending just before the end
    assert not any(p for p, _ in seen[first_end + 1 :])  # and not after it
