#!/bin/bash
# Session 23, run 6: the WAL at the device sketches' new rates (Count-Min on the GPU, default
# --gpu_sketches), no WAL / --wal_fsync=interval / always, 16 and 1 streams; the CPU beside.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/../d22b/lib
date -u; echo "main at $(cat REV)"; nvidia-smi --query-gpu=name --format=csv,noheader
W=$(mktemp -d -p $PWD)
one() {  # one LABEL STREAMS SUMMARY SERVER_FLAGS...
  local label=$1 s=$2 summ=$3; shift 3
  rm -f $W/port
  ./streamstatsd --listen=127.0.0.1:0 --port_file=$W/port --data_dir=$W/d$RANDOM "$@" > $W/log 2>&1 &
  local sp=$!
  for i in $(seq 100); do [ -s $W/port ] && break; sleep 0.1; done
  timeout 30 ./streamstats --server=127.0.0.1:$(cat $W/port) bench --server_pid=$sp --streams=$s --sessions=$s --batch=100000 --payload=uint64 --duration=4 --summary=$summ --distribution=zipf > $W/out 2>&1
  printf "%-22s S=%-2s %-10s %s | %s | %s\n" "$label" $s "$summ" "$(grep throughput $W/out | awk '{printf "%8.2f M", $2/1e6}')" "$(grep 'server CPU' $W/out | sed 's/^ *//;s/(pid [0-9]*) *//')" "$(grep -i 'ack lat' $W/out | sed 's/^ *//;s/(8 in.*//')"
  kill $sp; wait $sp 2>/dev/null
  rm -rf $W/d*
}
df -h $W | tail -1
for s in 16 1; do
  for b in "gpu:--gpus=auto" "cpu:--gpus=none"; do
    l=${b%%:*}; f=${b#*:}
    one "$l no WAL" $s count_min $f --durability=none
    one "$l WAL interval" $s count_min $f --durability=wal --wal_fsync=interval
    one "$l WAL always" $s count_min $f --durability=wal --wal_fsync=always
  done
done
date -u
