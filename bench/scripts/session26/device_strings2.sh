#!/bin/bash
# Session 26, run 3: after run 2, the parse bounds its keys' lengths (ValidateBatch reads no key)
# and a plain FCM on the pool hashes string keys on the device too. gpu_tests, then string keys
# ("key-<Zipf rank>", ranks over 10^6) into Count-Min and FCM on the CPU and GPU backends at 1,
# 4 and 16 streams, with the sink; the questions' p99 at 16 x 16.
# Usage: device_strings2.sh CARRIED_FOLDER (binaries, gpu_tests and lib/ inside)
# shellcheck source=bench/scripts/session23/common.sh
source "$(dirname "$0")/../session23/common.sh" "$1"
machine_info
gpu_tests_row
# shellcheck disable=SC2046  # no_wal's flags are words
{
  export PAYLOAD=strings DISTRIBUTION=zipf
  for s in 1 4 16; do
    bench_row "sink strings" "$SINK" "$s" "$s" count_min 0
    for summ in count_min fcm; do
      for b in none auto; do bench_row "$b $summ" "$SERVER" "$s" "$s" "$summ" 0 --gpus=$b $(no_wal); done
    done
  done
  bench_row "auto count_min q200" "$SERVER" 16 16 count_min 200 --gpus=auto $(no_wal)
  bench_row "auto fcm q200" "$SERVER" 16 16 fcm 200 --gpus=auto $(no_wal)
}
date -u
