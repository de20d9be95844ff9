// CUDA error handling for gpu/: every runtime call goes through STREAMSTATS_CUDA_RETURN_IF_ERROR,
// which turns a failure into absl::InternalError("<file>:<line>: <cudaGetErrorName>: <what>");
// every launch is followed by STREAMSTATS_CUDA_CHECK_LAUNCH (cudaGetLastError).
#ifndef STREAMSTATS_GPU_DETAIL_CUDA_CHECK_CUH_
#define STREAMSTATS_GPU_DETAIL_CUDA_CHECK_CUH_

#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace streamstats::gpu::detail {

inline absl::Status CudaError(cudaError_t err, const char* file, int line, const char* what) {
  return absl::InternalError(absl::StrCat(file, ":", line, ": ", cudaGetErrorName(err), ": ", what,
                                          " (", cudaGetErrorString(err), ")"));
}

}  // namespace streamstats::gpu::detail

#define STREAMSTATS_CUDA_RETURN_IF_ERROR(expr)                                             \
  do {                                                                                     \
    const cudaError_t streamstats_cuda_err_ = (expr);                                      \
    if (streamstats_cuda_err_ != cudaSuccess) {                                            \
      return ::streamstats::gpu::detail::CudaError(streamstats_cuda_err_, __FILE__, __LINE__, \
                                                   #expr);                                 \
    }                                                                                      \
  } while (0)

#define STREAMSTATS_CUDA_CHECK_LAUNCH() STREAMSTATS_CUDA_RETURN_IF_ERROR(cudaGetLastError())

#define STREAMSTATS_RETURN_IF_ERROR(expr)        \
  do {                                           \
    absl::Status streamstats_status_ = (expr);   \
    if (!streamstats_status_.ok()) return streamstats_status_; \
  } while (0)

#endif  // STREAMSTATS_GPU_DETAIL_CUDA_CHECK_CUH_
