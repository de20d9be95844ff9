#!/bin/bash
# Session 28, run 1: FCM on the host a stage at a time (FcmWalk::StageCells, the shared vector
# bucket kernels, chunked candidate offers) against session 27's per-item loop; and FCM on a GPU
# host taking concurrent batches of one session in parts (merged tables back on the device).
# Usage: fcm_host.sh CARRIED_FOLDER (binaries, streamstatsd_s27, hot_session_bench_s27,
# gpu_tests, perf.tgz and lib/ inside)
# shellcheck source=bench/scripts/session28/common.sh
source "$(dirname "$0")/common.sh" "$1"
gpu_tests_row
echo "== in process, one session per thread (hot_session_bench --sessions=each), new then s27"
for bin in "$BIN/hot_session_bench" "$OLD_HOT"; do
  "$bin" --sessions=each --threads=1,16 --items=40000000 --summary=fcm --summary=count_min \
    --summary=fcm:conservative=true 2>&1 | tail -n 12
done
# shellcheck disable=SC2046  # no_wal's flags are words
{
  for s in 1 16; do
    bench_row "sink" "$SINK" "$s" "$s" fcm 0
    bench_row "new none fcm" "$SERVER" "$s" "$s" fcm 0 --gpus=none $(no_wal)
    bench_row "s27 none fcm" "$OLD" "$s" "$s" fcm 0 --gpus=none $(no_wal)
    bench_row "new none fcm cons" "$SERVER" "$s" "$s" fcm:conservative=true 0 --gpus=none $(no_wal)
    bench_row "s27 none fcm cons" "$OLD" "$s" "$s" fcm:conservative=true 0 --gpus=none $(no_wal)
    bench_row "new none count_min" "$SERVER" "$s" "$s" count_min 0 --gpus=none $(no_wal)
  done
  echo "== 16 streams into one session"
  bench_row "new none fcm 16->1" "$SERVER" 16 1 fcm 0 --gpus=none $(no_wal)
  bench_row "s27 none fcm 16->1" "$OLD" 16 1 fcm 0 --gpus=none $(no_wal)
  bench_row "new auto fcm 16->1" "$SERVER" 16 1 fcm 0 --gpus=auto $(no_wal)
  bench_row "new auto fcm 16->1 q" "$SERVER" 16 1 fcm 200 --gpus=auto $(no_wal)
  bench_row "new auto fcm 16x16" "$SERVER" 16 16 fcm 0 --gpus=auto $(no_wal)
  perf_setup
  export PROFILE="-e cpu-clock"
  bench_row "prof_new_fcm_none" "$SERVER" 16 16 fcm 0 --gpus=none $(no_wal)
  unset PROFILE
  perf_tables prof_new_fcm_none
}
date -u
