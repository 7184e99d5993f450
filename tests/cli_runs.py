"""Run an agent on a synthetic talk through simulstream's inference runner (our `simulstream` CLI), as a user does:
the talk spoken by espeak-ng (the test skips without it), then the metrics log's output records."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import eval_configs


def run_cli_on_talk(folder: Path, sentences: list[str], agent: str, preset: str, *settings: str,
                    tgt_lang: str = "de") -> tuple[list[dict], Path]:
    """The records that carry output (`generated_tokens`) and the metrics log, for `sentences` spoken as one talk and
    streamed to `agent` with `eval_configs/PRESET.yaml` and `--set` `settings` ("key=value")."""
    from agents.simulstream_cli import main
    from common.synthetic_speech import SynthesisError, synthesize_talk

    try:
        synthesize_talk(sentences, folder / "talk.wav")
    except SynthesisError as error:
        pytest.skip(str(error))
    (folder / "wavs.txt").write_text("talk.wav\n")
    log = folder / "metrics.jsonl"
    overrides = [argument for setting in settings for argument in ("--set", setting)]
    assert main(["--agent", agent, "--config", str(eval_configs.path(preset)), "--wav-list", str(folder / "wavs.txt"),
                 "--src-lang", "en", "--tgt-lang", tgt_lang, *overrides, "--metrics-log", str(log)]) == 0
    records = [json.loads(line) for line in log.read_text().splitlines()]
    return [record for record in records if "generated_tokens" in record], log
