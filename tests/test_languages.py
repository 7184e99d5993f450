"""Languages given as ISO codes or names, in any case, become one ISO code everywhere: the leaf module, the YAML/flag
knobs, every command line and simulstream's `set_*_language` calls (the organizers pass `English`, `German`)."""
from __future__ import annotations

import argparse
from types import SimpleNamespace

import pytest

from common.config import ConfigError, add_config_args, build_config, config_from_namespace
from common.languages import LANGUAGES, LanguageError, language_code, language_name
from agents.systems.config import AlignAttConfig, CascadeConfig, check_language_pair


@pytest.mark.parametrize("given,code", [
    ("English", "en"), ("english", "en"), ("EN", "en"), ("en-US", "en"), ("en_GB", "en"), ("eng", "en"),
    ("German", "de"), ("german", "de"), ("de", "de"), ("Deutsch", "de"), ("deu", "de"), (" de-AT ", "de"),
    ("zh", "zh"), ("Chinese", "zh"), ("zh-CN", "zh"), ("zh_Hans", "zh"), ("中文", "zh"), ("Chinese (Mandarin)", "zh"),
    ("cs", "cs"), ("Czech", "cs"), ("ces", "cs"), ("Italian", "it"), ("ITALIAN", "it"), ("it", "it"),
])
def test_names_and_codes_in_any_case_become_the_iso_code(given, code):
    assert language_code(given) == code
    assert language_name(given) == LANGUAGES[code]


@pytest.mark.parametrize("given", ["Klingon", "xx", "", "   ", None, "Germanic"])
def test_unknown_languages_are_refused_naming_the_supported_list(given):
    with pytest.raises(LanguageError, match=r"en \(English\), de \(German\), it \(Italian\), zh \(Chinese\), "
                                            r"cs \(Czech\)"):
        language_code(given)


def test_yaml_and_namespace_knobs_hold_the_iso_code():
    config = build_config(CascadeConfig, {"source_lang": "Czech", "target_lang": "english"})
    assert (config.source_lang, config.target_lang) == ("cs", "en")
    with pytest.raises(ConfigError, match="target_lang: unknown language 'Klingon'.*de \\(German\\)"):
        build_config(AlignAttConfig, {"target_lang": "Klingon"})
    with pytest.raises(ConfigError, match="both 'en'"):
        build_config(AlignAttConfig, {"source_lang": "English", "target_lang": "EN"})


def test_simuleval_agent_flags_take_names():
    parser = argparse.ArgumentParser()
    add_config_args(parser, AlignAttConfig)
    config = config_from_namespace(AlignAttConfig, parser.parse_args(["--source-lang", "English",
                                                                      "--target-lang", "Chinese"]))
    assert (config.source_lang, config.target_lang) == ("en", "zh")


def test_a_config_built_by_hand_with_a_name_is_refused_not_misread():
    # "Chinese" held as is would be taken for a word-unit language; configs hold codes.
    with pytest.raises(ConfigError, match="target_lang 'Chinese' must be held as its ISO code 'zh'"):
        check_language_pair("en", "Chinese")


def test_command_lines_take_names_and_refuse_unknown_ones(capsys):
    from evaluation.cli import build_parser as simulagents_parser
    from agents.simulstream_cli import build_parser as simulstream_parser

    args = simulstream_parser().parse_args(["--agent", "x:Y", "--src-lang", "English", "--tgt-lang", "German"])
    assert (args.src_lang, args.tgt_lang) == ("en", "de")
    args = simulagents_parser().parse_args(["eval", "--agent", "x:Y", "--out", "o", "--src-lang", "czech",
                                            "--tgt-lang", "English"])
    assert (args.src_lang, args.tgt_lang) == ("cs", "en")
    with pytest.raises(SystemExit):
        simulstream_parser().parse_args(["--agent", "x:Y", "--tgt-lang", "Klingon"])
    assert "unknown language 'Klingon'" in capsys.readouterr().err


def test_simulstream_processor_takes_names_from_the_harness():
    pytest.importorskip("simulstream")
    from agents.alignatt4llm import Agent

    agent = Agent(SimpleNamespace(speech_chunk_size=1.0, model="embedded"))  # parses the config; loads no weights
    agent.set_source_language("English")
    agent.set_target_language("Italian")
    assert (agent.source_lang, agent.target_lang) == ("en", "it")
    agent.set_target_language("chinese")
    assert agent.target_lang == "zh"
    with pytest.raises(ConfigError, match="unknown language 'Klingon'.*cs \\(Czech\\)"):
        agent.set_target_language("Klingon")
    assert agent.target_lang == "zh" and agent.translator is None
