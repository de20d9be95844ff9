// A device's stream and the event its owner waits on: each device-resident sketch
// (sketch_device.cuh, SketchDevice) and each Lossy Counting key counter (gpu_key_counter.cu)
// keeps one. Included by the gpu_*.cu files only.
#ifndef STREAMSTATS_GPU_DETAIL_DEVICE_STREAM_CUH_
#define STREAMSTATS_GPU_DETAIL_DEVICE_STREAM_CUH_

#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gpu/detail/cuda_check.cuh"

namespace streamstats::gpu::detail {

struct DeviceStream {
  int device = 0;
  int sm_count = 0;
  cudaStream_t stream = nullptr;
  // Blocking sync, no timing: whoever waits on it sleeps in the driver instead of spinning a
  // core (cudaStreamSynchronize spins by default, which with 16 sessions' streams took the cores
  // the ingest threads need).
  cudaEvent_t done = nullptr;

  DeviceStream() = default;
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;
  // A derived owner's destructor calls MakeCurrent() first, so its buffers and events are freed
  // on their device before this destroys the event and the stream.
  void MakeCurrent() const {
    if (stream != nullptr) cudaSetDevice(device);
  }
  ~DeviceStream() {
    if (stream != nullptr) {
      cudaSetDevice(device);
      if (done != nullptr) cudaEventDestroy(done);
      cudaStreamDestroy(stream);
    }
  }

  // Unavailable without a driver or device, InvalidArgument for a device that does not exist.
  absl::Status Init(int dev) {
    device = dev;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();
      return absl::UnavailableError("no CUDA driver or device");
    }
    if (dev < 0 || dev >= count) {
      return absl::InvalidArgumentError(absl::StrCat("GPU ", dev, " does not exist"));
    }
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaSetDevice(dev));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(
        cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, dev));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    STREAMSTATS_CUDA_RETURN_IF_ERROR(
        cudaEventCreateWithFlags(&done, cudaEventBlockingSync | cudaEventDisableTiming));
    return absl::OkStatus();
  }
};

}  // namespace streamstats::gpu::detail

#endif  // STREAMSTATS_GPU_DETAIL_DEVICE_STREAM_CUH_
