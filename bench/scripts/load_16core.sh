#!/bin/bash
# End-to-end load figures on the 16-core GPU machine (issue 7): streamstats bench against a real
# streamstatsd (WAL on, fsync always, --gpus=auto), next to the in-process rate (summary_bench).
set -u
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
nvidia-smi --query-gpu=name --format=csv,noheader; nproc; grep -m1 "model name" /proc/cpuinfo
./summary_bench --items=8000000
rm -rf d; mkdir d
./streamstatsd --listen=127.0.0.1:0 --port_file=d/port --data_dir=d/data --metrics_listen= --gpus=auto > d/log 2>&1 &
SP=$!
for i in $(seq 50); do [ -s d/port ] && break; sleep 0.1; done
head -1 d/log
A=127.0.0.1:$(cat d/port)
run() { echo "### $*"; ./streamstats --server=$A bench --duration=6 --query_rate=100 --server_pid=$SP "$@" 2>&1 | tail -12; }
for batch in 10000 100000; do
  run --streams=4 --sessions=4 --batch=$batch --payload=doubles --distribution=normal --summary=quantiles:epsilon=0.001
  run --streams=4 --sessions=4 --batch=$batch --payload=uint64 --distribution=zipf --summary=lossy_counting:epsilon=0.0001
  run --streams=4 --sessions=4 --batch=$batch --payload=uint64 --distribution=zipf --summary=count_min:epsilon=0.001
  run --streams=4 --sessions=4 --batch=$batch --payload=uint64 --distribution=zipf --summary=pbf:keys=1000000,threshold=1000
done
kill $SP; wait
