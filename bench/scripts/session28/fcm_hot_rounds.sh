#!/bin/bash
# Session 28, run 3: 16 streams into one FCM session on a GPU host, new (parts on the host, the
# merged table back on the device) and session 27's server (one batch at a time on the device),
# alternating, ROUNDS times (default 3).
# Usage: [ROUNDS=N] fcm_hot_rounds.sh CARRIED_FOLDER (as fcm_gpu_host.sh)
# shellcheck source=bench/scripts/session28/common.sh
source "$(dirname "$0")/common.sh" "$1"
OLD_GPU="$BIN/streamstatsd_s27gpu"
# shellcheck disable=SC2046  # no_wal's flags are words
for round in $(seq "${ROUNDS:-3}"); do
  echo "== round $round"
  for spec in fcm fcm:conservative=true; do
    bench_row "new auto $spec" "$SERVER" 16 1 "$spec" 0 --gpus=auto $(no_wal)
    bench_row "s27 auto $spec" "$OLD_GPU" 16 1 "$spec" 0 --gpus=auto $(no_wal)
  done
done
date -u
