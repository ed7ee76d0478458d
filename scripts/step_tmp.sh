#!/usr/bin/env bash
# Session 13 last: Nsight Compute source counters (per-SASS-instruction stall samples) of one qkv_attention_o v9
# launch in the decode step at context 128, to see what its o loop waits on.
set -u
BIN=build/h200/bin; mkdir -p $BIN; tar -xJf build/carry/bins.tar.xz -C $BIN
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1); echo "ncu: $NCU"; $NCU --version | tail -1
timeout 200 $NCU --clock-control none --graph-profiling node -k regex:qkv_attention_o_kernel --launch-skip 110 \
  --launch-count 1 --section SourceCounters --section WarpStateStats --section SpeedOfLight -o $OUT/ncu-v9-p128 \
  $BIN/qwen3 bench --synthetic qwen3-8b --path fast --prompt-len 128 --gen 8 > $OUT/ncu.log 2>&1
echo "ncu exit $?"; tail -5 $OUT/ncu.log
ls -la $OUT
$NCU -i $OUT/ncu-v9-p128.ncu-rep --page source --csv --print-source sass > $OUT/ncu-source-sass.csv 2> $OUT/src.err \
  || $NCU -i $OUT/ncu-v9-p128.ncu-rep --page source --csv > $OUT/ncu-source-sass.csv 2>> $OUT/src.err
echo "source page: $(wc -l < $OUT/ncu-source-sass.csv) lines"; head -c 600 $OUT/ncu-source-sass.csv; tail -3 $OUT/src.err
$NCU -i $OUT/ncu-v9-p128.ncu-rep --page details --csv > $OUT/ncu-details.csv 2>/dev/null; echo "details $(wc -l < $OUT/ncu-details.csv)"
gzip -k $OUT/ncu-source-sass.csv
