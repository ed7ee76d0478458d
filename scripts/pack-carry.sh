#!/usr/bin/env bash
# Packs prebuilt binaries for the device machine into one file under the device tool's carry limit (64 MiB with the
# tree): each binary stripped, then all of them in one tar.xz with a 192 MiB dictionary. The binaries link the same
# kernel library, so most of their bytes are the same fatbins; a dictionary that spans one binary finds them again in
# the next (session 35: qwen3, qwen3_gpu_tests, qwen3_engine_tests and measure_peaks in 21 MB, 61 MB with xz -3).
# On the device: `tar xJf build/carry-all.tar.xz` gives bin/ (decompressing needs ~200 MB of memory).
#
# Usage: scripts/pack-carry.sh [BUILD_BIN_DIR] [OUT_FILE]   (defaults build/h200/bin, build/carry-all.tar.xz)
#        BINARIES="qwen3 qwen3_gpu_tests" picks the binaries (default: the four above, those that exist).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build/h200/bin}
OUT_FILE=${2:-build/carry-all.tar.xz}
read -r -a NAMES <<< "${BINARIES:-qwen3 qwen3_gpu_tests qwen3_engine_tests measure_peaks}"
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/bin"
for name in "${NAMES[@]}"; do
  if [[ -x $BIN/$name ]]; then
    strip -o "$STAGE/bin/$name" "$BIN/$name"
  else
    echo "pack-carry: $BIN/$name not built, left out" >&2
  fi
done
tar cf - -C "$STAGE" bin | xz -6 -T1 --lzma2=dict=192MiB > "$OUT_FILE"
packed=("$STAGE"/bin/*)
echo "$OUT_FILE: $(du -h "$OUT_FILE" | cut -f1) (${packed[*]##*/})"
