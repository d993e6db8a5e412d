#!/usr/bin/env python3
"""Writes a tiny, deterministic, random-weight llama-architecture GGUF for servetop's tests.

The model generates gibberish, but llama-server treats it like any other: the real 32000-token
SentencePiece vocabulary (copied from the vocab-only GGUF in llama.cpp's tree), real
tokenization, prefill, KV cache, batching and streaming. The output projection is a separate
tensor (untied from the embeddings), which keeps greedy decoding from collapsing into repeating
the last token.

    make_model.py --target --gguf-py TREE/gguf-py --vocab TREE/models/ggml-vocab-llama-spm.gguf \
        --out tiny-llama.gguf
    make_model.py --draft ...   # a smaller model with the same vocabulary (speculative drafts)
    make_model.py --target --no-space-prefix ...   # the target, tokenizing without a leading space

--no-space-prefix: SentencePiece normally tokenizes a text as if it began with a space, so a
template's `<` reads differently from the `<` of a grammar's first token, and llama-server cannot
constrain a tool call's output ("Failed to initialize samplers"); without the prefix it can
(tests/llama_reasoning.rs, tool calls).

Same arguments, same bytes: weights come from a seeded generator and nothing depends on time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# (embedding, layers, heads, kv heads, feed-forward, seed)
SHAPES = {
    "target": (256, 2, 4, 4, 512, 7),
    "draft": (64, 1, 2, 2, 128, 11),
}

# A plain ChatML template, so /v1/chat/completions works without --chat-template.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    kind = ap.add_mutually_exclusive_group(required=True)
    kind.add_argument("--target", action="store_const", dest="kind", const="target")
    kind.add_argument("--draft", action="store_const", dest="kind", const="draft")
    ap.add_argument("--gguf-py", required=True, type=Path, help="llama.cpp's gguf-py directory")
    ap.add_argument("--vocab", required=True, type=Path, help="a vocab-only llama GGUF")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--context", type=int, default=32768, help="trained context length")
    ap.add_argument("--no-space-prefix", action="store_true", help="no leading space when tokenizing")
    a = ap.parse_args()

    sys.path.insert(0, str(a.gguf_py))
    import numpy as np
    import gguf

    n_embd, n_layer, n_head, n_head_kv, n_ff, seed = SHAPES[a.kind]
    head_dim = n_embd // n_head

    vocab = gguf.GGUFReader(str(a.vocab))

    def field(name: str):
        f = vocab.fields[name]
        return f

    tokens = [bytes(field("tokenizer.ggml.tokens").parts[i]) for i in field("tokenizer.ggml.tokens").data]
    scores = [float(field("tokenizer.ggml.scores").parts[i][0]) for i in field("tokenizer.ggml.scores").data]
    types = [int(field("tokenizer.ggml.token_type").parts[i][0]) for i in field("tokenizer.ggml.token_type").data]
    n_vocab = len(tokens)

    tmp = a.out.with_suffix(a.out.suffix + ".tmp")
    w = gguf.GGUFWriter(str(tmp), "llama")
    w.add_name(f"servetop-tiny-llama-{a.kind}")
    w.add_vocab_size(n_vocab)
    w.add_context_length(a.context)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(int(field("tokenizer.ggml.bos_token_id").contents()))
    w.add_eos_token_id(int(field("tokenizer.ggml.eos_token_id").contents()))
    w.add_unk_token_id(int(field("tokenizer.ggml.unknown_token_id").contents()))
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    if a.no_space_prefix:
        w.add_add_space_prefix(False)
    w.add_chat_template(CHAT_TEMPLATE)

    rng = np.random.default_rng(seed)

    def rand(*shape: int, scale: float) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    # numpy shapes are (rows, cols) = ggml's ne reversed: a matrix mapping n_in to n_out is
    # (n_out, n_in).
    w.add_tensor("token_embd.weight", rand(n_vocab, n_embd, scale=1.0))
    for i in range(n_layer):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        w.add_tensor(p + "attn_q.weight", rand(n_embd, n_embd, scale=n_embd**-0.5))
        w.add_tensor(p + "attn_k.weight", rand(n_head_kv * head_dim, n_embd, scale=n_embd**-0.5))
        w.add_tensor(p + "attn_v.weight", rand(n_head_kv * head_dim, n_embd, scale=n_embd**-0.5))
        w.add_tensor(p + "attn_output.weight", rand(n_embd, n_embd, scale=n_embd**-0.5))
        w.add_tensor(p + "ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
        w.add_tensor(p + "ffn_gate.weight", rand(n_ff, n_embd, scale=n_embd**-0.5))
        w.add_tensor(p + "ffn_up.weight", rand(n_ff, n_embd, scale=n_embd**-0.5))
        w.add_tensor(p + "ffn_down.weight", rand(n_embd, n_ff, scale=n_ff**-0.5))
    w.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    w.add_tensor("output.weight", rand(n_vocab, n_embd, scale=n_embd**-0.5))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.replace(a.out)
    size_mb = a.out.stat().st_size / 1e6
    print(f"wrote {a.out} ({a.kind}: {n_embd}-dim, {n_layer} layers, {n_vocab} tokens, {size_mb:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
