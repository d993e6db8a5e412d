#!/usr/bin/env bash
# vLLM with what servetop reads: /metrics is on by default, per-chunk token counts come from
# continuous_usage_stats (servetop asks for them), and --max-model-len sets the context limit
# that servetop's long-context ladder checks before sending. Then, in another shell:
#   servetop run --base-url http://127.0.0.1:8000 --long-context 8k,32k,60k
set -euo pipefail
MODEL=${MODEL:-Qwen/Qwen3-8B}
exec vllm serve "$MODEL" --port "${PORT:-8000}" --max-model-len "${MAX_MODEL_LEN:-65536}" "$@"
