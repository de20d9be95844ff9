#!/usr/bin/env bash
# ctest prometheus_scrape: a real Prometheus (Debian's `prometheus` package) on 127.0.0.1 scrapes a
# real streamstatsd; the test asks Prometheus's HTTP API for the ingest counter and for a quantile
# the session exported, and runs `promtool check metrics` on the exposition. (Issue 7.)
#
#   tests/deploy/prometheus_scrape_test.sh PATH/TO/streamstatsd PATH/TO/streamstats [REPO_ROOT]
#
# Both processes are stopped on exit; every wait is bounded.
set -uo pipefail

SERVER=${1:?usage: prometheus_scrape_test.sh streamstatsd streamstats [REPO_ROOT]}
CLI=${2:?usage: prometheus_scrape_test.sh streamstatsd streamstats [REPO_ROOT]}
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/deploy/lib.sh
. "$HERE/lib.sh"
need "$(command -v prometheus || true)" prometheus prometheus
need "$(command -v promtool || true)" promtool prometheus
need "$(command -v curl || true)" curl curl

TMP=$(mktemp -d)
PIDS=()
cleanup() {
  stop_pids "${PIDS[@]}"
  rm -rf "$TMP"
}
trap cleanup EXIT
die() { fail_with_logs "$*" "$TMP"/*.log; }

METRICS_PORT=$(free_port)
"$SERVER" --listen=127.0.0.1:0 --port_file="$TMP/port" --data_dir="$TMP/data" \
  --metrics_listen="127.0.0.1:$METRICS_PORT" > "$TMP/server.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$TMP/port" ] && break; sleep 0.1; done
[ -s "$TMP/port" ] || die "streamstatsd did not start"
C=("$CLI" "--server=127.0.0.1:$(cat "$TMP/port")")
"${C[@]}" session create lat --summary=quantiles:epsilon=0.001 --export=0.5,0.99 > /dev/null \
  || die "session create failed"
seq 1 100000 | "${C[@]}" ingest lat - > /dev/null || die "ingest failed"

curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" > "$TMP/exposition.txt" || die "cannot fetch /metrics"
promtool check metrics < "$TMP/exposition.txt" > "$TMP/promtool.log" 2>&1 \
  || die "promtool check metrics rejected the exposition: $(cat "$TMP/promtool.log")"

PROM_PORT=$(free_port)
cat > "$TMP/prometheus.yml" <<YML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: streamstats
    static_configs:
      - targets: ["127.0.0.1:$METRICS_PORT"]
YML
prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/tsdb" \
  --web.listen-address="127.0.0.1:$PROM_PORT" > "$TMP/prometheus.log" 2>&1 &
PIDS+=($!)

query() {  # prints the first sample's value of an instant query, or nothing
  curl -sf --get "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")'
}
items="" p99=""
for _ in $(seq 60); do  # at most about 60 s
  items=$(query 'streamstats_ingest_items_total{tenant="default"}' 2>/dev/null)
  p99=$(query 'streamstats_session_quantile{session="lat",quantile="0.99"}' 2>/dev/null)
  [ -n "$items" ] && [ -n "$p99" ] && break
  sleep 1
done
[ "$items" = "100000" ] || die "Prometheus reports streamstats_ingest_items_total=$items, want 100000"
# The exported p99 of 1..100000 is within epsilon*N = 100 ranks of 99000.
python3 -c "import sys; v=float('$p99'); sys.exit(0 if abs(v-99000) <= 100 else 1)" \
  || die "Prometheus reports the exported p99 as '$p99', want 99000 +- 100"
echo "PASS: Prometheus scraped ingest_items_total=$items and the exported p99=$p99"
