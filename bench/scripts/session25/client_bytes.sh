#!/bin/bash
# Session 25, run 3: the load generator sending each pool batch's bytes serialized once
# (client/load_generator.cc PoolBatch::wire) against run 1-2's client, which re-encoded every
# batch's keys with protobuf (86-91 % of its samples). Same server binary; the sink and the CPU
# and GPU backends with Count-Min at 16 x 16, one stream, and 16 streams into one session;
# Lossy Counting; the questions' p99 at 16 x 16.
# Usage: client_bytes.sh CARRIED_FOLDER (binaries, streamstats_old, lib/ inside)
# shellcheck source=bench/scripts/session23/common.sh
source "$(dirname "$0")/../session23/common.sh" "$1"
OLD_CLIENT=$BIN/streamstats_old
machine_info
# shellcheck disable=SC2046  # no_wal's flags are words
{
  for s in 16 1; do
    bench_row "sink" "$SINK" "$s" "$s" count_min 0
    CLIENT=$OLD_CLIENT bench_row "sink old client" "$SINK" "$s" "$s" count_min 0
  done
  for b in none auto; do
    for s in 16 1; do
      bench_row "$b" "$SERVER" "$s" "$s" count_min 0 --gpus=$b $(no_wal)
      CLIENT=$OLD_CLIENT bench_row "$b old client" "$SERVER" "$s" "$s" count_min 0 --gpus=$b $(no_wal)
    done
    bench_row "$b 16->1" "$SERVER" 16 1 count_min 0 --gpus=$b $(no_wal)
    CLIENT=$OLD_CLIENT bench_row "$b 16->1 old client" "$SERVER" 16 1 count_min 0 --gpus=$b $(no_wal)
  done
  for s in 16 1; do bench_row "lossy cpu" "$SERVER" "$s" "$s" lossy_counting 0 --gpus=none $(no_wal); done
  bench_row "lossy cpu 16->1" "$SERVER" 16 1 lossy_counting 0 --gpus=none $(no_wal)
  bench_row "cpu q" "$SERVER" 16 16 count_min 200 --gpus=none $(no_wal)
  bench_row "gpu q" "$SERVER" 16 16 count_min 200 --gpus=auto $(no_wal)
  CLIENT_FLAGS=--query=health bench_row "cpu health" "$SERVER" 16 16 count_min 200 --gpus=none $(no_wal)
}
date -u
