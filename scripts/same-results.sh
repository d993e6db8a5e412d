#!/usr/bin/env bash
# Runs the two seeded simulator plans a change of structure must leave alone, with one servetop
# binary, and writes the shape of each run's results.json (scripts/same-results.py):
#
#   scripts/same-results.sh BINARY OUT_DIR
#
# 1. `servetop demo` (the demo's plan against its managed simulator), into OUT_DIR/demo;
# 2. a plan with every pass dimension: two content kinds, structured twins, two thinking budgets,
#    two LoRA adapters and two repeats, against `servetop sim` serving reasoning and the adapters, into
#    OUT_DIR/passes.
#
# Compare two binaries' shapes with scripts/same-results.py OUT_A/demo.json OUT_B/demo.json (and
# passes.json): the same keys, level labels and order, request and token counts, finding ids.
set -euo pipefail
bin=$(realpath "$1")
out=$2
here=$(dirname "$0")
mkdir -p "$out"
"$bin" demo --headless --out "$out/demo" >"$out/demo.log" 2>&1
"$here/same-results.py" "$out/demo/results.json" >"$out/demo.json"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin" sim --port "$port" --seed 7 --reasoning-tokens 32 --lora-modules a,b \
  --decode-step-ms 2 --prefill-tokens-per-s 200000 >"$out/sim.log" 2>&1 &
sim=$!
trap 'kill $sim 2>/dev/null || true' EXIT
"$bin" run --base-url "http://127.0.0.1:$port" --headless --yes --no-gpu --seed 7 \
  --concurrency 1,4 --input-len 200 --output-len 48 --requests-per-level 12 --long-context none \
  --content code,chat --response-format json --thinking-budget 16,64 --lora-modules a,b --repeat 2 \
  --server-wait 30 --out "$out/passes" >"$out/passes.log" 2>&1
"$here/same-results.py" "$out/passes/results.json" >"$out/passes.json"
echo "shapes: $out/demo.json $out/passes.json"
