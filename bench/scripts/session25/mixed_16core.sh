#!/bin/bash
# Session 25, run 11: --ingest_policy=mixed (the first ingest thread at the server's priority,
# the others SCHED_IDLE) against auto (all 16 SCHED_IDLE) on the 16-core host, CPU backend: one
# stream (Count-Min, Lossy Counting, quantiles) and 16 x 16 Count-Min with 200 questions a
# second, alternating, two rounds.
# Usage: mixed_16core.sh CARRIED_FOLDER (binaries and lib/ inside)
# shellcheck source=bench/scripts/session23/common.sh
source "$(dirname "$0")/../session23/common.sh" "$1"
machine_info
# shellcheck disable=SC2046  # no_wal's flags are words
for _ in 1 2; do
  for policy in auto mixed; do
    bench_row "$policy" "$SERVER" 1 1 count_min 0 --gpus=none --ingest_policy=$policy $(no_wal)
    bench_row "$policy" "$SERVER" 1 1 lossy_counting 0 --gpus=none --ingest_policy=$policy $(no_wal)
    PAYLOAD=doubles DISTRIBUTION=normal bench_row "$policy" "$SERVER" 1 1 quantiles 0 \
      --gpus=none --ingest_policy=$policy $(no_wal)
    bench_row "$policy q" "$SERVER" 16 16 count_min 200 --gpus=none --ingest_policy=$policy $(no_wal)
  done
done
date -u
