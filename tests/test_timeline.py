from headstart.timeline import AudioClockMap, TurnTimeline


def test_audio_position_maps_to_the_push_time_of_its_frame():
    clock_map = AudioClockMap()
    for i in range(1, 6):  # 20 ms frames pushed at t = 10.0 + i * 0.05
        clock_map.record(i * 0.02, 10.0 + i * 0.05)
    assert clock_map.clock_at(0.0) == 10.05
    assert clock_map.clock_at(0.02) == 10.05
    assert clock_map.clock_at(0.021) == 10.10
    assert clock_map.clock_at(0.1) == 10.25
    assert clock_map.clock_at(0.11) is None


def test_metrics_derive_from_the_marks():
    t = TurnTimeline(
        speech_end_at_s=1.0, final_transcript_at_s=1.2, end_of_turn_at_s=1.25, reply_started_at_s=1.25,
        first_token_at_s=1.4, last_token_at_s=2.4, num_tokens=11, tts_first_text_at_s=1.6,
        first_audio_at_s=1.8,
    )
    m = t.metrics()
    assert abs(m["speech_end_to_final_s"] - 0.2) < 1e-9
    assert abs(m["ttft_s"] - 0.15) < 1e-9
    assert abs(m["tpot_s"] - 0.1) < 1e-9
    assert abs(m["voice_to_voice_s"] - 0.8) < 1e-9
    assert abs(m["tts_ttfa_s"] - 0.2) < 1e-9


def test_missing_marks_give_none_not_errors():
    m = TurnTimeline(first_token_at_s=1.0, num_tokens=1).metrics()
    assert m["voice_to_voice_s"] is None and m["tpot_s"] is None and m["ttft_s"] is None


def test_vad_end_figures_start_at_the_vads_end_of_speech():
    t = TurnTimeline(
        speech_end_at_s=1.0, vad_speech_end_at_s=1.1, final_transcript_at_s=1.3, end_of_turn_at_s=1.35,
        first_token_at_s=1.5, first_audio_at_s=1.9,
    )
    m = t.metrics()
    assert abs(m["vad_end_to_final_s"] - 0.2) < 1e-9
    assert abs(m["vad_end_to_turn_end_s"] - 0.25) < 1e-9
    assert abs(m["vad_end_to_first_token_s"] - 0.4) < 1e-9
    assert abs(m["vad_end_to_first_audio_s"] - 0.8) < 1e-9
    assert abs(m["turn_end_to_first_audio_s"] - 0.55) < 1e-9
    assert abs(m["voice_to_voice_s"] - 0.9) < 1e-9  # from the true end, not the VAD's
    assert TurnTimeline(first_audio_at_s=1.0).metrics()["vad_end_to_first_audio_s"] is None


def test_the_servers_turn_metrics_are_the_timelines_in_ms():
    from headstart.server.protocol import event_fields, ms
    from headstart.server.turn_metrics import turn_metrics

    t = TurnTimeline(vad_speech_end_at_s=1.1, end_of_turn_at_s=1.35, first_audio_at_s=1.9)
    out = event_fields(turn_metrics(t, "r1", False))
    for key, value in t.metrics().items():
        assert out[key.removesuffix("_s") + "_ms"] == ms(value), key
    assert out["vad_end_to_first_audio_ms"] == 800 and out["turn_end_to_first_audio_ms"] == 550
