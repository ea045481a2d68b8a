"""LocalAgreement-n with hand-made hypotheses (the policy is pure: no model, no event loop)."""

from __future__ import annotations

import pytest

from headstart.voice.agreement import LocalAgreement, drop_loop_tail, loop_start
from headstart.voice.words import Word, join_words, normalize_word

SENTENCE = "he was not an ill disposed young man".split()


def hyp(text: str, start_s: float = 0.0, step_s: float = 0.3) -> list[Word]:
    """Words 0.3 s apart from `start_s`, each 0.25 s long."""
    return [Word(" " + w, start_s + i * step_s, start_s + i * step_s + 0.25) for i, w in enumerate(text.split())]


def test_la2_commits_the_common_prefix_of_the_last_two_hypotheses():
    la = LocalAgreement(n=2)
    assert la.push(hyp("he")) == [] and la.pending_text == "he"
    assert [w.key for w in la.push(hyp("he was"))] == ["he"]
    assert (la.committed_text, la.pending_text) == ("he", "was")
    assert [w.key for w in la.push(hyp("he was not an"))] == ["was"]
    assert [w.key for w in la.push(hyp("he was not a nil"))] == ["not"]  # "an" vs "a": disagree
    assert (la.committed_text, la.pending_text) == ("he was not", "a nil")
    la.push(hyp("he was not an ill disposed"))
    assert la.committed_text == "he was not"  # "a" vs "an" again
    la.push(hyp("he was not an ill disposed young man"))
    assert la.committed_text == "he was not an ill disposed"
    assert la.pending_text == "young man"


def test_committed_text_only_grows_and_flush_commits_each_word_once():
    """cases.md: one sentence, then 3 s of silence -> the pending words are replaced by the committed
    ones and each word appears once. Silence adds passes that repeat the same hypothesis."""
    la = LocalAgreement(n=2)
    history = []
    for i in range(1, len(SENTENCE) + 1):
        la.push(hyp(" ".join(SENTENCE[:i])))
        history.append(la.committed_text)
    for _ in range(8):  # the silence after the sentence: the same words again and again
        la.push(hyp(" ".join(SENTENCE)))
        history.append(la.committed_text)
    assert all(later.startswith(earlier) for earlier, later in zip(history, history[1:]))
    la.flush()
    assert la.committed_text.split() == SENTENCE
    assert la.pending_text == ""
    assert la.flush() == []  # a second flush adds nothing


def test_punctuation_and_case_changes_do_not_block_agreement_or_duplicate_words():
    la = LocalAgreement(n=2)
    la.push(hyp("He was not"))
    la.push(hyp("he was not."))
    assert la.committed_text == "he was"  # agreed ignoring case/punctuation; "not." held back (last)
    la.push(hyp("He was, not an ill"))
    la.push(hyp("He was not an ill disposed"))
    assert la.committed_text == "he was not an ill"


def test_committed_words_are_spelt_as_in_the_hypothesis_that_heard_most_after_them():
    la = LocalAgreement(n=2)
    la.push(hyp("He was not an..."))
    la.push(hyp("He was not."))  # the newest is shorter here: its "not." is a cut-off
    assert la.committed_text == "He was not"
    assert la.pending_text == ""


def test_the_last_word_waits_for_a_following_word_and_takes_its_in_sentence_spelling():
    la = LocalAgreement(n=2)
    la.push(hyp("unless to be rather selfish."))
    la.push(hyp("unless to be rather selfish."))
    assert la.committed_text == "unless to be rather" and la.pending_text == "selfish."
    la.push(hyp("unless to be rather selfish, is"))
    assert la.committed_text == "unless to be rather selfish,"


def test_rewritten_earlier_words_are_matched_by_time_and_overlap():
    la = LocalAgreement(n=2)
    la.push(hyp("he was not"))
    la.push(hyp("he was not an"))
    assert la.committed_text == "he was not"
    # the recogniser now hears "he's not an ill": its prefix no longer matches the committed words,
    # so words starting before the committed end (0.85 - 0.1 s) are dropped
    rewritten = [Word(" he's", 0.0, 0.5), Word(" not", 0.62, 0.84), Word(" an", 0.9, 1.15), Word(" ill", 1.2, 1.45)]
    la.push(rewritten)
    la.push(rewritten + [Word(" disposed", 1.5, 1.9)])
    assert la.committed_text == "he was not an ill"


def test_trimmed_hypothesis_with_overlapping_words_is_deduplicated():
    """A hypothesis of audio after an offset that repeats the committed tail
    with jittered times."""
    la = LocalAgreement(n=2)
    la.push(hyp("he was not an"))
    la.push(hyp("he was not an ill"))
    assert la.committed_text == "he was not an"
    trimmed = [Word(" not", 0.7, 0.85), Word(" an", 0.95, 1.1), Word(" ill", 1.2, 1.45), Word(" disposed", 1.5, 1.9)]
    la.push(trimmed)
    la.push(trimmed + [Word(" young", 2.0, 2.2)])
    assert la.committed_text == "he was not an ill disposed"


def test_n3_needs_three_agreeing_hypotheses_and_n1_commits_at_once():
    la3 = LocalAgreement(n=3)
    la3.push(hyp("he was"))
    la3.push(hyp("he was"))
    assert la3.committed_text == ""
    la3.push(hyp("he was not"))
    assert la3.committed_text == "he was"
    la1 = LocalAgreement(n=1)
    la1.push(hyp("he was"))
    assert la1.committed_text == "he" and la1.pending_text == "was"
    la1.flush()
    assert la1.committed_text == "he was"


def test_shrinking_hypothesis_never_removes_committed_words():
    la = LocalAgreement(n=2)
    la.push(hyp("he was not an"))
    la.push(hyp("he was not an"))
    assert la.committed_text == "he was not"  # "an" held back: nothing heard after it yet
    la.push(hyp("he was"))
    la.push(hyp(""))
    la.flush()  # the newest hypothesis withdrew "an": it is never committed
    assert la.committed_text == "he was not"


def test_reset_and_empty_hypotheses():
    la = LocalAgreement(n=2)
    assert la.push([]) == [] and la.push([]) == [] and la.flush() == []
    assert la.committed_end_s is None
    la.push(hyp("he was"))
    la.push(hyp("he was"))
    assert la.committed_end_s == pytest.approx(0.25)  # "he" (0-0.25 s); "was" held back
    la.reset()
    assert la.committed == () and la.pending == () and la.committed_text == ""
    la.push(hyp("young man"))
    la.push(hyp("young man"))
    la.flush()
    assert la.committed_text == "young man"


def test_bad_n():
    with pytest.raises(ValueError, match="n >= 1"):
        LocalAgreement(n=0)


def test_word_helpers():
    assert normalize_word(" Man.") == "man" and normalize_word("don't") == "don't"
    words = [Word(" he", 0, 1), Word(" was", 1, 2), Word(" ill", 2, 3), Word("-disposed.", 3, 4)]
    assert join_words(words) == "he was ill-disposed."
    assert join_words(words[2:]) == "ill-disposed." and join_words([]) == ""


def test_a_repetition_loop_past_the_end_of_the_audio_is_dropped():
    # as Whisper tiny.en timed it on dhd_2934z ("two nine three four zero"), a pass ending at 1.716 s
    loop = [Word(" 29340", 0.156, 1.216), Word(" 0.", 1.216, 1.716), Word(" 29340", 1.716, 1.716),
            Word(" 0.", 1.716, 1.716), Word(" 293", 1.716, 1.716)]
    assert join_words(drop_loop_tail(loop)) == "29340 0."
    # one zero-length word that repeats nothing (a word cut by the end of the audio) is kept
    cut = hyp("go forward") + [Word(" ten", 0.6, 0.6)]
    assert drop_loop_tail(cut) == tuple(cut)
    inside = [Word(" When", 2.62, 2.62), Word(" you", 2.62, 2.78), Word(" are", 2.78, 2.96)]
    assert drop_loop_tail(inside) == tuple(inside)
    assert drop_loop_tail([]) == ()


def test_a_repetition_loop_inside_a_hypothesis_is_cut_where_it_begins():
    """tiny.en with the 8 s window loops inside a hypothesis; cut at a run of >= 2
    zero-length words, at word times going back, or at a zero-length copy of the phrase before it,
    keeping one copy of the phrase."""
    # cards_001, a pass over its first 1.1 s (tiny.en's times): "10 of clubs." then a zero-length copy
    cards = [Word(" 10", 0.0, 0.4), Word(" of", 0.4, 0.62), Word(" clubs.", 0.62, 0.86), Word(" 10", 1.0, 1.0),
             Word(" of", 1.0, 1.0), Word(" clubs.", 1.0, 1.0), Word(" 10", 1.06, 1.06)]
    assert join_words(drop_loop_tail(cards)) == "10 of clubs."
    # vm-next over 0.5 s: the second copy still has a length, the loop is cut back to one "Press"
    press = [Word(" Press", 0.0, 0.32), Word(" Press", 0.32, 0.48)] + [Word(" Press", 0.48, 0.48)] * 5
    assert join_words(drop_loop_tail(press)) == "Press"
    # the short clip of test_asr: one zero-length copy of the word before it
    assert join_words(drop_loop_tail([Word(" Press", 0.0, 0.28), Word(" Press", 0.28, 0.28)])) == "Press"
    # a loop in the middle, real-looking words after it (the finals): cut at the copy
    middle = hyp("press 1 to enter a number.") + [Word(w, 1.8, 1.8) for w in
                                                   (" Press", " 1", " to", " enter", " a", " number.")]
    middle += [Word(" or", 2.0, 2.2), Word(" hold.", 2.2, 2.6)]
    assert join_words(drop_loop_tail(middle)) == "press 1 to enter a number."
    # word times that go back: the decoder transcribed audio it had already transcribed
    back = hyp("all circuits are busy now.") + hyp("all circuits are", start_s=0.3)
    assert join_words(drop_loop_tail(back)) == "all circuits are busy now."
    # a run of zero-length words decoded past the audio's end, not a copy: cut at the run
    run = hyp("please try") + [Word(" a", 0.6, 0.6), Word(" gain", 0.6, 0.6)]
    assert join_words(drop_loop_tail(run)) == "please try"
    # a zero-length word inside that does not copy the phrase before it stays
    real = hyp("press 2 to change folders. press") + [Word(" 0", 1.8, 1.8)] + hyp("for mailbox options.", 2.0)
    assert drop_loop_tail(real) == tuple(real)
    # a single zero-length repeat in the middle of a sentence ("that that") is not a whole copy
    that = hyp("i think that") + [Word(" that", 0.9, 0.9)] + hyp("is right", 1.0)
    assert drop_loop_tail(that) == tuple(that)
    assert loop_start(cards) == 3 and loop_start(real) == len(real)


def test_new_speech_that_repeats_the_committed_tail_is_not_taken_for_it():
    """Ten prompts joined: "... placed into the conference." committed, then the next
    prompt "The conference will begin" 0.48 s later; the n-gram de-duplication took its "The
    conference" for the committed "the conference." and the final lost them."""
    placed = [Word(" placed", 17.66, 18.0), Word(" into", 18.0, 18.28), Word(" the", 18.28, 18.56),
              Word(" conference.", 18.56, 18.92)]
    la = LocalAgreement(n=2)
    la.push(placed)
    la.push(placed + [Word(" The", 19.4, 19.56)])
    assert la.committed_text == "placed into the conference."
    # the passes now start elsewhere (a rewritten first word): the committed words are found by time
    later = [Word(" Paced", 17.66, 18.0), Word(" into", 18.0, 18.28), Word(" the", 18.28, 18.58),
             Word(" conference.", 18.58, 18.94), Word(" The", 19.4, 19.62), Word(" conference", 19.62, 19.8)]
    la.push(later + [Word(" will...", 19.8, 19.96)])
    la.push(later + [Word(" will", 19.86, 20.08), Word(" begin.", 20.08, 20.36)])
    la.flush()
    assert la.committed_text == "placed into the conference. The conference will begin."
    # a re-transcription of the committed tail right where it ended is still dropped
    la = LocalAgreement(n=1)
    la.push(placed)
    la.push([Word(" conference.", 18.93, 19.1), Word(" Next", 19.2, 19.5)])
    assert la.committed_text == "placed into the conference. Next" or la.pending_text == "Next"
