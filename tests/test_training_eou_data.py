"""Training text of the EOU head (headstart/training/eou_data.py): which cuts are negatives, the synthetic short
turns, and that nothing of the bench (the held-out measure) is trained on. Fast: no model."""

from __future__ import annotations

import pytest

from headstart.training import eou_data as D
from headstart.training import train_eou as T


def labels(text: str) -> dict[str, int]:
    u = D.label_cuts(text)
    return {D.prefix_text(u.text, k): label for k, label in u.cuts}


def test_cuts_that_read_cut_off_are_negatives_and_complete_phrases_are_left_out():
    got = labels("Set a timer for twenty minutes.")
    assert got["Set a timer for twenty minutes"] == 1
    assert got["Set a"] == 0 and got["Set a timer for"] == 0 and got["Set a timer for twenty"] == 0
    assert "Set a timer" not in got  # complete before "for": not a negative
    got = labels("Jack of hearts and two of spades.")
    assert "Jack of hearts" not in got and got["Jack of hearts and"] == 0 and got["Jack of"] == 0
    assert labels("Nine seven five one") == {"Nine seven five one": 1}  # a number string: every prefix may be whole
    got = labels("Yes, please.")
    assert got == {"Yes, please": 1}
    got = labels("What time is it in Tokyo right now?")
    assert "What time is it" not in got and got["What time is it in"] == 0


def test_a_subordinate_clause_is_cut_off_until_its_main_clause():
    got = labels("If it rains tomorrow we will stay inside")
    assert got["If it rains"] == 0 and got["If it rains tomorrow"] == 0
    assert got["If it rains tomorrow we will stay inside"] == 1
    with pytest.raises(ValueError, match="no words"):
        D.label_cuts(" ?! ")


def test_synthetic_turns_are_seeded_short_varied_and_hold_dangling_negatives():
    a = D.synthetic_turns(seed=3, n=300)
    assert a == D.synthetic_turns(seed=3, n=300) and a != D.synthetic_turns(seed=4, n=300)
    assert D.synthetic_turns(seed=3, n=100) == a[:100]  # a longer run extends a shorter one
    assert len(a) == 300 and len({u.text.lower() for u in a}) == 300
    kinds = {u.source.split(":")[1] for u in a}
    assert kinds == {"command", "bare", "noun", "number", "answer", "question", "statement"}
    whole = [D.prefix_text(u.text, k) for u in a for k, label in u.cuts if label == 1]
    assert len(whole) == 300 and sorted(len(t.split()) for t in whole)[150] <= 3  # mostly short
    assert any(t.islower() for t in whole) and any(t[0].isupper() for t in whole)
    assert any(c.isdigit() for t in whole for c in t)
    assert any(u.text.endswith("?") for u in a) and any(u.text[-1].isalnum() for u in a)
    dangling = [D.prefix_text(u.text, k) for u in a for k, label in u.cuts if label == 0 and k == len(u.text.split())]
    assert 0.3 * len(a) < len(dangling) < 0.7 * len(a)
    for u in a:  # exactly one complete text per utterance, and cuts in range
        assert sum(label for _, label in u.cuts) == 1
        assert all(1 <= k <= len(D._strip(u.text).split()) for k, _ in u.cuts)
    with pytest.raises(ValueError):
        D.synthetic_turns(n=-1)


def test_no_training_text_overlaps_the_bench_transcripts():
    from headstart.corpus.recordings import recordings

    bench = [r.text for r in recordings()]
    utterances, dropped = D.training_utterances(T.packaged_sentences(), labels="pause-points", seed=0, synthetic=600,
                                                exclude=bench)
    assert D.overlap_with(utterances, bench) == []
    assert dropped > 0  # the check does find something to drop (e.g. "seven of clubs", "he was not")
    assert len(utterances) > 700
    # the overlap test itself: a bench text, one of its prefixes (a pause cut) and a 3-word run are caught
    probe = [D.label_cuts("Five five."), D.label_cuts("He was not sure"), D.label_cuts("Ten of clubs!")]
    hits = set(D.overlap_with(probe, bench))
    assert {"five five", "he was not", "ten of clubs"} <= hits
    assert D.overlap_with([D.label_cuts("5 5")], ["five five"]) == ["five five"]  # digits = number words
    kept, n = D.drop_overlap(probe, bench)
    assert [u.text for u in kept] == ["He was not sure"] and n >= 3


def test_all_cuts_is_the_shipped_heads_labelling_and_is_the_default():
    assert D.all_cuts("Go home, now.") == D.Utterance("Go home, now", ((1, 0), (2, 0), (3, 1)))
    assert [(D.prefix_text(u.text, k), label) for u in [D.all_cuts("Go home, now.")] for k, label in u.cuts] == \
        T.cut_examples("Go home, now.")
    plain, dropped = D.training_utterances(["Go home now.", "Turn it off"])
    assert plain == [D.all_cuts("Go home now."), D.all_cuts("Turn it off")] and dropped == 0
    with pytest.raises(ValueError, match="labels must be"):
        D.training_utterances(["Go home."], labels="some")


def test_extra_rows_are_read_as_they_stand_and_keep_out_the_test_split_and_the_bench(tmp_path):
    import json

    from headstart.corpus.recordings import recordings

    rows = [
        {"text": "Please enter the mailbox number.", "label": 1, "split": "train"},
        {"text": "Please enter the...", "label": 0, "split": "train"},  # a cut: a negative on its own
        {"text": "Please enter the...", "label": 0, "split": "train"},  # repeated (noise / zero): read once
        {"text": "Goodbye.", "label": 1, "split": "test"},  # the held-out split stays out
        {"text": "Press 6 to play the next message.", "label": 1},  # a bench transcript: dropped as overlap
    ]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows))
    extra = D.load_extra_rows(path)
    assert extra == [D.Utterance("Please enter the mailbox number", ((5, 1),), "extra"),
                     D.Utterance("Please enter the", ((3, 0),), "extra"),
                     D.Utterance("Press 6 to play the next message", ((7, 1),), "extra")]
    tsv = tmp_path / "rows.tsv"
    tsv.write_text("# text<TAB>label\nPlease enter the mailbox number.\t1\n\nPlease enter the...\t0\n")
    assert D.load_extra_rows(tsv) == extra[:2]
    bench = [r.text for r in recordings()]
    assert "Press 6 to play the next message." in bench
    kept, dropped = D.training_utterances(["Go home now."], extra=extra, exclude=bench)
    # the negative-only row is kept (not dropped for lacking a complete text); the bench's text is not
    assert kept == [D.all_cuts("Go home now."), *extra[:2]] and dropped == 1
    for bad, match in ([{"text": "Hi", "label": 2}], "label must be 0 or 1"), ([{"text": "Hi"}], "row 0"), ({}, "JSON list"):
        path.write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=match):
            D.load_extra_rows(path)
    (tmp_path / "no_tab.tsv").write_text("Hello there 1\n")
    with pytest.raises(ValueError, match="text<TAB>label"):
        D.load_extra_rows(tmp_path / "no_tab.tsv")
