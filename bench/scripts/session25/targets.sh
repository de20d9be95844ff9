#!/bin/bash
# Session 25, run 6: issue 14's end-to-end rows again with the load generator that sends its
# batches' bytes (2534f5f): the sink, and the CPU (--gpus=none) and GPU (--gpus=auto) backends
# at 16 streams into 16 sessions, one stream, and 16 streams into one session, for uint64 keys
# (Zipf 1.1 over 10^6: Count-Min, FCM, Lossy Counting) and doubles (normal: quantiles); the WAL
# (interval, always) at Count-Min's 16 x 16 rate on both backends; the questions' p99 at 16 x 16.
# Usage: targets.sh CARRIED_FOLDER (binaries and lib/ inside)
# shellcheck source=bench/scripts/session23/common.sh
source "$(dirname "$0")/../session23/common.sh" "$1"
machine_info
wal() { echo "--durability=wal --wal_fsync=$1 --data_dir=$WORK/d$RANDOM"; }
# shellcheck disable=SC2046  # the flag helpers' words
{
  for s in 16 1; do bench_row sink "$SINK" "$s" "$s" count_min 0; done
  for summ in count_min fcm lossy_counting; do
    for b in none auto; do
      bench_row "$b" "$SERVER" 16 16 "$summ" 0 --gpus=$b $(no_wal)
      bench_row "$b" "$SERVER" 1 1 "$summ" 0 --gpus=$b $(no_wal)
      bench_row "$b 16->1" "$SERVER" 16 1 "$summ" 0 --gpus=$b $(no_wal)
    done
  done
  export PAYLOAD=doubles DISTRIBUTION=normal
  for s in 16 1; do bench_row "sink doubles" "$SINK" "$s" "$s" quantiles 0; done
  for b in none auto; do
    bench_row "$b" "$SERVER" 16 16 quantiles 0 --gpus=$b $(no_wal)
    bench_row "$b" "$SERVER" 1 1 quantiles 0 --gpus=$b $(no_wal)
    bench_row "$b 16->1" "$SERVER" 16 1 quantiles 0 --gpus=$b $(no_wal)
  done
  bench_row "none q" "$SERVER" 16 16 quantiles 200 --gpus=none $(no_wal)
  bench_row "none q 16->1" "$SERVER" 16 1 quantiles 200 --gpus=none $(no_wal)
  unset PAYLOAD DISTRIBUTION
  for b in none auto; do
    bench_row "$b wal interval" "$SERVER" 16 16 count_min 0 --gpus=$b $(wal interval)
    bench_row "$b wal always" "$SERVER" 16 16 count_min 0 --gpus=$b $(wal always)
    bench_row "$b q" "$SERVER" 16 16 count_min 200 --gpus=$b $(no_wal)
  done
}
date -u
