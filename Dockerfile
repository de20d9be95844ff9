# Multi-stage build: CUDA devel image to build, CUDA runtime image to run.
#   docker build -t streamstats .
#   docker run -p 50051:50051 streamstats --listen=0.0.0.0:50051 --allow_insecure_remote
FROM nvidia/cuda:13.0.0-devel-ubuntu24.04 AS build
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      cmake ninja-build g++ pkg-config libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev \
      protobuf-compiler libabsl-dev prometheus-cpp-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTREAMSTATS_TESTS=OFF \
      -DSTREAMSTATS_BENCH=OFF && cmake --build build && cmake --install build --prefix /opt/streamstats

FROM nvidia/cuda:13.0.0-runtime-ubuntu24.04
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      libgrpc++1.51t64 libgrpc29t64 libprotobuf32t64 libprometheus-cpp-pull1.0 libprometheus-cpp-core1.0 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home /var/lib/streamstats --create-home streamstats
COPY --from=build /opt/streamstats/bin/ /usr/local/bin/
USER streamstats
WORKDIR /var/lib/streamstats
EXPOSE 50051 9464
# Kubernetes uses native gRPC probes on grpc.health.v1.Health; this covers plain Docker (with a
# tokens file, give the probe STREAMSTATS_TOKEN). The image was not built in CI (no Docker engine
# there); the package names are Ubuntu 24.04's.
HEALTHCHECK --interval=30s --timeout=3s CMD ["/usr/local/bin/streamstats", "--timeout=2", "session", "list"]
ENTRYPOINT ["/usr/local/bin/streamstatsd", "--data_dir=/var/lib/streamstats/data", "--metrics_listen=0.0.0.0:9464"]
