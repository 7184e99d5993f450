"""Tiny randomly initialised checkpoints (Gemma-4, Gemma-3, Qwen3, Qwen2, Llama) for fast tests, saved as complete
Hugging Face directories and loaded back through the same `backends.models.load_causal_lm` as real models. Gemma-4
and Gemma-3 also come as multimodal checkpoints (tiny vision, and for Gemma-4 audio, towers around the text decoder),
laid out like the real google/gemma-4-E4B-it and google/gemma-3-*-it directories."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import (
    Gemma3Config,
    Gemma3ForCausalLM,
    Gemma3ForConditionalGeneration,
    Gemma3TextConfig,
    Gemma4AudioConfig,
    Gemma4Config,
    Gemma4ForCausalLM,
    Gemma4ForConditionalGeneration,
    Gemma4TextConfig,
    Gemma4VisionConfig,
    LlamaConfig,
    LlamaForCausalLM,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
    SiglipVisionConfig,
)

TINY_ARCHITECTURES = ("gemma4", "gemma3", "qwen3", "qwen2", "llama")
TINY_MULTIMODAL_ARCHITECTURES = ("gemma4", "gemma3")  # also built with vision (and audio) towers

TINY_VOCAB_SIZE = 512
TINY_SLIDING_WINDOW = 16
TINY_MAX_POSITIONS = 512

# Simple parallel sentences (en, de, it, zh) so the byte-level BPE learns merges in all four scripts.
TINY_CORPUS = (
    "The cat sat on the mat.",
    "Die Katze saß auf der Matte.",
    "Il gatto era seduto sul tappeto.",
    "猫坐在垫子上。",
    "I would like a cup of coffee.",
    "Ich hätte gern eine Tasse Kaffee.",
    "Vorrei una tazza di caffè.",
    "我想要一杯咖啡。",
    "The weather is nice today.",
    "Das Wetter ist heute schön.",
    "Oggi il tempo è bello.",
    "今天天气很好。",
    "Where is the train station?",
    "Wo ist der Bahnhof?",
    "Dov'è la stazione ferroviaria?",
    "火车站在哪里？",
    "We are reading a book together.",
    "Wir lesen zusammen ein Buch.",
    "Stiamo leggendo un libro insieme.",
    "我们一起读一本书。",
    "Thank you very much for your help.",
    "Vielen Dank für Ihre Hilfe.",
    "Grazie mille per il tuo aiuto.",
    "非常感谢你的帮助。",
    "The meeting starts at nine o'clock.",
    "Die Sitzung beginnt um neun Uhr.",
    "La riunione inizia alle nove.",
    "会议九点开始。",
    "My brother lives in a small town.",
    "Mein Bruder wohnt in einer kleinen Stadt.",
    "Mio fratello vive in una piccola città.",
    "我哥哥住在一个小镇上。",
    "Translate the following sentence into German.",
    "Übersetze den folgenden Satz ins Deutsche.",
    "Traduci la frase seguente in italiano.",
    "把下面的句子翻译成中文。",
    "Speech translation should be fast and accurate.",
    "Die Sprachübersetzung soll schnell und genau sein.",
    "La traduzione del parlato deve essere veloce e precisa.",
    "语音翻译应该又快又准确。",
)

# Special tokens per chat format; the first one is the padding token (id 0).
CHATML_SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
GEMMA_SPECIAL_TOKENS = ("<pad>", "<bos>", "<start_of_turn>", "<end_of_turn>")

# Qwen's split pattern (as in transformers' Qwen2Tokenizer). AutoTokenizer in transformers 5 loads every
# model_type "qwen2" checkpoint as Qwen2Tokenizer whatever tokenizer_config.json says, and that class replaces the
# saved pre-tokenizer with this split + NFC; the Qwen tiny tokenizers are trained with it so a reload changes nothing.
QWEN_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

CHATML_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

# Gemma style: <bos>, "model" for the assistant role, and the system message merged into the first user turn.
GEMMA_TEMPLATE = (
    "{{- bos_token -}}"
    "{%- if messages and messages[0]['role'] == 'system' -%}"
    "{%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}"
    "{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}"
    "{%- set first_user_prefix = '' -%}"
    "{%- set loop_messages = messages -%}"
    "{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}"
    "{{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') -}}"
    "{%- endif -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}"
    "{{- '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else '') -}}"
    "{{- message['content'] | trim -}}"
    "{{- '<end_of_turn>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<start_of_turn>model\\n' -}}{%- endif -%}"
)


def build_tiny_tokenizer(arch: str) -> PreTrainedTokenizerFast:
    """A byte-level BPE trained on TINY_CORPUS with the chat format of `arch` (Gemma style or ChatML)."""
    gemma_style = _check_arch(arch).startswith("gemma")
    special_tokens = GEMMA_SPECIAL_TOKENS if gemma_style else CHATML_SPECIAL_TOKENS
    tokenizer = Tokenizer(models.BPE())
    if arch.startswith("qwen"):
        tokenizer.normalizer = normalizers.NFC()
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(QWEN_PRETOKENIZE_REGEX), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TINY_VOCAB_SIZE,  # counts the special tokens, so the total never exceeds the model's vocab
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(TINY_CORPUS, trainer=trainer)
    if gemma_style:
        names = {"pad_token": "<pad>", "bos_token": "<bos>", "eos_token": "<end_of_turn>"}
        chat_template = GEMMA_TEMPLATE
    else:
        names = {"pad_token": "<|endoftext|>", "bos_token": "<|endoftext|>", "eos_token": "<|im_end|>"}
        chat_template = CHATML_TEMPLATE
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, chat_template=chat_template, **names)


def build_tiny_config(arch: str, tokenizer: PreTrainedTokenizerFast) -> PretrainedConfig:
    """The tiny transformers config for `arch`, with special token ids taken from `tokenizer`."""
    token_ids = {
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    common = {
        "vocab_size": TINY_VOCAB_SIZE,
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": TINY_MAX_POSITIONS,
        **token_ids,
    }
    arch = _check_arch(arch)
    if arch == "gemma4":
        # Left at their defaults, the per-layer input embeddings (PLE) are a 262144 x (layers*256) table: 805M
        # parameters in a "tiny" model. Sized to the tiny vocab they stay in the model but cost almost nothing.
        return Gemma4TextConfig(
            **common,
            num_hidden_layers=12,
            head_dim=32,
            global_head_dim=64,
            sliding_window=TINY_SLIDING_WINDOW,
            num_kv_shared_layers=4,
            vocab_size_per_layer_input=TINY_VOCAB_SIZE,
            hidden_size_per_layer_input=16,
        )
    if arch == "gemma3":
        return Gemma3TextConfig(
            **common,
            num_hidden_layers=6,
            head_dim=32,
            query_pre_attn_scalar=32,
            sliding_window=TINY_SLIDING_WINDOW,
            layer_types=["sliding_attention"] * 5 + ["full_attention"],
        )
    if arch == "qwen3":
        # Qwen3 makes layer i sliding only when use_sliding_window and i >= max_window_layers (default 28), so with
        # 4 layers the defaults give no sliding layer at all: the layer types are spelled out instead.
        return Qwen3Config(
            **common,
            num_hidden_layers=4,
            head_dim=32,
            use_sliding_window=True,
            sliding_window=TINY_SLIDING_WINDOW,
            layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
        )
    if arch == "qwen2":
        return Qwen2Config(**common, num_hidden_layers=3)
    return LlamaConfig(**common, num_hidden_layers=3)


def build_tiny_model(arch: str, *, seed: int = 0) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """The tiny float32 model (random weights from `seed`) and its tokenizer, in memory, in eval mode."""
    model_classes = {
        "gemma4": Gemma4ForCausalLM,
        "gemma3": Gemma3ForCausalLM,
        "qwen3": Qwen3ForCausalLM,
        "qwen2": Qwen2ForCausalLM,
        "llama": LlamaForCausalLM,
    }
    tokenizer = build_tiny_tokenizer(arch)
    config = build_tiny_config(arch, tokenizer)
    with torch.random.fork_rng(devices=[]):  # seeds this build only, leaving the caller's RNG untouched
        torch.manual_seed(seed)
        model = model_classes[arch](config).to(torch.float32)
    return model.eval(), tokenizer


def build_tiny_checkpoint(arch: str, out_dir: Path | str, *, seed: int = 0) -> Path:
    """Save the tiny `arch` model and its tokenizer into `out_dir` (a complete HF directory) and return it."""
    model, tokenizer = build_tiny_model(arch, seed=seed)
    return _save(model, tokenizer, out_dir)


def _save(model: PreTrainedModel, tokenizer: PreTrainedTokenizerFast, out_dir: Path | str) -> Path:
    out_path = Path(out_dir).expanduser()
    if out_path.is_file():
        raise NotADirectoryError(f"cannot save a tiny checkpoint into {out_path}: it is a file; pass a directory")
    out_path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_path)
    tokenizer.save_pretrained(out_path)
    return out_path


def build_tiny_multimodal_config(arch: str, tokenizer: PreTrainedTokenizerFast) -> PretrainedConfig:
    """The multimodal config of `arch`: its tiny text config plus the smallest vision (and audio) towers."""
    text_config = build_tiny_config(_check_multimodal_arch(arch), tokenizer)
    if arch == "gemma4":  # the real E4B has both towers: a ViT for images and a conformer for audio
        vision_config = Gemma4VisionConfig(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=2,
            head_dim=16,
            patch_size=4,
            position_embedding_size=64,
            pooling_kernel_size=2,
        )
        audio_config = Gemma4AudioConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            subsampling_conv_channels=[8, 4],
            conv_kernel_size=3,
            output_proj_dims=32,
        )
        return Gemma4Config(text_config=text_config, vision_config=vision_config, audio_config=audio_config)
    # SigLIP: 16 px images in 4 px patches (4 x 4), pooled to mm_tokens_per_image = 2 x 2 soft tokens.
    vision_config = SiglipVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        image_size=16,
        patch_size=4,
    )
    return Gemma3Config(text_config=text_config, vision_config=vision_config, mm_tokens_per_image=4)


def build_tiny_multimodal_model(arch: str, *, seed: int = 0) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """The tiny float32 *ForConditionalGeneration model of `arch` (random weights from `seed`), in eval mode."""
    model_classes = {"gemma4": Gemma4ForConditionalGeneration, "gemma3": Gemma3ForConditionalGeneration}
    tokenizer = build_tiny_tokenizer(_check_multimodal_arch(arch))
    config = build_tiny_multimodal_config(arch, tokenizer)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_classes[arch](config).to(torch.float32)
    return model.eval(), tokenizer


def build_tiny_multimodal_checkpoint(arch: str, out_dir: Path | str, *, seed: int = 0) -> Path:
    """Save the tiny multimodal `arch` model and its tokenizer into `out_dir` (as a real multimodal checkpoint)."""
    model, tokenizer = build_tiny_multimodal_model(arch, seed=seed)
    return _save(model, tokenizer, out_dir)


def _check_multimodal_arch(arch: str) -> str:
    if arch not in TINY_MULTIMODAL_ARCHITECTURES:
        raise ValueError(
            f"unknown tiny multimodal architecture {arch!r}; choose one of {', '.join(TINY_MULTIMODAL_ARCHITECTURES)}"
        )
    return arch


def _check_arch(arch: str) -> str:
    if arch not in TINY_ARCHITECTURES:
        raise ValueError(f"unknown tiny architecture {arch!r}; choose one of {', '.join(TINY_ARCHITECTURES)}")
    return arch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m backends.tiny", description="Save a tiny random checkpoint for tests."
    )
    parser.add_argument("arch", choices=TINY_ARCHITECTURES, help="model family")
    parser.add_argument("out_dir", type=Path, help="directory to write (created if missing)")
    parser.add_argument("--seed", type=int, default=0, help="weight initialisation seed (default 0)")
    parser.add_argument(
        "--multimodal",
        action="store_true",
        help="save the multimodal checkpoint: the text decoder inside vision (and audio) towers "
        f"({', '.join(TINY_MULTIMODAL_ARCHITECTURES)} only)",
    )
    args = parser.parse_args(argv)
    if args.multimodal and args.arch not in TINY_MULTIMODAL_ARCHITECTURES:
        parser.error(f"--multimodal needs one of {', '.join(TINY_MULTIMODAL_ARCHITECTURES)}, not {args.arch!r}")
    build = build_tiny_multimodal_checkpoint if args.multimodal else build_tiny_checkpoint
    path = build(args.arch, args.out_dir, seed=args.seed)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
