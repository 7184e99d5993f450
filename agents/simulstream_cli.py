"""`simulstream --agent MODULE:CLASS`: run any of our simulstream agents through simulstream's own inference runner
(a wav list -> a metrics log the official scorers read) or its websocket server (`--serve`).

    simulstream --agent agents.alignatt4llm:Agent --config eval_configs/alignatt4llm_cpu.yaml \\
        --wav-list wavs.txt --src-lang en --tgt-lang de --metrics-log runs/x/metrics.jsonl

The effective processor YAML is written next to the metrics log (`<log>.config.yaml`): pass it as `--eval-config`
to `simulstream_score_latency`, `simulstream_score_quality`, `simulstream_stats` and as `--simulstream_config_file`
to `omnisteval longform`.
"""
from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import sys
import tempfile
from pathlib import Path

import yaml

import eval_configs
from common.audio import AudioError, normalized_wav, wav_list_paths
from common.config import ConfigError, language_arg, read_yaml

# What simulstream's scorers need to rebuild the text from our tokens: units carry their leading space.
DETOKENIZER_DEFAULTS = {"detokenizer_type": "simuleval", "latency_unit": "char"}


# Packages whose exceptions carry a message for the user (RecognizerError, ModelNotFoundError, HeadFileError, ...).
OWN_MODULES = ("agents.", "backends.", "common.", "policies.")


class CommandError(RuntimeError):
    """A command-line problem with a message that says the fix."""


def split_agent_spec(spec: str) -> tuple[str, str]:
    """'pkg.module:Class' or 'pkg.module.Class' -> (module, class name)."""
    module_name, sep, class_name = spec.partition(":")
    if not sep:
        module_name, _, class_name = spec.rpartition(".")
    if not module_name or not class_name:
        raise CommandError(f"--agent must look like MODULE:CLASS (e.g. agents.alignatt4llm:Agent), got {spec!r}")
    return module_name, class_name


def agent_class(spec: str) -> type:
    """The class `spec` names, checked to import and to be a simulstream SpeechProcessor."""
    module_name, class_name = split_agent_spec(spec)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        raise CommandError(f"--agent {spec}: cannot import module {module_name!r} ({error})") from None
    if not hasattr(module, class_name):
        raise CommandError(f"--agent {spec}: module {module_name!r} has no class {class_name!r}")
    from simulstream.server.speech_processors import SpeechProcessor

    cls = getattr(module, class_name)
    if not (isinstance(cls, type) and issubclass(cls, SpeechProcessor)):
        raise CommandError(f"--agent {spec}: {class_name} is not a simulstream SpeechProcessor")
    return cls


def agent_type(spec: str) -> str:
    """simulstream's dotted `type:` for `--agent spec` (e.g. agents.alignatt4llm.Agent), checked to import."""
    agent_class(spec)
    return ".".join(split_agent_spec(spec))


def default_config(spec: str) -> Path | None:
    """The shipped preset an agent runs when no --config is given (its embedded CPU operating point), if it has one."""
    preset = getattr(agent_class(spec), "default_preset", None)
    return eval_configs.path(preset) if preset else None


def parse_overrides(overrides: list[str]) -> dict:
    """`--set KEY=VALUE` arguments as a dict, each value read as YAML (numbers, booleans, strings)."""
    values = {}
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep:
            raise CommandError(f"--set expects KEY=VALUE, got {override!r}")
        values[key.strip()] = yaml.safe_load(value)
    return values


def processor_config(agent: str, config_path: str | None, overrides: list[str]) -> dict:
    """The simulstream processor YAML as a dict: the agent's `type`, our YAML (default: the agent's embedded CPU
    preset), `key=value` overrides, defaults."""
    config_path = config_path or default_config(agent)
    values = {**(read_yaml(config_path) if config_path else {}), **parse_overrides(overrides)}
    values["type"] = agent_type(agent)
    for key, value in DETOKENIZER_DEFAULTS.items():
        values.setdefault(key, value)
    if "speech_chunk_size" not in values:
        preset = "" if config_path else f" ({agent} has no embedded default operating point)"
        raise CommandError(f"speech_chunk_size (seconds per chunk) is not set{preset}: give it in --config or --set "
                           f"speech_chunk_size=0.85")
    return values


def prepare_wav_list(wav_list: str, converted_dir: Path) -> list[str]:
    """Resolve the wav list as simulstream does (relative to the list file) and convert files simulstream's reader
    would misread (stereo, int32 or float PCM, other sample rates) to 16 kHz mono int16, keeping each stem."""
    try:
        paths = wav_list_paths(wav_list)
    except (FileNotFoundError, ValueError) as error:
        raise CommandError(str(error)) from None
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise CommandError(f"wav list {wav_list!r} names missing files: {', '.join(missing[:5])}")
    stems = [p.stem for p in paths]
    duplicates = sorted({stem for stem in stems if stems.count(stem) > 1})
    if duplicates:
        raise CommandError(f"wav files must have distinct names (simulstream's logs key by stem): {duplicates}")
    try:
        return [normalized_wav(path, converted_dir) for path in paths]
    except AudioError as error:
        raise CommandError(str(error)) from None


def run_inference(config: dict, wavs: list[str], metrics_log: Path, src_lang: str | None, tgt_lang: str | None):
    """simulstream's own `inference.main` on the effective YAML (metrics logger forced to INFO: see notes)."""
    from simulstream import inference
    from simulstream.metrics.logger import METRICS_LOGGER

    config_file = effective_config_path(metrics_log)
    with tempfile.TemporaryDirectory() as tmp:
        wav_list = Path(tmp) / "wavs.txt"
        wav_list.write_text("\n".join(wavs) + "\n")
        METRICS_LOGGER.setLevel(logging.INFO)  # stays silent if the root logger was configured before import
        inference.main(argparse.Namespace(speech_processor_config=str(config_file), wav_list_file=str(wav_list),
                                          tgt_lang=tgt_lang, src_lang=src_lang, metrics_log_file=str(metrics_log)))
    for handler in METRICS_LOGGER.handlers:
        handler.flush()


def final_texts(metrics_log: Path) -> dict[str, str]:
    """Each talk's final text, as simulstream's scorers rebuild it from a metrics log and its effective YAML."""
    from simulstream.config import yaml_config
    from simulstream.metrics.readers import LogReader

    config = yaml_config(str(effective_config_path(metrics_log)))
    unit = getattr(config, "latency_unit", None) or DETOKENIZER_DEFAULTS["latency_unit"]
    return LogReader(config, str(metrics_log), latency_unit=unit).final_outputs()


def serve(config: dict, metrics_log: Path, host: str, port: int, pool_size: int) -> None:
    """simulstream's websocket server with this agent (blocks), answering each fault to its client
    (agents/harness/websocket_server.py)."""
    from simulstream.metrics.logger import METRICS_LOGGER

    from agents.harness import websocket_server

    server_file = metrics_log.with_name(metrics_log.name + ".server.yaml")
    server_file.write_text(yaml.safe_dump({
        "hostname": host, "port": port, "pool_size": pool_size, "acquire_timeout": 600,
        "metrics": {"enabled": True, "filename": str(metrics_log)},
    }))
    METRICS_LOGGER.setLevel(logging.INFO)
    asyncio.run(websocket_server.main(str(server_file), str(effective_config_path(metrics_log))))


def serve_http(config: dict, metrics_log: Path, host: str, port: int, pool_size: int, ttl: float) -> None:
    """simulstream's HTTP speech-processor server with this agent (blocks): what `HttpProxySpeechProcessor`, the
    IWSLT organizers' client, talks to. Metrics are logged by that client, not here."""
    from agents.harness.http_server import serve as serve_forever

    server_file = metrics_log.with_name(metrics_log.name + ".http_server.yaml")
    server_file.write_text(yaml.safe_dump(http_server_config(host, port, pool_size, ttl)))
    serve_forever(server_file, effective_config_path(metrics_log))


def http_server_config(host: str, port: int, pool_size: int, ttl: float) -> dict:
    """simulstream's HTTP server YAML (docker/http_server.yaml is the containers' one)."""
    return {"hostname": host, "port": port, "pool_size": pool_size, "ttl": ttl}


def effective_config_path(metrics_log: Path) -> Path:
    return metrics_log.with_name(metrics_log.name + ".config.yaml")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        "simulstream", description="Run a simulagents agent with simulstream's inference runner or websocket server.")
    parser.add_argument("--agent", required=True, help="MODULE:CLASS, e.g. agents.alignatt4llm:Agent")
    parser.add_argument("--config", help="processor YAML (default: the agent's embedded CPU preset, e.g. "
                                         "eval_configs/alignatt4llm_cpu.yaml)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override one YAML key")
    parser.add_argument("--wav-list", help="text file, one wav per line (relative to the file); runs inference")
    parser.add_argument("--src-lang", type=language_arg, help="source language: an ISO code or name, e.g. en or English")
    parser.add_argument("--tgt-lang", type=language_arg, help="target language: an ISO code or name, e.g. de or German")
    parser.add_argument("--metrics-log", default="metrics.jsonl", help="where simulstream writes its metrics log")
    parser.add_argument("--serve", action="store_true", help="start simulstream's websocket server instead")
    parser.add_argument("--serve-http", action="store_true",
                        help="start simulstream's HTTP speech-processor server instead (for HttpProxySpeechProcessor: "
                             "the IWSLT 2026 container path, docs/submission.md)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--pool-size", type=int, default=1, help="processors in the server pool (streams at once)")
    parser.add_argument("--session-ttl", type=float, default=600.0,
                        help="--serve-http: seconds a session may stay idle before its processor is cleared")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.serve and args.serve_http:
            raise CommandError("--serve (websocket) and --serve-http are two servers: choose one")
        if not (args.serve or args.serve_http or args.wav_list):
            raise CommandError("give --wav-list FILE to run inference, --serve to start the websocket server or "
                               "--serve-http to start the HTTP server")
        if args.pool_size < 1 or args.session_ttl <= 0:
            raise CommandError("--pool-size must be >= 1 and --session-ttl > 0 seconds")
        config = processor_config(args.agent, args.config, args.set)
        metrics_log = Path(args.metrics_log).resolve()
        metrics_log.parent.mkdir(parents=True, exist_ok=True)
        metrics_log.unlink(missing_ok=True)  # simulstream appends; a log must describe one run
        effective_config_path(metrics_log).write_text(yaml.safe_dump(config, sort_keys=False))
        # Refuse a bad configuration or language pair before any weights load.
        from simulstream.server.speech_processors import speech_processor_class_load

        processor_class = speech_processor_class_load(config["type"])
        check = getattr(processor_class, "check_languages", None)
        if check is not None:
            check(config, args.src_lang, args.tgt_lang)
        if args.serve:
            serve(config, metrics_log, args.host, args.port, args.pool_size)
            return 0
        if args.serve_http:
            serve_http(config, metrics_log, args.host, args.port, args.pool_size, args.session_ttl)
            return 0
        wavs = prepare_wav_list(args.wav_list, metrics_log.with_name(metrics_log.name + ".wavs"))
        run_inference(config, wavs, metrics_log, args.src_lang, args.tgt_lang)
        for talk, text in final_texts(metrics_log).items():
            print(f"{talk}:\n{text}\n")
    except Exception as error:  # noqa: BLE001 - our own errors (a model that will not load, ...) name the problem and
        if not isinstance(error, (CommandError, ConfigError)) and not type(error).__module__.startswith(OWN_MODULES):
            raise  # the fix: printed without a traceback; anything else is a bug, with its traceback
        print(f"simulstream: error: {error}", file=sys.stderr)
        return 2
    print(f"metrics log: {metrics_log}\neval config for the scorers: {effective_config_path(metrics_log)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
