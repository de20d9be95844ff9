#!/bin/bash
# Session 25, run 1: where the CPU backend's time goes with 16 streams into 16 Count-Min sessions
# (324-453 M items/s on hosts of this kind, 31-44 % of the sink, against 72 M at one stream).
# The host's topology; in process, T threads into T sessions (hot_session_bench --sessions=each:
# no gRPC, no parts) against one thread, so the host's own scaling; end to end the sink, one
# stream and 16 x 16, each sampled by perf; then the questions' p99 at 16 x 16 with the load
# generator's senders at nice 0 and at nice 10 (--sender_nice), CPU and GPU.
# Usage: where_16x16.sh CARRIED_FOLDER (binaries, hot_session_bench, lib/ and perf.tgz inside)
# shellcheck source=bench/scripts/session23/common.sh
source "$(dirname "$0")/../session23/common.sh" "$1"
perf_setup
machine_info
lscpu | grep -E "^(Thread|Core|Socket|NUMA node\(s\)|L1d|L2|L3)"
timeout 150 "$BIN/hot_session_bench" --threads=1,4,8,16 --sessions=each --items=40000000 \
  --summary=count_min --summary=lossy_counting
for s in 16 1; do bench_row sink "$SINK" "$s" "$s" count_min 0; done
# shellcheck disable=SC2046  # no_wal's flags are words
{
  PROFILE="-e cpu-clock" bench_row cpu16 "$SERVER" 16 16 count_min 0 --gpus=none $(no_wal)
  PROFILE="-e cpu-clock" bench_row cpu1 "$SERVER" 1 1 count_min 0 --gpus=none $(no_wal)
  bench_row "cpu16 q" "$SERVER" 16 16 count_min 200 --gpus=none $(no_wal)
  CLIENT_FLAGS=--sender_nice=10 bench_row "cpu16 q nice10" "$SERVER" 16 16 count_min 200 --gpus=none $(no_wal)
  bench_row "gpu16 q" "$SERVER" 16 16 count_min 200 --gpus=auto $(no_wal)
  CLIENT_FLAGS=--sender_nice=10 bench_row "gpu16 q nice10" "$SERVER" 16 16 count_min 200 --gpus=auto $(no_wal)
  CLIENT_FLAGS="--query=health --sender_nice=10" bench_row "cpu16 health nice10" "$SERVER" 16 16 count_min 200 --gpus=none $(no_wal)
}
for p in cpu16 cpu1; do perf_tables "$p" dso; done
date -u
