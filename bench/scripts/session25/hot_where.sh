#!/bin/bash
# Session 25, run 5: 16 streams into one Count-Min session on the CPU backend move 377 M items/s
# (run 3) against 493 M into 16 sessions, with ~4.5 of the host's 16 cores idle: where the
# server's time goes and where its threads sleep (perf: cpu-clock, then sched_switch with
# callers), and the session's own counters (GetSession's parts and merge seconds via the CLI).
# Usage: hot_where.sh CARRIED_FOLDER (binaries, lib/ and perf.tgz inside)
# shellcheck source=bench/scripts/session23/common.sh
source "$(dirname "$0")/../session23/common.sh" "$1"
perf_setup
machine_info
# shellcheck disable=SC2046  # no_wal's flags are words
{
  PROFILE="-e cpu-clock" bench_row hot "$SERVER" 16 1 count_min 0 --gpus=none $(no_wal)
  PROFILE="-e sched:sched_switch" bench_row hotsw "$SERVER" 16 1 count_min 0 --gpus=none $(no_wal)
  CLIENT_FLAGS=--in_flight=2 bench_row "hot in_flight 2" "$SERVER" 16 1 count_min 0 --gpus=none $(no_wal)
  CLIENT_FLAGS=--in_flight=32 bench_row "hot in_flight 32" "$SERVER" 16 1 count_min 0 --gpus=none $(no_wal)
}
perf_tables hot
perf_sleeps hotsw
date -u
