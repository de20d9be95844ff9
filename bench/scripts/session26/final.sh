#!/bin/bash
# Session 26, run 4: gpu_tests after the GPU sketches' shared AddPlainSelected, and string keys
# into Lossy Counting (which now folds viewed keys) and Count-Min at 1 and 16 streams, with the
# sink. Usage: final.sh CARRIED_FOLDER (binaries, gpu_tests and lib/ inside)
# shellcheck source=bench/scripts/session23/common.sh
source "$(dirname "$0")/../session23/common.sh" "$1"
machine_info
gpu_tests_row
# shellcheck disable=SC2046  # no_wal's flags are words
{
  export PAYLOAD=strings DISTRIBUTION=zipf
  for s in 1 16; do
    bench_row "sink strings" "$SINK" "$s" "$s" count_min 0
    bench_row "none lossy" "$SERVER" "$s" "$s" lossy_counting 0 --gpus=none $(no_wal)
    for b in none auto; do bench_row "$b count_min" "$SERVER" "$s" "$s" count_min 0 --gpus=$b $(no_wal); done
  done
}
date -u
