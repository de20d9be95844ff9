#!/bin/bash
# Session 25, on the 2-vCPU VM: two streams into two sessions with one ingest thread (the
# default on two cores, at the server's priority) against two (SCHED_IDLE), with 100 questions a
# second, batches of 10^4 and 10^5, Zipf uint64 keys (Lossy Counting) and normal doubles
# (quantiles), two rounds. Usage: vm_two_threads.sh BUILD_DIR
B=${1:?the build folder}
run() { # threads batch payload
  local d=$(mktemp -d)
  $B/server/streamstatsd --listen=127.0.0.1:0 --port_file=$d/port --data_dir=$d/data --durability=none --metrics_listen=127.0.0.1:0 --ingest_threads=$1 > $d/log 2>&1 &
  local pid=$!
  for i in $(seq 50); do [ -s $d/port ] && break; sleep 0.1; done
  local dist=zipf; [ $3 = doubles ] && dist=normal
  local out=$($B/client/streamstats --server=127.0.0.1:$(cat $d/port) bench --streams=2 --sessions=2 --batch=$2 --payload=$3 --distribution=$dist --duration=4 --query_rate=100 --server_pid=$pid)
  printf "threads=%s batch=%-6s %-7s %s | %s | %s\n" $1 $2 $3 "$(echo "$out" | grep throughput | awk '{printf "%7.2f M", $2/1e6}')" "$(echo "$out" | grep queries | sed 's/.*failed//')" "$(echo "$out" | grep 'server CPU' | sed 's/^ *//')"
  kill $pid; wait $pid 2>/dev/null; rm -rf $d
}
for round in 1 2; do
  for batch in 10000 100000; do
    for p in uint64 doubles; do
      for t in 1 2; do run $t $batch $p; done
    done
  done
done
