#!/bin/bash
# Session 27, run 1: uint64 keys parsed into the GPU pool's page-locked blocks and uploaded from
# there (no copy into the sketch's staging), against session 26's server (carried as
# streamstatsd_s26) and the sink in the same run; then where each server's time goes at 16 x 16.
# Usage: direct.sh CARRIED_FOLDER (binaries, streamstatsd_s26, gpu_tests, perf.tgz and lib/ inside)
# shellcheck source=bench/scripts/session27/common.sh
source "$(dirname "$0")/common.sh" "$1"
# shellcheck disable=SC2046  # no_wal's flags are words
{
  for s in 1 16; do
    bench_row "sink" "$SINK" "$s" "$s" count_min 0
    for summ in count_min fcm; do
      bench_row "new auto $summ" "$SERVER" "$s" "$s" "$summ" 0 --gpus=auto $(no_wal)
      bench_row "s26 auto $summ" "$OLD" "$s" "$s" "$summ" 0 --gpus=auto $(no_wal)
    done
    bench_row "new none count_min" "$SERVER" "$s" "$s" count_min 0 --gpus=none $(no_wal)
  done
  bench_row "new auto count_min q" "$SERVER" 16 16 count_min 200 --gpus=auto $(no_wal)
  perf_setup
  export PROFILE="-e cpu-clock"
  bench_row "prof_new" "$SERVER" 16 16 count_min 0 --gpus=auto $(no_wal)
  bench_row "prof_s26" "$OLD" 16 16 count_min 0 --gpus=auto $(no_wal)
  unset PROFILE
  perf_tables prof_new dso
  perf_tables prof_s26 dso
}
date -u
