#!/usr/bin/env bash
# Generate the Python stubs for proto/streamstats/v1/streamstats.proto into OUT_DIR:
#   examples/python/gen_stubs.sh OUT_DIR
# creating OUT_DIR/streamstats/v1/streamstats_pb2.py and streamstats_pb2_grpc.py.
# Uses the system protoc (protobuf-compiler) and grpc_python_plugin (protobuf-compiler-grpc), whose
# versions match Debian's python3-protobuf / python3-grpcio. (Debian 12's python3-grpc-tools is
# too old for proto3 `optional`, which the API uses.)
set -euo pipefail
out=${1:?usage: gen_stubs.sh OUT_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
plugin=${GRPC_PYTHON_PLUGIN:-$(command -v grpc_python_plugin || echo /usr/bin/grpc_python_plugin)}
mkdir -p "$out"
protoc -I "$root/proto" --python_out="$out" --grpc_python_out="$out" \
  --plugin=protoc-gen-grpc_python="$plugin" "$root/proto/streamstats/v1/streamstats.proto"
