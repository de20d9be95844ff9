#!/bin/bash
# Session 26, run 1: string keys ("key-<Zipf rank>", ranks over 10^6) decoded by the server's own
# parse as views into the message's bytes (fab28c1; 5c07ee1 decoded them into reused strings),
# against session 25's server (old/streamstatsd, protobuf's arena strings copied again) in the
# same run: the sinks (the new one parses as the new server does, the old one as the old), the
# CPU and GPU backends at 1, 4 and 16 streams and 16 streams into one session, Count-Min, Lossy
# Counting and HyperLogLog; uint64 keys into Count-Min as a check that nothing else moved; a
# profile of the new server at 16 x 16 strings.
# Usage: strings.sh CARRIED_FOLDER (binaries, lib/, perf.tgz and old/{streamstatsd,ingest_sink})
# shellcheck source=bench/scripts/session23/common.sh
source "$(dirname "$0")/../session23/common.sh" "$1"
perf_setup
machine_info
OLD=$BIN/old/streamstatsd
OLD_SINK=$BIN/old/ingest_sink
# shellcheck disable=SC2046  # no_wal's flags are words
{
  export PAYLOAD=strings DISTRIBUTION=zipf
  for s in 1 16; do
    bench_row "sink strings" "$SINK" "$s" "$s" count_min 0
    bench_row "sink strings s25" "$OLD_SINK" "$s" "$s" count_min 0
    for b in none auto; do
      bench_row "$b cm" "$SERVER" "$s" "$s" count_min 0 --gpus=$b $(no_wal)
      bench_row "$b cm s25" "$OLD" "$s" "$s" count_min 0 --gpus=$b $(no_wal)
    done
    bench_row "none lossy" "$SERVER" "$s" "$s" lossy_counting 0 --gpus=none $(no_wal)
    bench_row "none lossy s25" "$OLD" "$s" "$s" lossy_counting 0 --gpus=none $(no_wal)
    bench_row "none hll" "$SERVER" "$s" "$s" hll 0 --gpus=none $(no_wal)
    bench_row "none hll s25" "$OLD" "$s" "$s" hll 0 --gpus=none $(no_wal)
  done
  bench_row "sink strings" "$SINK" 4 4 count_min 0
  for b in none auto; do bench_row "$b cm" "$SERVER" 4 4 count_min 0 --gpus=$b $(no_wal); done
  bench_row "none cm 16->1" "$SERVER" 16 1 count_min 0 --gpus=none $(no_wal)
  bench_row "none cm 16->1 s25" "$OLD" 16 1 count_min 0 --gpus=none $(no_wal)
  bench_row "none cm q200" "$SERVER" 16 16 count_min 200 --gpus=none $(no_wal)
  PROFILE="-e cpu-clock" bench_row strings16 "$SERVER" 16 16 count_min 0 --gpus=none $(no_wal)
  PROFILE="-e cpu-clock" bench_row strings1 "$SERVER" 1 1 count_min 0 --gpus=none $(no_wal)
  export PAYLOAD=uint64
  for s in 1 16; do
    bench_row "uint64 none cm" "$SERVER" "$s" "$s" count_min 0 --gpus=none $(no_wal)
    bench_row "uint64 none cm s25" "$OLD" "$s" "$s" count_min 0 --gpus=none $(no_wal)
  done
}
for p in strings16 strings1; do perf_tables "$p"; done
date -u
