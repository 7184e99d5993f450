"""STAR training on this machine: the espeak-ng corpus builder, the training command (a few steps of a tiny model),
the streaming evaluation command and their input errors."""
from __future__ import annotations

import json

import pytest

from common.config import ConfigError, build_config
from backends.star.config import StarTrainConfig
from backends.star.data import read_tsv
from common.wer import word_errors


TINY = ["--vocab-size", "60", "--dim", "32", "--heads", "2", "--encoder-layers", "1", "--semantic-layers", "1",
        "--decoder-layers", "1", "--batch-size", "4", "--warmup-steps", "1"]


@pytest.fixture(scope="module")
def corpus(shared_data, tmp_path_factory):
    from common.synthetic_speech import SynthesisError
    from backends.star.corpus import build_corpus

    try:
        return build_corpus(tmp_path_factory.mktemp("star") / "corpus", train=8, dev=2, test=3,
                            vocabulary_size=1500, data_dir=shared_data, log=lambda message: None)
    except SynthesisError as error:
        pytest.skip(str(error))


def test_corpus_training_and_streaming_evaluation(corpus, tmp_path, capsys):
    from backends.star import evaluate, train

    written = corpus
    rows = {split: read_tsv(path) for split, path in written.items()}
    assert [len(rows[split]) for split in ("train", "dev", "test")] == [8, 2, 3]
    assert all(3 <= len(text.split()) <= 9 for split in rows.values() for _, text in split)
    checkpoint = tmp_path / "model"
    assert train.main(["--train-tsv", str(written["train"]), "--dev-tsv", str(written["dev"]), "--output-dir",
                       str(checkpoint), "--compressor", "cif", "--max-steps", "3", "--log-every", "1", *TINY]) == 0
    log = [json.loads(line) for line in (checkpoint / "train_log.jsonl").read_text().splitlines()]
    assert [record["step"] for record in log] == [1, 2, 3] and "dev_nll" in log[-1]
    capsys.readouterr()
    assert evaluate.main(["--checkpoint", str(checkpoint), "--tsv", str(written["test"]), "--wait-k", "2"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["utterances"] == 3 and report["compressor"] == "cif" and report["WER"] >= 0


def test_segmenter_is_frozen_after_segmenter_steps(corpus, tmp_path):
    from safetensors.torch import load_file

    from backends.star import train

    weights = {}
    for steps in (1, 3):
        out = tmp_path / f"steps{steps}"
        train.main(["--train-tsv", str(corpus["train"]), "--output-dir", str(out), "--max-steps", str(steps),
                    "--segmenter-steps", "1", *TINY])
        weights[steps] = load_file(str(out / "model.safetensors"))
    for name in weights[1]:
        same = bool((weights[1][name] == weights[3][name]).all())
        assert same == name.startswith("segmenter."), name  # only the segmenter stopped after step 1


def test_word_errors_by_hand():
    assert word_errors("the cat sat".split(), "the cat sat".split()) == 0
    assert word_errors("the bat sat down".split(), "the cat sat".split()) == 2  # one substitution, one insertion
    assert word_errors([], "a b c".split()) == 3


def test_training_knobs_are_checked():
    with pytest.raises(ConfigError, match="train_tsv is required"):
        build_config(StarTrainConfig, {})
    with pytest.raises(ConfigError, match="compressor"):
        build_config(StarTrainConfig, {"train_tsv": "x.tsv", "compressor": "conv"})


def test_utterance_list_errors_name_the_line(tmp_path):
    with pytest.raises(FileNotFoundError, match="backends.star.corpus"):
        read_tsv(tmp_path / "none.tsv")
    (tmp_path / "bad.tsv").write_text("a.wav\thello\nb.wav\n")
    with pytest.raises(ValueError, match="bad.tsv:2"):
        read_tsv(tmp_path / "bad.tsv")
