// GPU discovery for the accelerator pool. Host-only header: compiles with g++.
#ifndef STREAMSTATS_GPU_DEVICES_H_
#define STREAMSTATS_GPU_DEVICES_H_

#include <cstdint>
#include <string>
#include <vector>

namespace streamstats::gpu {

struct DeviceInfo {
  int ordinal;
  std::string name;
  size_t memory_bytes;
  int compute_major;
  int compute_minor;
};

// Device work done by one accelerator or sketch so far (the accelerator metrics): time between
// the first and last kernel of each call (CUDA events; copies before and after excluded) and bytes
// copied host<->device.
struct GpuWorkStats {
  double kernel_seconds = 0;
  uint64_t bytes_copied = 0;
};

// Bytes of device memory in use on `ordinal` (total − free, every process); 0 when unknown.
uint64_t DeviceMemoryUsed(int ordinal);

// The visible CUDA devices; empty (never an error) when there is no driver or no device.
std::vector<DeviceInfo> VisibleDevices();

}  // namespace streamstats::gpu

#endif  // STREAMSTATS_GPU_DEVICES_H_
