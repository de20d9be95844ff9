#!/bin/bash
# Session 24, runs 5 and 6: Count-Min on the device at one stream, this build and session 23's
# taken in turn three times (run 4 had them at 72.8 and 91.5 M items/s, while one stream's path
# did not change: a stream applies one batch at a time); a hot session on the device and on the
# CPU twice; gpu_tests. Usage: one_stream_check.sh CARRIED_FOLDER (as hot_device_session.sh)
# shellcheck source=bench/scripts/session23/common.sh
source "$(dirname "$0")/../session23/common.sh" "$1"
OLD=$BIN/streamstatsd_s23
# shellcheck disable=SC2046  # the flags are words
for i in 1 2 3; do
  bench_row "gpu 1 #$i" "$SERVER" 1 1 count_min 0 --gpus=auto $(no_wal)
  bench_row "gpu 1 s23 #$i" "$OLD" 1 1 count_min 0 --gpus=auto $(no_wal)
done
# shellcheck disable=SC2046
for i in 1 2; do
  bench_row "gpu 16->1 #$i" "$SERVER" 16 1 count_min 0 --gpus=auto $(no_wal)
  bench_row "cpu 16->1 #$i" "$SERVER" 16 1 count_min 0 --gpus=none $(no_wal)
done
gpu_tests_row
date -u
