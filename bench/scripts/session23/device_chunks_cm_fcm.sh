#!/bin/bash
# Session 23, run 4: Count-Min, conservative Count-Min and FCM on the GPU pool with device chunks
# (Summary::kDeviceChunkItems) against the CPU backend, session 22's server (streamstatsd_s22 in
# the carried folder: 8192-item chunks) and the sink, same host; questions at 200/s last.
# Usage: device_chunks_cm_fcm.sh CARRIED_FOLDER
source "$(dirname "$0")/common.sh" "$1"
gpu_tests_row
timeout 40 "$BIN/gpu_bench" --cm-session 2>&1 | grep cm-session
G="--gpus=auto --gpu_sketches=count_min,conservative,fcm"
# shellcheck disable=SC2046,SC2086  # flag lists
{
for s in 16 4 1; do bench_row sink "$SINK" "$s" "$s" count_min 0; done
for summ in count_min fcm count_min:conservative=true; do
  for s in 16 4 1; do
    bench_row cpu "$SERVER" "$s" "$s" "$summ" 0 $(no_wal) --gpus=none
    bench_row gpu "$SERVER" "$s" "$s" "$summ" 0 $(no_wal) $G
    bench_row gpu_s22 "$BIN/streamstatsd_s22" "$s" "$s" "$summ" 0 $(no_wal) $G
  done
done
for s in 16 1; do
  bench_row cpu+q "$SERVER" "$s" "$s" count_min 200 $(no_wal) --gpus=none
  bench_row gpu+q "$SERVER" "$s" "$s" count_min 200 $(no_wal) $G
done
}
date -u
