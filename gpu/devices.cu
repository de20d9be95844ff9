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

}  // namespace streamstats::gpu
