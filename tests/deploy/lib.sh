# shellcheck shell=bash
# Shared by the tests/deploy scripts (sourced, not run).

# need FOUND NAME DEBIAN_PACKAGE: return if FOUND is non-empty. Otherwise FAIL (exit 1) when apt
# could install the package here -- CI installs it, so its absence is a broken setup -- and SKIP
# (exit 77, ctest SKIP_RETURN_CODE) only when the package cannot be had on this system at all.
need() {
  local found=$1 name=$2 pkg=$3
  [ -n "$found" ] && return 0
  local candidate=""
  if command -v apt-cache >/dev/null 2>&1; then
    candidate=$(apt-cache policy "$pkg" 2>/dev/null | awk '/Candidate:/ {print $2}')
  fi
  if [ -n "$candidate" ] && [ "$candidate" != "(none)" ]; then
    echo "FAIL: $name not found, but Debian package '$pkg' ($candidate) provides it:" >&2
    echo "      sudo apt-get install --no-install-recommends $pkg" >&2
    exit 1
  fi
  echo "SKIP: $name not found and no '$pkg' package is installable on this system" \
       "(not Debian/Ubuntu, or the package is missing from its archive); nothing was checked." >&2
  exit 77
}

# first_python MODULE...: the first of $PYTHON, python3, /usr/bin/python3 that imports every MODULE.
first_python() {
  local p imports
  imports=$(printf 'import %s;' "$@")
  for p in ${PYTHON:-} python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c "$imports" 2>/dev/null; then
      command -v "$p"
      return 0
    fi
  done
}

# fail_with_logs MESSAGE [LOG...]: prints "FAIL: MESSAGE" and the tail of every non-empty LOG to
# stderr, then exits 1. Each script's die() passes its own logs.
fail_with_logs() {
  local message=$1 f
  shift
  echo "FAIL: $message" >&2
  for f in "$@"; do
    if [ -s "$f" ]; then echo "--- $f" >&2; tail -n 20 "$f" >&2; fi
  done
  exit 1
}

# free_port: a TCP port on 127.0.0.1 that nothing listens on right now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# stop_pids PID...: SIGTERM to each, up to 10 s for each to exit, then SIGKILL; reaps children.
stop_pids() {
  local p
  for p in "$@"; do kill -TERM "$p" 2>/dev/null; done
  for p in "$@"; do
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
  done
  wait 2>/dev/null
}
