#!/bin/bash
# Session 25, run 2: where the load generator's time goes (it took 11.9 cores to push 769 M items/s
# into the sink at 16 x 16 in run 1, 4.5 for our 264 M: ~16 ns an item, as much as half the
# server's own), and how busy the host is: the sink and the CPU backend at 16 x 16 and one
# stream, the client sampled by perf (-e cpu-clock) and the host's busy cores from /proc/stat.
# Usage: client_where.sh CARRIED_FOLDER (binaries, lib/ and perf.tgz inside)
# shellcheck source=bench/scripts/session23/common.sh
source "$(dirname "$0")/../session23/common.sh" "$1"
perf_setup
machine_info
# shellcheck disable=SC2046  # no_wal's flags are words
{
  CLIENT_PROFILE="-e cpu-clock" bench_row sink16 "$SINK" 16 16 count_min 0
  CLIENT_PROFILE="-e cpu-clock" bench_row cpu16 "$SERVER" 16 16 count_min 0 --gpus=none $(no_wal)
  bench_row sink1 "$SINK" 1 1 count_min 0
  bench_row cpu1 "$SERVER" 1 1 count_min 0 --gpus=none $(no_wal)
  bench_row gpu16 "$SERVER" 16 16 count_min 0 --gpus=auto $(no_wal)
}
for p in sink16 cpu16; do perf_tables "$p.client" dso; done
date -u
