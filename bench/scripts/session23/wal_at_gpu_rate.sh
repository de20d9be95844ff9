#!/bin/bash
# Session 23, run 6: the WAL at the device sketches' new rates (Count-Min on the GPU, default
# --gpu_sketches), no WAL / --wal_fsync=interval / always, 16 and 1 streams; the CPU beside.
# The data directory is on the host's disk (mktemp). Usage: wal_at_gpu_rate.sh CARRIED_FOLDER
source "$(dirname "$0")/common.sh" "$1"
df -h "$WORK" | tail -1
for s in 16 1; do
  for b in "gpu:--gpus=auto" "cpu:--gpus=none"; do
    l=${b%%:*}; f=${b#*:}
    bench_row "$l no WAL" "$SERVER" "$s" "$s" count_min 0 "$f" --durability=none \
      --data_dir="$WORK/d$RANDOM"
    bench_row "$l WAL interval" "$SERVER" "$s" "$s" count_min 0 "$f" --durability=wal \
      --wal_fsync=interval --data_dir="$WORK/d$RANDOM"
    bench_row "$l WAL always" "$SERVER" "$s" "$s" count_min 0 "$f" --durability=wal \
      --wal_fsync=always --data_dir="$WORK/d$RANDOM"
  done
done
date -u
