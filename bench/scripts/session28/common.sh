# shellcheck shell=bash
# Shared by the session 28 scripts (sourced with the carried folder): session 23's bench_row and
# friends, the machine, gpu_tests, and session 27's server (75986da, built without CUDA: its CPU
# backend) carried beside the new one as OLD.
# shellcheck source=bench/scripts/session23/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../session23/common.sh" "$1"
machine_info
OLD="$BIN/streamstatsd_s27"
OLD_HOT="$BIN/hot_session_bench_s27"
export OLD OLD_HOT
