#!/bin/bash
# Session 23, run 5: the other device sketches (HyperLogLog, AMS, Count Sketch) with device chunks
# against the CPU backend and session 22's server (8192-item chunks); Count-Min under the new
# default --gpu_sketches; 16 streams into one session; questions' p99 during ingest.
# Usage: device_chunks_others.sh CARRIED_FOLDER
source "$(dirname "$0")/common.sh" "$1"
gpu_tests_row
# shellcheck disable=SC2046  # flag lists
{
for summ in hll ams count_sketch; do
  for s in 16 4 1; do
    bench_row cpu "$SERVER" "$s" "$s" "$summ" 0 $(no_wal) --gpus=none
    bench_row gpu "$SERVER" "$s" "$s" "$summ" 0 $(no_wal) --gpus=auto --gpu_sketches=all
    bench_row gpu_s22 "$BIN/streamstatsd_s22" "$s" "$s" "$summ" 0 $(no_wal) --gpus=auto \
      --gpu_sketches=all
  done
done
bench_row cpu "$SERVER" 16 1 count_min 0 $(no_wal) --gpus=none
bench_row gpu_dflt "$SERVER" 16 1 count_min 0 $(no_wal) --gpus=auto
bench_row cpu+q "$SERVER" 16 16 count_min 200 $(no_wal) --gpus=none
for s in 16 4 1; do bench_row gpu_dflt+q "$SERVER" "$s" "$s" count_min 200 $(no_wal) --gpus=auto; done
}
date -u
