#!/bin/bash
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/../d22b/lib
date -u; nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p p && tar xzf perf.tgz -C p
PERF="env LD_LIBRARY_PATH=$PWD/p/perflib:$LD_LIBRARY_PATH ./p/perf"
W=$(mktemp -d)
one() {  # one LABEL STREAMS SUMMARY PROF SERVER_FLAGS...
  local label=$1 s=$2 summ=$3 prof=$4; shift 4
  rm -f $W/port
  ./streamstatsd --listen=127.0.0.1:0 --port_file=$W/port --durability=none --data_dir=$W/d$RANDOM "$@" > $W/log 2>&1 &
  local sp=$!
  for i in $(seq 100); do [ -s $W/port ] && break; sleep 0.1; done
  local pp=
  if [ "$prof" != "-" ]; then (sleep 1.5; $PERF record $prof -g -p $sp -o $OUT/$label.data -- sleep 2 > /dev/null 2>&1) & pp=$!; fi
  timeout 30 ./streamstats --server=127.0.0.1:$(cat $W/port) bench --server_pid=$sp --streams=$s --sessions=$s --batch=100000 --payload=uint64 --duration=4 --summary=$summ --distribution=zipf > $W/out 2>&1
  printf "%-14s S=%-2s %-10s %s | %s | %s\n" "$label" $s "$summ" "$(grep throughput $W/out | awk '{printf "%8.2f M", $2/1e6}')" "$(grep 'server CPU' $W/out | sed 's/^ *//;s/(pid [0-9]*) *//')" "$(grep -i 'ack' $W/out | head -1 | sed 's/^ *//')"
  [ -n "$pp" ] && wait $pp
  kill $sp; wait $sp 2>/dev/null
}
sink() {
  rm -f $W/port
  ./ingest_sink --listen=127.0.0.1:0 --port_file=$W/port > $W/slog 2>&1 &
  local sp=$!
  for i in $(seq 100); do [ -s $W/port ] && break; sleep 0.1; done
  timeout 30 ./streamstats --server=127.0.0.1:$(cat $W/port) bench --server_pid=$sp --streams=$1 --sessions=$1 --batch=100000 --payload=uint64 --duration=4 --summary=count_min --distribution=zipf > $W/out 2>&1
  printf "%-14s S=%-2s %s | %s\n" sink $1 "$(grep throughput $W/out | awk '{printf "%8.2f M", $2/1e6}')" "$(grep 'server CPU' $W/out | sed 's/^ *//;s/(pid [0-9]*) *//')"
  kill $sp; wait $sp 2>/dev/null
}
G="--gpus=auto --gpu_sketches=count_min,fcm"
one gpu 16 count_min - $G
cat $W/out > $OUT/bench_gpu16.txt
one gpu_nice 16 count_min - $G --ingest_policy=nice
one gpu_t32 16 count_min - $G --ingest_threads=32
one gpu_noslice 16 count_min - $G --ingest_slices=false
one gpu_prof 16 count_min "-e cpu-clock" $G
one gpu_sw 16 count_min "-e sched:sched_switch" $G
one cpu 1 count_min - --gpus=none
one gpu 1 count_min - $G
cat $W/out > $OUT/bench_gpu1.txt
one gpu_nice 1 count_min - $G --ingest_policy=nice
for f in gpu_prof gpu_sw; do
  [ -s $OUT/$f.data ] || { echo "no $f.data"; continue; }
  $PERF report -i $OUT/$f.data --no-children --sort sym --stdio 2>/dev/null | grep -v "^#" | grep -v "^$" | head -60 > $OUT/$f.top.txt
  $PERF report -i $OUT/$f.data --no-children --sort comm,sym --stdio -g caller,0.5,callee --percent-limit 2 2>/dev/null | head -300 > $OUT/$f.tree.txt
  echo "== $f"; head -25 $OUT/$f.top.txt
  rm -f $OUT/$f.data
done
date -u
