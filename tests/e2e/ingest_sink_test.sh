#!/usr/bin/env bash
# ctest ingest_sink: bench/ingest_sink answers `streamstats bench` as streamstatsd does, and counts
# exactly what it was sent (issue 14).
#
#   tests/e2e/ingest_sink_test.sh PATH/TO/ingest_sink PATH/TO/streamstats
#
# Starts the sink on 127.0.0.1 (port 0, --port_file), runs a few small item-count benches against
# it (doubles over two streams with a short last batch, uint64 keys one batch in flight, string
# keys with no in-flight limit, health questions alongside), each of which must succeed and report
# every item acknowledged; then SIGTERM must stop the sink (exit 0) with its items and batches
# equal to what the benches sent. The sink is stopped on exit; every wait is bounded.
set -uo pipefail

SINK=${1:?usage: ingest_sink_test.sh PATH/TO/ingest_sink PATH/TO/streamstats}
CLI=${2:?usage: ingest_sink_test.sh PATH/TO/ingest_sink PATH/TO/streamstats}
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/deploy/lib.sh
. "$HERE/../deploy/lib.sh"

TMP=$(mktemp -d)
PID=""
cleanup() {
  [ -n "$PID" ] && stop_pids "$PID"
  rm -rf "$TMP"
}
trap cleanup EXIT
die() { fail_with_logs "$*" "$TMP"/*.log; }

"$SINK" --listen=127.0.0.1:0 --port_file="$TMP/port" > "$TMP/sink.log" 2>&1 &
PID=$!
for _ in $(seq 100); do [ -s "$TMP/port" ] && break; sleep 0.1; done
[ -s "$TMP/port" ] || die "ingest_sink wrote no --port_file within 10 s"
ADDR=127.0.0.1:$(cat "$TMP/port")

items=0
batches=0
# run NAME ITEMS BATCH FLAGS...: one bench; it must exit 0 and report ITEMS items in
# ceil(ITEMS / BATCH) batches (the streams claim whole batches from one budget).
run() {
  local name=$1 n=$2 b=$3
  shift 3
  timeout 60 "$CLI" --server="$ADDR" bench --items="$n" --batch="$b" "$@" > "$TMP/$name.log" 2>&1 \
    || die "streamstats bench --items=$n --batch=$b $* failed"
  local want="ingested     $n items, $(((n + b - 1) / b)) batches"
  grep -q "$want" "$TMP/$name.log" || die "$name: the bench did not report '$want'"
  items=$((items + n))
  batches=$((batches + (n + b - 1) / b))
  echo "$name: $(grep throughput "$TMP/$name.log" | tr -s ' ')"
}
run doubles 123457 10000 --streams=2 --sessions=2 --payload=doubles
run uint64 50001 7000 --payload=uint64 --in_flight=1
run strings 20000 3000 --payload=strings --in_flight=0 --query=health --query_rate=200
grep -Eq "Health.Check at 200/s: [0-9]+ ok, 0 failed" "$TMP/strings.log" \
  || die "health questions to the sink failed: $(grep queries "$TMP/strings.log")"

kill -TERM "$PID"
rc=""
for _ in $(seq 150); do
  if ! kill -0 "$PID" 2>/dev/null || grep -q '^ingest_sink:' "$TMP/sink.log"; then
    wait "$PID"
    rc=$?
    break
  fi
  sleep 0.1
done
[ -n "$rc" ] || die "ingest_sink did not exit within 15 s of SIGTERM"
PID=""
[ "$rc" = 0 ] || die "ingest_sink exited with status $rc after SIGTERM"
line=$(grep '^ingest_sink:' "$TMP/sink.log") || die "ingest_sink printed no counts at exit"
echo "$line"
grep -q " items=$items batches=$batches " <<<"$line" \
  || die "the sink counted '$line', the benches sent items=$items batches=$batches"
echo "ingest_sink: all checks passed"
