#!/usr/bin/env python3
"""Writes a tiny, deterministic, random-weight Llama model in Hugging Face format for vLLM.

The model generates gibberish, but vLLM serves it like any other: its own tokenizer (a byte-level
BPE vocabulary trained here, offline, on the licence texts every Debian machine has), a chat
template, prefill, the paged KV cache, batching, streaming and speculative decoding are vLLM's.
At temperature 0 the model falls into loops, which is what lets vLLM's n-gram speculator accept
drafts.

    make_model.py --out DIR
    make_model.py --reasoning --out DIR   # a thinking model's tokenizer and template

With --reasoning the tokenizer also has `<think>`, `</think>`, `<tool_call>` and `</tool_call>` as
single tokens (vLLM's reasoning parsers and its thinking budget need the tags as tokens), and the
chat template opens `<think>` after the assistant's turn unless `enable_thinking` is false, as
Qwen3's does: everything the model writes is thinking until `</think>`, which vLLM forces when a
request's `thinking_token_budget` runs out. The template ends right after `<think>`, so a budget
of N is N reasoning tokens.

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
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
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


if __name__ == "__main__":
    raise SystemExit(main())
