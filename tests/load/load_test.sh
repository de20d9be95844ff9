#!/usr/bin/env bash
# Load test (issue 6, Load): a real streamstatsd on 127.0.0.1 (port 0, temp data dir,
# --durability=wal), STREAMS concurrent Ingest streams plus concurrent queries for SECONDS
# (tests/load/load_driver.cc), the server's RSS sampled from /proc every second.
# Passes when the driver saw no error (every batch acknowledged, every query answered, every
# session's N equal to the items acknowledged), the server exits 0 on SIGTERM, and memory is
# bounded: the max RSS over the second half of the run is at most 1.5x the max over
# [SECONDS/6, SECONDS/2) (for 60 s: seconds 30-60 vs 10-30).
#
#   tests/load/load_test.sh STREAMSTATSD LOAD_DRIVER [SECONDS=60] [STREAMS=64]
# Extra driver flags: LOAD_DRIVER_FLAGS="--batch_items=1000 --query_threads=4".
# Extra server flags: STREAMSTATSD_FLAGS="--wal_fsync=interval".
set -euo pipefail

server_bin=$1
driver_bin=$2
seconds=${3:-60}
streams=${4:-64}

work=$(mktemp -d "${TMPDIR:-/tmp}/streamstats-load.XXXXXX")
server_pid=""
sampler_pid=""
cleanup() {
  [ -n "$sampler_pid" ] && kill "$sampler_pid" 2>/dev/null || true
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then kill -KILL "$server_pid" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# shellcheck disable=SC2086
"$server_bin" --listen=127.0.0.1:0 --port_file="$work/port" --data_dir="$work/data" \
  --durability=wal --snapshot_interval_s=10 --metrics_listen=127.0.0.1:0 ${STREAMSTATSD_FLAGS:-} \
  >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 200); do
  [ -s "$work/port" ] && break
  kill -0 "$server_pid" 2>/dev/null || { echo "load_test: server died"; cat "$work/server.log"; exit 1; }
  sleep 0.1
done
[ -s "$work/port" ] || { echo "load_test: server did not write its port"; cat "$work/server.log"; exit 1; }
port=$(cat "$work/port")

# About one line per second: wall seconds since the driver started, VmRSS in kB.
(
  start=$(date +%s)
  while kill -0 "$server_pid" 2>/dev/null; do
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$server_pid/status" 2>/dev/null || true)
    [ -n "$rss" ] && echo "$(($(date +%s) - start)) $rss"
    sleep 1
  done
) >"$work/rss" &
sampler_pid=$!

driver_rc=0
# shellcheck disable=SC2086
"$driver_bin" --address="127.0.0.1:$port" --streams="$streams" --seconds="$seconds" \
  ${LOAD_DRIVER_FLAGS:-} >"$work/driver.out" 2>"$work/driver.err" || driver_rc=$?
cat "$work/driver.err" >&2
kill "$sampler_pid" 2>/dev/null || true
wait "$sampler_pid" 2>/dev/null || true
sampler_pid=""

kill -TERM "$server_pid"
server_rc=0
wait "$server_pid" || server_rc=$?
server_pid=""

figures=$(cat "$work/driver.out")
echo "load_test: $figures"
# RSS curve: every 10 s, and the bound check.
rss_ok=0
rss_report=$(awk -v secs="$seconds" '
  { rss[$1] = $2; if ($1 > last) last = $1 }
  END {
    lo = int(secs / 6); mid = int(secs / 2);
    curve = "";
    for (t = 0; t <= last; t += 10) if (t in rss) curve = curve sprintf(" %ds=%.0fMB", t, rss[t] / 1024);
    if (last in rss) curve = curve sprintf(" %ds=%.0fMB", last, rss[last] / 1024);
    for (t in rss) {
      if (t + 0 >= lo && t + 0 < mid && rss[t] > early) early = rss[t];
      if (t + 0 >= mid && t + 0 <= secs && rss[t] > late) late = rss[t];
      if (rss[t] > peak) peak = rss[t];
    }
    printf "rss_curve:%s\n", curve;
    printf "rss_peak_mb=%.0f rss_max_early_mb=%.0f rss_max_late_mb=%.0f ratio=%.3f\n",
           peak / 1024, early / 1024, late / 1024, (early > 0 ? late / early : 0);
    exit !(early > 0 && late <= 1.5 * early);
  }' "$work/rss") || rss_ok=$?
echo "$rss_report" | sed 's/^/load_test: /'

fail=0
if [ "$driver_rc" -ne 0 ]; then echo "load_test: FAIL: the driver reported errors (rc $driver_rc)"; fail=1; fi
if ! grep -q ' errors=0$' <<<"$figures"; then echo "load_test: FAIL: errors in the figures"; fail=1; fi
if [ "$rss_ok" -ne 0 ]; then echo "load_test: FAIL: server RSS grew more than 1.5x in the second half"; fail=1; fi
if [ "$server_rc" -ne 0 ]; then echo "load_test: FAIL: server exited $server_rc on SIGTERM"; fail=1; fi
if [ "$fail" -ne 0 ]; then
  echo "--- server log (tail) ---"
  tail -n 40 "$work/server.log"
  exit 1
fi
echo "load_test: PASS"
