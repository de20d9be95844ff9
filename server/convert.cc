#include "server/convert.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "core/common/key_id.h"
#include "core/common/serialization.h"
#include "server/split_session.h"
#include "server/summary_roles.h"

#if defined(__x86_64__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_epi32(), which -Wmaybe-uninitialized
// reports at the header's lines once inlined (core/accel/simd_sort.cc says more).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace streamstats::server {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbering.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

namespace {

// Turns a summary into its windowed form: a count window (sliding quantiles / frequencies) or a
// time window (a ring of per-interval summaries). `what` names it in errors.
absl::Status ApplyWindow(const v1::WindowSpec& w, core::ValueKind value_kind,
                         core::SummaryOptions* o, absl::string_view what) {
  if (w.kind_case() == v1::WindowSpec::KIND_NOT_SET) {
    return absl::InvalidArgumentError(absl::StrCat(what, " needs items or seconds"));
  }
  const bool timed = w.kind_case() == v1::WindowSpec::kSeconds;
  const bool counted_kind =
      o->kind == core::SummaryKind::kQuantiles || o->kind == core::SummaryKind::kLossyCounting;
  const bool timed_kind = counted_kind || o->kind == core::SummaryKind::kCountMin ||
                          o->kind == core::SummaryKind::kMisraGries;
  if (!(timed ? timed_kind : counted_kind) || o->partition.partitions > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": count windows (items) apply to quantiles and lossy_counting, time windows "
        "(seconds) also to count_min and misra_gries, without partitioning; not to ",
        core::SummaryKindName(o->kind), o->partition.partitions > 1 ? " with partitions" : ""));
  }
  if (!timed) {
    o->sliding.epsilon =
        o->kind == core::SummaryKind::kQuantiles ? o->quantiles.epsilon : o->lossy_counting.epsilon;
    o->sliding.window_items = w.items();
    o->kind = o->kind == core::SummaryKind::kQuantiles ? core::SummaryKind::kSlidingQuantiles
                                                       : core::SummaryKind::kSlidingFrequencies;
  } else {
    o->time_window.window_seconds = w.seconds();
    if (w.intervals() != 0) o->time_window.intervals = w.intervals();
    o->time_window.late_tolerance_seconds = w.late_tolerance_seconds();
    o->time_window.inner = o->kind;
    o->kind = core::SummaryKind::kTimeWindow;
  }
  if (absl::Status st = o->Validate(value_kind); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", st.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SessionConfig> ConfigFromSpec(const v1::SessionSpec& spec) {
  SessionConfig config;
  config.name = spec.name();
  switch (spec.value_kind()) {
    case v1::VALUE_KIND_NUMERIC:
      config.value_kind = core::ValueKind::kNumeric;
      break;
    case v1::VALUE_KIND_UINT64:
      config.value_kind = core::ValueKind::kUint64;
      break;
    case v1::VALUE_KIND_STRING:
      config.value_kind = core::ValueKind::kString;
      break;
    default:
      return absl::InvalidArgumentError(
          "value_kind must be VALUE_KIND_NUMERIC, VALUE_KIND_UINT64 or VALUE_KIND_STRING");
  }
  switch (spec.backend()) {
    case v1::BACKEND_AUTO:
      config.backend = Backend::kAuto;
      break;
    case v1::BACKEND_CPU:
      config.backend = Backend::kCpu;
      break;
    case v1::BACKEND_GPU:
      config.backend = Backend::kGpu;
      break;
    default:
      return absl::InvalidArgumentError("backend must be BACKEND_AUTO, BACKEND_CPU or BACKEND_GPU");
  }
  for (const v1::SummarySpec& s : spec.summaries()) {
    core::SummaryOptions o;
    switch (s.kind_case()) {
      case v1::SummarySpec::kQuantiles:
        o.kind = core::SummaryKind::kQuantiles;
        if (s.quantiles().has_epsilon()) o.quantiles.epsilon = s.quantiles().epsilon();
        o.quantiles.window_items = s.quantiles().window_items();
        break;
      case v1::SummarySpec::kLossyCounting:
        o.kind = core::SummaryKind::kLossyCounting;
        if (s.lossy_counting().has_epsilon()) o.lossy_counting.epsilon = s.lossy_counting().epsilon();
        o.lossy_counting.window_items = s.lossy_counting().window_items();
        break;
      case v1::SummarySpec::kCountMin: {
        const v1::CountMinSpec& c = s.count_min();
        o.kind = core::SummaryKind::kCountMin;
        if (c.has_epsilon()) o.count_min.epsilon = c.epsilon();
        if (c.has_delta()) o.count_min.delta = c.delta();
        o.count_min.conservative = c.conservative();
        o.count_min.heavy_hitter_capacity = c.heavy_hitter_capacity();
        break;
      }
      case v1::SummarySpec::kFcm: {
        const v1::FcmSpec& f = s.fcm();
        o.kind = core::SummaryKind::kFcm;
        if (f.has_epsilon()) o.fcm.epsilon = f.epsilon();
        if (f.has_delta()) o.fcm.delta = f.delta();
        o.fcm.dh = f.dh();
        o.fcm.dl = f.dl();
        if (f.k() != 0) o.fcm.k = f.k();
        o.fcm.conservative = f.conservative();
        o.fcm.heavy_hitter_capacity = f.heavy_hitter_capacity();
        break;
      }
      case v1::SummarySpec::kMisraGries:
        o.kind = core::SummaryKind::kMisraGries;
        if (s.misra_gries().k() != 0) o.misra_gries.k = s.misra_gries().k();
        break;
      case v1::SummarySpec::kPbf: {
        const v1::PbfSpec& b = s.pbf();
        o.kind = core::SummaryKind::kPbf;
        o.pbf.m = b.m();
        o.pbf.k = b.k();
        o.pbf.p = b.p();
        o.pbf.expected_keys = b.expected_keys();
        o.pbf.threshold = b.threshold();
        o.pbf.heavy_hitter_capacity = b.heavy_hitter_capacity();
        break;
      }
      case v1::SummarySpec::kAms: {
        const v1::AmsSpec& a = s.ams();
        o.kind = core::SummaryKind::kAms;
        if (a.has_epsilon()) o.ams.epsilon = a.epsilon();
        if (a.has_delta()) o.ams.delta = a.delta();
        break;
      }
      case v1::SummarySpec::kCountSketch: {
        const v1::CountSketchSpec& c = s.count_sketch();
        o.kind = core::SummaryKind::kCountSketch;
        if (c.has_epsilon()) o.count_sketch.epsilon = c.epsilon();
        if (c.has_delta()) o.count_sketch.delta = c.delta();
        o.count_sketch.heavy_hitter_capacity = c.heavy_hitter_capacity();
        break;
      }
      case v1::SummarySpec::kHierarchicalHeavyHitters: {
        const v1::HierarchicalHeavyHittersSpec& h = s.hierarchical_heavy_hitters();
        o.kind = core::SummaryKind::kHierarchicalHeavyHitters;
        if (h.has_epsilon()) o.hhh.epsilon = h.epsilon();
        o.hhh.window_items = h.window_items();
        switch (h.hierarchy()) {
          case v1::HierarchicalHeavyHittersSpec::HIERARCHY_AUTO:
            o.hhh.hierarchy = core::HierarchyKind::kAuto;
            break;
          case v1::HierarchicalHeavyHittersSpec::HIERARCHY_IPV4:
            o.hhh.hierarchy = core::HierarchyKind::kIpv4;
            break;
          case v1::HierarchicalHeavyHittersSpec::HIERARCHY_IPV6:
            o.hhh.hierarchy = core::HierarchyKind::kIpv6;
            break;
          case v1::HierarchicalHeavyHittersSpec::HIERARCHY_PATH:
            o.hhh.hierarchy = core::HierarchyKind::kPath;
            break;
          default:
            return absl::InvalidArgumentError(
                "hhh: hierarchy must be HIERARCHY_AUTO, HIERARCHY_IPV4, HIERARCHY_IPV6 or "
                "HIERARCHY_PATH");
        }
        o.hhh.max_depth = h.max_depth();
        break;
      }
      case v1::SummarySpec::kCorrelatedSum: {
        const v1::CorrelatedSumSpec& c = s.correlated_sum();
        o.kind = core::SummaryKind::kCorrelatedSum;
        if (c.has_epsilon()) o.correlated_sum.epsilon = c.epsilon();
        o.correlated_sum.window_items = c.window_items();
        break;
      }
      case v1::SummarySpec::kHll: {
        const v1::HllSpec& h = s.hll();
        o.kind = core::SummaryKind::kHll;
        o.hll.p = h.p();
        if (h.has_epsilon()) {
          if (h.epsilon() == 0) {
            return absl::InvalidArgumentError(
                "hll: epsilon must be in [0.00203, 1) when given, got 0 (leave it unset for p=12)");
          }
          o.hll.epsilon = h.epsilon();
        }
        break;
      }
      default:
        return absl::InvalidArgumentError("a summary spec must name its kind");
    }
    const bool sketch = o.kind == core::SummaryKind::kCountMin || o.kind == core::SummaryKind::kFcm ||
                        o.kind == core::SummaryKind::kMisraGries || o.kind == core::SummaryKind::kPbf;
    if (sketch && spec.partitioning().partitions() > 1) {
      o.partition.partitions = spec.partitioning().partitions();
      o.partition.scheme = spec.partitioning().scheme() == v1::Partitioning::SCHEME_HASH
                               ? core::PartitionScheme::kHash
                               : core::PartitionScheme::kBlock;
      o.partition.groups = spec.partitioning().groups();
    }
    if (absl::Status st = o.Validate(config.value_kind); !st.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(core::SummaryKindName(o.kind), ": ", st.message()));
    }
    if (s.has_scope()) {
      if (spec.has_window()) {
        return absl::InvalidArgumentError(
            "a summary's scope is for sessions without a window: give every summary its scope "
            "(and the whole-history ones none), or the session a window and no scopes");
      }
      if (absl::Status st = ApplyWindow(s.scope(), config.value_kind, &o,
                                        absl::StrCat(core::SummaryKindName(o.kind), " scope"));
          !st.ok()) {
        return st;
      }
    }
    config.summaries.push_back(o);
  }
  if (spec.has_window()) {
    for (core::SummaryOptions& o : config.summaries) {
      if (absl::Status st = ApplyWindow(spec.window(), config.value_kind, &o, "window"); !st.ok()) {
        return st;
      }
    }
  }
  if (spec.export_quantiles_size() > 16) {
    return absl::InvalidArgumentError("export at most 16 quantiles");
  }
  for (double phi : spec.export_quantiles()) {
    if (absl::Status st = core::ValidatePhi(phi); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("export_quantiles: ", st.message()));
    }
  }
  if (spec.export_quantiles_size() > 0 &&
      std::none_of(spec.summaries().begin(), spec.summaries().end(),
                   [](const v1::SummarySpec& s) { return s.has_quantiles(); })) {
    return absl::InvalidArgumentError("export_quantiles needs a quantiles summary");
  }
  if (spec.export_moments() && config.value_kind != core::ValueKind::kNumeric) {
    return absl::InvalidArgumentError(
        "export_moments needs a numeric session (moments are kept for numeric values only)");
  }
  if (spec.export_distinct() &&
      std::none_of(spec.summaries().begin(), spec.summaries().end(),
                   [](const v1::SummarySpec& s) { return s.has_hll(); })) {
    return absl::InvalidArgumentError("export_distinct needs an hll summary (--summary=hll)");
  }
  config.export_moments = spec.export_moments();
  config.export_distinct = spec.export_distinct();
  if (spec.parts().count() > 1) {
    // Answers merge the parts' exports: every summary must merge with its bound (issue 17).
    if (spec.parts().count() > kMaxParts) {
      return absl::InvalidArgumentError(
          absl::StrCat("parts.count must be at most ", kMaxParts, ", got ", spec.parts().count()));
    }
    for (const core::SummaryOptions& o : config.summaries) {
      if (std::string why = WhyNotMergeable(o); !why.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "a session split in parts answers by merging them, and its ", core::SummaryKindName(o.kind),
            " summary ", why, "; keep it in a session of one part"));
      }
    }
    config.parts = spec.parts().count();
    config.parts_by_key = spec.parts().scheme() == v1::Partitioning::SCHEME_HASH;
  }
  config.spec_bytes = spec.SerializeAsString();
  return config;
}

std::vector<v1::IngestRequest> SplitByKey(const v1::IngestRequest& request, uint32_t parts) {
  std::vector<v1::IngestRequest> out(parts);
  for (v1::IngestRequest& r : out) {
    r.set_session(request.session());
    r.set_sequence(request.sequence());
    r.set_producer_id(request.producer_id());
    r.set_event_time_unix_s(request.event_time_unix_s());
  }
  const bool weighted = request.weights_size() > 0;
  const bool with_y = request.y_size() > 0;
  auto rest = [&](v1::IngestRequest& r, int i) {
    if (weighted && i < request.weights_size()) r.add_weights(request.weights(i));
    if (with_y && i < request.y_size()) r.add_y(request.y(i));
  };
  switch (request.payload_case()) {
    case v1::IngestRequest::kValues:
      for (int i = 0; i < request.values().values_size(); ++i) {
        const double v = request.values().values(i);
        auto& r = out[KeyPart(core::ToOrderedBits(v), parts)];
        r.mutable_values()->add_values(v);
        rest(r, i);
      }
      break;
    case v1::IngestRequest::kKeys:
      for (int i = 0; i < request.keys().keys_size(); ++i) {
        const uint64_t k = request.keys().keys(i);
        auto& r = out[KeyPart(k, parts)];
        r.mutable_keys()->add_keys(k);
        rest(r, i);
      }
      break;
    case v1::IngestRequest::kStrings:
      for (int i = 0; i < request.strings().keys_size(); ++i) {
        const std::string& k = request.strings().keys(i);
        auto& r = out[KeyPart(core::StringKeyId(k), parts)];
        r.mutable_strings()->add_keys(k);
        rest(r, i);
      }
      break;
    default:
      break;
  }
  return out;
}

absl::StatusOr<SessionConfig> ConfigFromSpecBytes(absl::string_view bytes) {
  v1::SessionSpec spec;
  if (!spec.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::DataLossError("session spec does not parse");
  }
  return ConfigFromSpec(spec);
}

void FillSessionInfo(const Session& session, v1::SessionInfo* info) {
  info->mutable_spec()->ParseFromString(session.config().spec_bytes);
  SessionStats stats = session.Stats();
  info->set_count(stats.count);
  info->set_memory_bytes(stats.memory_bytes);
  info->set_backend(stats.backend);
  info->set_batches(stats.batches);
  info->set_create_time_unix_ms(session.config().create_time_unix_ms);
  info->set_log_position(session.applied_lsn());
  for (const SummaryStats& s : stats.summaries) {
    v1::SummaryInfo* si = info->add_summaries();
    si->set_kind(core::SummaryKindName(s.kind));
    si->set_parameters(s.parameters);
    si->set_memory_bytes(s.memory_bytes);
    si->set_placement(s.placement);
  }
}

void FillExport(const Session& session, SessionExport e, v1::ExportSummaryResponse* response) {
  response->set_summary_export(std::move(e.bytes));
  response->set_format_version(core::kSerializationVersion);
  response->mutable_spec()->ParseFromString(session.config().spec_bytes);
  response->set_count(e.count);
  response->set_log_position(e.applied_lsn);
  for (const auto& [id, sequence] : e.producers) {
    v1::ProducerSequence* p = response->add_producers();
    p->set_producer_id(id);
    p->set_sequence(sequence);
  }
  for (const ExportedSummary& s : e.summaries) {
    v1::ExportedSummary* out = response->add_summaries();
    out->set_kind(core::SummaryKindName(s.kind));
    out->set_parameters(s.parameters);
    out->set_bytes(s.bytes);
    out->set_merges(s.merges);
  }
}

namespace {

// A varint at p (< end) into *out: the byte after it, or nullptr where it does not end within
// nine bytes (values from 2^63 up, and malformed bytes, are left to protobuf).
inline const uint8_t* ReadVarint(const uint8_t* p, const uint8_t* end, uint64_t* out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 63 && p < end; shift += 7) {
    const uint64_t b = *p++;
    v |= (b & 0x7f) << shift;
    if (b < 0x80) {
      *out = v;
      return p;
    }
  }
  return nullptr;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define STREAMSTATS_VARINT_VECTORS 1
// Decodes keys of up to four bytes from *q while 64 bytes remain before q_end, into out (at most
// max_keys), 16 a step: the step's 64 bytes in one vector, the ends of their keys (bytes without
// the continuation bit) compressed into one vector of positions and the starts one lane after
// them, then each key's bytes permuted into a 32-bit lane and their 7-bit groups joined. Stops
// before a key of five bytes or more, and where fewer than 64 bytes remain; returns how many keys
// it decoded and moves *q past them. Keys over 10^6 take three bytes each, which the byte-by-byte
// loop below decodes with a branch a byte: 1.36 ns a key on one core of the 2-vCPU VM, 16 % of
// the server at 16 x 16 uint64 on the 16-core host (perf, session 16).
__attribute__((target("avx512f,avx512bw,avx512vbmi,avx512vbmi2,bmi2,popcnt"))) size_t
DecodeShortVarintsVbmi2(const uint8_t** q, const uint8_t* q_end, uint64_t* out,
                        size_t max_keys) {
  alignas(64) static constexpr uint8_t kTables[3][64] = {
      // byte i: i (positions)
      {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
       22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43,
       44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63},
      // byte 4k + j: k (the key a byte of the output belongs to)
      {0,  0,  0,  0,  1,  1,  1,  1,  2,  2,  2,  2,  3,  3,  3,  3,  4,  4,  4,  4,  5,  5,
       5,  5,  6,  6,  6,  6,  7,  7,  7,  7,  8,  8,  8,  8,  9,  9,  9,  9,  10, 10, 10, 10,
       11, 11, 11, 11, 12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15},
      // byte 4k + j: j (its place in the key)
      {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3,
       0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3,
       0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}};
  const __m512i position = _mm512_load_si512(kTables[0]);
  const __m512i key_of = _mm512_load_si512(kTables[1]);
  const __m512i place = _mm512_load_si512(kTables[2]);
  // Lane k <- lane k - 1 (lane 0 <- lane 63, masked off below).
  const __m512i previous = _mm512_sub_epi8(position, _mm512_set1_epi8(1));
  const __m512i one = _mm512_set1_epi8(1);
  const __m512i three = _mm512_set1_epi8(3);
  const __m512i low7 = _mm512_set1_epi8(0x7f);
  const uint8_t* p = *q;
  size_t done = 0;
  while (q_end - p >= 64 && done < max_keys) {
    const __m512i data = _mm512_loadu_si512(p);
    const uint64_t ends = ~_mm512_movepi8_mask(data);
    size_t n = std::min<size_t>({static_cast<size_t>(__builtin_popcountll(ends)), 16,
                                 max_keys - done});
    if (n == 0) break;
    const __mmask64 first_n = (uint64_t{1} << n) - 1;
    const __m512i end = _mm512_maskz_compress_epi8(ends, position);
    const __m512i start =
        _mm512_maskz_add_epi8(~uint64_t{1}, _mm512_permutexvar_epi8(previous, end), one);
    const __mmask64 too_long =
        _mm512_mask_cmpgt_epu8_mask(first_n, _mm512_sub_epi8(end, start), three);
    if (too_long != 0) {
      n = static_cast<size_t>(__builtin_ctzll(too_long));
      if (n == 0) break;
    }
    const __m512i from = _mm512_add_epi8(_mm512_permutexvar_epi8(key_of, start), place);
    const __mmask64 within = _mm512_cmple_epu8_mask(from, _mm512_permutexvar_epi8(key_of, end));
    const __m512i x = _mm512_and_si512(_mm512_maskz_permutexvar_epi8(within, from, data), low7);
    const __m512i v = _mm512_or_si512(
        _mm512_or_si512(_mm512_and_si512(x, _mm512_set1_epi32(0x7f)),
                        _mm512_and_si512(_mm512_srli_epi32(x, 1), _mm512_set1_epi32(0x3f80))),
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(x, 2), _mm512_set1_epi32(0x1fc000)),
                        _mm512_and_si512(_mm512_srli_epi32(x, 3), _mm512_set1_epi32(0xfe00000))));
    const __mmask8 low_keys = static_cast<__mmask8>(n >= 8 ? 0xff : (1u << n) - 1);
    _mm512_mask_storeu_epi64(out + done, low_keys,
                             _mm512_cvtepu32_epi64(_mm512_castsi512_si256(v)));
    if (n > 8) {
      _mm512_mask_storeu_epi64(out + done + 8, static_cast<__mmask8>((1u << (n - 8)) - 1),
                               _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(v, 1)));
    }
    // Past the n-th key's last byte.
    p += __builtin_ctzll(_pdep_u64(uint64_t{1} << (n - 1), ends)) + 1;
    done += n;
  }
  *q = p;
  return done;
}

bool HasVarintVectors() {
  static const bool has = __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vbmi") &&
                          __builtin_cpu_supports("avx512vbmi2") && __builtin_cpu_supports("bmi2");
  return has;
}
#endif

std::atomic<uint64_t> keys_batches_decoded_here{0};  // KeysBatchesDecodedHere
std::atomic<bool> vectors_allowed{true};               // SetConvertVectorsForTesting

// Whether DecodeKeys may call DecodeShortVarintsVbmi2: the CPU has it and no test turned it off.
bool VarintVectorsAllowed() {
#if defined(STREAMSTATS_VARINT_VECTORS)
  return HasVarintVectors() && vectors_allowed.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

// Uint64Keys' bytes [p, end) appended to `keys`: field 1, packed or not, and nothing else
// (another field, a 10-byte varint, anything malformed: false, and protobuf parses the batch).
// `allow_vectors`: VarintVectorsAllowed(), read once per request.
bool DecodeKeys(const uint8_t* p, const uint8_t* end, bool allow_vectors,
                google::protobuf::RepeatedField<uint64_t>* keys) {
  while (p < end) {
    uint64_t tag;
    if ((p = ReadVarint(p, end, &tag)) == nullptr) return false;
    if (tag == ((1 << 3) | 0)) {  // one key, not packed
      uint64_t v;
      if ((p = ReadVarint(p, end, &v)) == nullptr) return false;
      keys->Add(v);
      continue;
    }
    if (tag != ((1 << 3) | 2)) return false;
    uint64_t len;
    if ((p = ReadVarint(p, end, &len)) == nullptr || len > static_cast<uint64_t>(end - p)) return false;
    const uint8_t* q = p;
    const uint8_t* const q_end = p + len;
    p = q_end;
    if (len == 0) continue;
    if (q_end[-1] & 0x80) return false;  // the last varint does not end
    // One key per byte without the continuation bit, counted eight bytes at a time: the array
    // is sized once.
    constexpr uint64_t kHigh = 0x8080808080808080ULL;
    size_t count = 0;
    const uint8_t* b = q;
    for (; q_end - b >= 8; b += 8) {
      uint64_t w;
      std::memcpy(&w, b, sizeof w);
      count += (((~w & kHigh) >> 7) * 0x0101010101010101ULL) >> 56;
    }
    for (; b < q_end; ++b) count += *b < 0x80;
    if (keys->size() + count > static_cast<size_t>(std::numeric_limits<int>::max())) return false;
    keys->Reserve(keys->size() + static_cast<int>(count));
    uint64_t* out = keys->AddNAlreadyReserved(static_cast<int>(count));
#if defined(STREAMSTATS_VARINT_VECTORS)
    // Not where most keys take one byte: 16 a step is slower than one a byte.
    const bool vectors = allow_vectors && 2 * len >= 3 * count;
#else
    static_cast<void>(allow_vectors);
#endif
    // Keys of up to four bytes (up to 2^28) inline, byte by byte with constant shifts: the
    // branches follow the keys' lengths, which a stream's keys mostly share, so they predict
    // and the next key's start is known before this one's bytes arrive.
    for (size_t i = 0; i < count; ++i) {
#if defined(STREAMSTATS_VARINT_VECTORS)
      if (vectors && q_end - q >= 64) {
        i += DecodeShortVarintsVbmi2(&q, q_end, out + i, count - i);
        if (i == count) break;
      }
#endif
      if (q_end - q >= 4) {
        const uint64_t b0 = q[0];
        if (b0 < 0x80) {
          out[i] = b0;
          q += 1;
          continue;
        }
        const uint64_t b1 = q[1];
        uint64_t v = (b0 & 0x7f) | ((b1 & 0x7f) << 7);
        if (b1 < 0x80) {
          out[i] = v;
          q += 2;
          continue;
        }
        const uint64_t b2 = q[2];
        v |= (b2 & 0x7f) << 14;
        if (b2 < 0x80) {
          out[i] = v;
          q += 3;
          continue;
        }
        const uint64_t b3 = q[3];
        v |= (b3 & 0x7f) << 21;
        if (b3 < 0x80) {
          out[i] = v;
          q += 4;
          continue;
        }
      }
      if ((q = ReadVarint(q, q_end, &out[i])) == nullptr) return false;
    }
    if (q != q_end) return false;  // cannot happen: one end per key
  }
  return true;
}

// An IngestRequest whose payload is uint64 keys, from its contiguous bytes, into `request`
// (empty): the keys decoded here, every other field by protobuf (their bytes gathered into
// `rest`). False, with `request` in any state, for anything else (another payload or none, the
// keys field twice, an unknown field inside the keys), so that protobuf parses the batch as ever
// (ParseIngestRequest in convert.h says why).
bool ParseKeysRequest(const uint8_t* p, const uint8_t* end, bool allow_vectors,
                      v1::IngestRequest* request, std::string* rest) {
  rest->clear();
  bool seen_keys = false;
  while (p < end) {
    const uint8_t* const field_start = p;
    uint64_t tag;
    if ((p = ReadVarint(p, end, &tag)) == nullptr) return false;
    const uint64_t field = tag >> 3;
    if (field == 0 || field > (uint64_t{1} << 29) - 1) return false;
    if (field == 3 || field == 5) return false;  // values or strings: the oneof is protobuf's
    if (field == 4) {
      uint64_t len;
      if ((tag & 7) != 2 || seen_keys) return false;
      if ((p = ReadVarint(p, end, &len)) == nullptr || len > static_cast<uint64_t>(end - p)) return false;
      if (!DecodeKeys(p, p + len, allow_vectors, request->mutable_keys()->mutable_keys())) {
        return false;
      }
      p += len;
      seen_keys = true;
      continue;
    }
    switch (tag & 7) {
      case 0: {
        uint64_t v;
        if ((p = ReadVarint(p, end, &v)) == nullptr) return false;
        break;
      }
      case 1:
        if (end - p < 8) return false;
        p += 8;
        break;
      case 2: {
        uint64_t len;
        if ((p = ReadVarint(p, end, &len)) == nullptr || len > static_cast<uint64_t>(end - p)) return false;
        p += len;
        break;
      }
      case 5:
        if (end - p < 4) return false;
        p += 4;
        break;
      default:
        return false;
    }
    rest->append(reinterpret_cast<const char*>(field_start), p - field_start);
  }
  return seen_keys && request->MergeFromString(*rest);
}

}  // namespace

uint64_t KeysBatchesDecodedHere() {
  return keys_batches_decoded_here.load(std::memory_order_relaxed);
}

void SetConvertVectorsForTesting(bool on) {
  vectors_allowed.store(on, std::memory_order_relaxed);
}

grpc::Status ParseIngestRequest(grpc::ByteBuffer* bytes, bool expect_keys,
                                v1::IngestRequest* request) {
  if (expect_keys && bytes->Length() <= static_cast<size_t>(std::numeric_limits<int>::max())) {
    grpc::Slice slice;
    if (bytes->TrySingleSlice(&slice).ok() || bytes->DumpToSingleSlice(&slice).ok()) {
      thread_local std::string rest;
      if (ParseKeysRequest(slice.begin(), slice.end(), VarintVectorsAllowed(), request, &rest)) {
        keys_batches_decoded_here.fetch_add(1, std::memory_order_relaxed);
        bytes->Clear();
        return grpc::Status::OK;
      }
    }
    request->Clear();  // not a keys batch, or not one this decoder takes: protobuf parses it
  }
  return grpc::SerializationTraits<v1::IngestRequest>::Deserialize(bytes, request);
}

absl::StatusOr<core::Batch> BatchFromRequest(const v1::IngestRequest& request,
                                             std::vector<std::string>* strings) {
  core::Batch b;
  switch (request.payload_case()) {
    case v1::IngestRequest::kValues:
      b.kind = core::ValueKind::kNumeric;
      b.values = absl::MakeConstSpan(request.values().values().data(),
                                     request.values().values().size());
      break;
    case v1::IngestRequest::kKeys:
      b.kind = core::ValueKind::kUint64;
      b.keys = absl::MakeConstSpan(request.keys().keys().data(), request.keys().keys().size());
      break;
    case v1::IngestRequest::kStrings:
      b.kind = core::ValueKind::kString;
      strings->assign(request.strings().keys().begin(), request.strings().keys().end());
      b.strings = absl::MakeConstSpan(*strings);
      break;
    default:
      return absl::InvalidArgumentError("a batch needs a payload: values, keys or strings");
  }
  b.weights = absl::MakeConstSpan(request.weights().data(), request.weights().size());
  b.ys = absl::MakeConstSpan(request.y().data(), request.y().size());
  b.event_seconds = request.event_time_unix_s();
  return b;
}

}  // namespace streamstats::server
