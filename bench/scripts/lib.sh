# shellcheck shell=bash
# Shared by the bench/scripts (sourced, not run).

# bench_binaries DIR: sets SERVER, CLI and SINK (streamstatsd, streamstats, ingest_sink) from a
# build folder (server/, client/, bench/), or from a carried folder that holds them side by side
# with their .so files in lib/ (then LD_LIBRARY_PATH points there).
bench_binaries() {
  local d
  d=$(command -v realpath >/dev/null && realpath "$1" || echo "$1")
  SERVER=$d/server/streamstatsd; CLI=$d/client/streamstats; SINK=$d/bench/ingest_sink
  if [ ! -x "$SERVER" ]; then
    SERVER=$d/streamstatsd; CLI=$d/streamstats; SINK=$d/ingest_sink
    export LD_LIBRARY_PATH=$d/lib
  fi
}

# machine_info: the cores and the CPU the numbers below it were taken on.
machine_info() { nproc; grep -m1 "model name" /proc/cpuinfo; }

# start_server LOG COMMAND...: runs COMMAND --port_file=LOG.port in the background with its output
# in LOG and waits (10 s at most) for the port; sets STARTED_PID and STARTED_ADDR (127.0.0.1:PORT).
# Returns 1, with the log's tail on stderr, if no port came (and kills what it started). COMMAND
# may start with a wrapper (taskset ...) that execs the server, so STARTED_PID is the server's.
start_server() {
  local log=$1
  shift
  rm -f "$log.port"
  "$@" --port_file="$log.port" > "$log" 2>&1 &
  STARTED_PID=$!
  for _ in $(seq 100); do [ -s "$log.port" ] && break; sleep 0.1; done
  if [ ! -s "$log.port" ]; then
    echo "$* wrote no port within 10 s:" >&2
    tail -5 "$log" >&2
    kill "$STARTED_PID" 2>/dev/null
    return 1
  fi
  STARTED_ADDR=127.0.0.1:$(cat "$log.port")
}
