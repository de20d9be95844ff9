// The GPU pool of streamstatsd: its flags (--gpus, --gpu_cpu_threshold, --gpu_linger_us,
// --gpu_job_min_keys, --gpu_filter_min_keys, --gpu_launch_max_keys, --gpu_streams_per_device,
// --gpu_sketches; defined in gpu_setup.cc) and its start. Built into streamstatsd only, with the
// GPU library where there is CUDA.
#ifndef STREAMSTATS_SERVER_GPU_SETUP_H_
#define STREAMSTATS_SERVER_GPU_SETUP_H_

#include <memory>

#include "absl/status/status.h"
#include "core/accel/accelerator.h"

namespace streamstats::server {

// Checks the GPU flags and starts the pool per --gpus; leaves *pool null for the CPU. Errors
// only for a bad flag, or when GPUs were named explicitly and cannot be used.
absl::Status StartGpuPool(std::unique_ptr<core::Accelerator>* pool);

}  // namespace streamstats::server

#endif  // STREAMSTATS_SERVER_GPU_SETUP_H_
