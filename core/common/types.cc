#include "core/common/types.h"

#include <algorithm>

namespace streamstats::core {

const char* ValueKindName(ValueKind kind) {
  switch (kind) {
    case ValueKind::kNumeric:
      return "numeric";
    case ValueKind::kUint64:
      return "uint64";
    case ValueKind::kString:
      return "string";
  }
  return "unknown";
}

StringColumn StringColumn::subspan(size_t pos, size_t len) const {
  pos = std::min(pos, size_);
  len = std::min(len, size_ - pos);
  StringColumn out;
  out.region_ = region_;
  out.max_key_bytes_ = max_key_bytes_;
  if (views_ != nullptr) out.views_ = views_ + pos;
  if (strings_ != nullptr) out.strings_ = strings_ + pos;
  out.size_ = len;
  return out;
}

size_t Batch::size() const {
  switch (kind) {
    case ValueKind::kNumeric:
      return values.size();
    case ValueKind::kUint64:
      return keys.size();
    case ValueKind::kString:
      return strings.size();
  }
  return 0;
}

size_t Keys::size() const {
  switch (kind) {
    case ValueKind::kNumeric:
      return values.size();
    case ValueKind::kUint64:
      return keys.size();
    case ValueKind::kString:
      return strings.size();
  }
  return 0;
}

}  // namespace streamstats::core
