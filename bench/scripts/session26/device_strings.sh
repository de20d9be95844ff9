#!/bin/bash
# Session 26, run 2: string keys hashed on the device (a plain Count-Min on the pool:
# DeviceSketch::AddSelectedStrings; the host packs each key's place in the request's bytes and
# copies those bytes once). gpu_tests first (the device path against the host's ids, bit for
# bit), then Count-Min on string keys ("key-<Zipf rank>", ranks over 10^6) at 1, 4 and 16 streams
# and 16 streams into one session: the sink, the CPU backend, the GPU backend, and session 25's
# server on the GPU in the same run where old/ was carried (not in run 2: the carry limit); a profile of the GPU backend at 16 x 16.
# Usage: device_strings.sh CARRIED_FOLDER (binaries, gpu_tests, lib/, perf.tgz, old/streamstatsd)
# shellcheck source=bench/scripts/session23/common.sh
source "$(dirname "$0")/../session23/common.sh" "$1"
perf_setup
machine_info
gpu_tests_row
OLD=$BIN/old/streamstatsd
# shellcheck disable=SC2046  # no_wal's flags are words
{
  export PAYLOAD=strings DISTRIBUTION=zipf
  for s in 1 4 16; do
    bench_row "sink strings" "$SINK" "$s" "$s" count_min 0
    bench_row "none cm" "$SERVER" "$s" "$s" count_min 0 --gpus=none $(no_wal)
    bench_row "auto cm" "$SERVER" "$s" "$s" count_min 0 --gpus=auto $(no_wal)
    [ -x "$OLD" ] && bench_row "auto cm s25" "$OLD" "$s" "$s" count_min 0 --gpus=auto $(no_wal)
  done
  bench_row "none cm 16->1" "$SERVER" 16 1 count_min 0 --gpus=none $(no_wal)
  bench_row "auto cm 16->1" "$SERVER" 16 1 count_min 0 --gpus=auto $(no_wal)
  bench_row "auto cm q200" "$SERVER" 16 16 count_min 200 --gpus=auto $(no_wal)
  PROFILE="-e cpu-clock" bench_row gpustr16 "$SERVER" 16 16 count_min 0 --gpus=auto $(no_wal)
  PROFILE="-e cpu-clock" bench_row gpustr1 "$SERVER" 1 1 count_min 0 --gpus=auto $(no_wal)
}
for p in gpustr16 gpustr1; do perf_tables "$p"; done
date -u
