#!/usr/bin/env python3
"""Writes a tiny, deterministic, random-weight Llama model in Hugging Face format for vLLM.

The model generates gibberish, but vLLM serves it like any other: its own tokenizer (a byte-level
BPE vocabulary trained here, offline, on the licence texts every Debian machine has), a chat
template, prefill, the paged KV cache, batching, streaming and speculative decoding are vLLM's.
At temperature 0 the model falls into loops, which is what lets vLLM's n-gram speculator accept
drafts.

    make_model.py --out DIR
    make_model.py --reasoning --out DIR   # a thinking model's tokenizer and template
    make_model.py --vision --out DIR      # a vision-language model (Qwen2-VL's architecture)

With --reasoning the tokenizer also has `<think>`, `</think>`, `<tool_call>` and `</tool_call>` as
single tokens (vLLM's reasoning parsers and its thinking budget need the tags as tokens), and the
chat template opens `<think>` after the assistant's turn unless `enable_thinking` is false, as
Qwen3's does: everything the model writes is thinking until `</think>`, which vLLM forces when a
request's `thinking_token_budget` runs out. The template ends right after `<think>`, so a budget
of N is N reasoning tokens.

With --vision the model is a Qwen2-VL: the same tiny language model (Qwen2's) behind a one-block
vision encoder, its image processor (28-pixel squares: a W x H image, both multiples of 28
within the processor's pixel bounds, is (W/28)(H/28) `<|image_pad|>` tokens between
`<|vision_start|>` and `<|vision_end|>`), and a template that puts those three tags where an
OpenAI-style `image_url` part stands in a message. vLLM runs the encoder and counts the image
tokens in the request's `prompt_tokens`, as it does for a real Qwen2-VL.

Same arguments, same files: the weights come from a seeded generator and the tokenizer trainer
sees the same texts in the same order.
"""

from __future__ import annotations

import argparse
from pathlib import Path

# A plain ChatML template, so /v1/chat/completions works without --chat-template.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
# A thinking model's template: ChatML, then `<think>` opened for the answer unless the request's
# chat_template_kwargs say {"enable_thinking": false}.
REASONING_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + (message['content'] or '') + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% if enable_thinking is not defined or enable_thinking %}{{ '<think>' }}{% endif %}"
    "{% endif %}"
)
# A vision model's template: ChatML whose content may be a list of OpenAI-style parts; each image
# part becomes Qwen2-VL's image placeholder, which vLLM's processor widens to the image's tokens.
VISION_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% elif part['type'] in ['image', 'image_url'] %}"
    "{{ '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{% endif %}{% endfor %}{% endif %}"
    "{{ '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
VISION = ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
# The tiny language model's size, the same in every model written here.
LM_SIZE = dict(
    hidden_size=256,
    intermediate_size=512,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
)
# Tags a reasoning or tool-call parser looks for, as plain (not special) added tokens: they are
# detokenized like any other text.
TAGS = ["<think>", "</think>", "<tool_call>", "</tool_call>"]


def train_tokenizer(corpus: list[Path], vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    texts = [p.read_text(errors="replace") for p in corpus]
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--vocab-size", type=int, default=4096)
    ap.add_argument("--max-positions", type=int, default=131072)
    ap.add_argument("--licences", type=Path, default=Path("/usr/share/common-licenses"))
    ap.add_argument("--reasoning", action="store_true", help="add the thinking and tool-call tags")
    ap.add_argument("--vision", action="store_true", help="a Qwen2-VL vision-language model")
    a = ap.parse_args()

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    corpus = sorted(p for p in a.licences.iterdir() if p.is_file())
    if not corpus:
        raise SystemExit(f"make_model: no text files in {a.licences} to train a tokenizer on")
    raw = train_tokenizer(corpus, a.vocab_size)
    if a.reasoning:
        from tokenizers import AddedToken

        raw.add_tokens([AddedToken(t, special=False, normalized=False) for t in TAGS])
    if a.vision:
        return write_vision(raw, a)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        chat_template=REASONING_TEMPLATE if a.reasoning else CHAT_TEMPLATE,
        model_max_length=a.max_positions,
    )

    torch.manual_seed(7)
    config = LlamaConfig(
        vocab_size=raw.get_vocab_size(),
        **LM_SIZE,
        max_position_embeddings=a.max_positions,
        bos_token_id=raw.token_to_id("<s>"),
        eos_token_id=raw.token_to_id("</s>"),
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    a.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(a.out, safe_serialization=True)
    tok.save_pretrained(a.out)
    params = sum(p.numel() for p in model.parameters())
    print(f"make_model: {a.out}: {params / 1e6:.1f}M parameters, vocabulary {config.vocab_size}")
    return 0


def write_vision(raw, a) -> int:
    """The Qwen2-VL of --vision: tokenizer with the vision tags, weights, processor."""
    import torch
    from tokenizers import AddedToken
    from transformers import (
        Qwen2TokenizerFast,
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
        Qwen2VLVideoProcessor,
    )

    raw.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in VISION])
    ids = {t: raw.token_to_id(t) for t in VISION}
    a.out.mkdir(parents=True, exist_ok=True)
    max_positions = min(a.max_positions, 32768)
    Qwen2TokenizerFast(
        tokenizer_object=raw,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="</s>",
        chat_template=VISION_TEMPLATE,
        model_max_length=max_positions,
    ).save_pretrained(a.out)
    tok = Qwen2TokenizerFast.from_pretrained(a.out)

    torch.manual_seed(7)
    config = Qwen2VLConfig(
        text_config=dict(
            vocab_size=raw.get_vocab_size(),
            **LM_SIZE,
            max_position_embeddings=max_positions,
            # Qwen2-VL's rotary embedding in three sections (time, height, width): half the
            # head's 64 dimensions.
            rope_parameters={"rope_type": "default", "mrope_section": [8, 12, 12],
                             "rope_theta": 1000000.0},
            bos_token_id=raw.token_to_id("<s>"),
            eos_token_id=raw.token_to_id("</s>"),
        ),
        vision_config=dict(depth=1, embed_dim=64, hidden_size=256, num_heads=2, mlp_ratio=2),
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    model = Qwen2VLForConditionalGeneration(config).to(torch.bfloat16)
    model.save_pretrained(a.out, safe_serialization=True)
    # Images of 56x56 to 448x448 pixels keep their size (the stock upper bound, 12.8 MP, would
    # make vLLM's start-up profile a 16,384-token image on the CPU).
    processor = Qwen2VLProcessor(
        image_processor=Qwen2VLImageProcessor(min_pixels=56 * 56, max_pixels=448 * 448),
        video_processor=Qwen2VLVideoProcessor(),
        tokenizer=tok,
        chat_template=VISION_TEMPLATE,
    )
    processor.save_pretrained(a.out)
    params = sum(p.numel() for p in model.parameters())
    print(f"make_model: {a.out}: {params / 1e6:.1f}M parameters (Qwen2-VL), vocabulary {config.text_config.vocab_size}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
