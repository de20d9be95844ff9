#include "core/common/key_id.h"

#include "absl/strings/str_cat.h"

namespace streamstats::core {

uint64_t KeyIdAt(const Batch& batch, size_t i) {
  switch (batch.kind) {
    case ValueKind::kNumeric:
      return ToOrderedBits(batch.values[i]);
    case ValueKind::kUint64:
      return batch.keys[i];
    case ValueKind::kString:
      return StringKeyId(batch.strings[i]);
  }
  return 0;
}

uint64_t KeyIdAt(const Keys& keys, size_t i) {
  switch (keys.kind) {
    case ValueKind::kNumeric:
      return ToOrderedBits(keys.values[i]);
    case ValueKind::kUint64:
      return keys.keys[i];
    case ValueKind::kString:
      return StringKeyId(keys.strings[i]);
  }
  return 0;
}

bool PackStringKeys(const StringColumn& keys, std::vector<uint64_t>* packed) {
  const absl::string_view region = keys.region();
  if (region.empty() || region.size() >= (uint64_t{1} << 31)) return false;
  const uintptr_t base = reinterpret_cast<uintptr_t>(region.data());
  packed->resize(keys.size());
  uint64_t* out = packed->data();
  for (size_t i = 0; i < keys.size(); ++i) {
    const absl::string_view key = keys[i];
    const uint64_t offset = reinterpret_cast<uintptr_t>(key.data()) - base;  // wraps if below
    if (offset > region.size() || key.size() > region.size() - offset) return false;
    out[i] = offset << 32 | key.size();
  }
  return true;
}

absl::string_view KeyStringAt(const Batch& batch, size_t i) {
  return batch.kind == ValueKind::kString ? absl::string_view(batch.strings[i])
                                          : absl::string_view();
}

HeavyHitter MakeHeavyHitter(ValueKind kind, uint64_t id, absl::string_view str,
                            const FrequencyAnswer& frequency) {
  HeavyHitter h;
  switch (kind) {
    case ValueKind::kNumeric:
      h.value = FromOrderedBits(id);
      break;
    case ValueKind::kUint64:
      h.key = id;
      break;
    case ValueKind::kString:
      h.str = std::string(str);
      break;
  }
  h.frequency = frequency;
  return h;
}

absl::Status CheckKeysKind(const Keys& keys, ValueKind kind, absl::string_view summary_name) {
  if (keys.kind != kind) {
    return absl::InvalidArgumentError(absl::StrCat(summary_name, " holds ", ValueKindName(kind),
                                                   " items; the question asks about ",
                                                   ValueKindName(keys.kind), " keys"));
  }
  return absl::OkStatus();
}

absl::Status CheckSupport(double support) {
  if (!(support > 0 && support <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("heavy-hitter support must be in (0, 1], got ", support));
  }
  return absl::OkStatus();
}

bool ValueKindFromByte(uint8_t byte, ValueKind* kind) {
  switch (byte) {
    case static_cast<uint8_t>(ValueKind::kNumeric):
    case static_cast<uint8_t>(ValueKind::kUint64):
    case static_cast<uint8_t>(ValueKind::kString):
      *kind = static_cast<ValueKind>(byte);
      return true;
    default:
      return false;
  }
}

}  // namespace streamstats::core
