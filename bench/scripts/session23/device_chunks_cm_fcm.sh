#!/bin/bash
# Session 23, run 4: Count-Min and FCM on the GPU pool with device chunks (kDeviceChunkItems)
# against the CPU backend, the previous build (8192-item chunks) and the sink, same host.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/../d22b/lib
date -u; echo "main at $(cat REV)"; nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 ./gpu_tests > $OUT/gpu_tests.log 2>&1; echo "gpu_tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $OUT/gpu_tests.log | head -20
timeout 40 ./gpu_bench --cm-session 2>&1 | grep cm-session
W=$(mktemp -d)
one() {  # one LABEL BINARY STREAMS SUMMARY QUERY_RATE SERVER_FLAGS...
  local label=$1 bin=$2 s=$3 summ=$4 q=$5; shift 5
  rm -f $W/port
  ./$bin --listen=127.0.0.1:0 --port_file=$W/port --durability=none --data_dir=$W/d$RANDOM "$@" > $W/log 2>&1 &
  local sp=$!
  for i in $(seq 100); do [ -s $W/port ] && break; sleep 0.1; done
  timeout 30 ./streamstats --server=127.0.0.1:$(cat $W/port) bench --server_pid=$sp --streams=$s --sessions=$s --batch=100000 --payload=uint64 --duration=4 --summary=$summ --distribution=zipf --query_rate=$q > $W/out 2>&1
  printf "%-9s S=%-2s %-10s %s | %s | %s | %s\n" "$label" $s "$summ" "$(grep throughput $W/out | awk '{printf "%8.2f M", $2/1e6}')" "$(grep 'server CPU' $W/out | sed 's/^ *//;s/(pid [0-9]*) *//')" "$(grep -i 'ack lat' $W/out | sed 's/^ *//;s/(8 in.*//')" "$(grep -i 'query lat' $W/out | sed 's/^ *//')"
  kill $sp; wait $sp 2>/dev/null
}
sink() {
  rm -f $W/port
  ./ingest_sink --listen=127.0.0.1:0 --port_file=$W/port > $W/slog 2>&1 &
  local sp=$!
  for i in $(seq 100); do [ -s $W/port ] && break; sleep 0.1; done
  timeout 30 ./streamstats --server=127.0.0.1:$(cat $W/port) bench --server_pid=$sp --streams=$1 --sessions=$1 --batch=100000 --payload=uint64 --duration=4 --summary=count_min --distribution=zipf > $W/out 2>&1
  printf "%-9s S=%-2s %-10s %s | %s\n" sink $1 "" "$(grep throughput $W/out | awk '{printf "%8.2f M", $2/1e6}')" "$(grep 'server CPU' $W/out | sed 's/^ *//;s/(pid [0-9]*) *//')"
  kill $sp; wait $sp 2>/dev/null
}
G="--gpus=auto --gpu_sketches=count_min,conservative,fcm"
for s in 16 4 1; do sink $s; done
for summ in count_min fcm count_min:conservative=true; do
  for s in 16 4 1; do
    one cpu streamstatsd $s $summ 0 --gpus=none
    one gpu streamstatsd $s $summ 0 $G
    one gpu_s22 streamstatsd_s22 $s $summ 0 $G
  done
done
for s in 16 1; do
  one cpu+q streamstatsd $s count_min 200 --gpus=none
  one gpu+q streamstatsd $s count_min 200 $G
done
date -u
