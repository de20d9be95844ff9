// Code shared by the CPU and the GPU is written once, in core/, and marked with this macro: it
// becomes __host__ __device__ only when nvcc compiles it, so both compute the same thing.
#ifndef STREAMSTATS_CORE_COMMON_HOST_DEVICE_H_
#define STREAMSTATS_CORE_COMMON_HOST_DEVICE_H_

#ifdef __CUDACC__
#define STREAMSTATS_HOST_DEVICE __host__ __device__
#else
#define STREAMSTATS_HOST_DEVICE
#endif

#endif  // STREAMSTATS_CORE_COMMON_HOST_DEVICE_H_
