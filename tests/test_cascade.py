"""The speech cascade on a tiny random LLM with a scripted (fake) recogniser: the start delay, the hold-back on one
absolute time base across tail cuts, segment finishing, append-only output, stream isolation, and the simulstream
adapter's tokens. Real speech and real models are in test_simulstream_agent.py."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from agents.core import Emission
from agents.harness.audio import AudioError
from agents.systems.cascade import CascadeTranslator
from agents.systems.config import CascadeConfig
from agents.systems.llm import AlignAttTranslator
from backends.asr.base import SpeechRecognizer, TimedWord
from backends.heads import HeadSet
from backends.hf.lm import CausalLM
from backends.models import load_causal_lm

RATE = 16_000
SCALE = float(2 ** 24)  # the fake audio's samples encode their absolute index exactly in float32

# (word, absolute start, absolute end) in seconds: two sentences with a pause between them.
TIMELINE = [("the", 0.2, 0.5), ("committee", 0.5, 1.0), ("approved", 1.0, 1.6), ("the", 1.6, 1.8),
            ("budget.", 1.8, 2.4), ("schools", 3.0, 3.5), ("and", 3.5, 3.7), ("hospitals", 3.7, 4.3),
            ("waited.", 4.3, 4.9)]


def timeline_audio(seconds: float) -> np.ndarray:
    return (np.arange(int(seconds * RATE), dtype=np.float64) / SCALE).astype(np.float32)


class TimelineRecognizer(SpeechRecognizer):
    """A fake recogniser: reads the absolute position from the samples and returns the scripted words that lie
    wholly inside the audio, relative to its start (a real recogniser's contract, without a model)."""

    def __init__(self, timeline=TIMELINE):
        self.timeline = timeline
        self.calls = 0

    def transcribe(self, audio, language):
        self.calls += 1
        if len(audio) == 0:
            return []
        start = round(float(audio[0]) * SCALE) / RATE
        end = start + len(audio) / RATE
        return [TimedWord(text, s - start, e - start) for text, s, e in self.timeline
                if s >= start - 1e-9 and e <= end + 1e-9]


@pytest.fixture(scope="module")
def tiny_lm(tiny_checkpoint):
    return CausalLM(*load_causal_lm(str(tiny_checkpoint("qwen3"))))


def cascade(lm, **overrides) -> CascadeTranslator:
    config = CascadeConfig(model="unused", border=1, median_width=3, final_max_new_tokens=12, max_new_tokens=6,
                           **overrides)
    heads = HeadSet(((0, 0), (0, 1), (1, 0), (1, 1)))
    return CascadeTranslator(TimelineRecognizer(), AlignAttTranslator(lm, config, heads), config)


def run(translator: CascadeTranslator, seconds: float = 6.0, chunk: float = 0.5) -> list[Emission]:
    audio = timeline_audio(seconds)
    step = int(chunk * RATE)
    emissions = [translator.feed_audio(audio[i:i + step]) for i in range(0, len(audio), step)]
    return [*emissions, translator.flush()]


def test_fake_asr_no_emission_and_no_asr_before_min_start(tiny_lm):
    translator = cascade(tiny_lm, min_start_seconds=2.0)
    audio = timeline_audio(1.5)
    assert translator.feed_audio(audio).is_empty and translator.recognizer.calls == 0
    translator.feed_audio(timeline_audio(2.0)[len(audio):])
    assert translator.recognizer.calls == 1


def test_fake_asr_hold_back_uses_one_absolute_time_base_after_tail_cuts(tiny_lm):
    translator = cascade(tiny_lm, hold_back=0.25, min_start_seconds=0.0)
    audio = timeline_audio(4.4)
    translator.feed_audio(audio[: int(3.0 * RATE)])
    translator.feed_audio(audio[int(3.0 * RATE): int(3.2 * RATE)])
    assert translator.committed_sentences == []  # agreed, but no next word yet: the cut could clip "budget."
    translator.feed_audio(audio[int(3.2 * RATE): int(3.6 * RATE)])  # "schools" has begun: commit
    assert [[w.text for w in s] for s in translator.committed_sentences] == [
        ["the", "committee", "approved", "the", "budget."]]
    assert translator.stabilizer.tail_start == pytest.approx(2.7)  # midway through the 2.4-3.0 pause
    translator.feed_audio(audio[int(3.6 * RATE):])  # now = 4.4 s
    step = translator.translator.steps[-1]
    # Live words end at 3.5, 3.7, 4.3 (absolute); with now - hold_back = 4.15, two are accessible. Tail-relative
    # times (the reference's bug) would make all three accessible.
    assert [w.text for w in translator.live_words] == ["schools", "and", "hospitals"]
    assert step.accessible_words == 2


def test_fake_asr_cascade_is_append_only_and_translates_every_sentence(tiny_lm):
    translator = cascade(tiny_lm, min_start_seconds=0.0)
    emissions = run(translator)
    assert all(e.retract_units == 0 for e in emissions)
    units = [u for e in emissions for u in e.new_units]
    assert units == translator.emitted_units
    assert [len(s) for s in translator.committed_sentences] == [5, 4]
    # Each sentence was finished as its own segment: the translator starts the next from an empty target.
    assert translator.translator.segment_start == len(units)
    assert translator.transcript == " ".join(w for w, _, _ in TIMELINE)


def test_fake_asr_streams_do_not_share_state(tiny_lm):
    alone = run(cascade(tiny_lm, min_start_seconds=0.0))
    first, second = cascade(tiny_lm, min_start_seconds=0.0), cascade(tiny_lm, min_start_seconds=0.0)
    audio = timeline_audio(6.0)
    step = int(0.5 * RATE)
    interleaved_first, interleaved_second = [], []
    for i in range(0, len(audio), step):
        interleaved_first.append(first.feed_audio(audio[i:i + step]))
        interleaved_second.append(second.feed_audio(audio[i:i + step]))
    interleaved_first.append(first.flush())
    interleaved_second.append(second.flush())
    assert interleaved_first == alone and interleaved_second == alone
    # reset() starts a new stream from scratch: the same audio gives the same output again.
    first.reset()
    assert run(first) == alone


def test_fake_asr_cascade_refuses_bad_audio(tiny_lm):
    translator = cascade(tiny_lm)
    with pytest.raises(AudioError, match="mono"):
        translator.feed_audio(np.zeros((100, 2), dtype=np.float32))
    with pytest.raises(AudioError, match="NaN"):
        translator.feed_audio(np.full(100, np.nan, dtype=np.float32))
    assert translator.feed_audio(np.zeros(0, dtype=np.float32)).is_empty
    assert translator.flush().is_empty  # no audio at all: nothing to say, no error


class ScriptedTranslator:
    """A fake translator replaying emissions, to test the simulstream adapter's token bookkeeping alone."""

    def __init__(self, emissions, target_unit="word"):
        self.emissions = list(emissions)
        self.target_unit = target_unit

    def feed_audio(self, samples):
        return self.emissions.pop(0)

    def flush(self):
        return self.emissions.pop(0)

    def reset(self):
        pass


def adapter(emissions, target_unit="word"):
    from agents.alignatt4llm import Agent

    agent = Agent(SimpleNamespace(speech_chunk_size=1.0, model="embedded", target_lang="de"))
    agent.translator = ScriptedTranslator(emissions, target_unit)
    return agent


def test_fake_translator_simulstream_tokens_carry_their_spaces_and_retract_exact_suffixes():
    agent = adapter([Emission(new_units=("Guten", "Tag")), Emission(new_units=("alle",)),
                     Emission(retract_units=1, new_units=("zusammen.",))])
    outputs = [agent.process_chunk(np.zeros(10, np.float32)) for _ in range(2)] + [agent.end_of_stream()]
    assert [o.new_tokens for o in outputs] == [["Guten", " Tag"], [" alle"], [" zusammen."]]
    assert outputs[2].deleted_tokens == [" alle"] and outputs[2].deleted_string == " alle"
    assert agent.tokens_to_string(agent.sent_tokens) == "Guten Tag zusammen."
    agent.clear()
    assert agent.sent_tokens == []


def test_fake_translator_simulstream_char_targets_concatenate():
    agent = adapter([Emission(new_units=("你", "好")), Emission(new_units=("。",))], target_unit="char")
    tokens = [t for _ in range(2) for t in agent.process_chunk(np.zeros(1, np.float32)).new_tokens]
    assert agent.tokens_to_string(tokens) == "你好。"


def test_simulstream_agent_refuses_unknown_keys_and_unsupported_pairs_before_loading():
    from agents.alignatt4llm import Agent
    from agents.harness.config import ConfigError

    with pytest.raises(ConfigError, match="unknown setting"):
        Agent(SimpleNamespace(speech_chunk_size=1.0, hold_bak=0.2))
    agent = Agent(SimpleNamespace(speech_chunk_size=1.0, model="embedded"))
    with pytest.raises(ConfigError, match="en->fr.*no default head set"):
        agent.set_target_language("fr")
    with pytest.raises(ConfigError, match="unknown language 'xx'"):
        agent.set_target_language("xx")
    assert agent.translator is None  # nothing was loaded


def test_units_before_sentence_end():
    from agents.systems.llm import units_before_sentence_end

    assert units_before_sentence_end(("Guten", "Tag.", "Heute")) == ("Guten",)
    assert units_before_sentence_end(("z.B.", "drei", "Schulen")) == ("z.B.", "drei", "Schulen")
    assert units_before_sentence_end(("你", "好", "。", "我")) == ("你", "好")


def test_fake_asr_live_steps_never_close_a_sentence_the_speaker_has_not_finished(tiny_lm):
    from policies.transcript import ends_sentence

    translator = cascade(tiny_lm, min_start_seconds=0.0)
    audio = timeline_audio(6.0)
    step = int(0.5 * RATE)
    for i in range(0, len(audio), step):
        sentences_before = len(translator.committed_sentences)
        emission = translator.feed_audio(audio[i:i + step])
        if len(translator.committed_sentences) == sentences_before:  # a live step only: no sentence was finished
            assert not any(ends_sentence(unit) for unit in emission.new_units)
