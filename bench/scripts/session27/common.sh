# shellcheck shell=bash
# Shared by the session 27 scripts (sourced with the carried folder): session 23's bench_row and
# friends, the machine, gpu_tests, and session 26's server carried beside the new one as OLD.
# shellcheck source=bench/scripts/session23/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../session23/common.sh" "$1"
machine_info
gpu_tests_row
OLD="$BIN/streamstatsd_s26"
export OLD
