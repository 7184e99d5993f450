"""Tiny randomly initialised checkpoints (Gemma-4, Gemma-3, Qwen3, Qwen2, Llama) for fast tests, saved as complete
Hugging Face directories and loaded back through the same `backends.models.load_causal_lm` as real models. Gemma-4
and Gemma-3 also come as multimodal checkpoints (tiny vision, and for Gemma-4 audio, towers around the text decoder),
laid out like the real google/gemma-4-E4B-it and google/gemma-3-*-it directories. Qwen3-ASR and its forced aligner
come as a pair laid out like Qwen/Qwen3-ASR-*-hf and Qwen/Qwen3-ForcedAligner-0.6B-hf (model, tokenizer, processor)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import torch
from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    trainers,
)
from transformers import (
    FalconConfig,
    FalconForCausalLM,
    Gemma2Config,
    Gemma2ForCausalLM,
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
    GenerationConfig,
    LlamaConfig,
    LlamaForCausalLM,
    Phi3Config,
    Phi3ForCausalLM,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen2Tokenizer,
    Qwen3ASRConfig,
    Qwen3ASREncoderConfig,
    Qwen3ASRFeatureExtractor,
    Qwen3ASRForConditionalGeneration,
    Qwen3ASRForTokenClassification,
    Qwen3ASRProcessor,
    Qwen3Config,
    Qwen3ForCausalLM,
    SiglipVisionConfig,
)

TINY_ARCHITECTURES = ("gemma4", "gemma3", "qwen3", "qwen2", "llama", "gemma2", "phi3", "falcon")
TINY_MULTIMODAL_ARCHITECTURES = ("gemma4", "gemma3")  # also built with vision (and audio) towers
TINY_SPEECH_ARCHITECTURES = ("qwen3-asr", "qwen3-aligner")  # Qwen3-ASR and Qwen3-ForcedAligner (backends.asr.qwen3)

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
# Gemma-4's control tokens (ai.google.dev "Gemma 4 prompt formatting"): <|turn> ... <turn|> turns, a thought channel
# <|channel> ... <channel|>, and <|think|>, which switches thinking on from the top of the system turn.
GEMMA4_SPECIAL_TOKENS = ("<pad>", "<eos>", "<bos>", "<|turn>", "<turn|>", "<|channel>", "<channel|>", "<|think|>")
# Qwen3 ships its thought markers as plain (not special) added tokens: decoding keeps them.
QWEN3_THOUGHT_TOKENS = ("<think>", "</think>")

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

# Gemma-4's documented format, in our own words: one <bos>; a native system turn (opened with <|think|> when
# thinking is on); "model" for the assistant role, whose earlier thoughts are not shown again; and a generation
# prompt that, with thinking off, carries an EMPTY thought block, so the model answers at once. Continuing an
# unfinished model turn (continue_final_message) renders no such block: that prompt differs from the generation
# prompt, which is what the real template does too.
GEMMA4_TEMPLATE = (
    "{{- bos_token -}}"
    "{%- set thinking = enable_thinking is defined and enable_thinking -%}"
    "{%- set has_system = messages and messages[0]['role'] == 'system' -%}"
    "{%- if thinking or has_system -%}"
    "{{- '<|turn>system\\n' -}}"
    "{%- if thinking -%}{{- '<|think|>' -}}{%- endif -%}"
    "{%- if has_system -%}{{- messages[0]['content'] | trim -}}{%- endif -%}"
    "{{- '<turn|>\\n' -}}"
    "{%- endif -%}"
    "{%- for message in (messages[1:] if has_system else messages) -%}"
    "{%- if message['role'] == 'assistant' -%}"
    "{{- '<|turn>model\\n' + (message['content'].split('<channel|>') | last | trim) + '<turn|>\\n' -}}"
    "{%- else -%}"
    "{{- '<|turn>' + message['role'] + '\\n' + (message['content'] | trim) + '<turn|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|turn>model\\n' -}}"
    "{%- if not thinking -%}{{- '<|channel>thought\\n<channel|>' -}}{%- endif -%}"
    "{%- endif -%}"
)

# Qwen3's documented format, in our own words: ChatML; with enable_thinking=false the generation prompt carries an
# empty <think></think> block; an assistant turn after the last user turn is rendered with that (empty) block before
# its answer, earlier assistant turns without their thoughts. Thinking is on unless asked off.
QWEN3_TEMPLATE = (
    "{%- set ns = namespace(last_user=-1) -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}"
    "{%- endfor -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'assistant' -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if loop.index0 > ns.last_user -%}{{- '<think>\\n\\n</think>\\n\\n' -}}{%- endif -%}"
    "{{- (message['content'].split('</think>') | last).lstrip('\\n') + '<|im_end|>\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}{{- '<think>\\n\\n</think>\\n\\n' -}}"
    "{%- endif -%}"
    "{%- endif -%}"
)


def build_tiny_tokenizer(arch: str) -> PreTrainedTokenizerFast:
    """A byte-level BPE trained on TINY_CORPUS with the chat format of `arch`: Gemma-4's and Qwen3's own (control
    tokens and template behaviour as documented for the real models), Gemma-3 style for the other Gemmas, ChatML
    for the rest."""
    arch = _check_arch(arch)
    extra_tokens: tuple[str, ...] = ()
    if arch == "gemma4":
        special_tokens, chat_template = GEMMA4_SPECIAL_TOKENS, GEMMA4_TEMPLATE
        names = {"pad_token": "<pad>", "bos_token": "<bos>", "eos_token": "<eos>"}
    elif arch.startswith("gemma"):
        special_tokens, chat_template = GEMMA_SPECIAL_TOKENS, GEMMA_TEMPLATE
        names = {"pad_token": "<pad>", "bos_token": "<bos>", "eos_token": "<end_of_turn>"}
    else:
        special_tokens = CHATML_SPECIAL_TOKENS
        chat_template = QWEN3_TEMPLATE if arch == "qwen3" else CHATML_TEMPLATE
        extra_tokens = QWEN3_THOUGHT_TOKENS if arch == "qwen3" else ()
        names = {"pad_token": "<|endoftext|>", "bos_token": "<|endoftext|>", "eos_token": "<|im_end|>"}
    tokenizer = _train_byte_level_bpe(special_tokens, qwen_split=arch.startswith("qwen"),
                                      vocab_size=TINY_VOCAB_SIZE - len(extra_tokens))
    tokenizer.add_tokens([AddedToken(token, special=False, normalized=False) for token in extra_tokens])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, chat_template=chat_template, **names)


def end_of_turn_token(arch: str) -> str:
    """The token that ends an assistant turn in `arch`'s chat format."""
    return {"gemma4": "<turn|>"}.get(arch, "<end_of_turn>" if arch.startswith("gemma") else "<|im_end|>")


def _train_byte_level_bpe(special_tokens: tuple[str, ...], *, qwen_split: bool, vocab_size: int) -> Tokenizer:
    """A byte-level BPE with `special_tokens` first (ids 0, 1, ...), trained on TINY_CORPUS up to `vocab_size` ids;
    `qwen_split` pre-tokenizes with Qwen's split pattern and NFC, as Qwen2Tokenizer does on reload."""
    tokenizer = Tokenizer(models.BPE())
    if qwen_split:
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
        vocab_size=vocab_size,  # counts the special tokens, so the total never exceeds the model's vocab
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(TINY_CORPUS, trainer=trainer)
    return tokenizer


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
    if arch == "gemma2":  # alternating sliding/full layers, attention and final logit softcapping (eager only)
        return Gemma2Config(**common, num_hidden_layers=4, head_dim=32, query_pre_attn_scalar=32,
                            sliding_window=TINY_SLIDING_WINDOW)
    if arch == "phi3":
        return Phi3Config(**common, num_hidden_layers=3)
    if arch == "falcon":  # laid out like tiiuae/falcon-rw-1b: ALiBi, sequential attention/MLP, biases, no MQA
        return FalconConfig(vocab_size=TINY_VOCAB_SIZE, hidden_size=128, num_attention_heads=4, num_hidden_layers=3,
                            alibi=True, new_decoder_architecture=False, multi_query=False, parallel_attn=False,
                            bias=True, max_position_embeddings=TINY_MAX_POSITIONS, **token_ids)
    return LlamaConfig(**common, num_hidden_layers=3)


def build_tiny_model(arch: str, *, seed: int = 0) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """The tiny float32 model (random weights from `seed`) and its tokenizer, in memory, in eval mode."""
    model_classes = {
        "gemma4": Gemma4ForCausalLM,
        "gemma3": Gemma3ForCausalLM,
        "qwen3": Qwen3ForCausalLM,
        "qwen2": Qwen2ForCausalLM,
        "llama": LlamaForCausalLM,
        "gemma2": Gemma2ForCausalLM,
        "phi3": Phi3ForCausalLM,
        "falcon": FalconForCausalLM,
    }
    tokenizer = build_tiny_tokenizer(arch)
    config = build_tiny_config(arch, tokenizer)
    with torch.random.fork_rng(devices=[]):  # seeds this build only, leaving the caller's RNG untouched
        torch.manual_seed(seed)
        model = model_classes[arch](config).to(torch.float32)
    _stop_at_end_of_turn(model, tokenizer, arch)
    return model.eval(), tokenizer


def _stop_at_end_of_turn(model: PreTrainedModel, tokenizer: PreTrainedTokenizerFast, arch: str) -> None:
    """Generation ends at end-of-sequence or end-of-turn, as the real models' generation_config.json says (Gemma-4:
    [<eos>, <turn|>]; where the tokenizer's eos IS the end of turn, one id)."""
    ends = {tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids(end_of_turn_token(arch))}
    if len(ends) > 1:
        model.generation_config.eos_token_id = sorted(ends)


def build_tiny_checkpoint(arch: str, out_dir: Path | str, *, seed: int = 0) -> Path:
    """Save the tiny `arch` model and its tokenizer into `out_dir` (a complete HF directory) and return it."""
    model, tokenizer = build_tiny_model(arch, seed=seed)
    return _save(model, tokenizer, out_dir)


def _save(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerFast | Qwen3ASRProcessor, out_dir: Path | str
) -> Path:
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
    _stop_at_end_of_turn(model, tokenizer, arch)
    return model.eval(), tokenizer


def build_tiny_multimodal_checkpoint(arch: str, out_dir: Path | str, *, seed: int = 0) -> Path:
    """Save the tiny multimodal `arch` model and its tokenizer into `out_dir` (as a real multimodal checkpoint)."""
    model, tokenizer = build_tiny_multimodal_model(arch, seed=seed)
    return _save(model, tokenizer, out_dir)


# --- Qwen3-ASR and Qwen3-ForcedAligner ------------------------------------------------------------------------------
# Both are transformers' `qwen3_asr` family: a Whisper-style audio encoder whose frames replace the <|audio_pad|>
# placeholders in a Qwen3 decoder. The ASR model generates text; the aligner (same body, a token-classification
# head) predicts, at each <timestamp> slot after a word, a time class (80 ms each).

# The tokenizer's named audio tokens (special; the processor reads them by these names) and the two plain added
# tokens: the forced-language marker the ASR prompt ends with, and the aligner's word-boundary slot.
QWEN3_ASR_AUDIO_TOKENS = (
    ("audio_bos_token", "<|audio_start|>"),
    ("audio_eos_token", "<|audio_end|>"),
    ("audio_token", "<|audio_pad|>"),
)
QWEN3_ASR_MARKER_TOKENS = ("<asr_text>", "<timestamp>")
TINY_ALIGNER_TIME_CLASSES = 64  # x 80 ms: times up to 5.12 s, so random times land inside a few seconds of test audio

# The chat templates transformers' convert_qwen3_asr_to_hf.py writes into Qwen/Qwen3-ASR-*-hf and
# Qwen/Qwen3-ForcedAligner-0.6B-hf. ASR: system text, one audio placeholder per audio, then the assistant turn (the
# forced-language prefill "language <NAME><asr_text>" comes in as an unfinished assistant message). Aligner: the
# audio placeholder, then the words joined by, and ended with, two <timestamp> slots (start and end of each word).
QWEN3_ASR_CHAT_TEMPLATE = (
    "{%- set ns = namespace(system_text='') -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'system' -%}"
    "{%- if m.content is string -%}"
    "{%- set ns.system_text = ns.system_text + m.content -%}"
    "{%- else -%}"
    "{%- for c in m.content -%}"
    "{%- if c.type == 'text' and (c.text is defined) -%}"
    "{%- set ns.system_text = ns.system_text + c.text -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- set ns2 = namespace(audio_tokens='') -%}"
    "{%- for m in messages -%}"
    "{%- if m.content is not string -%}"
    "{%- for c in m.content -%}"
    "{%- if c.type == 'audio' or ('audio' in c) or ('audio_url' in c) -%}"
    "{%- set ns2.audio_tokens = ns2.audio_tokens + '<|audio_start|><|audio_pad|><|audio_end|>' -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{{- '<|im_start|>system\\n' + ns.system_text + '<|im_end|>\\n' -}}"
    "{{- '<|im_start|>user\\n' + ns2.audio_tokens + '<|im_end|>\\n' -}}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'assistant' -%}"
    "{%- set ns3 = namespace(assistant_text='') -%}"
    "{%- if m.content is string -%}"
    "{%- set ns3.assistant_text = m.content -%}"
    "{%- else -%}"
    "{%- for c in m.content -%}"
    "{%- if c.type == 'text' and (c.text is defined) -%}"
    "{%- set ns3.assistant_text = ns3.assistant_text + c.text -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{% generation %}"
    "{{- ns3.assistant_text + '<|im_end|>\\n' -}}"
    "{% endgeneration %}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- endif -%}"
)
QWEN3_FORCED_ALIGNER_CHAT_TEMPLATE = (
    "{%- set ns = namespace(audio_tokens='', words=[]) -%}"
    "{%- for m in messages -%}"
    "{%- if m.content is not string -%}"
    "{%- for c in m.content -%}"
    "{%- if c.type == 'audio' or ('audio' in c) or ('audio_url' in c) -%}"
    "{%- set ns.audio_tokens = ns.audio_tokens + '<|audio_start|><|audio_pad|><|audio_end|>' -%}"
    "{%- endif -%}"
    "{%- if c.type == 'text' and (c.text is defined) -%}"
    "{%- set ns.words = ns.words + [c.text] -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{{- ns.audio_tokens + ns.words | join('<timestamp><timestamp>') + '<timestamp><timestamp>' -}}"
)


def build_tiny_qwen3_asr_processor(*, aligner: bool = False) -> Qwen3ASRProcessor:
    """The Qwen3-ASR processor: the real feature extractor (128 mel bins), a tiny Qwen2Tokenizer with the ChatML,
    audio and marker tokens, and the ASR chat template (or, with `aligner`, the forced aligner's)."""
    audio_tokens = dict(QWEN3_ASR_AUDIO_TOKENS)
    special_tokens = CHATML_SPECIAL_TOKENS + tuple(audio_tokens.values())
    vocab_size = TINY_VOCAB_SIZE - len(QWEN3_ASR_MARKER_TOKENS)  # the markers are added after training
    bpe = _train_byte_level_bpe(special_tokens, qwen_split=True, vocab_size=vocab_size)
    bpe.add_tokens([AddedToken(marker, special=False, normalized=False) for marker in QWEN3_ASR_MARKER_TOKENS])
    tokenizer = Qwen2Tokenizer(
        tokenizer_object=bpe,
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        unk_token=None,
        extra_special_tokens=audio_tokens,
    )
    chat_template = QWEN3_FORCED_ALIGNER_CHAT_TEMPLATE if aligner else QWEN3_ASR_CHAT_TEMPLATE
    return Qwen3ASRProcessor(
        feature_extractor=Qwen3ASRFeatureExtractor(), tokenizer=tokenizer, chat_template=chat_template
    )


def build_tiny_qwen3_asr_config(tokenizer: Qwen2Tokenizer, *, aligner: bool = False) -> Qwen3ASRConfig:
    """A tiny Qwen3-ASR config (1-layer encoder, 2-layer decoder) with token ids from `tokenizer`; with `aligner`,
    the forced aligner's, whose classifier has TINY_ALIGNER_TIME_CLASSES time classes."""
    ids = tokenizer.convert_tokens_to_ids
    audio_config = Qwen3ASREncoderConfig(
        num_mel_bins=128,  # fixed by the feature extractor
        encoder_layers=1,
        encoder_attention_heads=2,
        encoder_ffn_dim=64,
        d_model=32,
        output_dim=64,  # the decoder's hidden size: the projector maps audio frames into it
        downsample_hidden_size=8,
    )
    # Untied output embeddings: tied ones make a random decoder repeat the prompt's last token (<asr_text>), so the
    # tiny model would never say a word; untied, it emits varied text (words, punctuation, CJK, broken bytes).
    text_config = Qwen3Config(
        vocab_size=TINY_VOCAB_SIZE,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
        pad_token_id=ids("<|im_end|>"),
        eos_token_id=ids("<|im_end|>"),
    )
    head = {"num_labels": TINY_ALIGNER_TIME_CLASSES} if aligner else {}
    return Qwen3ASRConfig(
        audio_config=audio_config,
        text_config=text_config,
        audio_token_id=ids(tokenizer.audio_token),
        timestamp_token_id=ids("<timestamp>"),
        pad_token_id=ids("<|im_end|>"),
        eos_token_id=[ids("<|endoftext|>"), ids("<|im_end|>")],
        tie_word_embeddings=False,
        **head,
    )


def build_tiny_qwen3_asr_model(*, aligner: bool = False, seed: int = 0) -> tuple[PreTrainedModel, Qwen3ASRProcessor]:
    """The tiny float32 Qwen3-ASR model (or, with `aligner`, forced aligner) with random weights from `seed`, and its
    processor, in memory, in eval mode."""
    processor = build_tiny_qwen3_asr_processor(aligner=aligner)
    config = build_tiny_qwen3_asr_config(processor.tokenizer, aligner=aligner)
    model_class = Qwen3ASRForTokenClassification if aligner else Qwen3ASRForConditionalGeneration
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_class(config).to(torch.float32)
    if not aligner:  # greedy with Qwen's end tokens, as in the converted checkpoints
        model.generation_config = GenerationConfig(
            eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id, do_sample=False, max_new_tokens=512
        )
    return model.eval(), processor


def build_tiny_qwen3_asr_checkpoint(out_dir: Path | str, *, seed: int = 0) -> Path:
    """Save a tiny random Qwen3-ASR model with its processor into `out_dir` (like Qwen/Qwen3-ASR-*-hf)."""
    model, processor = build_tiny_qwen3_asr_model(seed=seed)
    return _save(model, processor, out_dir)


def build_tiny_qwen3_aligner_checkpoint(out_dir: Path | str, *, seed: int = 0) -> Path:
    """Save a tiny random Qwen3 forced aligner with its processor into `out_dir` (like
    Qwen/Qwen3-ForcedAligner-0.6B-hf)."""
    model, processor = build_tiny_qwen3_asr_model(aligner=True, seed=seed)
    return _save(model, processor, out_dir)


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


# vLLM (backends/vllm) serves every tiny architecture above as is, except Qwen3: its vLLM model refuses a sliding
# window on some layers only ("Sliding window for some but all layers is not supported"), so the vLLM variant of
# the tiny Qwen3 has full attention everywhere. Sliding windows stay covered by the tiny Gemma-3 and Gemma-4.
TINY_VLLM_ARCHITECTURES = ("gemma4", "gemma3", "qwen3", "qwen2", "llama")


def build_tiny_vllm_checkpoint(arch: str, out_dir: Path | str, *, seed: int = 0) -> Path:
    """Like `build_tiny_checkpoint`, in a layout vLLM 0.32 can serve (see TINY_VLLM_ARCHITECTURES)."""
    if arch not in TINY_VLLM_ARCHITECTURES:
        raise ValueError(f"no vLLM tiny variant of {arch!r}; choose one of {', '.join(TINY_VLLM_ARCHITECTURES)}")
    if arch != "qwen3":
        return build_tiny_checkpoint(arch, out_dir, seed=seed)
    tokenizer = build_tiny_tokenizer(arch)
    config = build_tiny_config(arch, tokenizer)
    config.use_sliding_window, config.sliding_window = False, None
    config.layer_types = ["full_attention"] * config.num_hidden_layers
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config).to(torch.float32)
    return _save(model.eval(), tokenizer, out_dir)


# ---- The paper's models at their real configurations --------------------------------------------------------------
# Gemma-4 E4B-it's text decoder as its config.json gives it: 42 layers of [5 sliding, 1 full] x 7, the last 18
# reading the keys and values of earlier layers, a 512-token window, 8 query and 2 KV heads of 256 (512 on full
# layers, with proportional RoPE on a quarter of them), per-layer input embeddings. Qwen3-ASR-1.7B is transformers'
# Qwen3ASRConfig default (24-layer audio encoder, Qwen3-1.7B decoder) with the projector sized to that decoder;
# the forced aligner is approximated by the same encoder before Qwen3-0.6B's decoder, with the tiny model's time
# classes (speed depends on the sizes, not the weights; these two are close, not exact). `narrow` keeps every structural number (layers, heads, window,
# sharing, layer types) and shrinks only widths and the vocabulary: CPU tests check the shapes `make gpu-check`
# runs at full size.
GEMMA4_E4B_REPO = "google/gemma-4-E4B-it"
QWEN3_ASR_REPO = "Qwen/Qwen3-ASR-1.7B-hf"
QWEN3_ALIGNER_REPO = "Qwen/Qwen3-ForcedAligner-0.6B-hf"
GEMMA4_E4B_TEXT = {
    "hidden_size": 2560,
    "intermediate_size": 10240,
    "num_hidden_layers": 42,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "global_head_dim": 512,
    "num_kv_shared_layers": 18,
    "sliding_window": 512,
    "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 7,
    "vocab_size": 262144,
    "vocab_size_per_layer_input": 262144,
    "hidden_size_per_layer_input": 256,
    "max_position_embeddings": 131072,
    "final_logit_softcapping": 30.0,
    "tie_word_embeddings": True,
}
GEMMA4_NARROW_WIDTHS = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "head_dim": 16,
    "global_head_dim": 32,
    "vocab_size": TINY_VOCAB_SIZE,
    "vocab_size_per_layer_input": TINY_VOCAB_SIZE,
    "hidden_size_per_layer_input": 8,
}
QWEN3_0_6B_TEXT = {"hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
                   "num_key_value_heads": 8, "head_dim": 128}


def build_paper_gemma4(*, narrow: bool, seed: int = 0, dtype: torch.dtype = torch.float32, device: str = "cpu",
                       temper: bool = True, **overrides) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """Gemma-4 E4B-it's text decoder at its real configuration (`narrow`: the same structure, tiny widths; config
    `overrides` on top), random weights from `seed`, built directly on `device` in `dtype`, attention logits tempered
    unless `temper` is False (`temper_attention_logits`), with the tiny Gemma-4 tokenizer (its chat format)."""
    tokenizer = build_tiny_tokenizer("gemma4")
    values = {**GEMMA4_E4B_TEXT, **(GEMMA4_NARROW_WIDTHS if narrow else {}), **overrides}
    config = Gemma4TextConfig(**values, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                              pad_token_id=tokenizer.pad_token_id)
    with torch.random.fork_rng(devices=[]), _default_dtype(dtype), torch.device(device):
        torch.manual_seed(seed)
        model = Gemma4ForCausalLM(config)
    if temper:
        temper_attention_logits(model, GEMMA4_NARROW_WIDTHS["head_dim"])
    _stop_at_end_of_turn(model, tokenizer, "gemma4")
    return model.eval(), tokenizer


@torch.no_grad()
def temper_attention_logits(model: PreTrainedModel, reference_head_dim: int) -> None:
    """Give every head the logit spread of a `reference_head_dim`-wide head by scaling its query norm's weight by
    sqrt(reference_head_dim / head_dim) (the narrow model's sliding-window heads are that wide and stay unchanged).

    Gemma-4 normalises q and k and attends with scaling 1.0, so with the initial norm weights (ones) a head of width d
    has logits of standard deviation about sqrt(d): 16 at head_dim 256, 23 at 512. Such random attention is
    saturated (a row's top weight is 0.9999), and a saturated random network is chaotic: the 1e-7 rounding
    difference between SDPA and eager attention grows through the layers (to 1e-1 in a 42-layer float32 forward on
    an H100), so no reference forward can check the capture. Trained weights learn norms that keep logits moderate;
    this gives random ones the same. Speed does not change."""
    for name, module in model.named_modules():
        if name.endswith("self_attn.q_norm") and getattr(module, "weight", None) is not None:
            module.weight.mul_((reference_head_dim / module.weight.shape[0]) ** 0.5)


def build_paper_qwen3_asr(*, aligner: bool, narrow: bool, seed: int = 0, dtype: torch.dtype = torch.float32,
                          device: str = "cpu") -> tuple[PreTrainedModel, Qwen3ASRProcessor]:
    """Qwen3-ASR-1.7B (or, with `aligner`, Qwen3-ForcedAligner-0.6B) at its real sizes, random weights, with the
    tiny processor (the real feature extractor and template); `narrow` is the tiny model of the tests."""
    if narrow:
        return build_tiny_qwen3_asr_model(aligner=aligner, seed=seed)
    processor = build_tiny_qwen3_asr_processor(aligner=aligner)
    tiny = build_tiny_qwen3_asr_config(processor.tokenizer, aligner=aligner)
    defaults = Qwen3ASRConfig()
    text = defaults.text_config.to_dict() | (QWEN3_0_6B_TEXT if aligner else {})
    text.pop("layer_types", None)  # recomputed for the layer count
    text |= {name: getattr(tiny.text_config, name) for name in ("pad_token_id", "eos_token_id")}
    audio = defaults.audio_config.to_dict() | {"output_dim": text["hidden_size"]}  # the projector feeds the decoder
    config = Qwen3ASRConfig(**{**tiny.to_dict(), "audio_config": audio, "text_config": text,
                               "tie_word_embeddings": defaults.tie_word_embeddings})
    model_class = Qwen3ASRForTokenClassification if aligner else Qwen3ASRForConditionalGeneration
    with torch.random.fork_rng(devices=[]), _default_dtype(dtype), torch.device(device):
        torch.manual_seed(seed)
        model = model_class(config)
    if not aligner:
        model.generation_config = GenerationConfig(eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id)
    return model.eval(), processor


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    """Parameters created inside are `dtype` from the start (a full-size model never exists in float32)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def hf_cache_snapshot(repo_id: str, hub_cache: Path | str) -> Path:
    """The snapshot directory (not yet created) of `repo_id` in a Hugging Face hub cache laid out as `hf download`
    leaves it: models--ORG--NAME/snapshots/COMMIT, with refs/main naming COMMIT (written here)."""
    repo = Path(hub_cache) / ("models--" + repo_id.replace("/", "--"))
    commit = "0" * 40
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    return repo / "snapshots" / commit


def save_into_hf_cache(model: PreTrainedModel, tokenizer, repo_id: str, hub_cache: Path | str) -> Path:
    """Save `model` and its tokenizer/processor as the snapshot of `repo_id` in the hub cache `hub_cache`, so
    loading by repo id goes through the user's path; returns the snapshot directory."""
    return _save(model, tokenizer, hf_cache_snapshot(repo_id, hub_cache))


# ---- STAR --------------------------------------------------------------------------------------------------------
STAR_SENTENCES = ("the committee has approved the report", "we need a clear answer today")


def build_tiny_star_checkpoint(out_dir: Path | str) -> Path:
    """A tiny random STAR checkpoint (target vocabulary trained on STAR_SENTENCES) whose segmenter fires and whose
    decoder writes several words before it stops."""
    from backends.star.checkpoint import save_star
    from backends.star.model import StarModel, StarModelConfig
    from backends.star.text import TargetVocabulary

    vocabulary = TargetVocabulary.train(list(STAR_SENTENCES) * 20, vocab_size=60)
    torch.manual_seed(0)
    model = StarModel(StarModelConfig(vocab_size=len(vocabulary), dim=32, heads=2, encoder_layers=1,
                                      semantic_layers=1, decoder_layers=1, wait_k=2))
    with torch.no_grad():
        model.segmenter[2].bias.fill_(-1.0)
        model.decoder.embedding.weight[vocabulary.eos_id] *= 0  # a random decoder that does not stop at once
        model.decoder.norm.weight.copy_(torch.randn(32))  # ... and does not just repeat its input piece
    return save_star(model, vocabulary, Path(out_dir))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python tests/tiny_checkpoints.py", description="Save a tiny random checkpoint for tests."
    )
    parser.add_argument(
        "arch",
        choices=TINY_ARCHITECTURES + TINY_SPEECH_ARCHITECTURES,
        help="model family; qwen3-asr and qwen3-aligner are the speech recogniser pair (backends.asr.qwen3)",
    )
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
    if args.arch == "qwen3-asr":
        path = build_tiny_qwen3_asr_checkpoint(args.out_dir, seed=args.seed)
    elif args.arch == "qwen3-aligner":
        path = build_tiny_qwen3_aligner_checkpoint(args.out_dir, seed=args.seed)
    else:
        build = build_tiny_multimodal_checkpoint if args.multimodal else build_tiny_checkpoint
        path = build(args.arch, args.out_dir, seed=args.seed)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

