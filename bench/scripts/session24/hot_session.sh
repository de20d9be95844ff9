#!/bin/bash
# Session 24, run 3: one hot Count-Min or FCM session after the candidates' merge was made
# cheaper (one heap construction, the union's estimates hashed in vectors). In process:
# hot_session_bench at 1-16 threads (its merge column is the part under the session's lock). End
# to end, the CPU backend: 16 streams into one session and one stream, this build and session
# 23's (streamstatsd_s23) in the same run; then varint_bench (the log's key encoding).
# HyperLogLog on the device (--gpu_sketches with hll) at 1 and 4 streams, this build (whose
# GpuHll waits as the other sketches do) and session 23's.
# Usage: hot_session.sh CARRIED_FOLDER (this build's binaries, streamstatsd_s23, hot_session_bench,
# varint_bench, gpu_tests and lib/ inside)
# shellcheck source=bench/scripts/session23/common.sh
source "$(dirname "$0")/../session23/common.sh" "$1"
OLD=$BIN/streamstatsd_s23
machine_info
timeout 200 "$BIN/hot_session_bench" --threads=1,4,8,16 --summary=count_min --summary=fcm
for summ in count_min fcm; do
  # shellcheck disable=SC2046  # no_wal's flags are words
  {
    bench_row "cpu 16->1" "$SERVER" 16 1 "$summ" 0 --gpus=none $(no_wal)
    bench_row "cpu 16->1 s23" "$OLD" 16 1 "$summ" 0 --gpus=none $(no_wal)
    bench_row "cpu 1" "$SERVER" 1 1 "$summ" 0 --gpus=none $(no_wal)
    bench_row "cpu 1 s23" "$OLD" 1 1 "$summ" 0 --gpus=none $(no_wal)
  }
done
for s in 1 4; do hll_rows "$SERVER" "$OLD" "$s"; done
timeout 100 "$BIN/varint_bench"
gpu_tests_row
date -u
