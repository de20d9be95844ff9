#!/bin/bash
# Session 10: HyperLogLog registers on the GPU (--gpu_sketches=hll) against the CPU, 1, 4 and 16
# streams, Zipf uint64 keys, batches of 10^5, hll:p=14 (bench/E2E_RESULTS.md, session 10).
#
#   bench/scripts/gpu_hll_vs_cpu.sh BUILD_OR_CARRIED_DIR
#
# BUILD_OR_CARRIED_DIR as sink_ratio.sh takes it (a build folder, or streamstatsd, streamstats and
# ingest_sink side by side with their .so files in lib/).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DIR=${1:?usage: gpu_hll_vs_cpu.sh BUILD_OR_CARRIED_DIR}
date -u; grep -m1 "model name" /proc/cpuinfo; nproc
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
export BATCHES=100000 PAYLOADS=uint64
for R in 1 2; do
  for F in "--gpus=none" "--gpus=auto --gpu_sketches=hll"; do
    echo "== round $R: hll:p=14 $F"
    SERVER_FLAGS="$F" STREAMS="1 4 16" "$HERE/sink_ratio.sh" "$DIR" --duration=4 \
      --distribution=zipf --summary=hll:p=14 2>&1 | grep "^| [0-9]"
  done
done
