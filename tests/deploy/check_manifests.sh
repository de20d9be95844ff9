#!/usr/bin/env bash
# ctest deploy_manifests: everything under deploy/ renders, parses and agrees with itself.
#
#   tests/deploy/check_manifests.sh [REPO_ROOT]
#
# - `kubectl kustomize` renders deploy/kubernetes/base, overlays/gpu and overlays/cluster;
#   check_deploy.py checks the
#   rendered objects (kinds, grpc probes, PVC, GPU only in the overlay, non-root, resources, ports,
#   ServiceMonitor -> Service -> pods) and proves, by breaking them on purpose, that it notices.
# - promtool: check rules + unit tests of deploy/prometheus/alerts.yml, check config of
#   prometheus.yml, and every dashboard query parsed as PromQL.
# - The dashboard JSON parses and uses only metrics streamstatsd exports, each as its type allows.
#
# Tools (Debian 12 packages): kubectl (kubernetes-client), promtool (prometheus), python3 with
# PyYAML (python3-yaml), nats-server (nats-server: `-t` on the cluster overlay's config).
# Override with KUBECTL=, PROMTOOL=, PYTHON=, NATS_SERVER=. A missing tool FAILS the test when apt
# could install it here; the test is skipped (exit 77) only when it cannot be had at all.
set -uo pipefail

ROOT=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
failures=0

fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { echo "ok:   $*"; }

# shellcheck source=tests/deploy/lib.sh
. "$HERE/lib.sh"

KUBECTL=${KUBECTL:-$(command -v kubectl || true)}
need "$KUBECTL" kubectl kubernetes-client
PROMTOOL=${PROMTOOL:-$(command -v promtool || true)}
need "$PROMTOOL" promtool prometheus
PY=$(first_python yaml)
need "$PY" "python3 with PyYAML" python3-yaml
NATS_SERVER=${NATS_SERVER:-$(command -v nats-server || true)}
need "$NATS_SERVER" nats-server nats-server

echo "using $("$KUBECTL" version --client --short 2>/dev/null || "$KUBECTL" version --client 2>&1 | head -1)"
echo "using $("$PROMTOOL" --version 2>&1 | head -1)"
echo "using $("$PY" --version) ($PY)"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# 1. Render both kustomizations (stderr kept: deprecation warnings from new kustomize are fine).
render() {  # render DIR OUT
  if "$KUBECTL" kustomize "$1" >"$2" 2>"$TMP/kustomize.err"; then
    ok "kubectl kustomize ${1#"$ROOT"/} ($(grep -c '^kind:' "$2") objects)"
    return 0
  fi
  cat "$TMP/kustomize.err" >&2
  fail "kubectl kustomize ${1#"$ROOT"/} does not render"
  return 1
}
rendered=1
render "$ROOT/deploy/kubernetes/base" "$TMP/base.yaml" || rendered=0
render "$ROOT/deploy/kubernetes/overlays/gpu" "$TMP/gpu.yaml" || rendered=0
if render "$ROOT/deploy/kubernetes/overlays/cluster" "$TMP/cluster.yaml"; then
  if "$PY" "$HERE/check_deploy.py" cluster "$TMP/cluster.yaml"; then
    ok "overlays/cluster: NATS JetStream and streamstatsd replicas consistent, breakages caught"
  else
    fail "overlays/cluster (see FAIL lines above)"
  fi
  # The NATS config as the servers will read it, checked by nats-server itself.
  "$PY" -c 'import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d["kind"] == "ConfigMap" and d["metadata"]["name"] == "nats-config":
        open(sys.argv[2], "w").write(d["data"]["nats.conf"])' "$TMP/cluster.yaml" "$TMP/nats.conf"
  if POD_NAME=nats-0 "$NATS_SERVER" -c "$TMP/nats.conf" -t >"$TMP/nats.out" 2>&1; then
    ok "overlays/cluster: nats-server -t accepts the NATS config"
  else
    cat "$TMP/nats.out" >&2
    fail "overlays/cluster: nats-server rejects the NATS config"
  fi
else
  rendered=0
fi

# 2. Structure of the rendered objects, and proof the checks bite.
if [ $rendered = 1 ]; then
  if "$PY" "$HERE/check_deploy.py" manifests "$TMP/base.yaml" "$TMP/gpu.yaml"; then
    ok "rendered manifests are consistent"
  else
    fail "rendered manifests (see FAIL lines above)"
  fi
  if "$PY" "$HERE/check_deploy.py" selftest "$TMP/base.yaml" "$TMP/gpu.yaml"; then
    ok "every deliberate breakage of the manifests is caught"
  else
    fail "check_deploy.py misses a broken manifest"
  fi
fi

# The overlay's JSON patch guards the argument it rewrites: move it and rendering must fail.
cp -r "$ROOT/deploy/kubernetes" "$TMP/k8s"
sed -i 's/--gpus=none/--gpus=off/' "$TMP/k8s/base/statefulset.yaml"
if "$KUBECTL" kustomize "$TMP/k8s/overlays/gpu" >/dev/null 2>&1; then
  fail "overlays/gpu renders although the base's --gpus argument moved (its 'test' op no longer guards)"
else
  ok "overlays/gpu refuses to render when the base's --gpus argument changes"
fi
if "$KUBECTL" kustomize "$TMP/k8s/overlays/cluster" >/dev/null 2>&1; then
  fail "overlays/cluster renders although the base's argument list changed (its 'test' op no longer guards)"
else
  ok "overlays/cluster refuses to render when the base's argument list changes"
fi

# 3. Prometheus config and alert rules.
if "$PROMTOOL" check rules "$ROOT/deploy/prometheus/alerts.yml"; then ok "promtool check rules alerts.yml"
else fail "promtool check rules deploy/prometheus/alerts.yml"; fi
if "$PROMTOOL" check config "$ROOT/deploy/prometheus/prometheus.yml"; then ok "promtool check config prometheus.yml"
else fail "promtool check config deploy/prometheus/prometheus.yml"; fi
if "$PROMTOOL" test rules "$HERE/alerts_test.yml"; then ok "promtool test rules (alerts fire when they should)"
else fail "promtool test rules tests/deploy/alerts_test.yml"; fi

# 4. Dashboard and alert PromQL: metric names and types, then promtool parses every query.
if "$PY" "$HERE/check_deploy.py" promql "$ROOT/deploy/prometheus/alerts.yml" \
     "$ROOT/deploy/grafana/streamstats-dashboard.json" "$TMP/dashboard_rules.yml"; then
  ok "dashboard and alerts use only exported metrics"
  if "$PROMTOOL" check rules "$TMP/dashboard_rules.yml" >/dev/null; then ok "every dashboard query parses as PromQL"
  else "$PROMTOOL" check rules "$TMP/dashboard_rules.yml"; fail "a dashboard query is not valid PromQL"; fi
else
  fail "dashboard/alerts metric names (see FAIL lines above)"
fi
# ... and that check notices a misspelled metric.
sed 's/streamstats_ingest_queue_depth/streamstats_ingest_queue_length/' \
  "$ROOT/deploy/grafana/streamstats-dashboard.json" >"$TMP/bad-dashboard.json"
if "$PY" "$HERE/check_deploy.py" promql "$ROOT/deploy/prometheus/alerts.yml" \
     "$TMP/bad-dashboard.json" "$TMP/bad_rules.yml" >/dev/null 2>&1; then
  fail "a dashboard with an unknown metric name passes the check"
else
  ok "a misspelled metric in the dashboard is caught"
fi

if [ $failures -gt 0 ]; then
  echo "deploy_manifests: $failures check(s) failed" >&2
  exit 1
fi
echo "deploy_manifests: all checks passed"
