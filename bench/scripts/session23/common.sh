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
# seconds of the run; CLIENT_FLAGS (words) go to `streamstats bench` too, and CLIENT (a binary)
# replaces the carried `streamstats` for the row; PAYLOAD and DISTRIBUTION (default uint64, zipf)
# change what it sends. With PROFILE set to a perf event
# (e.g. "-e cpu-clock"), `perf record -g` ($PERF) samples the server for 2 s into $OUT/LABEL.data;
# with CLIENT_PROFILE set likewise, the load generator from its second 1.5 s on into
# $OUT/LABEL.client.data. The row ends with the host's busy cores over the run (/proc/stat).
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
  local wrap="" busy0
  # shellcheck disable=SC2086  # CLIENT_PROFILE and PERF are word lists
  [ -n "${CLIENT_PROFILE:-}" ] && wrap="$PERF record -D 1500 $CLIENT_PROFILE -g -o $OUT/$label.client.data --"
  busy0=$(host_busy)
  # shellcheck disable=SC2086  # CLIENT_FLAGS and wrap are word lists
  timeout $((30 + ${DURATION:-4})) $wrap "${CLIENT:-$CLI}" --server="$STARTED_ADDR" bench --server_pid="$STARTED_PID" --streams="$s" \
    --sessions="$ss" --batch=100000 --payload="${PAYLOAD:-uint64}" --summary="$summ" \
    --distribution="${DISTRIBUTION:-zipf}" --query_rate="$q" --duration="${DURATION:-4}" ${CLIENT_FLAGS:-} \
    > "$WORK/out" 2>&1
  printf "%-22s S=%-2s/%-2s %-28s %s | %s | %s | %s\n" "$label" "$s" "$ss" "$summ" \
    "$(grep throughput "$WORK/out" | awk '{printf "%8.2f M", $2/1e6}')" \
    "$(grep 'server CPU' "$WORK/out" | sed 's/^ *//;s/(pid [0-9]*) *//')" \
    "$(grep -i 'ack lat' "$WORK/out" | sed 's/^ *//;s/(8 in.*//')" \
    "$(grep -i 'queries' "$WORK/out" | sed 's/^ *//')"
  echo "   host busy cores over the run: $(host_busy_since "$busy0")"
  [ -n "$pp" ] && wait "$pp"
  kill "$STARTED_PID"; wait "$STARTED_PID" 2>/dev/null
  rm -rf "$WORK"/d*
}

# host_busy: "busy total" jiffies of all CPUs (/proc/stat); host_busy_since EARLIER: the busy
# cores in between (user, nice, system, irq, softirq, steal over the elapsed jiffies, x cores).
host_busy() { awk '/^cpu / {t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t}' /proc/stat; }
host_busy_since() {
  local now
  now=$(host_busy)
  awk -v a="$1" -v b="$now" -v n="$(nproc)" 'BEGIN {split(a, x, " "); split(b, y, " ");
    printf "%.2f of %d", (y[1] - x[1]) / (y[2] - x[2]) * n, n}'
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

# perf_setup: unpacks the carried perf.tgz (the dev VM's perf and its libraries) and sets $PERF.
perf_setup() {
  mkdir -p "$WORK/p" && tar xzf "$BIN/perf.tgz" -C "$WORK/p"
  PERF="env LD_LIBRARY_PATH=$WORK/p/perflib:$LD_LIBRARY_PATH $WORK/p/perf"
}

# perf_tables NAME [BY]: $OUT/NAME.data (bench_row's PROFILE writes LABEL.data, CLIENT_PROFILE
# LABEL.client.data) as text: NAME.top.txt (self samples by symbol), NAME.BY.txt (self samples by
# BY: comm, dso, ...; default comm), NAME.children.txt (with callees, >= 2 %); prints the first
# lines of the first two and removes the data file.
perf_tables() {
  local name=$1 by=${2:-comm} data="$OUT/$1.data"
  $PERF report -i "$data" --no-children --sort sym --stdio -g none 2>/dev/null |
    grep -v "^#" | grep -v "^$" | head -45 > "$OUT/$name.top.txt"
  $PERF report -i "$data" --no-children --sort "$by" --stdio -g none 2>/dev/null |
    grep -v "^#" | grep -v "^$" | head -20 > "$OUT/$name.$by.txt"
  $PERF report -i "$data" --children --sort sym --stdio -g none --percent-limit 2 2>/dev/null |
    grep -v "^#" | grep -v "^$" | head -60 > "$OUT/$name.children.txt"
  rm -f "$data"
  echo "== $name"; head -25 "$OUT/$name.top.txt"; head -12 "$OUT/$name.$by.txt"
}

# perf_sleeps NAME: $OUT/NAME.data recorded with -e sched:sched_switch, as where the threads went
# to sleep (callers, >= 2 %) in NAME.callers.txt; removes the data file.
perf_sleeps() {
  $PERF report -i "$OUT/$1.data" --no-children --sort sym --stdio -G --percent-limit 2 2>/dev/null |
    grep -v "^#" | grep -v "^$" | cut -c1-200 | head -200 > "$OUT/$1.callers.txt"
  rm -f "$OUT/$1.data"
}
