#!/usr/bin/env bash
# ctest python_client: the Python package (python/) and the example built on it, against the real
# server.
#
#   tests/deploy/python_client_test.sh PATH/TO/streamstatsd [REPO_ROOT]
#
# Installs the package as a user would (pip install of python/ into a fresh venv that sees
# Debian's python3-grpcio / protobuf / numpy; the stubs are generated from proto/ by the build,
# with the system protoc + grpc_python_plugin; no network: --no-index --no-build-isolation), from
# a copy of python/ and proto/ so the checkout stays clean. Starts streamstatsd on 127.0.0.1
# (port 0, --port_file, a temporary --data_dir, a tokens file), runs tests/python/test_client.py
# (every answer checked against the exact answer, bad input, errors as exceptions with their gRPC
# status) and examples/python/streamstats_client.py, whose quantiles it checks exactly (the values
# are a permutation of 1..N, so the value of rank r is r). If the server has --metrics_listen, it
# also scrapes /metrics and checks that the metric names the dashboard and alerts use are there.
# Finally SIGTERM must stop the server cleanly (exit 0). The server is always killed on exit.
#
# Tools (Debian 12): protoc (protobuf-compiler), grpc_python_plugin (protobuf-compiler-grpc),
# python3 with grpc (python3-grpcio), google.protobuf (python3-protobuf), venv (python3-venv),
# setuptools (python3-setuptools); numpy (python3-numpy) is optional. Missing tools fail the test
# when apt could install them, and skip it (exit 77) only when they cannot be had.
set -uo pipefail

SERVER=${1:?usage: python_client_test.sh PATH/TO/streamstatsd [REPO_ROOT]}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "${2:-$HERE/../..}" && pwd)
# shellcheck source=tests/deploy/lib.sh
. "$HERE/lib.sh"

[ -x "$SERVER" ] || { echo "FAIL: server binary $SERVER is not executable (build streamstatsd)" >&2; exit 1; }
need "$(command -v protoc || true)" protoc protobuf-compiler
PLUGIN=${GRPC_PYTHON_PLUGIN:-$(command -v grpc_python_plugin || true)}
need "$PLUGIN" grpc_python_plugin protobuf-compiler-grpc
PY=$(first_python grpc)
need "$PY" "python3 with the grpc module" python3-grpcio
PY=$(first_python grpc google.protobuf)
need "$PY" "python3 with the google.protobuf module" python3-protobuf
PY=$(first_python grpc google.protobuf setuptools)
need "$PY" "python3 with setuptools" python3-setuptools
PY=$(first_python grpc google.protobuf setuptools venv ensurepip)
need "$PY" "python3 with venv and ensurepip" python3-venv
echo "using $("$PY" --version) ($PY), grpcio $("$PY" -c 'import grpc; print(grpc.__version__)'), $(protoc --version)"

TMP=$(mktemp -d)
PID=""
# Running and not a zombie (kill -0 succeeds on an exited child until it is waited for).
alive() { [ -r "/proc/$1/stat" ] && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null; }
cleanup() {
  if [ -n "$PID" ]; then
    kill -TERM "$PID" 2>/dev/null
    for _ in $(seq 50); do alive "$PID" || break; sleep 0.1; done
    kill -KILL "$PID" 2>/dev/null
    wait "$PID" 2>/dev/null
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
die() { fail_with_logs "$*" "$TMP/server.log"; }

# 1. The package, pip-installed into a venv as a user would (stubs generated at build time).
mkdir -p "$TMP/src"
cp -r "$ROOT/python" "$ROOT/proto" "$TMP/src/" || die "cannot copy python/ and proto/"
rm -rf "$TMP/src/python/build" "$TMP/src/python/"*.egg-info
"$PY" -m venv --system-site-packages "$TMP/venv" || die "python3 -m venv failed"
VPY=$TMP/venv/bin/python
GRPC_PYTHON_PLUGIN=$PLUGIN "$VPY" -m pip install --quiet --no-deps --no-build-isolation --no-index \
  "$TMP/src/python" >"$TMP/pip.log" 2>&1 || { cat "$TMP/pip.log" >&2; die "pip install ./python failed"; }
(cd "$TMP" && "$VPY" -c "import streamstats, streamstats.v1.streamstats_pb2_grpc; print('streamstats', streamstats.__version__, 'from', streamstats.__file__)") \
  || die "the installed package does not import"

# 2. The server, on loopback, on a free port.
TOKEN=python-test-token-0123456789
echo "python-tests $TOKEN" >"$TMP/tokens"
flags=(--listen=127.0.0.1:0 --port_file="$TMP/port" --data_dir="$TMP/data" --auth_tokens_file="$TMP/tokens")
METRICS_PORT=""
help=$(timeout 10 "$SERVER" --helpfull 2>&1 || true)  # absl's --helpfull exits 1
if grep -q -- '--metrics_listen' <<<"$help"; then
  METRICS_PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  flags+=("--metrics_listen=127.0.0.1:$METRICS_PORT")
fi
"$SERVER" "${flags[@]}" >"$TMP/server.log" 2>&1 &
PID=$!
deadline=$((SECONDS + 30))
while [ $SECONDS -lt $deadline ]; do
  [ -s "$TMP/port" ] && break
  alive "$PID" || die "streamstatsd exited during start-up"
  sleep 0.1
done
[ -s "$TMP/port" ] || die "streamstatsd wrote no --port_file within 30 s"
ADDR=127.0.0.1:$(cat "$TMP/port")
echo "streamstatsd pid $PID on $ADDR${METRICS_PORT:+, metrics on 127.0.0.1:$METRICS_PORT}"

# 3. The package's tests: each RPC through the idiomatic API, answers against exact ones.
(cd "$TMP" && STREAMSTATS_SERVER=$ADDR STREAMSTATS_TOKEN=$TOKEN timeout 180 "$VPY" "$ROOT/tests/python/test_client.py") \
  || die "the Python package's tests failed"

client() { timeout 120 "$VPY" "$ROOT/examples/python/streamstats_client.py" --server="$ADDR" --token="$TOKEN" "$@"; }

# 3b. The example as a user runs it (human-readable output, its own bound check).
client --check || die "the example client failed in its default mode"

# 4. Exact checks on a permutation of 1..N: the value of rank r is r.
N=100000
client --json --values=permutation --count=$N --batch=7000 --epsilon=0.01 --session=py-perm \
  --phis=0,0.01,0.25,0.5,0.9,0.99,1 --keep >"$TMP/answer.json" || die "the example client failed (--json)"
"$PY" - "$TMP/answer.json" "$N" 0.01 <<'EOF' || die "the quantiles are not what the guarantee promises"
import json, math, sys
from fractions import Fraction
ans = json.load(open(sys.argv[1]))
n, eps = int(sys.argv[2]), float(sys.argv[3])
bad = []
def expect(cond, msg):
    if not cond: bad.append(msg)
expect(ans["count"] == n, f"count {ans['count']} != {n}")
expect(abs(ans["epsilon"] - eps) < 1e-12, f"epsilon {ans['epsilon']} != {eps}")
expect(ans["max_rank_error"] == math.floor(eps * n), f"max_rank_error {ans['max_rank_error']} != floor(eps*N)")
qs = ans["quantiles"]
expect([q["phi"] for q in qs] == [0, 0.01, 0.25, 0.5, 0.9, 0.99, 1], f"phis {[q['phi'] for q in qs]}")
prev = -math.inf
for q in qs:
    # max(1, ceil(phi*N)): either the exact ceiling for the double phi (90001 for phi = 0.9 and
    # N = 100000, the double nearest 0.9 being slightly above it) or the ceiling of the rounded
    # floating-point product (90000); the checks below hold against the one the server reports.
    v, err = q["value"], ans["max_rank_error"]
    allowed = {max(1, math.ceil(Fraction(q["phi"]) * n)), max(1, math.ceil(q["phi"] * n))}
    target = q["target_rank"]
    where = f"phi={q['phi']}: value {v}"
    expect(v == int(v) and 1 <= v <= n, f"{where} is not one of the values sent")
    expect(target in allowed, f"{where}: target_rank {target} is not ceil(phi*N) ({sorted(allowed)})")
    expect(abs(v - target) <= err, f"{where}: true rank {int(v)} is more than {err} from {target}")
    expect(q["rank_lower"] <= v <= q["rank_upper"], f"{where}: true rank outside [{q['rank_lower']}, {q['rank_upper']}]")
    expect(q["target_rank"] - err <= q["rank_lower"] and q["rank_upper"] <= q["target_rank"] + err,
           f"{where}: rank interval [{q['rank_lower']}, {q['rank_upper']}] wider than target +- {err}")
    expect(v >= prev, f"{where}: quantiles not monotone in phi")
    prev = v
for b in bad: print("  " + b, file=sys.stderr)
if not bad:
    print("quantiles: " + ", ".join(f"p{q['phi']*100:g}={q['value']:g}" for q in qs) + f" (N={n}, eps={eps}): all within bound")
sys.exit(1 if bad else 0)
EOF

# 5. Metrics, once the server has them: the names deploy/ relies on, and promtool's lint.
if [ -n "$METRICS_PORT" ]; then
  "$PY" - "$METRICS_PORT" "$TMP/metrics.txt" <<'EOF' || die "metrics: /metrics lacks names the dashboard and alerts rely on"
import re, sys, time, urllib.request
port, out = sys.argv[1], sys.argv[2]
text = ""
for _ in range(50):
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        break
    except OSError:
        time.sleep(0.1)
open(out, "w").write(text)
names = set(re.findall(r"^(streamstats_[a-zA-Z0-9_]+?)(?:_bucket|_sum|_count)?[{ ]", text, re.M))
names |= set(re.findall(r"^# TYPE (streamstats_\S+)", text, re.M))
# Present after a session was created, fed and queried on any server (GPU or not, WAL or not).
must = ["streamstats_ingest_items_total", "streamstats_ingest_bytes_total", "streamstats_ingest_batches_total",
        "streamstats_rpc_requests_total", "streamstats_rpc_duration_seconds", "streamstats_query_duration_seconds",
        "streamstats_sessions", "streamstats_session_memory_bytes", "streamstats_ingest_queue_depth",
        "streamstats_build_info"]
rest = ["streamstats_rejected_batches_total", "streamstats_accelerator_fallbacks_total",
        "streamstats_accelerator_kernel_seconds_total", "streamstats_accelerator_bytes_copied_total",
        "streamstats_wal_fsync_duration_seconds", "streamstats_snapshot_duration_seconds",
        "streamstats_device_memory_bytes", "streamstats_session_quantile"]
missing = [m for m in must if m not in names]
for m in missing:
    print(f"  metrics: {m} is not exported", file=sys.stderr)
absent = [m for m in rest if m not in names]
print(f"metrics: {len(must) - len(missing)}/{len(must)} required names exported"
      + (f"; not (yet) exported here: {', '.join(absent)}" if absent else ""))
sys.exit(1 if missing else 0)
EOF
  if command -v promtool >/dev/null 2>&1; then
    promtool check metrics <"$TMP/metrics.txt" || die "metrics: promtool check metrics finds problems in /metrics"
    echo "metrics: promtool check metrics passes"
  fi
else
  echo "note: $SERVER has no --metrics_listen flag yet; the /metrics checks did not run"
fi

# 6. SIGTERM: stop cleanly (what Kubernetes sends before it kills a pod).
kill -TERM "$PID"
rc=""
deadline=$((SECONDS + 15))
while [ $SECONDS -lt $deadline ]; do
  if ! alive "$PID"; then wait "$PID"; rc=$?; break; fi
  sleep 0.1
done
[ -n "$rc" ] || die "streamstatsd did not exit within 15 s of SIGTERM"
PID=""
[ "$rc" = 0 ] || die "streamstatsd exited with status $rc after SIGTERM"
echo "python_client: all checks passed"
