#!/bin/bash
# Network path against the in-process rate (issue 7 goal: >= 50 % with batches of >= 10^4 items).
# In-process: summary_bench (each summary built from the same spec text as the server builds it).
# Network: a real streamstatsd without durability (--data_dir=) and one `streamstats bench`
# stream on the same machine. Usage: network_ratio.sh BUILD_DIR [SECONDS]
set -u
. "$(dirname "$0")/lib.sh"
B=$(realpath "$1"); T=${2:-5}
machine_info
W=$(mktemp -d)
trap 'kill ${SP:-} 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
start_server $W/log "$B/server/streamstatsd" --listen=127.0.0.1:0 --data_dir= --metrics_listen= || exit 1
SP=$STARTED_PID; A=$STARTED_ADDR
for batch in 10000 100000; do
  echo "### batch $batch: in-process (summary_bench)"
  "$B/bench/summary_bench" --items=4000000 --batch=$batch 2>&1 | tail -6
  echo "### batch $batch: network (streamstats bench, 1 stream)"
  while read -r payload dist summary; do
    printf "%-45s " "$summary"
    "$B/client/streamstats" --server=$A bench --duration=$T --streams=1 --batch=$batch \
        --payload=$payload --distribution=$dist --summary=$summary --server_pid=$SP 2>&1 |
      grep -E "throughput" | tr -s ' '
  done <<ROWS
doubles normal quantiles:epsilon=0.01
doubles normal quantiles:epsilon=0.001
uint64 zipf lossy_counting:epsilon=0.001
uint64 zipf lossy_counting:epsilon=0.0001
uint64 zipf count_min:epsilon=0.001,delta=0.01
uint64 zipf pbf:keys=1000000,threshold=1000
ROWS
done
