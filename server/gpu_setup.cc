// The GPU pool's flags and its start (server/gpu_setup.h), for streamstatsd.
#include "server/gpu_setup.h"

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#ifdef STREAMSTATS_HAVE_GPU
#include "gpu/gpu_pool.h"
#endif

ABSL_FLAG(std::string, gpus, "auto",
          "GPUs for the accelerator pool: auto (every visible GPU, or the CPU when there is none), "
          "none, or ordinals like 0,1");
ABSL_FLAG(int64_t, gpu_cpu_threshold, 65536,
          "windows of fewer keys than this are sorted on the calling CPU thread, not queued for a "
          "GPU (a queued window holds its ingest thread for the linger and the round trip, which "
          "costs more than sorting it: bench/E2E_RESULTS.md); in [0, 2^30]");
ABSL_FLAG(int64_t, gpu_linger_us, 100,
          "how long a GPU worker waits for more windows to sort in one launch while fewer than "
          "16384 keys are queued, in microseconds; in [0, 10^6]");
ABSL_FLAG(int64_t, gpu_job_min_keys, 65536,
          "a quantile summary hands an unweighted batch's windows to the GPU pool in jobs of up to "
          "16384 keys when this is at most its job size; smaller jobs, and every job under the "
          "default, sort on the ingest thread (measured 0.8-1.2x the CPU end to end, "
          "bench/E2E_RESULTS.md); in [0, 2^30]");
ABSL_FLAG(int64_t, gpu_filter_min_keys, 0,
          "Lossy Counting (uint64 and numeric keys) has a batch's keys counted on the GPU pool "
          "when its completed windows hold at least this many, and folds into its table only "
          "the items that can stay there (the same table and answers; "
          "core/frequencies/lossy_counter.h); smaller batches are counted on the host. 0 (the "
          "default): always on the host, which at 16 streams moved 1.1-1.2x what the device's "
          "count did with 65536 (bench/E2E_RESULTS.md, session 20); in [0, 2^30]");
ABSL_FLAG(int64_t, gpu_launch_max_keys, int64_t{1} << 22,
          "the most keys of queued windows a GPU worker sorts in one launch; in [2^12, 2^30]");
ABSL_FLAG(int, gpu_streams_per_device, 4,
          "GPU workers per device, each with its own CUDA stream and buffers, so one launch's "
          "copies overlap another's sort; in [1, 16]");
ABSL_FLAG(std::string, gpu_sketches, "count_min,conservative,pbf,ams,count_sketch,fcm",
          "sketch tables kept on the GPUs: none, all, or a comma list of count_min (plain, "
          "bit-equal to the CPU), conservative (conservative Count-Min in its batch form), pbf, "
          "hll (HyperLogLog registers, equal to the CPU's), ams (AMS counters, equal to the "
          "CPU's), count_sketch (its counters, equal to the CPU's; candidates offered per "
          "batch) and fcm (FCM's table, with dl > dh its phase detector too: plain bit-equal to "
          "the CPU, conservative in the batch form); the others stay in host memory "
          "(measured: bench/E2E_RESULTS.md, sessions 9, 10, 12 and 23; bench/GPU_RESULTS.md)");

namespace streamstats::server {
namespace {

// --gpu_sketches, read into which sketch kinds live on the devices.
struct GpuSketchKinds {
  bool count_min = false, conservative = false, pbf = false, hll = false, ams = false,
       count_sketch = false, fcm = false;
};

absl::StatusOr<GpuSketchKinds> ParseGpuSketches(absl::string_view text) {
  if (text == "all") return GpuSketchKinds{true, true, true, true, true, true, true};
  GpuSketchKinds kinds;
  if (text == "none") return kinds;
  for (absl::string_view kind : absl::StrSplit(text, ',')) {
    if (kind == "count_min") {
      kinds.count_min = true;
    } else if (kind == "conservative") {
      kinds.conservative = true;
    } else if (kind == "pbf") {
      kinds.pbf = true;
    } else if (kind == "hll") {
      kinds.hll = true;
    } else if (kind == "ams") {
      kinds.ams = true;
    } else if (kind == "count_sketch") {
      kinds.count_sketch = true;
    } else if (kind == "fcm") {
      kinds.fcm = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--gpu_sketches: expected none, all, or a comma list of count_min, conservative, pbf, "
          "hll, ams, count_sketch, fcm; "
          "got '", text, "'"));
    }
  }
  return kinds;
}

}  // namespace

absl::Status StartGpuPool(std::unique_ptr<core::Accelerator>* pool) {
  const std::string spec = absl::GetFlag(FLAGS_gpus);
  const int64_t threshold = absl::GetFlag(FLAGS_gpu_cpu_threshold);
  const int64_t linger_us = absl::GetFlag(FLAGS_gpu_linger_us);
  if (threshold < 0 || threshold > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpu_cpu_threshold must be in [0, 2^30] keys, got ", threshold));
  }
  if (linger_us < 0 || linger_us > 1000000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpu_linger_us must be in [0, 10^6] microseconds, got ", linger_us));
  }
  const int streams = absl::GetFlag(FLAGS_gpu_streams_per_device);
  if (streams < 1 || streams > 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpu_streams_per_device must be in [1, 16], got ", streams));
  }
  const int64_t job_min = absl::GetFlag(FLAGS_gpu_job_min_keys);
  if (job_min < 0 || job_min > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpu_job_min_keys must be in [0, 2^30] keys, got ", job_min));
  }
  const int64_t filter_min = absl::GetFlag(FLAGS_gpu_filter_min_keys);
  if (filter_min < 0 || filter_min > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpu_filter_min_keys must be in [0, 2^30] keys, got ", filter_min));
  }
  const int64_t launch_max = absl::GetFlag(FLAGS_gpu_launch_max_keys);
  if (launch_max < (int64_t{1} << 12) || launch_max > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpu_launch_max_keys must be in [2^12, 2^30] keys, got ", launch_max));
  }
  const absl::StatusOr<GpuSketchKinds> sketches = ParseGpuSketches(absl::GetFlag(FLAGS_gpu_sketches));
  if (!sketches.ok()) return sketches.status();
  if (spec == "none") return absl::OkStatus();
#ifdef STREAMSTATS_HAVE_GPU
  gpu::GpuPoolOptions options;
  options.sketches.count_min = sketches->count_min;
  options.sketches.conservative_count_min = sketches->conservative;
  options.sketches.pbf = sketches->pbf;
  options.sketches.hll = sketches->hll;
  options.sketches.ams = sketches->ams;
  options.sketches.count_sketch = sketches->count_sketch;
  options.sketches.fcm = sketches->fcm;
  options.streams_per_device = streams;
  options.batch_max_keys = static_cast<size_t>(launch_max);
  options.job_cpu_threshold = static_cast<size_t>(job_min);
  options.filter_min_keys = static_cast<size_t>(filter_min);
  options.cpu_threshold = static_cast<size_t>(absl::GetFlag(FLAGS_gpu_cpu_threshold));
  options.linger = absl::Microseconds(absl::GetFlag(FLAGS_gpu_linger_us));
  if (spec != "auto") {
    for (absl::string_view ordinal : absl::StrSplit(spec, ',')) {
      int d;
      if (!absl::SimpleAtoi(ordinal, &d) || d < 0) {
        return absl::InvalidArgumentError("--gpus: expected auto, none or ordinals like 0,1; got '" + spec + "'");
      }
      options.devices.push_back(d);
    }
  }
  auto created = gpu::GpuPool::Create(options);
  if (!created.ok()) {
    if (spec != "auto") {
      return absl::Status(created.status().code(),
                          absl::StrCat("--gpus: ", created.status().message()));
    }
    std::fprintf(stderr, "streamstatsd: no usable GPU (%s); the CPU does the work\n",
                 std::string(created.status().message()).c_str());
    return absl::OkStatus();
  }
  *pool = *std::move(created);
  return absl::OkStatus();
#else
  (void)pool;
  if (spec != "auto") {
    return absl::FailedPreconditionError("this streamstatsd was built without CUDA; use --gpus=auto or none");
  }
  return absl::OkStatus();
#endif
}

}  // namespace streamstats::server
