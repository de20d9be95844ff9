#!/bin/bash
# Session 25, on the 2-vCPU VM: two streams into two sessions with one ingest thread (the
# default on two cores, at the server's priority) against two (--ingest_policy=auto: SCHED_IDLE)
# and two with the first at the server's priority (--ingest_policy=mixed), with 100 questions a
# second, batches of 10^4 and 10^5, Zipf uint64 keys (Lossy Counting) and normal doubles
# (quantiles), two rounds. Usage: vm_two_threads.sh BUILD_DIR_OR_FOLDER [CONFIG...], a CONFIG
# THREADS:POLICY (default 1:auto 2:auto 2:mixed); STREAMS (default 2) streams into as many sessions.
# shellcheck source=bench/scripts/lib.sh
source "$(dirname "$0")/../lib.sh"
bench_binaries "${1:?the build folder}"
W=$(mktemp -d)
trap 'kill ${STARTED_PID:-} 2>/dev/null; rm -rf "$W"' EXIT
machine_info
CONFIGS=("${@:2}")
[ ${#CONFIGS[@]} -gt 0 ] || CONFIGS=(1:auto 2:auto 2:mixed)
run() {  # THREADS:POLICY BATCH PAYLOAD
  local dist=zipf out
  [ "$3" = doubles ] && dist=normal
  start_server "$W/log" "$SERVER" --listen=127.0.0.1:0 --data_dir="$W/data$RANDOM" \
    --durability=none --metrics_listen=127.0.0.1:0 --ingest_threads="${1%%:*}" \
    --ingest_policy="${1#*:}" || return 1
  out=$("$CLI" --server="$STARTED_ADDR" bench --streams="${STREAMS:-2}" --sessions="${STREAMS:-2}" --batch="$2" \
    --payload="$3" --distribution="$dist" --duration=4 --query_rate=100 --server_pid="$STARTED_PID")
  printf "%-8s batch=%-6s %-7s %s | %s | %s\n" "$1" "$2" "$3" \
    "$(echo "$out" | grep throughput | awk '{printf "%7.2f M", $2/1e6}')" \
    "$(echo "$out" | grep queries | sed 's/.*failed//')" \
    "$(echo "$out" | grep 'server CPU' | sed 's/^ *//')"
  kill "$STARTED_PID"; wait "$STARTED_PID" 2>/dev/null
}
for _ in 1 2; do
  for batch in 10000 100000; do
    for p in uint64 doubles; do
      for c in "${CONFIGS[@]}"; do run "$c" "$batch" "$p"; done
    done
  done
done
