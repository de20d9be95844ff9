#!/bin/bash
# Session 25, run 7: Count-Min's 16 threads into 16 sessions move 12.9x one thread in process
# (run 1), but each thread's items cost ~1.9x what one thread's do (Lossy Counting ~1.3x): is it
# the AVX-512 kernel's clock at all-core load? hot_session_bench --sessions=each with the bucket
# kernel capped at AVX2 and not, alternating, twice.
# Usage: simd_at_scale.sh CARRIED_FOLDER (hot_session_bench and lib/ inside)
# shellcheck source=bench/scripts/session23/common.sh
source "$(dirname "$0")/../session23/common.sh" "$1"
machine_info
grep -o -m1 -E "avx512(f|_vbmi2)" /proc/cpuinfo | sort -u | tr '\n' ' '; echo
for round in 1 2; do
  for simd in avx512 avx2; do
    echo "== round $round, $simd"
    timeout 100 "$BIN/hot_session_bench" --threads=1,4,8,16 --sessions=each --items=40000000 \
      --summary=count_min --summary=count_min:conservative=true --count_min_simd=$simd |
      grep "^| count"
  done
done
date -u
