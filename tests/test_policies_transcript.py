"""The transcript commit rule: sentence ends, local agreement, tail cuts on one absolute time base, forced commits."""
from __future__ import annotations

import pytest

from backends.asr.base import merge_word_pieces
from common.stream import SourceWord, TimedWord
from policies.transcript import (
    FREEZE_MIN_PAUSE,
    PAUSE_COMMIT_MIN_PAUSE,
    TranscriptStabilizer,
    TranscriptUpdate,
    agreed_prefix_length,
    agreed_sentence_end,
    closes_sentence,
    ends_sentence,
    following_pauses,
    frozen_word_count,
    pause_commit_count,
    strip_unconfirmed_end,
)


def timed(text: str, start: float = 0.0, step: float = 0.5, pause: float = 0.0) -> list[TimedWord]:
    """Words of `text`, one every `step` seconds from `start`, each followed by `pause` seconds of silence."""
    return [TimedWord(w, start + i * step, start + (i + 1) * step - pause) for i, w in enumerate(text.split())]


def paused(text: str, start: float = 0.0) -> list[TimedWord]:
    """Words every 0.6 s, each 0.25 s long: a 0.35 s pause after each, where freezing may cut."""
    return timed(text, start, step=0.6, pause=0.35)


@pytest.mark.parametrize("word,expected", [
    ("talking.", True), ("why?", True), ("Stop!", True), ('said."', True), ("(this).", True), ("结束。", True),
    ("e.g.", False), ("i.e.", False), ("Dr.", False), ("U.S.", False), ("J.", False), ("3.5", False),
    ("mod...", False), ("well…", False), ("word", False), ("word,", False),
])
def test_ends_sentence(word, expected):
    assert ends_sentence(word) is expected


@pytest.mark.parametrize("word,expected", [
    ("rose.", "rose"), ("mod...", "mod"), ("why?", "why"), ("e.g.", "e.g."), ("U.S.", "U.S."), ("3.5", "3.5"),
    ("word", "word"), (".", "."),
])
def test_strip_unconfirmed_end(word, expected):
    assert strip_unconfirmed_end(word) == expected


def test_merge_word_pieces_joins_pieces_without_leading_space():
    pieces = [(" The", 0.0, 0.2), (" price", 0.2, 0.5), (" 3", 0.5, 0.7), (".5", 0.7, 0.9), ("%", 0.9, 1.0),
              (" fell.", 1.0, 1.4)]
    assert merge_word_pieces(pieces) == [TimedWord("The", 0.0, 0.2), TimedWord("price", 0.2, 0.5),
                                         TimedWord("3.5%", 0.5, 1.0), TimedWord("fell.", 1.0, 1.4)]


def test_agreed_prefix_compares_words_as_written():
    assert agreed_prefix_length(timed("a b c"), timed("a b d")) == 2
    assert agreed_prefix_length(timed("a b c"), timed("a b c. d")) == 2
    assert agreed_prefix_length([], timed("a")) == 0


def test_agreed_sentence_end_needs_a_sentence_end_at_the_same_time_in_both():
    before = timed("As shown we use oral models. Existing")
    assert agreed_sentence_end(before, timed("As shown we use neural models. Existing work"), 0.5) == 6
    assert agreed_sentence_end(before, timed("As shown we use neural models, existing work"), 0.5) == 0
    # The same words, but the sentence ends one word (0.5 s) later: a tolerance below that tells them apart.
    later = timed("As shown we use oral models too. Existing")
    assert agreed_sentence_end(before, later, 0.4) == 0 and agreed_sentence_end(before, later, 0.5) == 7
    # The latest agreed sentence end counts; none in the previous hypothesis, none agreed.
    assert agreed_sentence_end(timed("A bee. C dee. E"), timed("A ex. C why. E eff"), 0.1) == 4
    assert agreed_sentence_end(timed("A bee see dee"), timed("A bee. See dee"), 0.5) == 0


@pytest.mark.parametrize("agreement,committed", [("words", []), ("sentence_end", [["As", "shown", "we", "use",
                                                                                   "neural", "models."]])])
def test_a_reworded_sentence_is_committed_at_its_agreed_end_only_with_sentence_end(agreement, committed):
    stabilizer = TranscriptStabilizer(commit_agreement=agreement)
    stabilizer.update(timed("As shown we use oral models. Existing"), 3.5)
    update = stabilizer.update(timed("As shown we use neural models. Existing work"), 4.0)
    assert [[w.text for w in s] for s in update.committed_sentences] == committed
    live = ["Existing", "work"] if committed else ["As", "shown", "we", "use", "neural", "models.", "Existing", "work"]
    assert [w.text for w in update.live_words] == live
    if committed:  # the cut lies after the committed sentence and times stay absolute
        assert update.cut_seconds == pytest.approx(3.0) and update.live_words[0].end_time == pytest.approx(3.5)


def test_sentence_end_agreement_still_waits_for_the_next_word_and_for_both_hypotheses():
    stabilizer = TranscriptStabilizer(commit_agreement="sentence_end")
    assert stabilizer.update(timed("It rose. Then"), 2.0).committed_sentences == ()  # one hypothesis only
    stabilizer = TranscriptStabilizer(commit_agreement="sentence_end")
    stabilizer.update(timed("It rose."), 1.0)
    assert stabilizer.update(timed("It grew."), 1.0).committed_sentences == ()  # no word after the end yet
    with pytest.raises(ValueError, match="commit_agreement must be one of words, sentence_end"):
        TranscriptStabilizer(commit_agreement="boundary")


def test_nothing_is_committed_before_two_hypotheses_agree_on_a_sentence_end():
    stabilizer = TranscriptStabilizer()
    first = stabilizer.update(timed("Hello everyone. Today we"), 2.5)
    assert first.committed_sentences == () and first.cut_seconds == 0.0
    assert [w.text for w in first.live_words] == ["Hello", "everyone.", "Today", "we"]
    assert [w.text for w in first.live_sentence] == ["Hello", "everyone."]
    second = stabilizer.update(timed("Hello everyone. Today we talk"), 3.0)
    assert [[w.text for w in s] for s in second.committed_sentences] == [["Hello", "everyone."]]
    assert [w.text for w in second.live_words] == ["Today", "we", "talk"]


def test_cut_lies_in_the_pause_and_times_stay_absolute_across_cuts():
    stabilizer = TranscriptStabilizer()
    words = [TimedWord("One.", 0.0, 1.0), TimedWord("Two", 1.4, 2.0), TimedWord("three", 2.0, 2.5)]
    stabilizer.update(words, 3.0)
    update = stabilizer.update(words, 3.0)
    assert update.cut_seconds == pytest.approx(1.2)  # midway through the 1.0-1.4 pause
    assert update.committed_sentences[0][0].end_time == pytest.approx(1.0)
    assert [w.end_time for w in update.live_words] == pytest.approx([2.0, 2.5])
    # The next hypothesis is of the tail that starts at 1.2 s: times are relative to it.
    tail = [TimedWord("Two", 0.2, 0.8), TimedWord("three.", 0.8, 1.3), TimedWord("Four", 1.6, 2.0)]
    stabilizer.update(tail, 2.3)
    update = stabilizer.update(tail, 2.3)
    assert [w.text for w in update.committed_sentences[0]] == ["Two", "three."]
    assert update.committed_sentences[0][-1].end_time == pytest.approx(1.2 + 1.3)
    assert update.live_words[0].end_time == pytest.approx(1.2 + 2.0)
    assert stabilizer.tail_start == pytest.approx(1.2 + 1.45)


def test_abbreviations_and_decimals_do_not_split_sentences():
    stabilizer = TranscriptStabilizer()
    text = "Models e.g. Whisper cost 3.5 dollars in the U.S. today and"
    stabilizer.update(timed(text), 8.0)
    assert stabilizer.update(timed(text), 8.0).committed_sentences == ()


def test_a_sentence_is_committed_only_once_the_next_word_has_begun():
    stabilizer = TranscriptStabilizer()
    stabilizer.update(timed("It rose in 2027."), 2.5)
    assert stabilizer.update(timed("It rose in 2027."), 3.0).committed_sentences == ()
    update = stabilizer.update(timed("It rose in 2027. Then"), 3.5)
    assert [w.text for w in update.committed_sentences[0]] == ["It", "rose", "in", "2027."]


def test_final_commits_everything_split_into_sentences():
    stabilizer = TranscriptStabilizer()
    update = stabilizer.update(timed("First one. Second one. third"), 4.0, final=True)
    assert [[w.text for w in s] for s in update.committed_sentences] == [["First", "one."], ["Second", "one."],
                                                                         ["third"]]
    assert update.live_words == ()


def test_a_tail_longer_than_the_limit_freezes_its_first_half_and_keeps_the_sentence_open():
    """Speech goes on past max_tail_seconds without a sentence end: the words of the tail's first half leave the audio
    but stay in the sentence being translated, so the translator's segment is not ended where it has already read
    further (a forced commit there made the next segment translate those words again)."""
    stabilizer = TranscriptStabilizer(max_tail_seconds=10.0)
    words = timed(" ".join(f"w{i}" for i in range(24)))  # 12 s, no sentence end, nothing agreed yet
    update = stabilizer.update(words, 12.0)
    assert update.committed_sentences == ()
    assert [w.text for w in stabilizer.frozen] == [f"w{i}" for i in range(14)]  # ended by 12 - 10 / 2 = 7 s
    assert all(w.end_time <= 7.0 for w in stabilizer.frozen)
    assert [w.text for w in update.live_words] == [w.text for w in words]
    assert update.cut_seconds == pytest.approx(7.0)
    assert stabilizer.context == " ".join(f"w{i}" for i in range(14))
    # The sentence ends later: it is committed whole, frozen words first.
    rest = timed("w14 w15 w16 w17 w18 w19 w20 w21 w22 w23 end. Next", start=0.0)
    stabilizer.update(rest, 6.0)
    update = stabilizer.update(rest, 6.0)
    assert [[w.text for w in s] for s in update.committed_sentences] == [[*(f"w{i}" for i in range(24)), "end."]]


def test_a_tail_whose_speaker_stopped_is_committed_without_a_sentence_end():
    """No word in the tail's last half: the translator has read every word, so the sentence ends there."""
    stabilizer = TranscriptStabilizer(max_tail_seconds=10.0)
    words = timed("we stopped right here", step=0.5)  # 2 s of words, then silence
    update = stabilizer.update(words, 12.0)
    assert [[w.text for w in s] for s in update.committed_sentences] == [["we", "stopped", "right", "here"]]
    assert stabilizer.frozen == [] and update.live_words == ()


def test_a_sentence_longer_than_its_limit_is_committed_at_its_agreed_words():
    """A sentence that never ends (a recogniser that writes no full stop): past max_sentence_seconds it is committed
    up to the words the last two hypotheses agree on, the translator's own reading position, not ten seconds
    behind it."""
    stabilizer = TranscriptStabilizer(max_tail_seconds=10.0, max_sentence_seconds=30.0)
    words = [f"w{i}" for i in range(80)]
    committed: list[list[str]] = []
    for chunk in range(1, 41):  # 40 s, a word every 0.5 s, 1 s chunks
        spoken = float(chunk)
        heard = [TimedWord(w, i * 0.5 - stabilizer.tail_start, i * 0.5 + 0.4 - stabilizer.tail_start)
                 for i, w in enumerate(words[: int(spoken / 0.5)]) if i * 0.5 >= stabilizer.tail_start - 1e-9]
        update = stabilizer.update(heard, spoken - stabilizer.tail_start)
        committed += [[w.text for w in s] for s in update.committed_sentences]
        assert spoken - stabilizer.tail_start <= 10.0 + 1.0  # the recogniser's audio
        assert spoken - stabilizer.live_start <= 30.0 + 1.0  # the translator's sentence
    assert len(committed) == 1
    # Committed once the sentence passed 30 s (at 31 s, 62 words heard), up to what both hypotheses agreed on: all
    # but the newest words, which the last chunk brought.
    assert committed[0] == words[:60]
def test_live_sentence_drops_an_unconfirmed_full_stop():
    live = tuple(TranscriptStabilizer().update(timed("The price rose."), 2.0).live_words)
    assert [w.text for w in TranscriptUpdate((), live, 0.0).live_sentence] == ["The", "price", "rose"]


def test_two_stabilizers_do_not_share_state():
    a, b = TranscriptStabilizer(), TranscriptStabilizer()
    a.update(timed("Alpha beta. gamma"), 2.0)
    a.update(timed("Alpha beta. gamma"), 2.0)
    assert b.tail_start == 0.0 and b.previous == []
    assert b.update(timed("Alpha beta. gamma"), 2.0).committed_sentences == ()


@pytest.mark.parametrize("word,lang,expected", [
    ("„Ja.“", "de", True), ("«Oui.»", "fr", True), ("「好。」", "zh", True), ("‚so.‘", "de", True),
    ("3.", "de", False), ("12.", "cs", False), ("3.", "en", True), ("3.", None, True), ("2019.", "en", True),
    ("Mai.", "de", True),
])
def test_ends_sentence_closing_quotes_and_ordinals(word, lang, expected):
    assert ends_sentence(word, lang) is expected


def test_long_non_speech_is_cut_even_when_nothing_is_said():
    stabilizer = TranscriptStabilizer(max_tail_seconds=20.0)
    update = stabilizer.update([], 35.0)
    assert update.cut_seconds == pytest.approx(25.0)  # keeps the last half of the limit
    assert stabilizer.tail_start == pytest.approx(25.0)


def test_long_non_speech_before_the_first_word_is_cut_up_to_that_word():
    stabilizer = TranscriptStabilizer(max_tail_seconds=20.0)
    late = timed("and then we", start=18.0)  # speech resumes 18 s into a 21 s tail, ends after keep_from
    update = stabilizer.update(late, 21.0)
    assert update.committed_sentences == ()
    assert update.cut_seconds == pytest.approx(11.0)  # min(21 - 10, first word start 18)
    early = TranscriptStabilizer(max_tail_seconds=20.0)
    update = early.update(timed("and then we", start=5.0, step=6.5), 21.0)  # first word 5-11.5 s
    assert update.cut_seconds == pytest.approx(5.0)
    assert [w.text for w in update.live_words] == ["and", "then", "we"]
    assert update.live_words[0].end_time == pytest.approx(11.5)  # still absolute


def test_tail_stays_bounded_over_a_long_silence():
    stabilizer, tail = TranscriptStabilizer(max_tail_seconds=20.0), 0.0
    for _ in range(40):  # 100 s of silence in 2.5 s chunks
        tail += 2.5
        tail -= stabilizer.update([], tail).cut_seconds
        assert tail <= 20.0 + 2.5


def test_an_empty_final_hypothesis_commits_the_live_words():
    stabilizer = TranscriptStabilizer()
    stabilizer.update(timed("we saw that the"), 3.0)
    update = stabilizer.update([], 3.5, final=True)
    assert [w.text for s in update.committed_sentences for w in s] == ["we", "saw", "that", "the"]


def test_agreed_words_far_behind_the_tail_end_are_frozen_and_their_audio_cut():
    """retranscribe_seconds=4: of a 6 s tail, the words two hypotheses agree on that ended 2 s or more before its
    end are frozen; they stay live words of the sentence, leave the audio and become the recogniser's context."""
    stabilizer = TranscriptStabilizer(retranscribe_seconds=4.0)
    text = "we trained one model on four tasks and then"  # 9 words every 0.6 s, no sentence end
    first = stabilizer.update(paused(text)[:8], 5.0)
    assert first.cut_seconds == 0.0 and stabilizer.frozen == []  # nothing agreed yet
    second = stabilizer.update(paused(text), 6.0)  # ends at 0.25 (...) 4.45, 5.05; freeze up to 4.0 s
    assert [w.text for w in stabilizer.frozen] == ["we", "trained", "one", "model", "on", "four", "tasks"]
    assert second.cut_seconds == pytest.approx((3.85 + 4.2) / 2)  # in the pause after "tasks"
    assert stabilizer.context == "we trained one model on four tasks"
    assert [w.text for w in second.live_words] == text.split()
    assert [w.end_time for w in second.live_words] == pytest.approx([0.6 * i + 0.25 for i in range(9)])
    assert second.agreed_live_words == 8  # the frozen words and "and" (the last word is never agreed)
    # The next chunk's hypothesis covers only the audio after the cut (4.025 s): times on the new tail.
    third = stabilizer.update(paused("and then we stopped.", start=0.175), 3.0)
    assert [w.text for w in third.live_words] == [*text.split(), "we", "stopped."]
    assert third.live_words[-1].end_time == pytest.approx(4.025 + 0.175 + 1.8 + 0.25)
    assert third.committed_sentences == ()


def test_words_are_frozen_only_up_to_a_pause():
    """Running speech (words that abut) is never cut: the cut would clip the next word's onset. The freeze stops at
    the last agreed word, ended by `until`, that a pause of at least `min_pause` follows."""
    running = timed("we trained one model on four tasks and then", step=0.6)
    assert frozen_word_count(running, 8, 4.0, FREEZE_MIN_PAUSE) == 0
    mixed = timed("we trained one", step=0.6) + timed("model on", start=1.8, step=0.6, pause=0.35) \
        + timed("four tasks and then", start=3.0, step=0.6)
    assert [w.end - w.start for w in mixed[3:5]] == pytest.approx([0.25, 0.25])
    assert frozen_word_count(mixed, 8, 4.0, FREEZE_MIN_PAUSE) == 5  # after "on" (pause 0.35 s), not "model"
    assert frozen_word_count(mixed, 8, 2.5, FREEZE_MIN_PAUSE) == 4  # "on" ended at 2.65, after 2.5
    assert frozen_word_count(mixed, 3, 4.0, FREEZE_MIN_PAUSE) == 0  # only agreed words
    assert frozen_word_count(mixed[:5], 5, 4.0, FREEZE_MIN_PAUSE) == 4  # never the last word
    stabilizer = TranscriptStabilizer(retranscribe_seconds=4.0)
    for _ in range(3):
        update = stabilizer.update(running, 6.0)
    assert stabilizer.frozen == [] and update.cut_seconds == 0.0


def test_a_sentence_with_frozen_words_is_committed_whole():
    stabilizer = TranscriptStabilizer(retranscribe_seconds=4.0)
    text = "we trained one model on four tasks and then"
    stabilizer.update(paused(text), 6.0)
    stabilizer.update(paused(text), 6.0)
    assert len(stabilizer.frozen) == 7
    rest = paused("and then stopped. Next", start=0.175)  # the tail begins at the cut, 4.025 s
    stabilizer.update(rest, 3.2)
    update = stabilizer.update(rest, 3.2)
    assert [[w.text for w in s] for s in update.committed_sentences] == [
        "we trained one model on four tasks and then stopped.".split()]
    assert stabilizer.frozen == [] and [w.text for w in update.live_words] == ["Next"]
    assert update.cut_seconds == pytest.approx((1.625 + 1.975) / 2)  # in the pause after "stopped."
    assert stabilizer.tail_start == pytest.approx(4.025 + 1.8) and stabilizer.live_start == pytest.approx(5.825)


def test_a_final_update_commits_the_frozen_words_too():
    stabilizer = TranscriptStabilizer(retranscribe_seconds=4.0)
    text = "we trained one model on four tasks and then"
    stabilizer.update(paused(text), 6.0)
    stabilizer.update(paused(text), 6.0)
    assert stabilizer.frozen
    update = stabilizer.update([], 2.0, final=True)  # the last re-transcription heard nothing
    assert [w.text for s in update.committed_sentences for w in s] == text.split()


def test_the_sentence_limit_counts_the_frozen_part_of_a_sentence():
    """A sentence that never ends: freezing keeps the audio short, and max_sentence_seconds still bounds the live
    sentence by committing its agreed words."""
    stabilizer = TranscriptStabilizer(max_tail_seconds=10.0, retranscribe_seconds=4.0, max_sentence_seconds=12.0)
    words = [f"w{i}" for i in range(60)]
    spoken, committed, longest_tail = 0.0, [], 0.0
    for chunk in range(1, 31):  # 30 s, a 0.15 s word every 0.5 s (pauses of 0.35 s), 1 s chunks
        spoken = float(chunk)
        heard = [TimedWord(w, i * 0.5 - stabilizer.tail_start, i * 0.5 + 0.15 - stabilizer.tail_start)
                 for i, w in enumerate(words[: int(spoken / 0.5)]) if i * 0.5 >= stabilizer.tail_start - 1e-9]
        update = stabilizer.update(heard, spoken - stabilizer.tail_start)
        committed += [w.text for s in update.committed_sentences for w in s]
        longest_tail = max(longest_tail, spoken - stabilizer.tail_start)
        assert spoken - stabilizer.live_start <= 12.0 + 1.0
    assert longest_tail <= 4.0 + 1.0
    assert committed and committed == words[: len(committed)]


def test_without_retranscribe_seconds_nothing_is_frozen():
    stabilizer = TranscriptStabilizer()
    text = "we trained one model on four tasks and then"
    for _ in range(3):
        update = stabilizer.update(timed(text, step=0.6), 6.0)
    assert stabilizer.frozen == [] and update.cut_seconds == 0.0 and stabilizer.context == ""
    with pytest.raises(ValueError, match="retranscribe_seconds"):
        TranscriptStabilizer(retranscribe_seconds=-1.0)


def test_a_looping_hypothesis_is_cut_before_the_second_copy():
    """Whisper base on 1.9 s of espeak-ng: "The second ingredient is the model size." and the same sentence again
    to the end of its budget. The repeat is no speech: it is dropped, and the real next sentence still commits."""
    stabilizer = TranscriptStabilizer()
    looping = timed("The second ingredient is the model size. The second ingredient is the model size.", step=0.2)
    update = stabilizer.update(looping, 3.0)
    assert [w.text for w in update.live_words] == "The second ingredient is the model size.".split()
    update = stabilizer.update(looping + timed("And then", start=3.0), 4.0)
    assert [w.text for w in update.live_words] == "The second ingredient is the model size.".split()
    assert stabilizer.update(timed("The second ingredient is the model size. And then", step=0.2), 4.0
                             ).committed_sentences != ()
    # A phrase said twice in a row by a person (two words, twice) is no loop.
    assert len(TranscriptStabilizer().update(timed("thank you, thank you. We start"), 3.0).live_words) == 6


def test_forced_prefix_is_the_agreed_tail_words_less_the_rollback():
    stabilizer = TranscriptStabilizer()
    assert stabilizer.forced_prefix(0) == ""  # nothing heard yet
    stabilizer.update(timed("the city will build"), 2.0)
    assert stabilizer.forced_prefix(0) == ""  # one hypothesis: nothing agreed yet
    stabilizer.update(timed("the city will build three new"), 3.0)
    assert stabilizer.forced_prefix(0) == "the city will build"
    assert stabilizer.forced_prefix(2) == "the city"
    assert stabilizer.forced_prefix(9) == ""
    # A revision shrinks the agreement, and with it the prefix: only words two hypotheses share are forced.
    stabilizer.update(timed("the city will built three new schools"), 3.5)
    assert stabilizer.forced_prefix(1) == "the city"
    with pytest.raises(ValueError, match="rollback_words"):
        stabilizer.forced_prefix(-1)


def test_forced_prefix_holds_only_words_still_in_the_tail_audio():
    stabilizer = TranscriptStabilizer()
    words = [TimedWord("One.", 0.0, 1.0), TimedWord("Two", 1.4, 2.0), TimedWord("three", 2.0, 2.5),
             TimedWord("four", 2.5, 2.9)]
    stabilizer.update(words, 3.0)
    update = stabilizer.update(words, 3.0)
    assert [w.text for w in update.committed_sentences[0]] == ["One."]  # its audio is cut from the tail
    assert stabilizer.forced_prefix(1) == "Two three"
    stabilizer.update([], 3.0, final=True)
    assert stabilizer.forced_prefix(0) == ""  # a final update commits everything


def test_forced_prefix_leaves_frozen_words_to_the_context():
    stabilizer = TranscriptStabilizer(retranscribe_seconds=2.0)
    hypothesis = paused("we will now build three new schools and two")
    stabilizer.update(hypothesis, 5.4)
    stabilizer.update(hypothesis, 5.4)
    assert stabilizer.frozen, "the agreed words far behind the tail's end are frozen"
    frozen = stabilizer.context.split()
    prefix = stabilizer.forced_prefix(0).split()
    assert frozen + prefix == [w.text for w in hypothesis][: len(frozen) + len(prefix)]
    assert prefix and prefix[0] == hypothesis[len(frozen)].text


@pytest.mark.parametrize("text,index,expected", [
    ("still remains understudied In this paper", 2, True),   # a full stop the recogniser did not write
    ("planning An abstract goal", 0, True),
    ("understudied. In this", 0, True),                        # written
    ("I'm from Fudan University", 2, False),                  # a name goes on
    ("we call it option A", 3, False),                        # a letter, not "A" as an opener
    ("when I came, In that", 2, False),                       # after a comma: no end
    ("results of table 3 The", 3, False),                     # only after a lower-case letter
    ("and then we", 2, False),                                # the last word: nothing follows
    ("the problem In", 2, False),
])
def test_closes_sentence_reads_a_capitalised_opener_after_a_bare_word_as_an_unwritten_end(text, index, expected):
    assert closes_sentence(text.split(), index) is expected


@pytest.mark.parametrize("agreement", ["words", "sentence_end"])
def test_a_sentence_the_recogniser_left_without_its_full_stop_is_committed_at_the_capitalised_opener(agreement):
    """Whisper on MCIF talk ccpXHNfaoy (1.5B en→zh runs of 2026-11-30): one hypothesis ends the sentence with a full
    stop, the next one, hearing on, drops every full stop; without the unwritten end the sentence ran to
    max_sentence_seconds and the stream emitted nothing for 45 s."""
    stabilizer = TranscriptStabilizer(commit_agreement=agreement)
    first = "Planning for goals still remains understudied." if agreement == "sentence_end" else \
        "Planning for goals still remains understudied In this"
    stabilizer.update(timed(first), 4.0)
    update = stabilizer.update(timed("Planning for goals still remains understudied In this paper we"), 5.0)
    assert [[w.text for w in s] for s in update.committed_sentences] == [
        ["Planning", "for", "goals", "still", "remains", "understudied"]]
    assert [w.text for w in update.live_words] == ["In", "this", "paper", "we"]


def test_the_live_sentence_ends_at_an_unwritten_sentence_end_too():
    words = [SourceWord(text, 0.5 * (i + 1)) for i, text in enumerate("remains understudied In this paper".split())]
    assert [w.text for w in TranscriptUpdate((), tuple(words), 0.0).live_sentence] == ["remains", "understudied"]


def test_following_pauses_are_the_silences_between_words():
    words = [TimedWord("a", 0.0, 0.4), TimedWord("b", 1.0, 1.5), TimedWord("c", 1.4, 2.0)]
    assert following_pauses(words) == [pytest.approx(0.6), 0.0, None]  # an overlap is no pause
    assert following_pauses([]) == []


def test_pause_commit_count_takes_the_last_recent_agreed_pause_long_enough():
    words = [SourceWord(f"w{i}", end) for i, end in enumerate([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])]
    pauses = [0.7, 0.1, 0.9, 0.6, 0.3, None]
    assert pause_commit_count(words, pauses, 5, 0.5, 2.0) == 4  # after w3 (ended 1 s before w4), not after w2
    assert pause_commit_count(words, pauses, 5, 0.8, 2.0) == 3  # w2's 0.9 s pause, 2 s before w4: still recent
    assert pause_commit_count(words, pauses, 5, 0.8, 1.5) == 0  # none recent enough: wait for the next pause
    assert pause_commit_count(words, pauses, 2, 0.5, 2.0) == 1  # only among the agreed words
    assert pause_commit_count(words, pauses, 5, 1.0, 10.0) == 0  # none long enough
    assert pause_commit_count(words, pauses, 0, 0.5, 2.0) == 0 and pause_commit_count([], [], 3, 0.5, 2.0) == 0


def spoken_without_punctuation(count: int, long_pauses_after: set[int], gap: float = 0.1) -> list[TimedWord]:
    """`count` words "w0".. on the absolute time base, 0.4 s each; `gap` seconds of silence after each, 0.8 s after
    those in `long_pauses_after` (where the speaker ended a sentence the recogniser did not write)."""
    words, at = [], 0.0
    for index in range(count):
        words.append(TimedWord(f"w{index}", at, at + 0.4))
        at += 0.4 + (0.8 if index in long_pauses_after else gap)
    return words


def stream_transcript(stabilizer: TranscriptStabilizer, words: list[TimedWord], seconds: int,
                      first: int = 1) -> list[tuple[int, list[str]]]:
    """Feed a recogniser that hears `words` exactly, one 1 s chunk at a time, the chunks ending at `first` to
    `seconds` seconds; the sentences committed, each with the chunk that committed it."""
    committed: list[tuple[int, list[str]]] = []
    for chunk in range(first, seconds + 1):
        heard = [TimedWord(w.text, w.start - stabilizer.tail_start, w.end - stabilizer.tail_start) for w in words
                 if w.end <= chunk and w.start >= stabilizer.tail_start - 1e-9]
        update = stabilizer.update(heard, chunk - stabilizer.tail_start)
        committed += [(chunk, [w.text for w in sentence]) for sentence in update.committed_sentences]
    return committed


def test_a_sentence_without_an_end_is_committed_at_the_next_pause_past_pause_commit_seconds():
    """A recogniser that writes no sentence end: past pause_commit_seconds the sentence is committed at the next
    pause near its agreed words (after w44, 22 s in), the cut in that pause, not at the older pause after w15, which
    the translator has read and translated past; without the rule nothing is committed before max_sentence_seconds."""
    words = spoken_without_punctuation(70, {15, 44})
    assert words[45].start - words[44].end >= PAUSE_COMMIT_MIN_PAUSE
    with_pauses = TranscriptStabilizer(max_tail_seconds=20.0, max_sentence_seconds=60.0, pause_commit_seconds=20.0)
    committed = stream_transcript(with_pauses, words, 26)
    assert [sentence for _, sentence in committed] == [[f"w{i}" for i in range(45)]]
    assert committed[0][0] <= words[45].end + 2  # as soon as two hypotheses agree on w44 and w45 began
    assert words[44].end < with_pauses.tail_start < words[45].start  # the cut lies in the pause
    without = TranscriptStabilizer(max_tail_seconds=20.0, max_sentence_seconds=60.0)
    assert stream_transcript(without, words, 26) == []


def test_a_pause_commit_takes_the_frozen_words_with_it():
    """With `retranscribe_seconds` the agreed words older than 1 s are frozen (their audio cut) at every pause of
    FREEZE_MIN_PAUSE: the pause commit past 20 s commits them with the tail's words up to the 0.8 s pause."""
    words = spoken_without_punctuation(70, {44}, gap=FREEZE_MIN_PAUSE + 0.05)
    stabilizer = TranscriptStabilizer(max_tail_seconds=20.0, max_sentence_seconds=60.0, retranscribe_seconds=2.0,
                                      pause_commit_seconds=20.0)
    assert stream_transcript(stabilizer, words, 20) == [] and len(stabilizer.frozen) > 20
    committed = stream_transcript(stabilizer, words, 40, first=21)  # w44 ends at 33.4 s
    assert [sentence for _, sentence in committed][:1] == [[f"w{i}" for i in range(45)]]


def test_without_a_long_pause_the_sentence_waits_for_max_sentence_seconds():
    words = spoken_without_punctuation(120, set())
    stabilizer = TranscriptStabilizer(max_tail_seconds=20.0, max_sentence_seconds=30.0, pause_commit_seconds=20.0)
    assert stream_transcript(stabilizer, words, 29) == []
    assert len(stream_transcript(stabilizer, words, 31, first=30)) == 1


def test_a_negative_pause_commit_seconds_is_refused():
    with pytest.raises(ValueError, match=r"pause_commit_seconds must be >= 0 \(0: off\)"):
        TranscriptStabilizer(pause_commit_seconds=-1.0)
