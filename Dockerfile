# Multi-stage build: CUDA devel image to build, CUDA runtime image to run.
#   docker build -t streamstats .
#   docker run -p 50051:50051 streamstats --listen=0.0.0.0:50051 --allow_insecure_remote
# Build args (all optional):
#   BUILD_IMAGE, RUNTIME_IMAGE  the two bases; they must be the same distribution release (the
#                               runtime stage reuses the build stage's shared libraries), and the
#                               build stage must be Debian/Ubuntu (apt package names below).
#   CMAKE_ARGS                  extra CMake flags, e.g. -DSTREAMSTATS_GPU=OFF on a base without nvcc
#   CMAKE_BUILD_PARALLEL_LEVEL  compile jobs (default: the build tool's, i.e. all cores)
# Without a CUDA base (tests/deploy/docker_image_test.sh builds it on a plain Debian 12 rootfs):
#   docker build --build-arg BUILD_IMAGE=debian:12 --build-arg RUNTIME_IMAGE=debian:12 \
#     --build-arg CMAKE_ARGS=-DSTREAMSTATS_GPU=OFF -t streamstats:cpu .
# See deploy/DOCKER_RESULTS.md for what has and has not been verified.
ARG BUILD_IMAGE=nvidia/cuda:13.0.0-devel-ubuntu24.04
ARG RUNTIME_IMAGE=nvidia/cuda:13.0.0-runtime-ubuntu24.04

FROM ${BUILD_IMAGE} AS build
# The list ./dev installs; valid on Debian 12 (built) and Ubuntu 24.04 (names checked on
# packages.ubuntu.com, not built; prometheus-cpp-dev is in universe, which Ubuntu images enable).
# libnats-dev (cluster mode, --cluster): Debian 12 has 3.4.1; on Ubuntu 24.04 not checked.
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      cmake ninja-build g++ pkg-config libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev \
      protobuf-compiler libabsl-dev prometheus-cpp-dev libjs-chart.js libnats-dev \
    && rm -rf /var/lib/apt/lists/*
ARG CMAKE_ARGS=""
ARG CMAKE_BUILD_PARALLEL_LEVEL=""
WORKDIR /src
# .dockerignore keeps a host build/ tree out (its CMakeCache.txt would name another source dir).
COPY . .
# The CUDA runtime is linked statically (CUDA::cudart_static), so the binaries need no libcudart;
# cudart loads the driver (libcuda.so.1) at run time, and the NVIDIA container runtime injects it.
# Every other shared library except glibc, libstdc++ and libgcc_s (present in any Debian/Ubuntu
# base) is copied to /opt/streamstats/lib, so the runtime stage installs no packages.
RUN cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTREAMSTATS_TESTS=OFF \
      -DSTREAMSTATS_BENCH=OFF ${CMAKE_ARGS} \
    && cmake --build /tmp/build \
    && cmake --install /tmp/build --prefix /opt/streamstats --strip \
    && mkdir -p /opt/streamstats/lib \
    && if ldd /opt/streamstats/bin/* | grep -F 'not found'; then exit 1; fi \
    && ldd /opt/streamstats/bin/* | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u \
       | while read -r soname path; do \
           case "$soname" in \
             ld-linux*|libc.so.*|libm.so.*|libmvec.so.*|libpthread.so.*|libdl.so.*|librt.so.*|\
             libutil.so.*|libresolv.so.*|libanl.so.*|libstdc++.so.*|libgcc_s.so.*|\
             libcuda.so*|libnvidia-*) ;; \
             *) cp -L "$path" "/opt/streamstats/lib/$soname" || exit 1 ;; \
           esac; \
         done \
    && ls /opt/streamstats/lib \
    && rm -rf /tmp/build

FROM ${RUNTIME_IMAGE}
RUN groupadd --gid 10001 streamstats \
    && useradd --no-log-init --uid 10001 --gid 10001 --home-dir /var/lib/streamstats --create-home \
       --shell /usr/sbin/nologin streamstats
COPY --from=build /opt/streamstats/lib/ /opt/streamstats/lib/
COPY --from=build /opt/streamstats/bin/ /usr/local/bin/
# Prepended, so the CUDA images' LD_LIBRARY_PATH (/usr/local/nvidia/lib*) still applies. The
# driver capabilities are the CUDA images' own value; set here so that a non-CUDA RUNTIME_IMAGE
# still gets libcuda injected by the NVIDIA container runtime.
ENV LD_LIBRARY_PATH=/opt/streamstats/lib${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}} \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
# Fails the build when the runtime base lacks a library the build stage did not copy.
RUN if ldd /usr/local/bin/streamstatsd /usr/local/bin/streamstats | grep -F 'not found'; then exit 1; fi \
    && /usr/local/bin/streamstats --help > /dev/null
# Numeric, so that Kubernetes' runAsNonRoot can verify it without a runAsUser.
USER 10001:10001
WORKDIR /var/lib/streamstats
EXPOSE 50051 9464
# Kubernetes uses native gRPC probes on grpc.health.v1.Health; this covers plain Docker (with a
# tokens file, give the probe STREAMSTATS_TOKEN). Needs the Docker image format (buildah/podman:
# --format docker; the OCI format has no HEALTHCHECK).
HEALTHCHECK --interval=30s --timeout=3s CMD ["/usr/local/bin/streamstats", "--timeout=2", "session", "list"]
ENTRYPOINT ["/usr/local/bin/streamstatsd", "--data_dir=/var/lib/streamstats/data", "--metrics_listen=0.0.0.0:9464"]
