#!/bin/bash
# A streamstatsd on a 3-node NATS JetStream cluster against the single node (issue 17, item
# "Throughput"): the same `streamstats bench` command against
#   - streamstatsd --durability=none           (no log: the apply's ceiling),
#   - streamstatsd --wal_fsync=interval|always (the single node's local log),
#   - streamstatsd --cluster=3 local nats-servers (R=3 JetStream log, acked after the quorum),
# back to back, one table row per configuration, all on this machine (client, servers and the
# three JetStream nodes share its cores; loopback network).
#
#   cluster_ratio.sh BUILD_DIR_OR_FOLDER [BENCH_FLAG...]
#
# $STREAMS (default "1 4 16"), $BATCH (10000), $PAYLOAD (doubles), $NATS_SERVER (nats-server on
# PATH or /usr/sbin), $CLUSTER_FLAGS (extra streamstatsd flags in cluster mode). BENCH_FLAGs are
# added to every run (none given: --duration=5). Everything listens on 127.0.0.1 and is stopped on
# exit.
set -u
. "$(dirname "$0")/lib.sh"
bench_binaries "${1:?usage: cluster_ratio.sh BUILD_DIR_OR_FOLDER [BENCH_FLAG...]}"
shift
FLAGS=("$@")
[ ${#FLAGS[@]} -gt 0 ] || FLAGS=(--duration=5)
NATS=${NATS_SERVER:-$(command -v nats-server || echo /usr/sbin/nats-server)}
for b in "$SERVER" "$CLI" "$NATS"; do
  [ -x "$b" ] || { echo "cluster_ratio.sh: $b is not there" >&2; exit 2; }
done
W=$(mktemp -d)
PIDS=()
trap 'kill ${PIDS[*]} 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
machine_info
"$NATS" --version

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Three JetStream nodes routed to each other, stores under $W.
CP=() RP=()
for i in 0 1 2; do CP+=("$(free_port)"); RP+=("$(free_port)"); done
ROUTES=nats://127.0.0.1:${RP[0]},nats://127.0.0.1:${RP[1]},nats://127.0.0.1:${RP[2]}
for i in 0 1 2; do
  "$NATS" -js -sd "$W/js$i" -a 127.0.0.1 -p "${CP[$i]}" -n "n$i" --cluster_name bench \
      --cluster "nats://127.0.0.1:${RP[$i]}" --routes "$ROUTES" > "$W/nats$i.log" 2>&1 &
  PIDS+=($!)
done
URLS=nats://127.0.0.1:${CP[0]},nats://127.0.0.1:${CP[1]},nats://127.0.0.1:${CP[2]}

echo
echo "| streams | batch | payload | log | items/s | vs no log | server cores | client cores | nats cores |"
echo "|---:|---:|---|---|---:|---:|---:|---:|---:|"
# run NAME SERVER_FLAGS...: one server, every stream count; rows appended; NONE holds the rates
# of the no-log server per stream count.
declare -A NONE
run() {
  local name=$1
  shift
  start_server "$W/$name.log" "$SERVER" --listen=127.0.0.1:0 --data_dir="$W/data-$name" \
      --metrics_listen=127.0.0.1:0 "$@" || return 1
  local sp=$STARTED_PID addr=$STARTED_ADDR
  for s in ${STREAMS:-1 4 16}; do
    local before after
    before=$(for p in "${PIDS[@]}"; do awk '{print $14 + $15}' /proc/$p/stat 2>/dev/null; done | awk '{t += $1} END {print t + 0}')
    local t0=$SECONDS
    if "$CLI" --server="$addr" bench --server_pid="$sp" --streams="$s" --sessions="$s" \
        --batch="${BATCH:-10000}" --payload="${PAYLOAD:-doubles}" "${FLAGS[@]}" > "$W/out.txt" 2>&1; then
      after=$(for p in "${PIDS[@]}"; do awk '{print $14 + $15}' /proc/$p/stat 2>/dev/null; done | awk '{t += $1} END {print t + 0}')
      local secs=$((SECONDS - t0))
      [ "$secs" -gt 0 ] || secs=1
      read -r rate score kcore < <(awk '/throughput/ {r = $2} /server CPU/ {c = $3; k = $(NF - 1)} END {print r, c, k}' "$W/out.txt")
      local ncores
      ncores=$(awk -v a="$after" -v b="$before" -v hz="$(getconf CLK_TCK)" -v s="$secs" 'BEGIN {printf "%.2f", (a - b) / hz / s}')
      [ "$name" = none ] && NONE[$s]=$rate
      local ratio="-"
      [ -n "${NONE[$s]:-}" ] && ratio=$(awk -v a="$rate" -v b="${NONE[$s]}" 'BEGIN {printf "%.0f %%", 100 * a / b}')
      printf '| %s | %s | %s | %s | %.2f M | %s | %s | %s | %s |\n' "$s" "${BATCH:-10000}" \
          "${PAYLOAD:-doubles}" "$name" "$(awk -v r="$rate" 'BEGIN {print r / 1e6}')" "$ratio" \
          "$score" "$kcore" "$([ "$name" = cluster ] && echo "$ncores" || echo -)"
    else
      echo "### failed: $name, $s streams" >&2
      cat "$W/out.txt" >&2
    fi
  done
  kill "$sp"
  wait "$sp" 2>/dev/null
}
run none --durability=none
run wal_interval --durability=wal --wal_fsync=interval
run wal_always --durability=wal --wal_fsync=always
run cluster --cluster="$URLS" --cluster_replicas=3 ${CLUSTER_FLAGS:-}
