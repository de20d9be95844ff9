// The batch phase rule of FCM on the device (dl > dh): its buffers and its kernels' set-up,
// shared by gpu_fcm.cu (GpuFcm) and gpu_fcm_phase.cu (the kernels and GpuFcm's Launch* members).
#ifndef STREAMSTATS_GPU_DETAIL_FCM_PHASE_CUH_
#define STREAMSTATS_GPU_DETAIL_FCM_PHASE_CUH_

#include <cstdint>

#include "absl/status/status.h"
#include "gpu/detail/buffers.cuh"

namespace streamstats::gpu::detail {

// Ping-pong buffers of the batch phase rule's summaries (capacity slots each) and the batch's
// weight.
struct FcmPhaseScratch {
  DeviceBuffer<uint64_t> ids[2], counts[2];
  DeviceBuffer<uint32_t> lens[2];
  DeviceBuffer<uint64_t> batch_weight;
};

// Lets the phase kernels use their 64 KiB of dynamic shared memory.
absl::Status PreparePhaseKernels();

}  // namespace streamstats::gpu::detail

#endif  // STREAMSTATS_GPU_DETAIL_FCM_PHASE_CUH_
