"""`python -m backends.star.evaluate --checkpoint DIR --tsv test.tsv [--wait-k 3]`: stream each utterance through
the recogniser in fixed chunks (no reference lengths anywhere) and report WER and latency (AL, LAAL, DAL in ms,
from the audio each anchor had read), plus the compression actually achieved (encoder frames per anchor)."""
from __future__ import annotations

import argparse
import json
import sys
from statistics import mean

from backends.star.checkpoint import load_star
from backends.star.data import read_tsv
from backends.star.encoder import FRAME_MS
from common.audio import decode_audio_16k
from backends.star.streaming import StreamingRecognizer
from backends.star.text import normalize_transcript
from backends.star.words import WordAssembler
from common.wer import word_errors
from policies.latency import average_lagging, differentiable_average_lagging, length_adaptive_average_lagging


def transcribe(recognizer: StreamingRecognizer, words: WordAssembler, audio, chunk_samples: int):
    """[(word, delay ms)] for one utterance streamed in chunks of `chunk_samples`."""
    recognizer.reset()
    words.reset()
    out = []
    for start in range(0, len(audio), chunk_samples):
        for token in recognizer.feed_audio(audio[start:start + chunk_samples]):
            out += words.push(token)
    for token in recognizer.finish():
        out += words.push(token)
    return out + words.finish(len(audio) / 16)  # pieces left when decoding stopped at max_tokens


def evaluate(checkpoint: str, tsv: str, wait_k: int | None = None, chunk_ms: int = FRAME_MS, limit: int = 0,
             max_tokens: int = 128) -> dict:
    model, vocabulary, metadata = load_star(checkpoint)
    wait_k = metadata["model"]["wait_k"] if wait_k is None else wait_k
    recognizer = StreamingRecognizer(model, vocabulary.eos_id, vocabulary.bos_id, wait_k, max_tokens)
    words = WordAssembler(vocabulary)
    rows = read_tsv(tsv)[:limit or None]
    errors = reference_words = anchors = frames = 0
    latency = {"AL": [], "LAAL": [], "DAL": []}
    for wav, text in rows:
        audio = decode_audio_16k(wav)
        output = transcribe(recognizer, words, audio, chunk_ms * 16)
        reference = normalize_transcript(text).split()
        errors += word_errors([word for word, _ in output], reference)
        reference_words += len(reference)
        anchors += len(recognizer.anchor_times_ms)
        frames += recognizer.encoder.frames
        if output:
            delays, source_ms = [delay for _, delay in output], len(audio) / 16
            latency["AL"].append(average_lagging(delays, source_ms, len(reference)))
            latency["LAAL"].append(length_adaptive_average_lagging(delays, source_ms, len(reference)))
            latency["DAL"].append(differentiable_average_lagging(delays, source_ms))
    return {"checkpoint": checkpoint, "compressor": metadata["model"]["compressor"], "wait_k": wait_k,
            "utterances": len(rows), "WER": round(100 * errors / max(1, reference_words), 2),
            **{f"{name}_ms": round(mean(values), 1) if values else None for name, values in latency.items()},
            "frames_per_anchor": round(frames / max(1, anchors), 2), "chunk_ms": chunk_ms,
            "training_steps": metadata["training"].get("steps")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m backends.star.evaluate", description=__doc__.split(":", 1)[1])
    parser.add_argument("--checkpoint", required=True, help="a directory written by python -m backends.star.train")
    parser.add_argument("--tsv", required=True, help="'wav path<TAB>transcript' per line")
    parser.add_argument("--wait-k", type=int, default=None, help="anchors ahead of each token (0: offline; "
                        "default: the training value)")
    parser.add_argument("--chunk-ms", type=int, default=FRAME_MS, help="audio chunk fed per call")
    parser.add_argument("--limit", type=int, default=0, help="only the first N utterances (0: all)")
    args = parser.parse_args(argv)
    print(json.dumps(evaluate(args.checkpoint, args.tsv, args.wait_k, args.chunk_ms, args.limit)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
