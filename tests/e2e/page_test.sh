#!/usr/bin/env bash
# ctest page: the page at / (server/web_page.h, server/web/) in headless Chromium against the real
# streamstatsd on 127.0.0.1.
#
#   tests/e2e/page_test.sh PATH/TO/streamstatsd PATH/TO/streamstats
#
# 1. Open server (no tokens file): the CLI creates 'latency' (quantiles, values 1..100000) and
#    'words' (Misra-Gries; a key '<img src=x onerror=alert(1)>' planted 5000 times and 'héavy ✓'
#    2000 times among 13000 distinct keys). curl checks the static files (Content-Type, ETag and
#    304, the page's Content-Security-Policy, 405) and that they need no token.
#    Chromium loads the page for a few seconds of virtual time (--virtual-time-budget: timers
#    run fast, the clock waits for requests in flight) and dumps the DOM and a screenshot;
#    page_check.py checks N exactly, p50/p90/p99 and every curve point within the rank bound,
#    at least two refreshes of the series, the planted keys among the heavy hitters as text
#    (no <img> element), and coloured pixels in the plots' canvases.
# 2. A server with a tokens file: /#token=READER shows the data; no token and a wrong token
#    show the 401 and no session.
# The servers are always killed on exit; every wait is bounded (chromium under timeout).
#
# Tools (Debian 12): chromium, curl, python3. Missing tools fail the test when apt could install
# them, and skip it (exit 77) only when they cannot be had.
set -uo pipefail

SERVER=${1:?usage: page_test.sh PATH/TO/streamstatsd PATH/TO/streamstats}
CLI=${2:?usage: page_test.sh PATH/TO/streamstatsd PATH/TO/streamstats}
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/deploy/lib.sh
. "$HERE/../deploy/lib.sh"

[ -x "$SERVER" ] || { echo "FAIL: server binary $SERVER is not executable (build streamstatsd)" >&2; exit 1; }
[ -x "$CLI" ] || { echo "FAIL: CLI $CLI is not executable (build streamstats)" >&2; exit 1; }
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
need "$CHROMIUM" chromium chromium
need "$(command -v curl || true)" curl curl
need "$(command -v python3 || true)" python3 python3
echo "using $("$CHROMIUM" --version 2>/dev/null | head -n1)"

TMP=$(mktemp -d)
PID=""
T0=$(date +%s)
stop_server() {
  if [ -n "$PID" ]; then
    kill -TERM "$PID" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$PID" 2>/dev/null
    wait "$PID" 2>/dev/null
    PID=""
  fi
}
cleanup() {
  stop_server
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
die() { fail_with_logs "$*" "$TMP/server.log" "$TMP/chromium.log"; }

# start_server NAME [FLAGS...]: streamstatsd on 127.0.0.1, ports picked by it; sets PORT, HTTP.
start_server() {
  local name=$1
  shift
  rm -f "$TMP/port" "$TMP/http_port"
  "$SERVER" --listen=127.0.0.1:0 --port_file="$TMP/port" --http_listen=127.0.0.1:0 \
    --http_port_file="$TMP/http_port" --metrics_listen=127.0.0.1:0 --data_dir="$TMP/data-$name" \
    "$@" >"$TMP/server.log" 2>&1 &
  PID=$!
  for _ in $(seq 200); do
    [ -s "$TMP/port" ] && [ -s "$TMP/http_port" ] && break
    kill -0 "$PID" 2>/dev/null || die "streamstatsd ($name) exited at start"
    sleep 0.1
  done
  [ -s "$TMP/port" ] && [ -s "$TMP/http_port" ] || die "streamstatsd ($name) wrote no port files in 20 s"
  PORT=$(cat "$TMP/port")
  HTTP=$(cat "$TMP/http_port")
}

# ingest TOKEN: the two sessions and their streams, through the CLI.
N=100000
ingest() {
  local c=("$CLI" "--server=127.0.0.1:$PORT" "--timeout=30")
  [ -n "$1" ] && c+=("--token=$1")
  "${c[@]}" session create latency --type=numeric --summary=quantiles:epsilon=0.001 >/dev/null \
    || die "session create latency failed"
  seq 1 "$N" | "${c[@]}" ingest latency - >/dev/null || die "ingest latency failed"
  "${c[@]}" session create words --type=strings --summary=misra_gries:k=100 >/dev/null \
    || die "session create words failed"
  python3 -c '
import random
keys = ["<img src=x onerror=alert(1)>"] * 5000 + ["h\u00e9avy \u2713"] * 2000 + ["w%d" % i for i in range(13000)]
random.Random(7).shuffle(keys)
print("\n".join(keys))' | "${c[@]}" ingest words - >/dev/null || die "ingest words failed"
}

# browse OUT_DOM OUT_PNG URL: the page after 7 s of virtual time (3+ refreshes at 2 s).
browse() {
  local dom=$1 png=$2 url=$3 profile
  profile=$(mktemp -d "$TMP/profile.XXXXXX")
  local flags=(--headless=new --no-sandbox --disable-gpu --no-first-run --no-default-browser-check
               --disable-extensions --disable-background-networking --disable-sync
               --user-data-dir="$profile" --window-size=1280,1800 --force-device-scale-factor=1
               --hide-scrollbars --virtual-time-budget=7000)
  # HOME: chromium writes its caches there; CI's may be read-only or absent.
  HOME=$TMP timeout 60 "$CHROMIUM" "${flags[@]}" --dump-dom "$url" >"$dom" 2>>"$TMP/chromium.log" \
    || die "chromium --dump-dom $url failed or timed out"
  if [ -n "$png" ]; then
    HOME=$TMP timeout 60 "$CHROMIUM" "${flags[@]}" --screenshot="$png" "$url" >>"$TMP/chromium.log" 2>&1 \
      || die "chromium --screenshot $url failed or timed out"
    [ -s "$png" ] || die "chromium wrote no screenshot"
  fi
}

# header FILE NAME: a response header's value (curl -D), without the CR.
header() { awk -v n="$2" 'BEGIN { IGNORECASE = 1 } tolower($1) == tolower(n) ":" { $1 = ""; sub(/^ /, ""); sub(/\r$/, ""); print }' "$1"; }

# static_files: the page's files over curl, without a token.
static_files() {
  local path type code etag
  for entry in "/|text/html" "/index.html|text/html" "/static/page.js|text/javascript" \
               "/static/page.css|text/css" "/static/chart.js|text/javascript"; do
    path=${entry%%|*}
    type=${entry#*|}
    code=$(curl -s -m 10 -o "$TMP/body" -D "$TMP/headers" -w '%{http_code}' "http://127.0.0.1:$HTTP$path")
    [ "$code" = 200 ] || die "GET $path without a token: HTTP $code, want 200"
    header "$TMP/headers" Content-Type | grep -q "^$type" || die "GET $path: Content-Type $(header "$TMP/headers" Content-Type), want $type"
    [ "$(header "$TMP/headers" Cache-Control)" = no-cache ] || die "GET $path: Cache-Control $(header "$TMP/headers" Cache-Control)"
    etag=$(header "$TMP/headers" ETag)
    [ -n "$etag" ] || die "GET $path: no ETag"
    code=$(curl -s -m 10 -o "$TMP/body304" -w '%{http_code}' -H "If-None-Match: $etag" "http://127.0.0.1:$HTTP$path")
    [ "$code" = 304 ] && [ ! -s "$TMP/body304" ] || die "GET $path with If-None-Match $etag: HTTP $code, want 304 and no body"
  done
  curl -s -m 10 -D "$TMP/headers" -o "$TMP/body" "http://127.0.0.1:$HTTP/"
  header "$TMP/headers" Content-Security-Policy | grep -q "script-src 'self'" || die "the page has no Content-Security-Policy"
  curl -s -m 10 -o "$TMP/body" "http://127.0.0.1:$HTTP/static/chart.js"
  head -c 100 "$TMP/body" | grep -q 'Chart.js v' || die "/static/chart.js is not Chart.js"
  code=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$HTTP/")
  [ "$code" = 405 ] || die "POST /: HTTP $code, want 405"
}

# 1. Open server.
start_server open
ingest ""
static_files
browse "$TMP/open.html" "$TMP/open.png" "http://127.0.0.1:$HTTP/"
python3 "$HERE/page_check.py" data "$TMP/open.html" "$TMP/open.png" "$N" || die "the page (open server) is wrong"
stop_server

# 2. Tokens: admin for the CLI, a read-only token for the page.
ADMIN=page-test-admin-0123456789abcdef
READER=page-test-reader-0123456789abcde
printf 'alice %s\nalice %s read\n' "$ADMIN" "$READER" >"$TMP/tokens"
start_server tokens --auth_tokens_file="$TMP/tokens"
ingest "$ADMIN"
static_files  # still no token needed
code=$(curl -s -m 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$HTTP/v1/sessions")
[ "$code" = 401 ] || die "GET /v1/sessions without a token: HTTP $code, want 401"
browse "$TMP/token.html" "$TMP/token.png" "http://127.0.0.1:$HTTP/#token=$READER"
python3 "$HERE/page_check.py" data "$TMP/token.html" "$TMP/token.png" "$N" || die "the page with #token= is wrong"
browse "$TMP/none.html" "" "http://127.0.0.1:$HTTP/"
python3 "$HERE/page_check.py" error "$TMP/none.html" "401 UNAUTHENTICATED" || die "the page without a token is wrong"
browse "$TMP/wrong.html" "" "http://127.0.0.1:$HTTP/#token=wrong-token-0123456789abcdef"
python3 "$HERE/page_check.py" error "$TMP/wrong.html" "401 UNAUTHENTICATED" || die "the page with a wrong token is wrong"
stop_server

echo "PASS: the page at / in headless Chromium, open and with tokens ($(( $(date +%s) - T0 )) s)"
