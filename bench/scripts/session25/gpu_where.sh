#!/bin/bash
# Session 25, run 4: with the load generator's cost out of the way (run 3), Count-Min on the GPU
# at 16 x 16 moves 1.16 G items/s, 46 % of the sink, with ~5 of the host's 16 cores idle. Where
# the server's time goes (perf, cpu-clock and context switches) at 16 x 16 and one stream, and
# the device's own rate in process (gpu_bench's sketch pipeline rows are not carried: the
# server's in-process numbers come from session 23).
# Usage: gpu_where.sh CARRIED_FOLDER (binaries, lib/ and perf.tgz inside)
# shellcheck source=bench/scripts/session23/common.sh
source "$(dirname "$0")/../session23/common.sh" "$1"
perf_setup
machine_info
# shellcheck disable=SC2046  # no_wal's flags are words
{
  bench_row "sink" "$SINK" 16 16 count_min 0
  PROFILE="-e cpu-clock" bench_row gpu16 "$SERVER" 16 16 count_min 0 --gpus=auto $(no_wal)
  PROFILE="-e sched:sched_switch" bench_row gpu16sw "$SERVER" 16 16 count_min 0 --gpus=auto $(no_wal)
  PROFILE="-e cpu-clock" bench_row gpu1 "$SERVER" 1 1 count_min 0 --gpus=auto $(no_wal)
  CLIENT_FLAGS=--in_flight=32 bench_row "gpu16 in_flight 32" "$SERVER" 16 16 count_min 0 --gpus=auto $(no_wal)
}
for p in gpu16 gpu1; do perf_tables "$p"; done
perf_sleeps gpu16sw
date -u
