"""benchmarks/sentence_boundaries.py: the recogniser that writes no punctuation it stands in for, and how a segment
cut in a pause is matched to the reference lines' ends."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from sentence_boundaries import Unpunctuated, at_line_end  # noqa: E402

from common.stream import TimedWord  # noqa: E402


class ScriptedRecognizer:
    """A fake recogniser: the same punctuated words for any audio."""

    def transcribe(self, audio, language, context="", prefix=""):
        return [TimedWord("Hello,", 0.0, 0.4), TimedWord("world.", 0.5, 0.9), TimedWord("—", 1.0, 1.1),
                TimedWord("It's", 1.2, 1.4), TimedWord("U.S.-made", 1.5, 2.0)]


def test_unpunctuated_writes_neither_case_nor_punctuation_and_keeps_the_times():
    words = Unpunctuated(ScriptedRecognizer()).transcribe(np.zeros(16000, dtype=np.float32), "en")
    assert words == [TimedWord("hello", 0.0, 0.4), TimedWord("world", 0.5, 0.9), TimedWord("it's", 1.2, 1.4),
                     TimedWord("us-made", 1.5, 2.0)]


def test_a_cut_is_at_a_line_end_only_when_a_line_ends_in_its_pause():
    line_ends = np.array([10.0, 25.0])
    assert at_line_end(9.5, 10.2, line_ends)  # the pause 9.5-10.9 holds the line end at 10
    assert at_line_end(10.2, 10.6, line_ends)  # a word end a little late: within the tolerance before the pause
    assert not at_line_end(12.0, 12.4, line_ends)  # a pause in mid-line
    assert not at_line_end(8.0, 8.5, line_ends)  # a pause that ends 1 s before the line does
