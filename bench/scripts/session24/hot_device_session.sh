#!/bin/bash
# Session 24, run 4: a hot Count-Min session on the device (concurrent batches built as parts on
# the host, each merged table put back on the device: DeviceMirror::Reload) against session 23's
# build (one batch at a time there) and the CPU backend, in the same run; Count-Min on the device
# at 16 x 16 and 1 x 1 (no change meant); HyperLogLog on the device at 1 and 4 streams (a
# session with a summary on a device no longer slices one stream's batches); gpu_tests.
# Usage: hot_device_session.sh CARRIED_FOLDER (this build's binaries, streamstatsd_s23, gpu_tests
# and lib/ inside)
# shellcheck source=bench/scripts/session23/common.sh
source "$(dirname "$0")/../session23/common.sh" "$1"
OLD=$BIN/streamstatsd_s23
machine_info
# shellcheck disable=SC2046  # the flags are words
{
  bench_row "gpu 16->1" "$SERVER" 16 1 count_min 0 --gpus=auto $(no_wal)
  bench_row "gpu 16->1 s23" "$OLD" 16 1 count_min 0 --gpus=auto $(no_wal)
  bench_row "cpu 16->1" "$SERVER" 16 1 count_min 0 --gpus=none $(no_wal)
  bench_row "gpu 16->1 cons" "$SERVER" 16 1 count_min:conservative=true 0 --gpus=auto $(no_wal)
  bench_row "gpu 16->1 cons s23" "$OLD" 16 1 count_min:conservative=true 0 --gpus=auto $(no_wal)
  bench_row "gpu 16->1 q200" "$SERVER" 16 1 count_min 200 --gpus=auto $(no_wal)
  bench_row "gpu 16x16" "$SERVER" 16 16 count_min 0 --gpus=auto $(no_wal)
  bench_row "gpu 16x16 s23" "$OLD" 16 16 count_min 0 --gpus=auto $(no_wal)
  bench_row "gpu 1" "$SERVER" 1 1 count_min 0 --gpus=auto $(no_wal)
  bench_row "gpu 1 s23" "$OLD" 1 1 count_min 0 --gpus=auto $(no_wal)
}
for s in 1 4; do hll_rows "$SERVER" "$OLD" "$s"; done
gpu_tests_row
date -u
