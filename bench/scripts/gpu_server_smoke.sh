#!/bin/bash
# GPU server smoke: the same stream into a GPU-pool server and a CPU server must give identical answers.
set -u
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
./gpu_tests 2>&1 | grep -E "PASSED|FAILED|SKIPPED|tests ran"
python3 - <<'PY' > values.txt
import random
random.seed(4)
for i in range(3000000):
    print(round(random.gauss(100, 15), 3) if i % 7 else random.random() * 1e4)
PY
for mode in auto none; do
  rm -rf d-$mode; mkdir d-$mode
  ./streamstatsd --listen=127.0.0.1:0 --port_file=d-$mode/port --data_dir=d-$mode/data --gpus=$mode --metrics_listen= > d-$mode/log 2>&1 &
  for i in $(seq 50); do [ -s d-$mode/port ] && break; sleep 0.1; done
  C="./streamstats --server=127.0.0.1:$(cat d-$mode/port)"
  $C session create q --summary=quantiles:epsilon=0.0005,window=262144 --summary=lossy_counting:epsilon=0.0001,window=262144 > /dev/null
  $C ingest q values.txt --batch=100000
  $C session get q
  $C --json quantiles q 0 0.001 0.01 0.1 0.25 0.5 0.75 0.9 0.99 0.999 1 > d-$mode/q.json
  $C --json heavy-hitters q --support=0.001 > d-$mode/hh.json
  kill %1; wait
  head -1 d-$mode/log
done
cmp d-auto/q.json d-none/q.json && echo "quantiles: GPU-pool server == CPU server"
cmp d-auto/hh.json d-none/hh.json && echo "heavy hitters: GPU-pool server == CPU server"
mkdir -p $OUT && cp d-*/q.json d-*/log $OUT/ 2>/dev/null
