#!/bin/bash
# Session 25, run 8: Count-Min's AVX-512 bucket kernel with its short form for keys below 2^32
# (two of five 512-bit multiplies a row skipped) against the kernel before it, one core, in
# process: peers_bench --ours-only, Count-Min plain and conservative, Zipf(1.1) keys over 10^6,
# batches of 10^5, alternating, three rounds, then the same pinned to one core.
# Usage: small_keys.sh CARRIED_FOLDER (peers_bench_old, peers_bench_new, lib/ inside)
set -u
D=$(realpath "${1:?the carried folder}")
export LD_LIBRARY_PATH=$D/lib
date -u; nproc; grep -m1 "model name" /proc/cpuinfo
for round in 1 2 3; do
  for v in old new; do
    echo "$round $v $("$D/peers_bench_$v" --ours-only --only=count_min,count_min_conservative --reps=3 \
      --batch=100000 2>&1 | grep zipf | awk '{print $(NF-4)}' | tr '\n' ' ')"
  done
done
for round in 1 2; do
  for v in old new; do
    echo "pinned $round $v $(taskset -c 3 "$D/peers_bench_$v" --ours-only --only=count_min,count_min_conservative \
      --reps=3 --batch=100000 2>&1 | grep zipf | awk '{print $(NF-4)}' | tr '\n' ' ')"
  done
done
date -u
