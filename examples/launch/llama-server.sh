#!/usr/bin/env bash
# llama.cpp's llama-server with --metrics (the engine panel and the speculative-decoding
# counters). -c is divided among the -np slots: servetop reads the per-slot size from /props,
# so here each of 4 slots holds 8192 tokens. Then, in another shell:
#   servetop run --base-url http://127.0.0.1:8080 --concurrency 1,2,4,8 --long-context 4k
set -euo pipefail
MODEL=${MODEL:?set MODEL to a .gguf file}
exec llama-server -m "$MODEL" --port "${PORT:-8080}" -c "${CTX:-32768}" -np "${SLOTS:-4}" --metrics "$@"
