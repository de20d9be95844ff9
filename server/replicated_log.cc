#include "server/replicated_log.h"

#include "absl/strings/str_cat.h"
#include "server/split_session.h"

namespace streamstats::server {

std::string SubjectToken(absl::string_view name) {
  if (name.empty()) return "%";
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(name.size());
  for (unsigned char c : name) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
        c == '-') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string SessionSubject(absl::string_view prefix, absl::string_view tenant,
                           absl::string_view session) {
  if (auto part = ParsePartName(session); part.has_value()) {
    return absl::StrCat(prefix, ".", SubjectToken(tenant), ".", SubjectToken(part->first), ".",
                        part->second);
  }
  return absl::StrCat(prefix, ".", SubjectToken(tenant), ".", SubjectToken(session));
}

std::string BatchMessageId(absl::string_view tenant, absl::string_view session,
                           absl::string_view producer_id, uint64_t sequence) {
  return absl::StrCat(SubjectToken(tenant), ".", SubjectToken(session), ".",
                      SubjectToken(producer_id), ":", sequence);
}

}  // namespace streamstats::server
