#!/bin/bash
# Session 23, run 5: the other device sketches (HyperLogLog, AMS, Count Sketch, PBF) with device
# chunks against the CPU backend and session 22's build (8192-item chunks); Count-Min under the
# new default --gpu_sketches; 16 streams into one session; questions' p99 during ingest.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/../d22b/lib
date -u; echo "main at $(cat REV)"; nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 ./gpu_tests > $OUT/gpu_tests.log 2>&1; echo "gpu_tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $OUT/gpu_tests.log | head -20
W=$(mktemp -d)
one() {  # one LABEL BINARY STREAMS SESSIONS SUMMARY QUERY_RATE SERVER_FLAGS...
  local label=$1 bin=$2 s=$3 ss=$4 summ=$5 q=$6; shift 6
  rm -f $W/port
  ./$bin --listen=127.0.0.1:0 --port_file=$W/port --durability=none --data_dir=$W/d$RANDOM "$@" > $W/log 2>&1 &
  local sp=$!
  for i in $(seq 100); do [ -s $W/port ] && break; sleep 0.1; done
  timeout 30 ./streamstats --server=127.0.0.1:$(cat $W/port) bench --server_pid=$sp --streams=$s --sessions=$ss --batch=100000 --payload=uint64 --duration=4 --summary=$summ --distribution=zipf --query_rate=$q > $W/out 2>&1
  printf "%-9s S=%-2s/%-2s %-12s %s | %s | %s | %s\n" "$label" $s $ss "$summ" "$(grep throughput $W/out | awk '{printf "%8.2f M", $2/1e6}')" "$(grep 'server CPU' $W/out | sed 's/^ *//;s/(pid [0-9]*) *//')" "$(grep -i 'ack lat' $W/out | sed 's/^ *//;s/(8 in.*//')" "$(grep -i 'queries' $W/out | sed 's/^ *//')"
  kill $sp; wait $sp 2>/dev/null
}
for summ in hll ams count_sketch; do
  for s in 16 4 1; do
    one cpu streamstatsd $s $s $summ 0 --gpus=none
    one gpu streamstatsd $s $s $summ 0 --gpus=auto --gpu_sketches=all
    one gpu_s22 streamstatsd_s22 $s $s $summ 0 --gpus=auto --gpu_sketches=all
  done
done
one cpu streamstatsd 16 1 count_min 0 --gpus=none
one gpu_dflt streamstatsd 16 1 count_min 0 --gpus=auto
one cpu+q streamstatsd 16 16 count_min 200 --gpus=none
one gpu_dflt+q streamstatsd 16 16 count_min 200 --gpus=auto
one gpu_dflt+q streamstatsd 4 4 count_min 200 --gpus=auto
one gpu_dflt+q streamstatsd 1 1 count_min 200 --gpus=auto
date -u
