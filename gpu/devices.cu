#include <cuda_runtime.h>

#include "gpu/devices.h"

namespace streamstats::gpu {

std::vector<DeviceInfo> VisibleDevices() {
  std::vector<DeviceInfo> out;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return out;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    out.push_back({i, prop.name, prop.totalGlobalMem, prop.major, prop.minor});
  }
  return out;
}

uint64_t DeviceMemoryUsed(int ordinal) {
  int current = 0;
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaGetDevice(&current) != cudaSuccess || cudaSetDevice(ordinal) != cudaSuccess ||
      cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  cudaSetDevice(current);
  return total_bytes - free_bytes;
}

}  // namespace streamstats::gpu
