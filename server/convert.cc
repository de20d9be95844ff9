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
#include "core/common/varint.h"
#include "server/split_session.h"
#include "server/summary_roles.h"

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

using core::ReadVarint;

std::atomic<uint64_t> keys_batches_decoded_here{0};  // KeysBatchesDecodedHere

// Uint64Keys' bytes [p, end) appended to `keys`: field 1, packed or not, and nothing else
// (another field, a 10-byte varint, anything malformed: false, and protobuf parses the batch).
bool DecodeKeys(const uint8_t* p, const uint8_t* end,
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
    // One key per byte without the continuation bit: the array is sized once.
    const size_t count = core::CountVarintEnds(q, q_end);
    if (keys->size() + count > static_cast<size_t>(std::numeric_limits<int>::max())) return false;
    keys->Reserve(keys->size() + static_cast<int>(count));
    if (!core::DecodeVarints(q, q_end, count, keys->AddNAlreadyReserved(static_cast<int>(count)))) {
      return false;
    }
  }
  return true;
}

// StringKeys' bytes [p, end) appended to `column` as views: field 1 and nothing else (another
// field or anything malformed: false, and protobuf parses the batch). `bytes` keys need no UTF-8
// check.
bool DecodeStrings(const uint8_t* p, const uint8_t* end, StringKeysColumn* column) {
  column->region = absl::string_view(reinterpret_cast<const char*>(p), end - p);
  while (p < end) {
    uint64_t tag, len;
    if ((p = ReadVarint(p, end, &tag)) == nullptr || tag != ((1 << 3) | 2)) return false;
    if ((p = ReadVarint(p, end, &len)) == nullptr || len > static_cast<uint64_t>(end - p)) return false;
    if (column->keys.size() == static_cast<size_t>(std::numeric_limits<int>::max())) return false;
    column->keys.emplace_back(reinterpret_cast<const char*>(p), len);
    column->longest = std::max<size_t>(column->longest, len);
    p += len;
  }
  return true;
}

// An IngestRequest whose payload is field `payload` (4, uint64 keys, or 5, string keys), from its
// contiguous bytes, into `request` (empty): the payload's bytes to `decode`, every other field to
// protobuf (their bytes gathered into `rest`). False, with `request` in any state, for anything
// else (another payload or none, the payload field twice, anything `decode` refuses), so that
// protobuf parses the batch as ever (ParseIngestRequest in convert.h says why).
template <typename Decode>
bool ParsePayloadRequest(const uint8_t* p, const uint8_t* end, uint64_t payload, Decode decode,
                         v1::IngestRequest* request, std::string* rest) {
  rest->clear();
  bool seen_payload = false;
  while (p < end) {
    const uint8_t* const field_start = p;
    uint64_t tag;
    if ((p = ReadVarint(p, end, &tag)) == nullptr) return false;
    const uint64_t field = tag >> 3;
    if (field == 0 || field > (uint64_t{1} << 29) - 1) return false;
    if (field >= 3 && field <= 5 && field != payload) return false;  // the oneof is protobuf's
    if (field == payload) {
      uint64_t len;
      if ((tag & 7) != 2 || seen_payload) return false;
      if ((p = ReadVarint(p, end, &len)) == nullptr || len > static_cast<uint64_t>(end - p)) return false;
      if (!decode(p, p + len)) return false;
      p += len;
      seen_payload = true;
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
  return seen_payload && request->MergeFromString(*rest);
}

std::atomic<uint64_t> strings_batches_decoded_here{0};  // StringsBatchesDecodedHere

}  // namespace

uint64_t KeysBatchesDecodedHere() {
  return keys_batches_decoded_here.load(std::memory_order_relaxed);
}

void SetConvertVectorsForTesting(bool on) {
  core::SetVarintVectorsForTesting(on);
}

uint64_t StringsBatchesDecodedHere() {
  return strings_batches_decoded_here.load(std::memory_order_relaxed);
}

grpc::Status ParseIngestRequest(grpc::ByteBuffer* bytes, v1::IngestRequest::PayloadCase expect,
                                v1::IngestRequest* request, StringKeysColumn* strings) {
  if (strings != nullptr) strings->Clear();
  const bool keys = expect == v1::IngestRequest::kKeys;
  if ((keys || (expect == v1::IngestRequest::kStrings && strings != nullptr)) &&
      bytes->Length() <= static_cast<size_t>(std::numeric_limits<int>::max())) {
    grpc::Slice slice;
    if (bytes->TrySingleSlice(&slice).ok() || bytes->DumpToSingleSlice(&slice).ok()) {
      thread_local std::string rest;
      bool parsed;
      if (keys) {
        parsed = ParsePayloadRequest(
            slice.begin(), slice.end(), 4,
            [request](const uint8_t* p, const uint8_t* end) {
              return DecodeKeys(p, end, request->mutable_keys()->mutable_keys());
            },
            request, &rest);
      } else {
        // The column holds the bytes before its keys view them: a small message's slice keeps
        // its bytes inline, inside the grpc::Slice object itself.
        strings->wire = std::move(slice);
        parsed = ParsePayloadRequest(
            strings->wire.begin(), strings->wire.end(), 5,
            [strings](const uint8_t* p, const uint8_t* end) { return DecodeStrings(p, end, strings); },
            request, &rest);
        if (parsed) {
          request->mutable_strings();  // the payload's case; its keys are in `strings`
          strings->decoded = true;
        }
      }
      if (parsed) {
        (keys ? keys_batches_decoded_here : strings_batches_decoded_here)
            .fetch_add(1, std::memory_order_relaxed);
        bytes->Clear();
        return grpc::Status::OK;
      }
    }
    request->Clear();  // not a batch this decoder takes: protobuf parses it
    if (strings != nullptr) strings->Clear();
  }
  return grpc::SerializationTraits<v1::IngestRequest>::Deserialize(bytes, request);
}

void RestoreStrings(const StringKeysColumn& strings, v1::IngestRequest* request) {
  if (!strings.decoded || request->payload_case() != v1::IngestRequest::kStrings ||
      request->strings().keys_size() != 0) {
    return;
  }
  auto* keys = request->mutable_strings()->mutable_keys();
  keys->Reserve(static_cast<int>(strings.size()));
  for (absl::string_view key : strings.view()) keys->Add()->assign(key.data(), key.size());
}

absl::StatusOr<core::Batch> BatchFromRequest(const v1::IngestRequest& request,
                                             std::vector<std::string>* strings,
                                             const StringKeysColumn* decoded) {
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
      if (decoded != nullptr && decoded->decoded) {
        // With their region, so a device can hash them (core::PackStringKeys).
        b.strings = core::StringColumn(decoded->view(), decoded->region, decoded->longest);
        break;
      }
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
