#!/usr/bin/env bash
# Builds llama.cpp's llama-server from the pinned llama-cpp-python sdist and writes the tiny
# random-weight test models, into a cache directory that git ignores. Re-running it is cheap: the
# build is skipped when the cached binary for the pinned version is already there, and the models
# are rewritten only when missing (they are deterministic, so rewriting changes nothing).
#
#   scripts/llama/build.sh            # build into .cache/llama (about 10 min on 2 cores)
#   SERVETOP_LLAMA_DIR=/elsewhere scripts/llama/build.sh
#
# What it leaves (tests/real_server/llama.rs looks in the same places):
#   $DIR/bin/llama-server    a link into the build's bin/ (shared libraries sit beside the binary)
#   $DIR/models/tiny-llama.gguf, $DIR/models/tiny-llama-draft.gguf, tiny-llama-nospace.gguf (the
#     target tokenizing without a leading space: llama-server can constrain tool calls on it)
#   $DIR/templates/think.jinja, think-nospace.jinja, qwen3.jinja (scripts/llama/think_templates.py)
#
# Needs: python3 with pip (PyPI reachable), a C/C++ compiler, cmake (installed with apt-get when
# missing and running as root). Nothing else is downloaded: the sdist carries the whole llama.cpp
# tree, and the build options below keep cmake from fetching the web UI or linking OpenSSL.
# The binary is built for this machine's CPU (llama.cpp's default GGML_NATIVE): a cache copied to
# a machine with an older CPU may die with "illegal instruction"; delete .cache/llama there.
set -euo pipefail
cd "$(dirname "$0")/../.."

VERSION=0.3.36
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
DIR=${SERVETOP_LLAMA_DIR:-.cache/llama}
JOBS=${SERVETOP_LLAMA_JOBS:-2}
SRC="$DIR/llama-cpp-python-$VERSION"
BIN="$SRC/build/bin/llama-server"
TREE="$SRC/src/vendor/llama.cpp"

mkdir -p "$DIR"

# Everything that shapes the binary; a cached build made with other options is rebuilt.
# The build RPATH is relative ($ORIGIN), so the cache still works if the checkout moves.
CMAKE_OPTS=(-DCMAKE_BUILD_TYPE=Release -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON)
STAMP="$VERSION $SHA256 ${CMAKE_OPTS[*]}"

if [[ -x "$BIN" && "$(cat "$SRC/build/.servetop-built" 2>/dev/null)" == "$STAMP" ]]; then
  echo "llama: cached $BIN ($VERSION)"
else
  if ! command -v cmake >/dev/null; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
      echo "llama: installing cmake (Debian)"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q cmake >/dev/null \
        || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q cmake >/dev/null; }
    else
      echo "llama: cmake is missing; install it (apt-get install cmake) and re-run" >&2
      exit 1
    fi
  fi
  rm -rf "$SRC"
  mkdir -p "$SRC/dl"
  echo "llama: fetching the llama-cpp-python $VERSION sdist"
  python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python \
    "llama-cpp-python==$VERSION" -d "$SRC/dl"
  TARBALL="$SRC/dl/llama_cpp_python-$VERSION.tar.gz"
  echo "$SHA256  $TARBALL" | sha256sum -c --quiet - \
    || { echo "llama: checksum mismatch for $TARBALL" >&2; exit 1; }
  mkdir -p "$SRC/src"
  tar xzf "$TARBALL" -C "$SRC/src" --strip-components=1
  rm -rf "$SRC/dl"
  echo "llama: configuring (cmake)"
  cmake -S "$TREE" -B "$SRC/build" "${CMAKE_OPTS[@]}" >"$DIR/cmake-configure.log" 2>&1 \
    || { tail -40 "$DIR/cmake-configure.log" >&2; exit 1; }
  echo "llama: building llama-server with -j$JOBS (about 10 min on 2 cores; log: $DIR/cmake-build.log)"
  start=$SECONDS
  cmake --build "$SRC/build" --target llama-server -j"$JOBS" >"$DIR/cmake-build.log" 2>&1 \
    || { tail -40 "$DIR/cmake-build.log" >&2; exit 1; }
  echo "$STAMP" >"$SRC/build/.servetop-built"
  echo "llama: built in $((SECONDS - start)) s: $BIN"
fi
# A stable path for the tests and the README: $DIR/bin -> the build's bin directory.
ln -sfn "llama-cpp-python-$VERSION/build/bin" "$DIR/bin"

"$BIN" --version 2>&1 | head -2 | sed 's/^/llama: /'

# The model writer imports gguf-py from the tree, which needs numpy and PyYAML (pinned here); a
# private venv keeps them out of the system Python.
VENV="$DIR/venv"
if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import numpy, yaml' 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check numpy==2.2.6 PyYAML==6.0.2
fi
mkdir -p "$DIR/models"
for spec in "tiny-llama.gguf --target" "tiny-llama-draft.gguf --draft" \
  "tiny-llama-nospace.gguf --target --no-space-prefix"; do
  set -- $spec
  if [[ ! -s "$DIR/models/$1" ]]; then
    "$VENV/bin/python" scripts/llama/make_model.py "${@:2}" \
      --gguf-py "$TREE/gguf-py" --vocab "$TREE/models/ggml-vocab-llama-spm.gguf" \
      --out "$DIR/models/$1"
  fi
done
echo "llama: models in $DIR/models: $(cd "$DIR/models" && echo *.gguf)"
# Thinking templates for tests/llama_reasoning.rs, from the tree's Qwen3 template.
python3 scripts/llama/think_templates.py \
  --qwen3 "$TREE/models/templates/Qwen-Qwen3-0.6B.jinja" --out "$DIR/templates"
