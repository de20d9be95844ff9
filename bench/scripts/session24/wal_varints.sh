#!/bin/bash
# Session 24, run 2: the WAL with uint64 keys as varints in its batch records, against the
# session 23 build (eight bytes a key) in the same run: Count-Min at 16 and 1 streams on the GPU
# and the CPU, no WAL / --wal_fsync=interval / always, then 20-second runs at 16 streams (past
# what the page cache absorbs). Then the varint tests where the CPU has AVX-512 VBMI2.
# Usage: wal_varints.sh CARRIED_FOLDER (this build; streamstatsd_s23 beside it: session 23's)
# shellcheck source=bench/scripts/session23/common.sh
source "$(dirname "$0")/../session23/common.sh" "$1"
OLD=$BIN/streamstatsd_s23
machine_info; df -hT "$WORK" | tail -1
wal() { echo "--durability=wal --wal_fsync=$1 --data_dir=$WORK/d$RANDOM"; }
for s in 16 1; do
  for b in "gpu:--gpus=auto" "cpu:--gpus=none"; do
    l=${b%%:*}; f=${b#*:}
    # shellcheck disable=SC2046  # wal's flags are words
    {
      bench_row "$l no WAL" "$SERVER" "$s" "$s" count_min 0 "$f" $(no_wal)
      bench_row "$l interval" "$SERVER" "$s" "$s" count_min 0 "$f" $(wal interval)
      bench_row "$l interval s23" "$OLD" "$s" "$s" count_min 0 "$f" $(wal interval)
      bench_row "$l always" "$SERVER" "$s" "$s" count_min 0 "$f" $(wal always)
      bench_row "$l always s23" "$OLD" "$s" "$s" count_min 0 "$f" $(wal always)
    }
  done
done
echo "20-second runs, 16 streams:"
# shellcheck disable=SC2046
{
  DURATION=20 bench_row "gpu no WAL 20s" "$SERVER" 16 16 count_min 0 --gpus=auto $(no_wal)
  DURATION=20 bench_row "gpu interval 20s" "$SERVER" 16 16 count_min 0 --gpus=auto $(wal interval)
  DURATION=20 bench_row "gpu interval s23 20s" "$OLD" 16 16 count_min 0 --gpus=auto $(wal interval)
}
for t in core_tests server_tests; do
  timeout 120 "$BIN/$t" --gtest_filter='Varint*:ParseIngestRequest*:Durability.*' 2>&1 | tail -1 |
    sed "s/^/$t: /"
done
grep -o -m1 avx512vbmi2 /proc/cpuinfo
date -u
