from headstart.timeline import AudioClockMap, EOUCounters, HeadStartOutcome, HeldRelease, TurnTimeline


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


def hit_turn() -> TurnTimeline:
    """A turn with every record set: a head-start hit, an EOU probability and the EOU counters."""
    return TurnTimeline(
        eou_probability=0.9,
        head_start=HeadStartOutcome("hit", enabled=True, hits=2, misses=1, wasted_tokens=7,
                                    release=HeldRelease(lead_s=0.75, held_tokens=3, held_audio_s=0.4123)),
        eou=EOUCounters(computed=4, skipped=1, compute_s=0.0123))


def test_the_servers_head_start_figures_read_the_turns_records():
    from headstart.server.turn_metrics import head_start_metrics as typed_figures
    from headstart.server.wire_json import to_fields

    def head_start_metrics(turn: TurnTimeline) -> dict:
        return to_fields(typed_figures(turn))  # as the wire carries them

    out = head_start_metrics(hit_turn())
    assert list(out.items()) == [
        ("preemptive", "hit"), ("preemptive_hits", 2), ("preemptive_misses", 1), ("preemptive_wasted_tokens", 7),
        ("eou_probability", 0.9), ("eou_computed", 4), ("eou_skipped", 1), ("eou_compute_ms", 12.3),
        ("preemptive_lead_ms", 750.0), ("held_tokens", 3), ("held_audio_ms", 412.3)]
    # a turn without records: the same keys with their defaults, no release figures
    assert head_start_metrics(TurnTimeline()) == {
        "preemptive": "none", "preemptive_hits": 0, "preemptive_misses": 0, "preemptive_wasted_tokens": 0,
        "eou_probability": None, "eou_computed": 0, "eou_skipped": 0, "eou_compute_ms": 0.0}
    miss = TurnTimeline(head_start=HeadStartOutcome("miss", enabled=True, hits=0, misses=1, wasted_tokens=5))
    assert "preemptive_lead_ms" not in head_start_metrics(miss)


def test_the_demos_row_has_the_figures_the_turn_has():
    from headstart.cli.demo import _turn_records

    assert list(_turn_records(hit_turn()).items()) == [
        ("preemptive_lead_s", 0.75), ("held_tokens", 3), ("held_audio_s", 0.4123), ("preemptive_hits", 2),
        ("preemptive_misses", 1), ("preemptive_wasted_tokens", 7), ("eou_probability", 0.9), ("eou_computed", 4),
        ("eou_compute_s", 0.0123)]
    assert _turn_records(TurnTimeline()) == {}
