// GPU discovery for the accelerator pool. Host-only header: compiles with g++.
#ifndef STREAMSTATS_GPU_DEVICES_H_
#define STREAMSTATS_GPU_DEVICES_H_

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

// The visible CUDA devices; empty (never an error) when there is no driver or no device.
std::vector<DeviceInfo> VisibleDevices();

}  // namespace streamstats::gpu

#endif  // STREAMSTATS_GPU_DEVICES_H_
