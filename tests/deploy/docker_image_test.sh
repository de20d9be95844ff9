#!/usr/bin/env bash
# The Dockerfile, built and run without a Docker engine or a registry (issue 7): buildah (chroot
# isolation, vfs storage) builds it on a local Debian 12 stand-in base made with debootstrap, with
# -DSTREAMSTATS_GPU=OFF; then the image's own binaries run from the image's config (ENTRYPOINT,
# USER, WORKDIR, ENV): streamstatsd as uid 10001, the image's CLI creates, ingests and queries a
# session, the HEALTHCHECK command runs in the server's container while the server is up (must
# pass) and after it stopped (must fail), /metrics is scraped with curl, and a restart keeps the
# session (data_dir in the image's WORKDIR). It does NOT test the CUDA base images, a GPU, or Ubuntu 24.04's package names.
# In CTest as docker_image (labels deploy, long): about 2 minutes on 2 cores, 4 the first time
# (debootstrap); see deploy/DOCKER_RESULTS.md.
#
#   sudo tests/deploy/docker_image_test.sh [REPO_ROOT]
#
# Environment:
#   STREAMSTATS_IMAGE_CACHE  debootstrap rootfs, buildah storage and logs
#                            (default /var/tmp/streamstats-image-test); reused across runs
#   STREAMSTATS_DEBIAN_MIRROR  Debian mirror for debootstrap (default: the Debian URI in
#                            /etc/apt/sources.list*, else http://deb.debian.org/debian)
#   STREAMSTATS_IMAGE_JOBS   compile jobs inside the build (default 2); everything runs at nice 19
#
# Exit 0: passed; 1: failed; 77: skipped (not root, no buildah/debootstrap, or they cannot run
# here), with the reason on stderr. Needs root, buildah, debootstrap, curl, python3:
#   apt-get install -y buildah debootstrap fuse-overlayfs uidmap crun curl python3
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/deploy/lib.sh
. "$HERE/lib.sh"
ROOT=$(cd "${1:-$HERE/../..}" && pwd)
CACHE=${STREAMSTATS_IMAGE_CACHE:-/var/tmp/streamstats-image-test}
JOBS=${STREAMSTATS_IMAGE_JOBS:-2}
BASE_IMAGE=localhost/debian12-base
IMAGE=localhost/streamstats:test
SRV=streamstats-test-srv
CLI=streamstats-test-cli

skip() { echo "SKIP: $*" >&2; exit 77; }
log() { echo "== $*" >&2; }

[ "$(id -u)" -eq 0 ] || skip "needs root (debootstrap, buildah's chroot isolation); nothing was checked"
for tool in buildah debootstrap curl python3; do
  command -v "$tool" >/dev/null 2>&1 ||
    skip "$tool not found (apt-get install -y buildah debootstrap fuse-overlayfs uidmap crun curl python3)"
done
[ -f "$ROOT/Dockerfile" ] || { echo "FAIL: no Dockerfile in $ROOT" >&2; exit 1; }

export BUILDAH_ISOLATION=chroot
NICE=(nice -n 19)
command -v ionice >/dev/null 2>&1 && NICE+=(ionice -c 3)
B=("${NICE[@]}" buildah --root "$CACHE/storage" --runroot "$CACHE/runroot" --storage-driver vfs)
mkdir -p "$CACHE/logs"
LOGS=$CACHE/logs

SERVER_PIDS=()
cleanup() {
  stop_pids "${SERVER_PIDS[@]}"
  "${B[@]}" rm "$SRV" "$CLI" >/dev/null 2>&1
}
trap cleanup EXIT
die() { fail_with_logs "$*" "$LOGS"/server*.log; }

# --- buildah itself -------------------------------------------------------------------------------
"${B[@]}" rm "$SRV" "$CLI" >/dev/null 2>&1  # left over from an interrupted run
if ! probe=$("${B[@]}" from scratch 2>"$LOGS/probe.log") ||
   ! "${B[@]}" mount "$probe" >>"$LOGS/probe.log" 2>&1; then
  skip "buildah cannot create/mount a container here: $(tail -n 3 "$LOGS/probe.log")"
fi
"${B[@]}" rm "$probe" >/dev/null

# --- the Debian 12 stand-in base (cached) ---------------------------------------------------------
mirror=${STREAMSTATS_DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
  mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
             2>/dev/null | grep -v '^\s*#' | grep -oE 'https?://[^ ]+/debian/?( |$)' | head -n 1 | tr -d ' ')
  mirror=${mirror:-http://deb.debian.org/debian}
fi
ROOTFS=$CACHE/rootfs-bookworm
if [ ! -f "$ROOTFS/.streamstats-complete" ]; then
  log "debootstrap --variant=minbase bookworm from $mirror (cached in $ROOTFS)"
  t0=$(date +%s)
  rm -rf "$ROOTFS.tmp"
  "${NICE[@]}" debootstrap --variant=minbase bookworm "$ROOTFS.tmp" "$mirror" > "$LOGS/debootstrap.log" 2>&1 ||
    skip "debootstrap failed (mirror $mirror unreachable?): $(tail -n 3 "$LOGS/debootstrap.log")"
  {
    echo "deb ${mirror%/} bookworm main"
    echo "deb ${mirror%/} bookworm-updates main"
    case "$mirror" in */debian|*/debian/) echo "deb ${mirror%/}-security bookworm-security main" ;; esac
  } > "$ROOTFS.tmp/etc/apt/sources.list"
  chroot "$ROOTFS.tmp" apt-get clean
  rm -rf "$ROOTFS.tmp"/var/lib/apt/lists/* "$ROOTFS.tmp"/var/log/* "$ROOTFS.tmp"/debootstrap
  rm -rf "$ROOTFS" && mv "$ROOTFS.tmp" "$ROOTFS" && touch "$ROOTFS/.streamstats-complete"
  echo "debootstrap: $(( $(date +%s) - t0 )) s" >&2
  "${B[@]}" rmi "$BASE_IMAGE" >/dev/null 2>&1  # re-import the new rootfs
fi
if ! "${B[@]}" inspect --type image "$BASE_IMAGE" >/dev/null 2>&1; then
  log "importing $ROOTFS as $BASE_IMAGE"
  t0=$(date +%s)
  ctr=$("${B[@]}" from scratch) || die "buildah from scratch"
  mnt=$("${B[@]}" mount "$ctr") || die "buildah mount"
  (cd "$ROOTFS" && tar --exclude=./.streamstats-complete -cf - .) | tar -C "$mnt" -xpf - ||
    die "copying the rootfs into the base image"
  "${B[@]}" umount "$ctr" >/dev/null
  "${B[@]}" config --os linux --arch amd64 --cmd /bin/bash \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr" || die "buildah config"
  "${B[@]}" commit --rm --format docker "$ctr" "$BASE_IMAGE" >/dev/null || die "buildah commit"
  echo "import: $(( $(date +%s) - t0 )) s" >&2
fi

# --- the image ------------------------------------------------------------------------------------
log "buildah bud (log: $LOGS/bud.log)"
"${B[@]}" rmi "$IMAGE" >/dev/null 2>&1
start=$(date +%s)
"${B[@]}" bud --isolation chroot --format docker \
  --build-arg BUILD_IMAGE="$BASE_IMAGE" --build-arg RUNTIME_IMAGE="$BASE_IMAGE" \
  --build-arg CMAKE_ARGS=-DSTREAMSTATS_GPU=OFF --build-arg CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" \
  -t "$IMAGE" -f "$ROOT/Dockerfile" "$ROOT" > "$LOGS/bud.log" 2>&1 ||
  { tail -n 40 "$LOGS/bud.log" >&2; die "buildah bud failed (full log: $LOGS/bud.log)"; }
echo "build: $(( $(date +%s) - start )) s" >&2
"${B[@]}" rmi --prune >/dev/null 2>&1  # the unnamed build stage
"${B[@]}" images >&2

# --- the image's config ---------------------------------------------------------------------------
"${B[@]}" inspect --type image "$IMAGE" |
  python3 -c 'import json,sys; json.dump(json.load(sys.stdin)["Docker"]["config"], sys.stdout)' \
  > "$LOGS/config.json" || die "buildah inspect $IMAGE"
python3 - "$LOGS/config.json" <<'PY' || die "image config: $(cat "$LOGS/config.json")"
import json, sys
c = json.load(open(sys.argv[1]))
want = {
    "User": "10001:10001",
    "WorkingDir": "/var/lib/streamstats",
    "Entrypoint": ["/usr/local/bin/streamstatsd", "--data_dir=/var/lib/streamstats/data",
                   "--metrics_listen=0.0.0.0:9464"],
}
bad = [f"{k}={c.get(k)!r}, want {v!r}" for k, v in want.items() if c.get(k) != v]
if sorted(c.get("ExposedPorts") or {}) != ["50051/tcp", "9464/tcp"]:
    bad.append(f"ExposedPorts={c.get('ExposedPorts')!r}")
hc = (c.get("Healthcheck") or {}).get("Test") or []
if hc[:1] != ["CMD"]:
    bad.append(f"Healthcheck={c.get('Healthcheck')!r}")
env = dict(e.split("=", 1) for e in c.get("Env") or [])
if not env.get("LD_LIBRARY_PATH", "").startswith("/opt/streamstats/lib"):
    bad.append(f"LD_LIBRARY_PATH={env.get('LD_LIBRARY_PATH')!r}")
for b in bad:
    print("image config:", b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
mapfile -t ENTRYPOINT < <(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["Entrypoint"]))' "$LOGS/config.json")
mapfile -t HEALTHCHECK < <(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["Healthcheck"]["Test"][1:]))' "$LOGS/config.json")

# --- run it ---------------------------------------------------------------------------------------
PORT=$(free_port)
MPORT=$(free_port)
"${B[@]}" from --name "$SRV" "$IMAGE" >/dev/null || die "buildah from $IMAGE (server)"
"${B[@]}" from --name "$CLI" "$IMAGE" >/dev/null || die "buildah from $IMAGE (cli)"
# Chroot isolation shares the host's network namespace: 127.0.0.1 is the host's.
in_cli() { "${B[@]}" run --env STREAMSTATS_SERVER="127.0.0.1:$PORT" "$CLI" -- "$@"; }
# Like Docker's HEALTHCHECK, in the server's own container (next to the running server).
in_srv() { "${B[@]}" run --env STREAMSTATS_SERVER="127.0.0.1:$PORT" "$SRV" -- "$@"; }

descendant_named() {  # descendant_named PID COMM: the first descendant process of PID named COMM
  local queue=("$1") p c
  while [ ${#queue[@]} -gt 0 ]; do
    p=${queue[0]}; queue=("${queue[@]:1}")
    # shellcheck disable=SC2013  # pids, one word each
    for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do
      [ "$(cat /proc/"$c"/comm 2>/dev/null)" = "$2" ] && { echo "$c"; return 0; }
      queue+=("$c")
    done
  done
  return 1
}
SERVER_PID=""
start_server() {  # the image's ENTRYPOINT, with loopback ports
  "${B[@]}" run "$SRV" -- "${ENTRYPOINT[@]}" --listen="127.0.0.1:$PORT" \
    --metrics_listen="127.0.0.1:$MPORT" > "$LOGS/server-$1.log" 2>&1 &
  local runner=$!
  SERVER_PID=""
  for _ in $(seq 100); do
    SERVER_PID=$(descendant_named "$runner" streamstatsd) && break
    kill -0 "$runner" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$SERVER_PID" ] || die "streamstatsd did not start in the container"
  SERVER_PIDS+=("$SERVER_PID")
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$MPORT/metrics" >/dev/null && break
    kill -0 "$SERVER_PID" 2>/dev/null || die "streamstatsd exited"
    sleep 0.2
  done
  uid=$(awk '/^Uid:/ {print $2}' /proc/"$SERVER_PID"/status)
  [ "$uid" = 10001 ] || die "streamstatsd runs as uid $uid, want 10001"
  echo "streamstatsd pid $SERVER_PID uid $uid on 127.0.0.1:$PORT, metrics 127.0.0.1:$MPORT" >&2
}
stop_server() {
  kill -TERM "$SERVER_PID"
  for _ in $(seq 300); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$SERVER_PID" 2>/dev/null && die "streamstatsd ignored SIGTERM for 30 s"
  wait 2>/dev/null
}

start_server 1
in_cli /usr/local/bin/streamstats session create t --type=numeric --summary=quantiles ||
  die "session create"
seq 1 100000 | in_cli /usr/local/bin/streamstats ingest t - || die "ingest"
q=$(in_cli /usr/local/bin/streamstats quantiles t 0.5) || die "quantiles"
echo "quantiles t 0.5: $q" >&2
median=$(sed -n 's/.*phi=0.5 *value=\([-+.0-9eE]*\).*/\1/p' <<<"$q")
python3 -c "import sys; sys.exit(0 if abs(float('$median') - 50000) <= 1000 else 1)" ||
  die "median of 1..100000 is $median, want 50000 +- 1000"
list=$(in_cli /usr/local/bin/streamstats session list) || die "session list"
echo "session list: $list" >&2
grep -qE '^t +type=NUMERIC +N=100000 ' <<<"$list" || die "session list lacks t with N=100000"
log "HEALTHCHECK: ${HEALTHCHECK[*]}"
in_srv "${HEALTHCHECK[@]}" > /dev/null || die "the HEALTHCHECK command fails against a running server"
curl -sf "http://127.0.0.1:$MPORT/metrics" > "$LOGS/metrics.txt" || die "GET /metrics"
grep -E '^streamstats_(build_info|ingest_items_total|sessions)\b' "$LOGS/metrics.txt" >&2
grep -qE '^streamstats_ingest_items_total\{[^}]*\} 100000$' "$LOGS/metrics.txt" ||
  die "/metrics lacks streamstats_ingest_items_total 100000"
stop_server
in_srv "${HEALTHCHECK[@]}" > /dev/null 2>&1 && die "the HEALTHCHECK command passes with no server"

# A restart in the same container finds the session in the data_dir (snapshot/WAL under WORKDIR).
start_server 2
q2=$(in_cli /usr/local/bin/streamstats quantiles t 0.5) || die "quantiles after restart"
[ "$q2" = "$q" ] || die "after a restart: '$q2', before: '$q'"
stop_server
echo "PASS: $IMAGE built on $BASE_IMAGE and ran (image kept; buildah --root $CACHE/storage images)" >&2
