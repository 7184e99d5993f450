"""benchmarks/cascade_trace.py: every step of a talk through a speech cascade agent as JSON lines, on real speech
(espeak-ng) and the embedded default, and its summary of sentences committed behind what the translator read."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from cascade_trace import words_read_past  # noqa: E402


def test_words_read_past_aligns_reworded_and_repunctuated_words():
    read = "we plot the results on graphs in which we have".split()
    assert words_read_past(read, "We plot the results on graphs.".split()) == 4
    assert words_read_past(read, "we plot the result on graphs in which we have BLEU.".split()) == 0
    assert words_read_past(["top-to-nation", "objectives"], ["top-timination", "objectives,"]) == 0


def test_each_record_names_the_steps_its_own_call_reported(tmp_path):
    """Each record carries the step its own call reported (a live step, or a final draft and its retry), and none
    where the call reported none (a fake translator, named so)."""
    from types import SimpleNamespace

    from agents.systems.events import Step
    from cascade_trace import Tracer
    from common.stream import Emission, SourceWord

    class FakeStepsTranslator:
        target_unit = "word"

        def __init__(self):
            self.observers, self.segment_units = [], []

        def report(self, *steps):
            for step in steps:
                for observer in self.observers:
                    observer(step)

        def revise(self, words, now=None, hold_back=0.0):
            self.report(Step(None, None, f"draft {len(words)}", "", len(words)))
            return Emission(new_units=("x",))

        def finish_segment(self, words):
            if len(words) == 2:  # a final draft and its retry (LLMTranslator._next_attempt)
                self.report(Step(None, None, "die, die", "", 2, final=True),
                            Step(None, None, "dropped", "", 2, final=True, dropped=True),
                            Step(None, None, "wir", "", 2, final=True, retry=True))
            return Emission()  # else a final step that adds no step

    translator = FakeStepsTranslator()
    with (tmp_path / "t.jsonl").open("w") as out:
        tracer = Tracer(SimpleNamespace(translator=translator, now=1.0), out)
        for count in range(1, 6):
            translator.revise([SourceWord(f"w{i}", 0.0) for i in range(count)], now=1.0)
        translator.finish_segment([SourceWord("w0", 0.0)])
        translator.finish_segment([SourceWord("w0", 0.0), SourceWord("w1", 0.0)])
    assert [r["accessible"] for r in tracer.records[:5]] == [1, 2, 3, 4, 5]
    assert [r["draft"] for r in tracer.records[:5]] == [f"draft {n}" for n in range(1, 6)]
    assert tracer.records[5]["kind"] == "final" and tracer.records[5]["draft"] is None
    assert (tracer.records[6]["draft"], tracer.records[6]["retry_drafts"]) == ("die, die", ["wir"])
    assert all("retry_drafts" not in r for r in tracer.records[:6])


@pytest.mark.real_model
def test_a_talk_is_traced_step_by_step_on_the_embedded_default(tmp_path):
    from common.synthetic_speech import synthesize_talk

    wav = tmp_path / "talk.wav"
    synthesize_talk(["Today we present our new model.", "It translates speech while the speaker is talking."], wav)
    out = tmp_path / "trace.jsonl"
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "cascade_trace.py"), "--wav", str(wav),
                             "--out", str(out), "--agent", "agents.alignatt4llm:WaitkAgent"],
                            capture_output=True, text=True, cwd=ROOT, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    finals = [r for r in records if r["kind"] == "final"]
    lives = [r for r in records if r["kind"] == "live"]
    assert lives and len(finals) == 2  # two sentences, each finished as its own segment
    assert [w.lower().strip(".,") for r in finals for w in r["words"]][:3] == ["today", "we", "present"]
    # What the trace says was emitted is the whole output, in order, and the summary counts the same records.
    assert all(r["accessible"] is None or 0 <= r["accessible"] <= len(r["words"]) for r in lives)
    assert sum(bool(r["emitted"]) for r in lives) > 0 and all(r["draft"] is not None for r in finals)
    assert any(" " in r["emitted"] for r in records)  # words joined as the target language writes them
    assert f"{len(lives)} live steps" in result.stdout and "2 sentences committed, 0 without a sentence end" \
        in result.stdout


def test_a_text_agent_is_refused_by_name(tmp_path):
    wav = tmp_path / "talk.wav"
    wav.write_bytes(b"")
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "cascade_trace.py"), "--wav", str(wav),
                             "--out", str(tmp_path / "t.jsonl"), "--agent", "agents.alignatt4llm:TextAgent"],
                            capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr and "TextAgent" in result.stderr
