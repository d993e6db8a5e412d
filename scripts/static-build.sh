#!/usr/bin/env bash
# A static Linux binary (x86_64, musl): one file to copy onto a GPU machine that has no Rust
# toolchain. It runs on any x86_64 Linux, whatever its C library.
#
#   scripts/static-build.sh [--profile dist|release|dev]
#
# The default, dist, is the release build stripped of its line tables and symbols (the size
# to copy); release keeps the line tables (profiling); dev is a debug build (tests).
#
# Needs the musl target (`rustup target add x86_64-unknown-linux-musl`) and a C compiler for it
# (`musl-gcc`: Debian/Ubuntu `apt-get install musl-tools`), for the TLS library's C part. Takes
# 5-8 minutes on two cores (dist or release). Prints the binary's path last.
#
# A static binary cannot load NVML (libnvidia-ml.so): it reads the GPUs through `nvidia-smi`
# instead, which the driver installs (docs/telemetry.md); it has no energy counter, so energy
# is integrated from power and said so.
set -euo pipefail
TARGET=x86_64-unknown-linux-musl
PROFILE=dist
case "${1:-}" in
  --profile) PROFILE=${2:?--profile needs dist, release or dev} ;;
  "") ;;
  *) echo "static-build: unknown argument $1 (usage: scripts/static-build.sh [--profile dist|release|dev])" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
if ! rustup target list --installed 2>/dev/null | grep -qx "$TARGET"; then
  echo "static-build: the $TARGET target is missing: rustup target add $TARGET" >&2
  exit 2
fi
if ! command -v musl-gcc >/dev/null; then
  echo "static-build: musl-gcc is missing: apt-get install musl-tools (Debian, Ubuntu)" >&2
  exit 2
fi
CC_x86_64_unknown_linux_musl=musl-gcc \
  cargo build --locked --profile "$PROFILE" --target "$TARGET" --no-default-features --bin servetop >&2
DIR=$PROFILE
[[ $PROFILE == dev ]] && DIR=debug
echo "target/$TARGET/$DIR/servetop"
