#!/usr/bin/env bash
# The real-GPU check: what servetop's NVML sampler reads on a machine with NVIDIA GPUs, saved
# as files the tests parse (tests/gpu_check.rs reads every tests/fixtures/gpu/*.json).
#
#   scripts/gpu-check.sh [SERVETOP_BINARY] [OUT_DIR]
#
# Needs nothing but a servetop release binary (a GPU machine may have no package registry):
# no Rust, no Python, no network. Takes about a minute. It writes to OUT_DIR (default $OUT, or
# ./gpu-check):
#   gpu-once.json      `servetop gpu --once --json`: names, memory, utilization, power, the
#                      energy counter, clocks; a field the GPU does not support is null
#   gpu-series.jsonl   ten readings half a second apart (does the energy counter move?)
#   run/               a short run against the built-in simulator with NVML sampling on: its
#                      telemetry.jsonl, results.json (energy per level from the real counter),
#                      summary.md; the GPU idles, since the simulator computes on the CPU
#   nvidia-smi.txt     `nvidia-smi -q`, when the tool is there, to check the readings against
#   nvidia-smi-query.csv  what the static binary's sampler reads (src/telemetry/smi.rs): copy
#                      it to tests/fixtures/gpu/<gpu-name>.csv too
# Then copy gpu-once.json to tests/fixtures/gpu/<gpu-name>.json and commit it.
set -euo pipefail
BIN=${1:-target/release/servetop}
OUT=${2:-${OUT:-gpu-check}}
[[ -x "$BIN" ]] || { echo "gpu-check: no servetop binary at $BIN (build one: cargo build --release)" >&2; exit 2; }
mkdir -p "$OUT"
"$BIN" --version | tee "$OUT/version.txt"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi -q > "$OUT/nvidia-smi.txt" 2>&1 || true
  nvidia-smi --query-gpu=index,name,uuid,memory.used,memory.total,utilization.gpu,utilization.memory,power.draw,enforced.power.limit,temperature.gpu,clocks.sm \
    --format=csv,noheader,nounits > "$OUT/nvidia-smi-query.csv" 2>&1 || true
else
  echo "nvidia-smi is not on this machine" > "$OUT/nvidia-smi.txt"
fi
"$BIN" gpu --once --json > "$OUT/gpu-once.json"
echo "== one reading"; cat "$OUT/gpu-once.json"; echo
: > "$OUT/gpu-series.jsonl"
for _ in 1 2 3 4 5 6 7 8 9 10; do
  "$BIN" gpu --once --json >> "$OUT/gpu-series.jsonl"
  sleep 0.5
done
echo "== a short run against the simulator, NVML sampling on"
timeout 300 "$BIN" run --serve "$BIN sim --preset fast --port {port}" --concurrency 1,8 \
  --requests-per-level 16 --output-len 256 --long-context none --headless --gpu-interval 0.5 \
  --gpu-hour-cost 1 --out "$OUT/run" > "$OUT/run.txt" 2>&1 || echo "the run exited with $? (see $OUT/run.txt)"
grep -E "energy|GPU|gpu" "$OUT/run.txt" | head -20 || true
echo "gpu-check: done; files in $OUT"
