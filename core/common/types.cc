#include "core/common/types.h"

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
