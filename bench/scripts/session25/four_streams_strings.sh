#!/bin/bash
# Session 25, run 10: issue 14's "at 1, 4 and 16 streams" rows at four streams (run 6 has 1 and
# 16), and string keys ("key-<Zipf rank>"), with the new client: the sink and both backends.
# Usage: four_streams_strings.sh CARRIED_FOLDER (binaries and lib/ inside)
# shellcheck source=bench/scripts/session23/common.sh
source "$(dirname "$0")/../session23/common.sh" "$1"
machine_info
# shellcheck disable=SC2046  # no_wal's flags are words
{
  bench_row sink "$SINK" 4 4 count_min 0
  for summ in count_min fcm lossy_counting; do
    for b in none auto; do bench_row "$b" "$SERVER" 4 4 "$summ" 0 --gpus=$b $(no_wal); done
  done
  export PAYLOAD=doubles DISTRIBUTION=normal
  bench_row "sink doubles" "$SINK" 4 4 quantiles 0
  for b in none auto; do bench_row "$b" "$SERVER" 4 4 quantiles 0 --gpus=$b $(no_wal); done
  export PAYLOAD=strings DISTRIBUTION=zipf
  for s in 1 16; do
    bench_row "sink strings" "$SINK" "$s" "$s" count_min 0
    for b in none auto; do bench_row "$b strings" "$SERVER" "$s" "$s" count_min 0 --gpus=$b $(no_wal); done
  done
}
date -u
