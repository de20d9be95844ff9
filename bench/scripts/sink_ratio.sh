#!/bin/bash
# streamstatsd against the transport ceiling (issue 14): the same `streamstats bench` command
# against a real streamstatsd and against bench/ingest_sink (the same Ingest RPC, each batch parsed
# and summed, nothing applied), back to back, one table row per configuration.
#
#   sink_ratio.sh BUILD_DIR_OR_FOLDER [BENCH_FLAG...]
#
# BUILD_DIR_OR_FOLDER: a build folder, or a carried folder holding streamstatsd, streamstats and
#   ingest_sink side by side with their .so files in lib/ (see lib.sh).
# Configurations: every combination of $STREAMS (default "1 2"), $BATCHES ("10000 100000") and
#   $PAYLOADS ("doubles uint64"), each with --sessions=min($SESSIONS, streams) ($SESSIONS unset:
#   one session per stream) and $REPEAT (1) rows. BENCH_FLAGs are added to every run (none given:
#   --duration=5), e.g. --distribution=zipf --summary=count_min or --items=20000000.
# streamstatsd runs with --durability=none and otherwise its defaults (metrics on a free port),
#   plus $SERVER_FLAGS (e.g. --gpus=none). $SERVER_WRAP (both servers) and $CLIENT_WRAP: command
#   prefixes as in query_latency.sh. Both listen on 127.0.0.1 and are stopped on exit.
set -u
. "$(dirname "$0")/lib.sh"
bench_binaries "${1:?usage: sink_ratio.sh BUILD_DIR_OR_FOLDER [BENCH_FLAG...]}"
shift
FLAGS=("$@")
[ ${#FLAGS[@]} -gt 0 ] || FLAGS=(--duration=5)
for b in "$SERVER" "$CLI" "$SINK"; do
  [ -x "$b" ] || { echo "sink_ratio.sh: $b is not built" >&2; exit 2; }
done
W=$(mktemp -d)
trap 'kill ${SP:-} ${KP:-} 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
machine_info
start_server $W/ours.log ${SERVER_WRAP:-} "$SERVER" --listen=127.0.0.1:0 --durability=none \
    --data_dir=$W/data --metrics_listen=127.0.0.1:0 ${SERVER_FLAGS:-} || exit 1
SP=$STARTED_PID; OURS=$STARTED_ADDR
start_server $W/sink.log ${SERVER_WRAP:-} "$SINK" --listen=127.0.0.1:0 || exit 1
KP=$STARTED_PID; SINK_ADDR=$STARTED_ADDR
head -1 $W/ours.log
echo "bench flags: ${FLAGS[*]}"

# bench ADDR PID OUT ARGS...: one run; OUT gets "ITEMS_PER_S SERVER_CORES CLIENT_CORES", or
# "failed" and the run's output goes to stderr.
bench() {
  local addr=$1 pid=$2 out=$3
  shift 3
  if ${CLIENT_WRAP:-} "$CLI" --server=$addr bench --server_pid=$pid "$@" > $out.txt 2>&1; then
    awk '/throughput/ {r = $2} /server CPU/ {c = $3; k = $(NF - 1)} END {print r, c, k}' $out.txt > $out
  else
    echo failed > $out
    { echo "### failed: streamstats --server=$addr bench $*"; cat $out.txt; } >&2
  fi
}

echo
echo "| streams | sessions | batch | payload | items/s ours | items/s sink | ratio | cores ours: server / client | cores sink: server / client |"
echo "|---:|---:|---:|---|---:|---:|---:|---|---|"
for streams in ${STREAMS:-1 2}; do
  sessions=${SESSIONS:-$streams}
  [ "$sessions" -le "$streams" ] || sessions=$streams
  for batch in ${BATCHES:-10000 100000}; do
    for payload in ${PAYLOADS:-doubles uint64}; do
      for _ in $(seq "${REPEAT:-1}"); do
        args=(--streams=$streams --sessions=$sessions --batch=$batch --payload=$payload "${FLAGS[@]}")
        bench $OURS $SP $W/ours "${args[@]}"
        bench $SINK_ADDR $KP $W/sink "${args[@]}"
        read -r ours ours_cpu ours_client < $W/ours
        read -r sink sink_cpu sink_client < $W/sink
        awk -v s=$streams -v k=$sessions -v b=$batch -v p=$payload -v o=$ours -v n=$sink \
            -v oc=${ours_cpu:-} -v ok=${ours_client:-} -v nc=${sink_cpu:-} -v nk=${sink_client:-} 'BEGIN {
          os = (o == "failed") ? o : sprintf("%.2f M", o / 1e6)
          ns = (n == "failed") ? n : sprintf("%.2f M", n / 1e6)
          r = (o == "failed" || n == "failed" || n == 0) ? "n/a" : sprintf("**%.0f %%**", 100 * o / n)
          printf "| %d | %d | %d | %s | %s | %s | %s | %s / %s | %s / %s |\n", s, k, b, p, os, ns, r, oc, ok, nc, nk
        }'
      done
    done
  done
done

# The sink's own count, which the acks the bench saw must add up to.
kill -TERM $KP
wait $KP 2>/dev/null
KP=
echo
grep "^ingest_sink:" $W/sink.log
