#!/bin/bash
# Session 27, run 2: gpu_tests after conservative Count-Min and FCM take page-locked ids in
# place too; conservative Count-Min (1 and 16 streams) and conservative FCM (16) from the new
# server and session 26's, with the sink, and a second sample of the plain rows at 16 x 16.
# Usage: conservative.sh CARRIED_FOLDER (as direct.sh's)
# shellcheck source=bench/scripts/session27/common.sh
source "$(dirname "$0")/common.sh" "$1"
# shellcheck disable=SC2046  # no_wal's flags are words
{
  for s in 1 16; do
    bench_row "sink" "$SINK" "$s" "$s" count_min 0
    bench_row "new auto" "$SERVER" "$s" "$s" count_min:conservative=true 0 --gpus=auto $(no_wal)
    bench_row "s26 auto" "$OLD" "$s" "$s" count_min:conservative=true 0 --gpus=auto $(no_wal)
  done
  bench_row "new auto" "$SERVER" 16 16 fcm:conservative=true 0 --gpus=auto $(no_wal)
  bench_row "s26 auto" "$OLD" 16 16 fcm:conservative=true 0 --gpus=auto $(no_wal)
  for summ in count_min fcm; do
    bench_row "s26 auto" "$OLD" 16 16 "$summ" 0 --gpus=auto $(no_wal)
    bench_row "new auto" "$SERVER" 16 16 "$summ" 0 --gpus=auto $(no_wal)
  done
  bench_row "sink" "$SINK" 16 16 count_min 0
}
date -u
