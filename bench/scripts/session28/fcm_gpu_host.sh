#!/bin/bash
# Session 28, run 2: an FCM on a GPU host, 16 streams into one session (concurrent batches in parts
# built on the host, the merged table put back on the device) against session 27's server built
# with CUDA (streamstatsd_s27gpu: one batch at a time on the device); 16 x 16 and one stream on the
# device for both; then where the CPU backend's time goes for FCM at 16 x 16 (symbols kept).
# Usage: [ROUNDS=N] fcm_gpu_host.sh CARRIED_FOLDER (as fcm_host.sh, with streamstatsd_s27gpu;
# gpu_tests runs first where the folder has it)
# shellcheck source=bench/scripts/session28/common.sh
source "$(dirname "$0")/common.sh" "$1"
[ -x "$BIN/gpu_tests" ] && gpu_tests_row
OLD_GPU="$BIN/streamstatsd_s27gpu"
# shellcheck disable=SC2046  # no_wal's flags are words
{
  bench_row "sink" "$SINK" 16 16 fcm 0
  for round in $(seq "${ROUNDS:-2}"); do
    echo "== round $round"
    bench_row "new auto fcm 16->1" "$SERVER" 16 1 fcm 0 --gpus=auto $(no_wal)
    bench_row "s27 auto fcm 16->1" "$OLD_GPU" 16 1 fcm 0 --gpus=auto $(no_wal)
    bench_row "new auto fcm:cons 16->1" "$SERVER" 16 1 fcm:conservative=true 0 --gpus=auto $(no_wal)
    bench_row "s27 auto fcm:cons 16->1" "$OLD_GPU" 16 1 fcm:conservative=true 0 --gpus=auto $(no_wal)
  done
  bench_row "new none fcm 16->1" "$SERVER" 16 1 fcm 0 --gpus=none $(no_wal)
  bench_row "new auto fcm 16x16" "$SERVER" 16 16 fcm 0 --gpus=auto $(no_wal)
  bench_row "s27 auto fcm 16x16" "$OLD_GPU" 16 16 fcm 0 --gpus=auto $(no_wal)
  bench_row "new auto fcm 16->1 q" "$SERVER" 16 1 fcm 200 --gpus=auto $(no_wal)
  perf_setup
  export PROFILE="-e cpu-clock"
  bench_row "prof_fcm_none" "$SERVER" 16 16 fcm 0 --gpus=none $(no_wal)
  bench_row "prof_fcm_auto_hot" "$SERVER" 16 1 fcm 0 --gpus=auto $(no_wal)
  unset PROFILE
  perf_tables prof_fcm_none
  perf_tables prof_fcm_auto_hot
}
date -u
