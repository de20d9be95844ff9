#!/bin/bash
# Session 25, run 9: where the CPU backend's time goes at 16 x 16 for Lossy Counting (uint64 Zipf
# keys, 28 % of the sink in run 6) and quantiles (normal doubles, 54 %), with the new client.
# Usage: lossy_where.sh CARRIED_FOLDER (binaries, lib/ and perf.tgz inside)
# shellcheck source=bench/scripts/session23/common.sh
source "$(dirname "$0")/../session23/common.sh" "$1"
perf_setup
machine_info
# shellcheck disable=SC2046  # no_wal's flags are words
{
  PROFILE="-e cpu-clock" bench_row lossy16 "$SERVER" 16 16 lossy_counting 0 --gpus=none $(no_wal)
  PROFILE="-e cpu-clock" bench_row lossy1 "$SERVER" 1 1 lossy_counting 0 --gpus=none $(no_wal)
  PROFILE="-e cpu-clock" PAYLOAD=doubles DISTRIBUTION=normal bench_row quant16 "$SERVER" 16 16 \
    quantiles 0 --gpus=none $(no_wal)
}
for p in lossy16 lossy1 quant16; do perf_tables "$p"; done
date -u
