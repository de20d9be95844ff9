// SlidingWindowSummary's serialized form (core/windows/sliding_window.h): writing and reading
// both payload versions; the window logic is in sliding_window.cc.
#include "core/windows/sliding_window.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/common/ordered_bits.h"
#include "core/common/serialization.h"

namespace streamstats::core {
namespace {

uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

}  // namespace

// Payload, format version 2:
//   u8 0xFF (kFormatMarker) | u8 2 (payload version) | value kind u8 | epsilon f64 | N u64 |
//   own stream | #parts u32 | parts × stream,
// a stream being t u64 | #raw u64 | raw keys | #levels u32 | per level: #blocks u64, per block:
// start u64 | error u64 | summary, where the summary is n u64 | #tuples u64 | (key rmin rmax)*
// for quantiles and absent u64 | #entries u64 | (key f delta)* for frequencies.
// Version 1 (before merge) had no marker, version, parts: value kind u8 | epsilon | N | own
// stream. Its first byte is a value kind (1 or 2), never 0xFF, so both still load.
namespace {
constexpr uint8_t kFormatMarker = 0xFF;
constexpr uint8_t kPayloadVersion = 2;
}  // namespace

void SlidingWindowSummary::WriteStream(const Stream& stream, ByteWriter* w) const {
  w->Put<uint64_t>(stream.t);
  w->Put<uint64_t>(stream.raw.size());
  for (uint64_t k : stream.raw) w->Put<uint64_t>(k);
  w->Put<uint32_t>(static_cast<uint32_t>(stream.levels.size()));
  for (const auto& level : stream.levels) {
    w->Put<uint64_t>(level.size());
    for (const Block& b : level) {
      w->Put<uint64_t>(b.start);
      w->Put<uint64_t>(b.error);
      if (kind_ == SummaryKind::kSlidingQuantiles) {
        w->Put<uint64_t>(b.gk.n);
        w->Put<uint64_t>(b.gk.tuples.size());
        for (const GkTuple& t : b.gk.tuples) {
          w->Put<uint64_t>(t.key);
          w->Put<uint64_t>(t.rmin);
          w->Put<uint64_t>(t.rmax);
        }
      } else {
        w->Put<uint64_t>(b.absent);
        w->Put<uint64_t>(b.table.size());
        for (const CountEntry& e : b.table) {
          w->Put<uint64_t>(e.key);
          w->Put<uint64_t>(e.f);
          w->Put<uint64_t>(e.delta);
        }
      }
    }
  }
}

std::string SlidingWindowSummary::Serialize() const {
  ByteWriter w;
  w.Put<uint8_t>(kFormatMarker);
  w.Put<uint8_t>(kPayloadVersion);
  w.Put<uint8_t>(static_cast<uint8_t>(value_kind_));
  w.Put<double>(shape_.epsilon);
  w.Put<uint64_t>(shape_.n);
  WriteStream(own_, &w);
  w.Put<uint32_t>(static_cast<uint32_t>(parts_.size()));
  for (const Stream& p : parts_) WriteStream(p, &w);
  return SealEnvelope(static_cast<uint16_t>(kind_), w.bytes());
}

absl::Status SlidingWindowSummary::ReadStream(SummaryKind kind, const SlidingWindowShape& shape,
                                              uint8_t vk, ByteReader* r, Stream* stream) {
  uint64_t t, raw_count;
  if (!r->Get(&t) || !r->GetCount(&raw_count, 8)) return Corrupt("sliding window stream header");
  if (raw_count != std::min(t, shape.raw)) return Corrupt("raw item count");
  stream->t = t;
  for (uint64_t i = 0; i < raw_count; ++i) {
    uint64_t k;
    if (!r->Get(&k)) return Corrupt("raw items cut short");
    if (vk == static_cast<uint8_t>(ValueKind::kNumeric) &&
        !(std::isfinite(FromOrderedBits(k)) && ToOrderedBits(FromOrderedBits(k)) == k)) {
      return Corrupt("raw item is not a finite double");
    }
    stream->raw.push_back(k);
  }
  uint32_t level_count;
  if (!r->Get(&level_count) || level_count != static_cast<uint32_t>(shape.max_level + 1)) {
    return Corrupt("level count");
  }
  stream->levels.resize(level_count);
  for (uint32_t level = 0; level < level_count; ++level) {
    const uint64_t b = shape.BlockSize(level);
    // The blocks a stream of t items leaves at this level: consecutive,
    // complete, not expired at the last multiple of b.
    const uint64_t last_multiple = t / b * b;
    const uint64_t horizon = shape.Horizon(level);
    uint64_t first = last_multiple > horizon ? CeilDiv(last_multiple - horizon, b) * b : 0;
    // A level-ℓ block exists once its newer half did (level 0: once complete).
    const uint64_t end = level == 0 ? t / shape.b0 * shape.b0 : last_multiple;
    const uint64_t complete = end > first ? (end - first) / b : 0;
    // Below the top level, an older half goes once its parent is built: a block is kept when
    // it is a newer half (odd index) or the newest block. Version-1 payloads hold every block;
    // the extra older halves are read and dropped.
    auto required = [&](uint64_t start) {
      return level == static_cast<uint32_t>(shape.max_level) || (start / b) % 2 == 1 ||
             start + b == end;
    };
    uint64_t blocks;
    if (!r->GetCount(&blocks, 24) || blocks > complete) return Corrupt("block count");
    uint64_t next = first;  // every block from here on that is required must come next
    for (uint64_t i = 0; i < blocks; ++i) {
      Block block;
      if (!r->Get(&block.start) || !r->Get(&block.error)) return Corrupt("block header cut short");
      if (block.start < next || block.start >= end || block.start % b != 0) {
        return Corrupt("block start");
      }
      for (; next < block.start; next += b) {
        if (required(next)) return Corrupt("a block is missing");
      }
      next = block.start + b;
      const uint64_t age = t - block.start;
      if (block.error > std::max(shape.CreationError(level), shape.AgedError(age))) {
        return Corrupt("block error exceeds its budget");
      }
      uint64_t count;
      if (kind == SummaryKind::kSlidingQuantiles) {
        if (!r->Get(&block.gk.n) || block.gk.n != b || !r->GetCount(&count, 24) || count == 0) {
          return Corrupt("block summary header");
        }
        block.gk.tuples.resize(count);
        for (GkTuple& x : block.gk.tuples) {
          if (!r->Get(&x.key) || !r->Get(&x.rmin) || !r->Get(&x.rmax)) return Corrupt("tuples");
        }
        const auto& ts = block.gk.tuples;
        if (ts.front().rmin != 1 || ts.front().rmax != 1 || ts.back().rmin != b ||
            ts.back().rmax != b) {
          return Corrupt("block does not span its items");
        }
        for (size_t j = 0; j < ts.size(); ++j) {
          if (ts[j].rmin > ts[j].rmax) return Corrupt("tuple rank bounds");
          if (j > 0 && (ts[j].key < ts[j - 1].key || ts[j].rmin <= ts[j - 1].rmin ||
                        ts[j].rmax <= ts[j - 1].rmax)) {
            return Corrupt("tuples out of order");
          }
        }
        if (block.gk.Gap() > 2 * block.error) return Corrupt("block gap exceeds its error");
      } else {
        if (!r->Get(&block.absent) || block.absent > block.error || !r->GetCount(&count, 24)) {
          return Corrupt("block table header");
        }
        uint64_t total = 0;
        block.table.resize(count);
        for (size_t j = 0; j < count; ++j) {
          CountEntry& e = block.table[j];
          if (!r->Get(&e.key) || !r->Get(&e.f) || !r->Get(&e.delta)) return Corrupt("entries");
          if (e.f == 0 || e.f > b || e.delta > block.error || (total += e.f) > b ||
              (j > 0 && e.key <= block.table[j - 1].key)) {
            return Corrupt("table entry");
          }
        }
      }
      if (required(block.start)) stream->levels[level].push_back(std::move(block));
    }
    for (; next < end; next += b) {
      if (required(next)) return Corrupt("a block is missing");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Summary>> SlidingWindowSummary::Deserialize(
    SummaryKind kind, absl::string_view payload, Accelerator* accelerator) {
  ByteReader r(payload);
  uint8_t vk;
  if (!r.Get(&vk)) return Corrupt("sliding window header cut short");
  const bool versioned = vk == kFormatMarker;  // else version 1: the byte is the value kind
  if (versioned) {
    uint8_t version;
    if (!r.Get(&version) || !r.Get(&vk)) return Corrupt("sliding window header cut short");
    if (version != kPayloadVersion) {
      return Corrupt(absl::StrCat("sliding window payload version ", version, " (this build reads 1 and ",
                                  kPayloadVersion, ")"));
    }
  }
  SlidingWindowOptions options;
  if (!r.Get(&options.epsilon) || !r.Get(&options.window_items)) {
    return Corrupt("sliding window header cut short");
  }
  if (vk != static_cast<uint8_t>(ValueKind::kNumeric) &&
      vk != static_cast<uint8_t>(ValueKind::kUint64)) {
    return Corrupt("sliding window with an invalid value kind");
  }
  if (!options.Validate().ok()) return Corrupt("sliding window parameters out of range");
  auto s = std::make_unique<SlidingWindowSummary>(kind, options, static_cast<ValueKind>(vk),
                                                  accelerator);
  if (absl::Status st = ReadStream(kind, s->shape_, vk, &r, &s->own_); !st.ok()) return st;
  if (versioned) {
    uint32_t parts;
    // A part is at least 20 bytes (t, #raw, #levels).
    if (!r.Get(&parts) || parts > r.remaining() / 20) return Corrupt("merged stream count");
    s->parts_.resize(parts);
    for (Stream& p : s->parts_) {
      if (absl::Status st = ReadStream(kind, s->shape_, vk, &r, &p); !st.ok()) return st;
      if (p.t == 0) return Corrupt("empty merged stream");
    }
  }
  if (r.remaining() != 0) return Corrupt("trailing bytes");
  return std::unique_ptr<Summary>(std::move(s));
}

}  // namespace streamstats::core
