#!/usr/bin/env bash
# SGLang with its Prometheus endpoint on (--enable-metrics: running and queued requests, KV-cache
# use, and sglang:spec_accept_length with speculative decoding) and --context-length, the
# limit servetop's long-context ladder checks. Then, in another shell:
#   servetop run --base-url http://127.0.0.1:30000 --long-context 30k,60k,100k
set -euo pipefail
MODEL=${MODEL:-Qwen/Qwen3-8B}
exec python -m sglang.launch_server --model-path "$MODEL" --port "${PORT:-30000}" \
  --enable-metrics --context-length "${CONTEXT_LENGTH:-65536}" "$@"
