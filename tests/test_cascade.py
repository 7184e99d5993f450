"""The speech cascade on a tiny random LLM with a scripted (fake) recogniser: the start delay, the hold-back on one
absolute time base across tail cuts, segment finishing, append-only output, stream isolation, and the simulstream
adapter's tokens. Real speech and real models are in test_simulstream_agent.py."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from common.stream import Emission
from common.audio import AudioError
from common.config import ConfigError
from agents.systems.cascade import CascadeTranslator
from agents.systems.config import CascadeConfig, LocalAgreementCascadeConfig, WaitkCascadeConfig
from agents.systems.llm import AlignAttTranslator, LocalAgreementTranslator, WaitkTranslator
from common.stream import TimedWord
from backends.asr.base import SpeechRecognizer
from backends.heads import HeadSet
from backends.hf.lm import CausalLM
from backends.prompt import PromptError
from backends.models import load_causal_lm

from observed import observe
from fake_agents import RATE, TIMELINE, TimelineRecognizer, timeline_audio  # noqa: E402


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
    seen = observe(translator)
    audio = timeline_audio(4.4)
    translator.feed_audio(audio[: int(3.0 * RATE)])
    translator.feed_audio(audio[int(3.0 * RATE): int(3.2 * RATE)])
    assert not translator.committed_sentences  # agreed, but no next word yet: the cut could clip "budget."
    translator.feed_audio(audio[int(3.2 * RATE): int(3.6 * RATE)])  # "schools" has begun: commit
    assert [[w.text for w in s] for s in translator.committed_sentences] == [
        ["the", "committee", "approved", "the", "budget."]]
    assert translator.stabilizer.tail_start == pytest.approx(2.7)  # midway through the 2.4-3.0 pause
    translator.feed_audio(audio[int(3.6 * RATE):])  # now = 4.4 s
    step = seen.steps[-1]
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

    append_only = False  # its emissions may retract

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
    outputs = [agent.process_chunk(np.zeros(RATE, np.float32)) for _ in range(2)] + [agent.end_of_stream()]
    assert [o.new_tokens for o in outputs] == [["Guten", " Tag"], [" alle"], [" zusammen."]]
    assert outputs[2].deleted_tokens == [" alle"] and outputs[2].deleted_string == " alle"
    assert agent.tokens_to_string(agent.sent_tokens) == "Guten Tag zusammen."
    agent.clear()
    assert agent.sent_tokens == []


def test_fake_translator_simulstream_keeps_no_copy_of_an_append_only_translators_output():
    agent = adapter([Emission(new_units=("Guten", "Tag")), Emission(new_units=("alle",)), Emission(),
                     Emission(new_units=("Neu",))])
    agent.translator.append_only = True  # nothing sent can be retracted: a long talk's output is not kept
    outputs = [agent.process_chunk(np.zeros(RATE, np.float32)) for _ in range(2)] + [agent.end_of_stream()]
    assert [o.new_tokens for o in outputs] == [["Guten", " Tag"], [" alle"], []]
    assert agent.sent_tokens == [] and agent.tokens_sent == 3
    agent.clear()  # a new stream: its first word has no leading space
    assert agent.process_chunk(np.zeros(RATE, np.float32)).new_tokens == ["Neu"] and agent.tokens_sent == 1


def test_fake_translator_simulstream_joins_a_piece_to_the_last_word_and_simulstreams_reader_dates_it_last(tmp_path):
    """A draft that goes on inside the word a step committed ("Sprachtranslation" + "en diskutieren.") is sent
    without a space before the piece; simulstream's own LogReader (which OmniSTEval reads logs with) rebuilds one
    word "Sprachtranslationen" and dates it by its last part."""
    import json

    from simulstream.metrics.readers import LogReader

    agent = adapter([Emission(new_units=("Hier", "Sprachtranslation")),
                     Emission(new_units=("en", "diskutieren."), joins_last_unit=True)])
    outputs = [agent.process_chunk(np.zeros(RATE, np.float32)) for _ in range(2)]
    assert [o.new_tokens for o in outputs] == [["Hier", " Sprachtranslation"], ["en", " diskutieren."]]
    log = tmp_path / "metrics.jsonl"
    lines = [{"id": 0, "metadata": {"wav_name": "talk.wav"}}] + [
        {"id": 0, "total_audio_processed": float(second), "computation_time": 0.1,
         "generated_tokens": output.new_tokens, "deleted_tokens": output.deleted_tokens}
        for second, output in enumerate(outputs, start=1)]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    config = SimpleNamespace(detokenizer_type="simuleval", latency_unit="char")  # what every preset writes
    output = LogReader(config, str(log), latency_unit="word").final_outputs_and_latencies()["talk"]
    assert output.final_text == "Hier Sprachtranslationen diskutieren."
    assert output.ideal_delays == [1.0, 2.0, 2.0]


def test_fake_translator_simulstream_char_targets_concatenate():
    agent = adapter([Emission(new_units=("你", "好")), Emission(new_units=("。",))], target_unit="char")
    tokens = [t for _ in range(2) for t in agent.process_chunk(np.zeros(RATE, np.float32)).new_tokens]
    assert agent.tokens_to_string(tokens) == "你好。"


def test_simulstream_agent_refuses_unknown_keys_and_unsupported_pairs_before_loading():
    from agents.alignatt4llm import Agent
    from common.config import ConfigError

    with pytest.raises(ConfigError, match="unknown setting"):
        Agent(SimpleNamespace(speech_chunk_size=1.0, hold_bak=0.2))
    agent = Agent(SimpleNamespace(speech_chunk_size=1.0, model="embedded"))
    with pytest.raises(ConfigError, match="unknown language 'xx'"):
        agent.set_target_language("xx")
    # A pair is checked when the stream starts: a harness sets the languages one at a time.
    agent.set_target_language("fr")
    with pytest.raises(ConfigError, match="en->fr.*no default head set"):
        agent.process_chunk(np.zeros(16_000, np.float32))
    assert agent.translator is None  # nothing was loaded


def test_a_harness_may_pass_through_an_unsupported_pair_on_the_way_to_a_supported_one():
    """simulstream's MessageProcessor (its websocket server and inference runner) sets the target first: from the
    preset's en→de to cs→en it passes en→en, which must not be refused."""
    from agents.alignatt4llm import Agent
    from common.config import ConfigError

    pytest.importorskip("simulstream")
    from simulstream.server.message_processor import MessageProcessor

    agent = Agent(SimpleNamespace(speech_chunk_size=1.0, model="embedded"))
    MessageProcessor(0, agent).process_metadata({"source_lang": "Czech", "target_lang": "English"})
    config = agent.config_for_languages(agent.base_config, agent.source_lang, agent.target_lang)
    assert (config.source_lang, config.target_lang) == ("cs", "en")
    agent.set_source_language("en")  # a stream left at en→en is refused when it starts
    with pytest.raises(ConfigError, match="en->en"):
        agent.process_chunk(np.zeros(16_000, np.float32))


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


class WhisperWindowRecognizer(TimelineRecognizer):
    """The scripted recogniser with Whisper's limit: audio longer than 30 s is refused, as the real one does."""

    def transcribe(self, audio, language, context="", prefix=""):
        if len(audio) > 30 * RATE:
            raise RuntimeError(f"{len(audio) / RATE:.1f} s of audio is longer than Whisper's 30 s window")
        return super().transcribe(audio, language, context)


def test_fake_asr_long_non_speech_inside_a_talk_keeps_the_tail_bounded(tiny_lm):
    # Two sentences, 40 s of applause (no words), then a third sentence: the tail must be cut during the silence.
    late = [(w, s + 45.0, e + 45.0) for w, s, e in TIMELINE[:5]]
    config = CascadeConfig(model="unused", border=0, median_width=3, final_max_new_tokens=12, max_new_tokens=6,
                           min_start_seconds=0.0)
    translator = CascadeTranslator(WhisperWindowRecognizer(TIMELINE + late),
                                   AlignAttTranslator(tiny_lm, config, HeadSet(((0, 0), (1, 1)))), config)
    longest = 0.0
    audio, step = timeline_audio(52.0), int(2.5 * RATE)
    for start in range(0, len(audio), step):
        translator.feed_audio(audio[start:start + step])
        longest = max(longest, len(translator.tail) / RATE)
    translator.flush()
    assert longest <= config.max_tail_seconds + 2.5
    assert translator.transcript.split() == [w for w, _, _ in TIMELINE + late]


def test_fake_asr_a_sentence_longer_than_the_tail_limit_is_translated_as_one_segment(tiny_lm):
    """A 16 s sentence with a 6 s tail limit: the recogniser's audio stays bounded, and the sentence reaches the
    translator as one segment (a forced commit of its first part ended the segment where the translator had read
    further, and the next one translated those words again: 2 of 34 sentences of an MCIF evaluation talk)."""
    long_sentence = [(f"w{i}", 0.2 + 0.5 * i, 0.6 + 0.5 * i) for i in range(31)] + [("end.", 15.7, 16.1)]
    timeline = long_sentence + [(w, s + 16.5, e + 16.5) for w, s, e in TIMELINE[5:]]
    config = CascadeConfig(model="unused", border=0, median_width=3, final_max_new_tokens=12, max_new_tokens=6,
                           min_start_seconds=0.0, max_tail_seconds=6.0)
    translator = CascadeTranslator(TimelineRecognizer(timeline),
                                   AlignAttTranslator(tiny_lm, config, HeadSet(((0, 0), (1, 1)))), config)
    longest, most_frozen = 0.0, 0
    audio, step = timeline_audio(22.0), int(1.0 * RATE)
    for start in range(0, len(audio), step):
        translator.feed_audio(audio[start:start + step])
        longest = max(longest, len(translator.tail) / RATE)
        most_frozen = max(most_frozen, len(translator.stabilizer.frozen))
    translator.flush()
    assert longest <= config.max_tail_seconds + 1.0
    assert most_frozen >= 10  # the limit was reached: words left the audio and stayed in the sentence
    assert [[w.text for w in s] for s in translator.committed_sentences] == [
        [w for w, _, _ in long_sentence], [w for w, _, _ in TIMELINE[5:]]]


class SilentAtTheEndRecognizer(TimelineRecognizer):
    """The scripted recogniser, except that the end-of-stream call hears nothing (a short, quiet last chunk)."""

    final = False

    def transcribe(self, audio, language, context="", prefix=""):
        return [] if self.final else super().transcribe(audio, language, context)


def test_fake_asr_an_empty_last_transcription_still_translates_the_live_words(tiny_lm):
    translator = cascade(tiny_lm, min_start_seconds=0.0)
    seen = observe(translator)
    translator.recognizer = SilentAtTheEndRecognizer()
    audio = timeline_audio(4.5)  # the second sentence is still being spoken
    for start, end in ((0.0, 3.0), (3.0, 3.6), (3.6, 4.5)):
        translator.feed_audio(audio[int(start * RATE):int(end * RATE)])
    assert [w.text for w in translator.live_words] == ["schools", "and", "hospitals"]
    translator.recognizer.final = True
    translator.flush()
    assert [w.text for w in translator.committed_sentences[-1]] == ["schools", "and", "hospitals"]
    assert seen.steps[-1].final and seen.steps[-1].prompt is not None


def test_fake_asr_a_word_with_whitespace_does_not_end_the_stream(tiny_lm):
    timeline = [("the", 0.2, 0.5), ("new  ", 0.5, 0.9), ("bud get", 0.9, 1.5), (" ", 1.5, 1.6), ("is", 1.6, 2.0)]
    translator = cascade(tiny_lm, min_start_seconds=0.0, hold_back=0.0)
    seen = observe(translator)
    translator.recognizer = TimelineRecognizer(timeline)
    for start in (0.0, 1.0, 2.0):
        translator.feed_audio(timeline_audio(start + 1.0)[int(start * RATE):])
    translator.flush()
    step = seen.steps[-1]
    assert step.final and "the new bud get is" in step.prompt.text


def test_fake_asr_a_source_the_prompt_cannot_map_skips_the_step(tiny_lm, monkeypatch):
    translator = cascade(tiny_lm, min_start_seconds=0.0, hold_back=0.0)
    seen = observe(translator)
    builder = translator.translator.prompts
    build = builder.build

    def unmappable(words, prefix="", map_source=True, live=False):  # a tokenizer whose offsets miss a word
        if map_source:
            raise PromptError("words without tokens: ['x']")
        return build(words, prefix, map_source, live)

    monkeypatch.setattr(builder, "build", unmappable)
    run(translator)
    steps = seen.steps
    assert all(step.skipped or step.final for step in steps) and any(step.skipped for step in steps)
    assert seen.stats.skipped > 0
    assert translator.emitted_units  # every sentence was still finished and translated


def test_fake_asr_local_agreement_peer_reads_only_words_two_hypotheses_agree_on(tiny_lm):
    """The LocalAgreement peer (whisper_streaming's LocalAgreement-2 on the recogniser): a live word reaches the
    translator only once two consecutive hypotheses hold it, i.e. (with the scripted recogniser, which hears a word
    once it has ended) once it had ended before the previous chunk; the AlignAtt cascade reads it one chunk earlier."""
    config = LocalAgreementCascadeConfig(model="unused", final_max_new_tokens=12, min_start_seconds=0.0)
    translator = CascadeTranslator(TimelineRecognizer(), LocalAgreementTranslator(tiny_lm, config), config)
    fed: list[tuple[float, list]] = []
    revise = translator.translator.revise

    def recording_revise(words, *args, **kwargs):
        fed.append((translator.now, list(words)))
        return revise(words, *args, **kwargs)

    translator.translator.revise = recording_revise
    audio, start, previous_end, withheld = timeline_audio(5.2), 0, 0.0, 0
    for end in (0.6, 1.1, 1.7, 2.0, 3.6, 4.0, 4.4, 4.6, 5.2):
        calls = len(fed)
        translator.feed_audio(audio[start:int(end * RATE)])
        start = int(end * RATE)
        if len(fed) > calls:
            words = fed[-1][1]
            assert words and all(word.end_time <= previous_end + 1e-6 for word in words)
            withheld += len(translator.live_words) > len(words)
        previous_end = end
    assert fed and withheld, "the peer never translated a live sentence, or never withheld a word heard once"
    translator.flush()
    assert translator.transcript.split() == [w for w, _, _ in TIMELINE]
    assert translator.emitted_units


def test_fake_asr_waitk_peer_counts_only_accessible_words(embedded_model_path):
    """The speech wait-k peer writes at most (accessible words - k + 1) target units of a live sentence, where a
    word is accessible once it ended `hold_back` before now: a word just heard does not yet buy a target word.
    The real embedded LLM (a random tiny one writes no live words), the scripted recogniser."""
    real_lm = CausalLM(*load_causal_lm(str(embedded_model_path)))
    config = WaitkCascadeConfig(model="unused", k=2, hold_back=0.5, min_start_seconds=0.0)
    translator = CascadeTranslator(TimelineRecognizer(), WaitkTranslator(real_lm, config), config)
    audio, start, live_writes, held_back = timeline_audio(5.2), 0, 0, 0
    for end in np.arange(0.4, 5.21, 0.2):
        translator.feed_audio(audio[start:int(round(end * RATE))])
        start = int(round(end * RATE))
        live = translator.live_words
        accessible = sum(w.end_time <= translator.now - config.hold_back + 1e-9 for w in live)
        written = len(translator.translator.segment_units) if live else 0
        assert written <= max(0, accessible - config.k + 1), (end, [w.text for w in live], accessible, written)
        live_writes += written > 0
        held_back += written == max(0, accessible - config.k + 1) < len(live) - config.k + 1
    assert live_writes, "the peer never wrote during a live sentence"
    assert held_back, "no step had a heard but not yet accessible word holding back a target word"
    translator.flush()
    assert translator.emitted_units


def test_fake_asr_frozen_words_shorten_the_audio_but_stay_in_the_sentence(tiny_lm):
    """retranscribe_seconds=3 on a 10 s sentence: the recogniser never gets much more than 3 s of audio, receives
    the frozen words as context, and the sentence is still committed and translated whole."""
    sentence = ("the committee approved the budget for new schools and hospitals in the north of the country "
                "after a long debate.").split()
    # A word every 0.5 s with a 0.35 s pause after it: freezing cuts only in pauses.
    timeline = [(word, 0.2 + 0.5 * i, 0.2 + 0.5 * i + 0.15) for i, word in enumerate(sentence)]
    config = CascadeConfig(model="unused", border=1, median_width=3, final_max_new_tokens=12, max_new_tokens=6,
                           min_start_seconds=0.0, retranscribe_seconds=3.0)
    recognizer = TimelineRecognizer(timeline)
    translator = CascadeTranslator(recognizer, AlignAttTranslator(tiny_lm, config, HeadSet(((0, 0), (1, 1)))),
                                   config)
    seen = observe(translator)
    audio, step, longest = timeline_audio(10.7), int(0.5 * RATE), 0.0
    for start in range(0, len(audio), step):
        translator.feed_audio(audio[start:start + step])
        longest = max(longest, len(translator.tail) / RATE)
        assert [w.text for w in translator.live_words] == sentence[: len(translator.live_words)]
    assert longest <= 3.0 + 0.5 + 0.5  # R, one chunk, and the pause before the cut
    contexts = recognizer.contexts
    assert contexts and all(" ".join(sentence).startswith(c) for c in contexts)
    assert len(contexts[-1].split()) >= 10
    translator.flush()
    assert [[w.text for w in s] for s in translator.committed_sentences] == [sentence]
    assert seen.steps[-1].final and translator.transcript == " ".join(sentence)


def test_fake_asr_forced_prefix_is_what_two_hypotheses_agreed_on_less_the_rollback(tiny_lm):
    """asr_forced_prefix: each call gets the tail's words the last two hypotheses agreed on, less the rollback,
    and the talk is committed and translated as without it (this fake recogniser hears the same words anyway)."""
    transcripts, prefixes = {}, {}
    for forced in (False, True):
        config = CascadeConfig(model="unused", border=1, median_width=3, final_max_new_tokens=12, max_new_tokens=6,
                               asr_forced_prefix=forced, asr_prefix_rollback=1)
        recognizer = TimelineRecognizer()
        translator = CascadeTranslator(recognizer, AlignAttTranslator(tiny_lm, config, HeadSet(((0, 0), (1, 1)))),
                                       config)
        run(translator, seconds=8.0)
        transcripts[forced] = translator.transcript
        prefixes[forced] = recognizer.prefixes
    assert transcripts[True] == transcripts[False]
    assert not any(prefixes[False])
    forced = [prefix for prefix in prefixes[True] if prefix]
    assert len(forced) >= 3, prefixes[True]
    spoken = " ".join(text for text, _, _ in TIMELINE)
    assert all(f" {prefix} " in f" {spoken} " for prefix in forced), forced
    assert prefixes[True][0] == ""  # the first call has nothing agreed


def test_forced_prefix_knobs_are_checked():
    CascadeConfig(model="unused", asr_forced_prefix=True).validate()
    with pytest.raises(ConfigError, match="asr_window: fitted"):
        CascadeConfig(model="unused", asr_forced_prefix=True, asr_window="padded").validate()
    with pytest.raises(ConfigError, match="asr_prefix_rollback"):
        CascadeConfig(model="unused", asr_prefix_rollback=-1).validate()


def test_fake_asr_commit_agreement_reaches_the_transcript_commit_and_is_checked(tiny_lm):
    from common.config import ConfigError

    with pytest.raises(ConfigError, match="commit_agreement must be one of words, sentence_end"):
        CascadeConfig(model="unused", commit_agreement="boundary").validate()
    config = CascadeConfig(model="unused", commit_agreement="sentence_end", border=1, median_width=3)
    config.validate()
    translator = CascadeTranslator(TimelineRecognizer(), AlignAttTranslator(tiny_lm, config, HeadSet(((0, 0),))),
                                   config)
    assert translator.stabilizer.commit_agreement == "sentence_end"


class SlowClock:
    """A wall clock that a fake recogniser advances by `cost` seconds per call: a machine slower than real time."""

    def __init__(self):
        self.seconds = 100.0

    def __call__(self) -> float:
        return self.seconds


class SlowTimelineRecognizer(TimelineRecognizer):
    def __init__(self, clock: SlowClock, cost: float):
        super().__init__()
        self.clock, self.cost, self.tails = clock, cost, []

    def transcribe(self, audio, language, context="", prefix=""):
        self.clock.seconds += self.cost
        self.tails.append(len(audio) / RATE)
        return super().transcribe(audio, language, context)


def slow_cascade(lm, cost: float, **overrides) -> CascadeTranslator:
    config = CascadeConfig(model="unused", border=1, median_width=3, final_max_new_tokens=12, max_new_tokens=6,
                           min_start_seconds=0.0, **overrides)
    clock = SlowClock()
    translator = AlignAttTranslator(lm, config, HeadSet(((0, 0), (0, 1), (1, 0), (1, 1))))
    return CascadeTranslator(SlowTimelineRecognizer(clock, cost), translator, config, clock=clock)


def test_fake_clock_a_stream_behind_the_audio_buffers_chunks_and_catches_up(tiny_lm):
    """Each step costs 1.5 s of wall clock for 0.5 s chunks (RTF 3). Off (the default), every chunk is processed and
    the lag grows without bound; with max_lag_seconds 1, chunks that arrive more than 1 s behind are only buffered,
    the lag stays within one step's cost of the bound, and every word is still transcribed and translated."""
    chunk = int(0.5 * RATE)
    audio = timeline_audio(6.0)
    lags = {}
    for max_lag in (0.0, 1.0):
        translator = slow_cascade(tiny_lm, cost=1.5, max_lag_seconds=max_lag)
        lags[max_lag] = []
        for start in range(0, len(audio), chunk):
            lags[max_lag].append(translator.lag_seconds())  # as the chunk arrives
            translator.feed_audio(audio[start:start + chunk])
        translator.flush()
        assert translator.transcript == " ".join(w for w, _, _ in TIMELINE)
        assert [len(s) for s in translator.committed_sentences] == [5, 4]
        if max_lag == 0.0:
            assert translator.chunks_buffered == 0 and translator.recognizer.calls == len(lags[0.0]) + 1
        else:
            assert translator.chunks_buffered > 0
            assert translator.recognizer.calls + translator.chunks_buffered == len(lags[1.0]) + 1
            assert max(translator.recognizer.tails) <= translator.config.max_tail_seconds + 0.5
    assert lags[0.0][-1] > 10.0  # 12 chunks, each 1 s further behind
    assert max(lags[1.0]) <= 1.0 + 1.5 + 1e-9


def test_fake_clock_catching_up_never_lets_the_tail_pass_max_tail_seconds(tiny_lm):
    translator = slow_cascade(tiny_lm, cost=30.0, max_lag_seconds=0.5, max_tail_seconds=2.0)
    audio = timeline_audio(6.0)
    chunk = int(0.5 * RATE)
    for start in range(0, len(audio), chunk):
        translator.feed_audio(audio[start:start + chunk])
    assert translator.chunks_buffered > 0
    assert max(translator.recognizer.tails) <= 2.0 + 0.5 + 1e-9
    translator.reset()  # a new stream on the same cascade starts from no lag
    assert translator.wall_origin is None and translator.chunks_buffered == 0


def test_max_lag_seconds_is_checked():
    from common.config import build_config

    with pytest.raises(ConfigError, match="max_lag_seconds must be >= 0"):
        build_config(CascadeConfig, {"model": "unused", "max_lag_seconds": -1})


def test_max_sentence_seconds_below_the_tail_limit_is_refused():
    from common.config import build_config

    with pytest.raises(ConfigError, match="max_sentence_seconds .* must be at least max_tail_seconds"):
        build_config(CascadeConfig, {"model": "unused", "max_tail_seconds": 20, "max_sentence_seconds": 10})
    assert build_config(CascadeConfig, {"model": "unused", "max_sentence_seconds": 20}).max_sentence_seconds == 20


def test_a_negative_pause_commit_seconds_is_refused():
    from common.config import build_config

    with pytest.raises(ConfigError, match=r"pause_commit_seconds must be >= 0 \(0: off"):
        build_config(CascadeConfig, {"model": "unused", "pause_commit_seconds": -5})
    assert build_config(CascadeConfig, {"model": "unused", "pause_commit_seconds": 0}).pause_commit_seconds == 0
