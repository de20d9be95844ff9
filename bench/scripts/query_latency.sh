#!/bin/bash
# Query latency during full-speed ingest (issue 7 goal: p99 < 5 ms): a real streamstatsd with a
# write-ahead log (fsync interval) and `streamstats bench` on the same machine, 100 queries/s
# alongside the ingest streams. Usage: query_latency.sh BUILD_DIR_OR_FOLDER [STREAMS]
#   BUILD_DIR_OR_FOLDER holds server/streamstatsd and client/streamstats (a build folder), or
#   streamstatsd and streamstats side by side (a carried folder with lib/). $SERVER_FLAGS: more
#   streamstatsd flags (e.g. --ingest_nice=0). $SERVER_WRAP / $CLIENT_WRAP: command prefixes, e.g.
#   SERVER_WRAP="taskset -c 0,1" CLIENT_WRAP="taskset -c 2-15" to give each its own cores.
#   $QUERY: the bench's --query (default auto; health measures the transport's round trip alone).
set -u
. "$(dirname "$0")/lib.sh"
STREAMS=${2:-2}
bench_binaries "$1"
W=$(mktemp -d)
trap 'kill ${SP:-} 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
machine_info
MP=${METRICS_PORT:-19464}
start_server $W/log ${SERVER_WRAP:-} "$SERVER" --listen=127.0.0.1:0 --data_dir=$W/data --wal_fsync=interval \
    --metrics_listen=127.0.0.1:$MP ${SERVER_FLAGS:-} || exit 1
SP=$STARTED_PID; A=$STARTED_ADDR
# The server's own view: the bucket holding the 99th percentile of streamstats_query_duration_seconds
# over the queries of one run (the difference of two scrapes).
scrape() { python3 -c "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:$MP/metrics').read().decode())" | grep '^streamstats_query_duration_seconds_bucket'; }
server_p99() {
  python3 - "$1" "$2" <<'PY'
import re, sys
def load(path):
    out = {}
    for line in open(path):
        m = re.match(r'.*le="([^"]+)"\} (\S+)', line)
        if m: out[m.group(1)] = out.get(m.group(1), 0) + float(m.group(2))
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
d = sorted(((float(k), b[k] - a.get(k, 0)) for k in b), key=lambda x: x[0])
if not d or d[-1][1] == 0: sys.exit()  # no session questions (e.g. QUERY=health)
n = d[-1][1]
p99 = next(le for le, c in d if c >= 0.99 * n)
p50 = next(le for le, c in d if c >= 0.5 * n)
print(f"  server-side  {int(n)} queries: p50 <= {p50*1000:g} ms   p99 <= {p99*1000:g} ms (histogram buckets)")
PY
}
run() {
  [[ -n "${ONLY:-}" && "$*" != *"$ONLY"* ]] && return  # $ONLY: run only the rows matching it
  echo "### $*"
  scrape > $W/before
  ${CLIENT_WRAP:-} "$CLI" --server=$A bench --duration=6 --query_rate=100 --query=${QUERY:-auto} --server_pid=$SP "$@" 2>&1 | grep -E "throughput|queries|latency|error"
  scrape > $W/after
  server_p99 $W/before $W/after
}
for batch in 10000 100000; do
  run --streams=$STREAMS --sessions=$STREAMS --batch=$batch --payload=doubles --distribution=normal --summary=quantiles:epsilon=0.01
  run --streams=$STREAMS --sessions=$STREAMS --batch=$batch --payload=doubles --distribution=zipf --summary=quantiles:epsilon=0.001
  run --streams=$STREAMS --sessions=$STREAMS --batch=$batch --payload=uint64 --distribution=zipf --summary=lossy_counting:epsilon=0.001
  run --streams=$STREAMS --sessions=$STREAMS --batch=$batch --payload=uint64 --distribution=zipf --summary=count_min:epsilon=0.001
  run --streams=$STREAMS --sessions=$STREAMS --batch=$batch --payload=uint64 --distribution=zipf --summary=pbf:keys=1000000,threshold=1000
done
