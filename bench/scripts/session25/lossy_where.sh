#!/bin/bash
# Session 25, run 9: where the CPU backend's time goes at 16 x 16 for Lossy Counting (uint64 Zipf
# keys, 28 % of the sink in run 6) and quantiles (normal doubles, 54 %), with the new client.
# Usage: lossy_where.sh CARRIED_FOLDER (binaries, lib/ and perf.tgz inside)
# shellcheck source=bench/scripts/session23/common.sh
source "$(dirname "$0")/../session23/common.sh" "$1"
mkdir -p "$WORK/p" && tar xzf "$BIN/perf.tgz" -C "$WORK/p"
PERF="env LD_LIBRARY_PATH=$WORK/p/perflib:$LD_LIBRARY_PATH $WORK/p/perf"
machine_info
# shellcheck disable=SC2046  # no_wal's flags are words
{
  PROFILE="-e cpu-clock" bench_row lossy16 "$SERVER" 16 16 lossy_counting 0 --gpus=none $(no_wal)
  PROFILE="-e cpu-clock" bench_row lossy1 "$SERVER" 1 1 lossy_counting 0 --gpus=none $(no_wal)
  PROFILE="-e cpu-clock" PAYLOAD=doubles DISTRIBUTION=normal bench_row quant16 "$SERVER" 16 16 \
    quantiles 0 --gpus=none $(no_wal)
}
for p in lossy16 lossy1 quant16; do
  $PERF report -i "$OUT/$p.data" --no-children --sort sym --stdio -g none 2>/dev/null |
    grep -v "^#" | grep -v "^$" | head -30 > "$OUT/$p.top.txt"
  $PERF report -i "$OUT/$p.data" --no-children --sort comm --stdio -g none 2>/dev/null |
    grep -v "^#" | grep -v "^$" | head -8 > "$OUT/$p.comm.txt"
  rm -f "$OUT/$p.data"
  echo "== $p"; head -22 "$OUT/$p.top.txt"; head -5 "$OUT/$p.comm.txt"
done
date -u
