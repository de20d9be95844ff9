#!/bin/bash
# Issue 4/7 device run: GPU tests, then Count-Min and PBF sessions on a GPU-pool server and a CPU
# server fed the same stream (answers must be identical), ingest throughput of both with
# `streamstats bench` (query p50/p99 during full-speed ingest included), and the accelerator
# metrics the GPU server exports. Run from a folder holding gpu_tests, streamstatsd, streamstats
# and lib/ (bench/GPU_RESULTS.md says how it was carried).
set -u
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc
./gpu_tests 2>&1 | grep -E "^\[  (PASSED|FAILED|  SKIPPED) |tests ran|FAILED  \]" | head -20
python3 - <<'PY' > keys.txt
import random
random.seed(7)
for i in range(4000000):
    print(int(random.paretovariate(1.1)) * 2654435761 % (1 << 40))
PY
for mode in auto none; do
  rm -rf d-$mode; mkdir d-$mode
  port=$([ $mode = auto ] && echo 19464 || echo 19465)
  ./streamstatsd --listen=127.0.0.1:0 --port_file=d-$mode/port --data_dir=d-$mode/data --gpus=$mode --metrics_listen=127.0.0.1:$port > d-$mode/log 2>&1 &
  SP=$!
  for i in $(seq 100); do [ -s d-$mode/port ] && break; sleep 0.1; done
  C="./streamstats --server=127.0.0.1:$(cat d-$mode/port)"
  $C session create s --type=keys --summary=count_min:epsilon=0.0001,delta=0.001 --summary=pbf:keys=1000000,threshold=1000 > /dev/null
  /usr/bin/time -f "$mode: ingest 4M keys in %e s" $C ingest s keys.txt --batch=16384 > /dev/null
  $C session get s | grep -i -E "backend|items" | head -3
  $C --json freq s 0 2654435761 5308871522 7963307283 12345 --summary=count_min > d-$mode/cm.json
  $C --json freq s 0 2654435761 5308871522 7963307283 12345 --summary=pbf > d-$mode/pbf.json
  $C --json heavy-hitters s --support=0.001 --summary=count_min > d-$mode/hh.json
  for summary in count_min:epsilon=0.0001,delta=0.001 pbf:keys=1000000,threshold=1000; do
    for batch in 10000 100000; do
      echo "### $mode $summary batch=$batch"
      $C bench --duration=5 --query_rate=100 --server_pid=$SP --streams=4 --sessions=4 --batch=$batch \
        --payload=uint64 --distribution=zipf --summary=$summary 2>&1 | tail -6
    done
  done
  [ $mode = auto ] && curl -s 127.0.0.1:$port/metrics | grep -E "^streamstats_(accelerator|device_memory)" | head -12
  kill $SP; wait
  head -1 d-$mode/log
done
for f in cm pbf hh; do cmp d-auto/$f.json d-none/$f.json && echo "$f: GPU-pool server == CPU server"; done
head -c 600 d-auto/hh.json; echo
mkdir -p $OUT && for m in auto none; do for f in d-$m/*.json d-$m/log; do cp $f $OUT/$m-$(basename $f); done; done
