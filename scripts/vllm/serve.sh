#!/usr/bin/env bash
# Serves the tiny test model (written by scripts/vllm/setup.sh) with vLLM's CPU build, on loopback,
# in the foreground: Ctrl-C (or SIGTERM) stops it in about a second.
#
#   scripts/vllm/serve.sh                      # port 8000, --max-model-len 4096
#   scripts/vllm/serve.sh --port 8123 --max-model-len 8192
#   scripts/vllm/serve.sh --speculative-config '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4}'
#
# Every argument goes to vLLM's OpenAI-compatible API server, after these defaults (a later flag
# wins). Start-up to a healthy /health takes about 40 s on 2 cores (setup.sh compiles the venv's
# bytecode); vLLM pins its compute to one core, so keep compiles off the machine while it measures.
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${SERVETOP_VLLM_DIR:-.cache/vllm}
PY="$DIR/venv/bin/python"
[[ -x "$PY" && -s "$DIR/model/config.json" ]] \
  || { echo "vllm: no venv or model in $DIR; run scripts/vllm/setup.sh first" >&2; exit 1; }
# VLLM_HOST_IP keeps its internal queues on loopback; the others keep it offline and quiet.
export VLLM_HOST_IP=127.0.0.1 VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1} \
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
# The wheel's `vllm` command looks itself up under the name "vllm" and crashes (the distribution
# is vllm-cpu), so the server module is started directly.
exec "$PY" -m vllm.entrypoints.openai.api_server --model "$DIR/model" \
  --served-model-name tiny-vllm --host 127.0.0.1 --port 8000 --max-model-len 4096 \
  --dtype bfloat16 --enforce-eager "$@"
