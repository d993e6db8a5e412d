#!/usr/bin/env python3
"""Writes a tiny LoRA adapter for the tiny test model (scripts/vllm/make_model.py), in PEFT's
format, without PEFT: `adapter_config.json` and `adapter_model.safetensors` holding rank-8
`lora_A`/`lora_B` matrices for every layer's q_proj and v_proj, from a seeded generator.

    make_lora.py --model DIR --out DIR [--seed N]

vLLM loads it with `--enable-lora --lora-modules NAME=DIR` and serves it as model NAME. The
weights are random, like the model's: what is measured is vLLM applying an adapter per request.
Same arguments, same files.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

RANK = 8


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    import torch
    from safetensors.torch import save_file

    cfg = json.loads((a.model / "config.json").read_text())
    hidden = cfg["hidden_size"]
    head_dim = cfg.get("head_dim", hidden // cfg["num_attention_heads"])
    out_dims = {
        "q_proj": cfg["num_attention_heads"] * head_dim,
        "v_proj": cfg["num_key_value_heads"] * head_dim,
    }
    g = torch.Generator().manual_seed(a.seed)
    tensors = {}
    for layer in range(cfg["num_hidden_layers"]):
        for name, out_dim in out_dims.items():
            base = f"base_model.model.model.layers.{layer}.self_attn.{name}"
            tensors[f"{base}.lora_A.weight"] = (
                torch.randn(RANK, hidden, generator=g) * 0.01
            ).to(torch.bfloat16)
            tensors[f"{base}.lora_B.weight"] = (
                torch.randn(out_dim, RANK, generator=g) * 0.01
            ).to(torch.bfloat16)
    a.out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(a.out / "adapter_model.safetensors"))
    (a.out / "adapter_config.json").write_text(
        json.dumps(
            {
                "peft_type": "LORA",
                "task_type": "CAUSAL_LM",
                "base_model_name_or_path": str(a.model),
                "r": RANK,
                "lora_alpha": 16,
                "lora_dropout": 0.0,
                "bias": "none",
                "target_modules": sorted(out_dims),
                "fan_in_fan_out": False,
                "inference_mode": True,
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
