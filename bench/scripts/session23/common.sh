# shellcheck shell=bash
# Shared by the session 23 scripts (sourced): the carried folder's binaries (lib.sh's
# bench_binaries: streamstatsd, streamstats, ingest_sink and lib/ side by side) and one bench run.
# shellcheck source=bench/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bench_binaries "${1:?the carried folder}"
BIN=$(dirname "$SERVER")
WORK=$(mktemp -d)
date -u; nproc
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

# bench_row LABEL SERVER STREAMS SESSIONS SUMMARY QUERY_RATE SERVER_FLAGS...: starts SERVER (a
# binary: streamstatsd, an older one, or ingest_sink) on loopback, runs `streamstats bench`
# against it (batches of 10^5 Zipf(1.1) uint64 keys, 4 s), prints one row (items/s, server and
# client CPU, ack and question latency) and stops the server. DURATION (default 4) sets the
# seconds of the run. With PROFILE set to a perf event
# (e.g. "-e cpu-clock"), `perf record -g` ($PERF) samples the server for 2 s into $OUT/LABEL.data.
bench_row() {
  local label=$1 server=$2 s=$3 ss=$4 summ=$5 q=$6 pp=""
  shift 6
  start_server "$WORK/log" "$server" --listen=127.0.0.1:0 "$@" || return 1
  if [ -n "${PROFILE:-}" ]; then
    # shellcheck disable=SC2086  # PROFILE and PERF are word lists
    (sleep 1.5; $PERF record $PROFILE -g -p "$STARTED_PID" -o "$OUT/$label.data" -- sleep 2 \
      > /dev/null 2>&1) &
    pp=$!
  fi
  timeout $((30 + ${DURATION:-4})) "$CLI" --server="$STARTED_ADDR" bench --server_pid="$STARTED_PID" --streams="$s" \
    --sessions="$ss" --batch=100000 --payload=uint64 --summary="$summ" \
    --distribution=zipf --query_rate="$q" --duration="${DURATION:-4}" > "$WORK/out" 2>&1
  printf "%-22s S=%-2s/%-2s %-28s %s | %s | %s | %s\n" "$label" "$s" "$ss" "$summ" \
    "$(grep throughput "$WORK/out" | awk '{printf "%8.2f M", $2/1e6}')" \
    "$(grep 'server CPU' "$WORK/out" | sed 's/^ *//;s/(pid [0-9]*) *//')" \
    "$(grep -i 'ack lat' "$WORK/out" | sed 's/^ *//;s/(8 in.*//')" \
    "$(grep -i 'queries' "$WORK/out" | sed 's/^ *//')"
  [ -n "$pp" ] && wait "$pp"
  kill "$STARTED_PID"; wait "$STARTED_PID" 2>/dev/null
  rm -rf "$WORK"/d*
}

# A server's flags for a run without a log, its data directory fresh.
no_wal() { echo "--durability=none --data_dir=$WORK/d$RANDOM"; }

# hll_rows NEW OLD STREAMS: HyperLogLog on the device (--gpu_sketches with hll) from NEW and OLD
# (two server binaries), and on the CPU from NEW.
hll_rows() {
  local hll="--gpus=auto --gpu_sketches=count_min,conservative,pbf,ams,count_sketch,fcm,hll"
  # shellcheck disable=SC2046,SC2086  # the flags are words
  {
    bench_row "hll gpu" "$1" "$3" "$3" hll 0 $hll $(no_wal)
    bench_row "hll gpu s23" "$2" "$3" "$3" hll 0 $hll $(no_wal)
    bench_row "hll cpu" "$1" "$3" "$3" hll 0 --gpus=none $(no_wal)
  }
}

gpu_tests_row() {
  timeout 200 "$BIN/gpu_tests" > "$OUT/gpu_tests.log" 2>&1; echo "gpu_tests rc=$?"
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]" "$OUT/gpu_tests.log" | head -20
}
