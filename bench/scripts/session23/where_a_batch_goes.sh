#!/bin/bash
# Session 23, run 2: Count-Min on the GPU pool at 16 x 16 under ingest-thread variants, and where
# the server's time goes (perf record -g of cpu-clock and of sched:sched_switch; perf carried as
# perf.tgz: the dev VM's perf and its libraries). Usage: where_a_batch_goes.sh CARRIED_FOLDER
source "$(dirname "$0")/common.sh" "$1"
perf_setup
G="--gpus=auto --gpu_sketches=count_min,fcm"
# shellcheck disable=SC2046,SC2086  # flag lists
{
bench_row gpu "$SERVER" 16 16 count_min 0 $(no_wal) $G
bench_row gpu_nice "$SERVER" 16 16 count_min 0 $(no_wal) $G --ingest_policy=nice
bench_row gpu_t32 "$SERVER" 16 16 count_min 0 $(no_wal) $G --ingest_threads=32
bench_row gpu_noslice "$SERVER" 16 16 count_min 0 $(no_wal) $G --ingest_slices=false
PROFILE="-e cpu-clock" bench_row gpu_prof "$SERVER" 16 16 count_min 0 $(no_wal) $G
PROFILE="-e sched:sched_switch" bench_row gpu_sw "$SERVER" 16 16 count_min 0 $(no_wal) $G
bench_row cpu "$SERVER" 1 1 count_min 0 $(no_wal) --gpus=none
bench_row gpu "$SERVER" 1 1 count_min 0 $(no_wal) $G
bench_row gpu_nice "$SERVER" 1 1 count_min 0 $(no_wal) $G --ingest_policy=nice
}
for f in gpu_prof gpu_sw; do
  [ -s "$OUT/$f.data" ] || { echo "no $f.data"; continue; }
  $PERF report -i "$OUT/$f.data" --no-children --sort sym --stdio -g none 2>/dev/null \
    | grep -v "^#" | grep -v "^$" | head -40 > "$OUT/$f.top.txt"
  echo "== $f"; head -25 "$OUT/$f.top.txt"
  rm -f "$OUT/$f.data"
done
date -u
