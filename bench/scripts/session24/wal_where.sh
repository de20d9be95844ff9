#!/bin/bash
# Session 24, run 1: where the WAL's ~281 M items/s (2.25 GB/s) ceiling at 16 streams comes from.
# The disk under the data directory (its filesystem; dd buffered and synced, one writer and four),
# then Count-Min on the GPU at 16 streams with --wal_fsync=interval, the server sampled by perf.
# Usage: wal_where.sh CARRIED_FOLDER (binaries, lib/ and perf.tgz inside)
# shellcheck source=bench/scripts/session23/common.sh
source "$(dirname "$0")/../session23/common.sh" "$1"
perf_setup
df -hT "$WORK" | tail -1; free -g | head -2
grep -H . /proc/sys/vm/dirty_ratio /proc/sys/vm/dirty_background_ratio /proc/sys/vm/dirty_bytes
rate() { awk '/copied/ {print $(NF-1), $NF}'; }
echo "dd one writer 4 GiB, page cache only: $(dd if=/dev/zero of="$WORK/dd0" bs=1M count=4096 2>&1 | rate)"
rm -f "$WORK/dd0"
echo "dd one writer 4 GiB, fdatasync at the end: $(dd if=/dev/zero of="$WORK/dd0" bs=1M count=4096 conv=fdatasync 2>&1 | rate)"
rm -f "$WORK/dd0"
start=$(date +%s%N)
for i in 1 2 3 4; do dd if=/dev/zero of="$WORK/dd$i" bs=1M count=2048 2> "$WORK/dd$i.err" & pids+=($!); done
wait "${pids[@]}"; pids=()
echo "dd four writers x 2 GiB, page cache only: $(( 8192 * 1000000000 / ($(date +%s%N) - start) )) MB/s total"
rm -f "$WORK"/dd*
start=$(date +%s%N)
for i in 1 2 3 4; do dd if=/dev/zero of="$WORK/dd$i" bs=1M count=2048 conv=fdatasync 2> "$WORK/dd$i.err" & pids+=($!); done
wait "${pids[@]}"; pids=()
echo "dd four writers x 2 GiB, fdatasync: $(( 8192 * 1000000000 / ($(date +%s%N) - start) )) MB/s total"
rm -f "$WORK"/dd*
if [ -d /dev/shm ]; then df -hT /dev/shm | tail -1; fi
bench_row "gpu no WAL" "$SERVER" 16 16 count_min 0 --gpus=auto --durability=none --data_dir="$WORK/d$RANDOM"
PROFILE="-e cpu-clock" bench_row "gpu_wal_interval" "$SERVER" 16 16 count_min 0 --gpus=auto \
  --durability=wal --wal_fsync=interval --data_dir="$WORK/d$RANDOM"
bench_row "cpu WAL interval" "$SERVER" 16 16 count_min 0 --gpus=none \
  --durability=wal --wal_fsync=interval --data_dir="$WORK/d$RANDOM"
$PERF report -i "$OUT/gpu_wal_interval.data" --no-children --sort sym --stdio 2>/dev/null |
  grep -v "^#" | grep -v "^$" | head -40 > "$OUT/top.txt"
$PERF report -i "$OUT/gpu_wal_interval.data" --children --sort sym --stdio -g none \
  --percent-limit 3 2>/dev/null | grep -v "^#" | grep -v "^$" | head -50 > "$OUT/children.txt"
rm -f "$OUT/gpu_wal_interval.data"
head -25 "$OUT/top.txt"; echo ---; head -30 "$OUT/children.txt"
date -u
