"""Tests for backends.star: causality of the incremental encoder, the segmenter's gradient path through the
cross-attention bias, streaming inference against one offline forward, training and checkpoints (tiny random models)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from backends.star.checkpoint import CheckpointError, load_star, save_star
from backends.star.decoder import Decoder
from backends.star.encoder import EncoderStream, encoder_frame_count, frame_end_ms
from backends.star.features import log_mel
from backends.star.model import Batch, StarModel, StarModelConfig
from backends.star.streaming import StreamingRecognizer
from backends.star.text import TargetVocabulary
from policies.integrate_fire import fire_frames, segment_weights

BOS, EOS = 1, 2


def tiny_model(compressor: str = "star", seed: int = 0, wait_k: int = 2, score_bias: float = -1.0) -> StarModel:
    torch.manual_seed(seed)
    model = StarModel(StarModelConfig(vocab_size=40, compressor=compressor, dim=32, heads=2, encoder_layers=2,
                                      semantic_layers=2, decoder_layers=2, wait_k=wait_k))
    with torch.no_grad():
        model.segmenter[2].bias.fill_(score_bias)  # σ ≈ 0.3: an anchor every few frames
        model.decoder.embedding.weight[EOS] *= 0  # keep the random decoder from stopping at once
    return model.eval()


def speech_like(seconds: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * 16_000)) / 16_000
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 3 * t)
    return (0.1 * envelope * (np.sin(2 * np.pi * 220 * t) + rng.normal(0, 0.3, t.size))).astype(np.float32)


def random_batch(seed: int = 0) -> Batch:
    generator = torch.Generator().manual_seed(seed)
    mel = torch.randn(3, 90, 80, generator=generator)
    lengths = torch.tensor([6, 4, 5])
    inputs = torch.randint(4, 40, (3, 6), generator=generator)
    targets = torch.randint(4, 40, (3, 6), generator=generator)
    for row, length in enumerate(lengths.tolist()):
        targets[row, length:] = -100
    return Batch(mel, torch.tensor([90, 70, 81]), inputs, targets, lengths)


def test_incremental_encoder_equals_full_sequence() -> None:
    model = tiny_model()
    mel = torch.randn(1, 203, 80)
    with torch.no_grad():
        full = model.acoustic(mel)
        stream, pieces, start = EncoderStream(), [], 0
        for size in [1, 2, 3, 7, 4, 13, 1, 1, 40, 5, 9, 60, 57]:
            pieces.append(model.acoustic.step(mel[:, start:start + size], stream))
            start += size
    assert start == mel.shape[1] and full.shape[1] == encoder_frame_count(203)
    assert torch.allclose(torch.cat(pieces, dim=1), full, atol=1e-5)


def test_encoder_frames_never_read_the_future() -> None:
    model = tiny_model()
    mel = torch.randn(1, 120, 80)
    changed = mel.clone()
    changed[:, 61:] = torch.randn(1, 59, 80)  # frames after mel frame 60 = 4·15
    with torch.no_grad():
        before, after = model.acoustic(mel), model.acoustic(changed)
    assert torch.allclose(before[:, :16], after[:, :16], atol=1e-6)  # encoder frames 0..15 read mel frames <= 60
    assert not torch.allclose(before[:, 16:], after[:, 16:])


@pytest.mark.parametrize("compressor", ["star", "cif"])
def test_segmenter_learns_only_through_its_paths(compressor: str) -> None:
    model = StarModel(StarModelConfig(vocab_size=40, compressor=compressor, dim=32, heads=2, encoder_layers=1,
                                      semantic_layers=1, decoder_layers=2, length_penalty=0.0)).train()
    model(random_batch())["loss"].backward()  # NLL only: γ = 0
    gradient = model.segmenter[0].weight.grad
    assert gradient is not None and float(gradient.abs().sum()) > 0  # STAR: the cross-attention bias; CIF: the weights


def test_star_segmenter_gradient_comes_from_the_cross_attention_bias(monkeypatch) -> None:
    model = StarModel(StarModelConfig(vocab_size=40, dim=32, heads=2, encoder_layers=1, semantic_layers=1,
                                      decoder_layers=2, length_penalty=0.0)).train()
    compress = model.compress

    def without_bias_gradient(*args):
        anchors = compress(*args)
        anchors.bias = anchors.bias.detach()
        return anchors

    monkeypatch.setattr(model, "compress", without_bias_gradient)
    model(random_batch())["loss"].backward()
    gradient = model.segmenter[0].weight.grad  # γ·(length penalty) with γ = 0 only contributes zeros
    assert gradient is None or float(gradient.abs().sum()) == 0  # anchor selection itself is not differentiable


def test_bias_reaches_every_decoder_layer() -> None:
    torch.manual_seed(0)
    decoder = Decoder(40, 32, 2, 3)
    memory, counts = torch.randn(1, 5, 32), torch.tensor([5])
    bias = torch.randn(1, 5, requires_grad=True)
    masks = []
    hooks = [block.cross_attention.register_forward_pre_hook(
        lambda module, args, kwargs: masks.append(kwargs["mask"]), with_kwargs=True) for block in decoder.blocks]
    decoder(torch.tensor([[1, 7, 9]]), memory, counts, bias, wait_k=0).sum().backward()
    for hook in hooks:
        hook.remove()
    assert len(masks) == 3 and float(bias.grad.abs().sum()) > 0
    for mask in masks:  # the same per-anchor bias for every head and query, in every layer
        assert torch.equal(mask, bias.detach().view(1, 1, 1, 5).expand(1, 1, 3, 5))


def offline_reference(model: StarModel, audio: np.ndarray, anchors: int, tokens: list[int], wait_k: int):
    """One full forward: all frames encoded at once, the same number of fires, the decoder teacher-forced."""
    with torch.no_grad():
        mel = log_mel(torch.from_numpy(audio)).unsqueeze(0)
        states = model.acoustic(mel)
        logits = model.scores(states)[0]
        alpha = torch.sigmoid(logits)
        frames = fire_frames(alpha, anchors)
        if model.config.compressor == "star":
            is_anchor = torch.zeros(1, states.shape[1], dtype=torch.long)
            is_anchor[0, frames] = 1
            memory = model.semantic(states + model.anchor_type(is_anchor))[0, frames].unsqueeze(0)
            bias = logits[frames].unsqueeze(0)
        else:
            memory = (segment_weights(alpha, anchors) @ model.semantic(states)[0]).unsqueeze(0)
            bias = None
        inputs = torch.tensor([[BOS] + tokens[:-1]])
        output = model.decoder(inputs, memory, torch.tensor([anchors]), bias, wait_k)[0]
    return frames, output


@pytest.mark.parametrize("compressor, wait_k", [("star", 2), ("star", 0), ("cif", 3)])
def test_streaming_equals_one_offline_forward(compressor: str, wait_k: int) -> None:
    model = tiny_model(compressor)
    audio = speech_like(1.3)
    recognizer = StreamingRecognizer(model, EOS, BOS, wait_k=wait_k, max_tokens=12)
    streamed, start = [], 0
    for size in [500, 1, 3000, 77, 2400, 6000, 4000, 10_000]:
        streamed += recognizer.feed_audio(audio[start:start + size])
        start += size
    streamed += recognizer.finish()
    anchors = len(recognizer.anchor_times_ms)
    assert anchors >= 5 and len(streamed) == 12
    tokens = [token.id for token in streamed]
    frames, logits = offline_reference(model, audio, anchors, tokens, wait_k)
    logits[:, [BOS, 0]] = float("-inf")  # the recogniser never writes <s> or <pad>
    assert logits.argmax(-1).tolist() == tokens
    fired = [frame_end_ms(int(f)) for f in frames[:-1]]
    assert recognizer.anchor_times_ms[:-1] == fired  # the last may be the fire forced at the end of the stream
    for index, token in enumerate(streamed, 1):
        needed = index + wait_k - 1
        expected = recognizer.anchor_times_ms[needed - 1] if wait_k and needed <= anchors else 1300.0
        assert token.delay_ms == expected


def test_streaming_without_enough_audio_writes_nothing() -> None:
    recognizer = StreamingRecognizer(tiny_model(), EOS, BOS)
    assert recognizer.feed_audio(np.zeros(200, dtype=np.float32)) == [] and recognizer.finish() == []
    with pytest.raises(RuntimeError, match="reset"):
        recognizer.feed_audio(np.zeros(10, dtype=np.float32))


@pytest.mark.parametrize("ctc_weight", [0.0, 0.3])
def test_a_few_training_steps_lower_the_loss(ctc_weight: float) -> None:
    torch.manual_seed(0)
    model = StarModel(StarModelConfig(vocab_size=40, dim=32, heads=2, encoder_layers=1, semantic_layers=1,
                                      decoder_layers=2, ctc_weight=ctc_weight)).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    batch, losses = random_batch(), []
    for _ in range(25):
        loss = model(batch)["loss"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]


def test_checkpoint_round_trip_and_errors(tmp_path) -> None:
    vocabulary = TargetVocabulary.train(["the cat sat on the mat", "a dog ran"] * 5, vocab_size=40)
    model = StarModel(StarModelConfig(vocab_size=len(vocabulary), dim=32, heads=2, encoder_layers=1,
                                      semantic_layers=1, decoder_layers=1)).eval()
    save_star(model, vocabulary, tmp_path / "ckpt", {"steps": 3})
    loaded, loaded_vocabulary, metadata = load_star(tmp_path / "ckpt")
    mel = torch.randn(1, 40, 80)
    assert torch.equal(loaded.acoustic(mel), model.acoustic(mel)) and metadata["training"]["steps"] == 3
    assert loaded_vocabulary.decode(loaded_vocabulary.encode("The cat, sat!")) == "the cat sat"
    with pytest.raises(CheckpointError, match="not a directory"):
        load_star(tmp_path / "missing")
    (tmp_path / "half").mkdir()
    with pytest.raises(CheckpointError, match="missing star_config.json, model.safetensors, tokenizer.json"):
        load_star(tmp_path / "half")
    config = tmp_path / "ckpt" / "star_config.json"
    config.write_text(json.dumps({"model": {"vocab_size": 40, "compressor": "conv"}}))
    with pytest.raises(CheckpointError, match="compressor"):
        load_star(tmp_path / "ckpt")


@pytest.mark.parametrize("mode", ["stream", "offline"])
def test_memory_benchmark_point_runs_at_tiny_size(mode: str, capsys) -> None:
    from benchmarks import star_memory

    assert star_memory.main(["--point", "60", "5", "--dim", "32", "--heads", "2", "--encoder-layers", "1",
                             "--semantic-layers", "1", "--decoder-layers", "1", "--vocab", "50", "--mode", mode]) == 0
    point = json.loads(capsys.readouterr().out)
    assert point["anchors"] == 12 and point["tokens"] == 6 and point["peak_mb"] >= 0
