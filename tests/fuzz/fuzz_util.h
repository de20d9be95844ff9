// Shared by the fuzz targets: a check that aborts (so libFuzzer and the replay driver both see a
// crash) and a small reader that turns fuzz bytes into typed values without reading past the end.
#ifndef STREAMSTATS_TESTS_FUZZ_FUZZ_UTIL_H_
#define STREAMSTATS_TESTS_FUZZ_FUZZ_UTIL_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/string_view.h"

// A violated property is a bug in the code under test: report it and abort.
#define FUZZ_CHECK(cond, ...)                                                    \
  do {                                                                           \
    if (!(cond)) {                                                               \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: ", __FILE__, __LINE__, \
                   #cond);                                                       \
      std::fprintf(stderr, __VA_ARGS__);                                         \
      std::fprintf(stderr, "\n");                                                \
      std::abort();                                                              \
    }                                                                            \
  } while (0)

namespace streamstats::fuzz {

// Reads from the front of the fuzz input; past the end every read yields zeros.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  size_t remaining() const { return empty() ? 0 : size_ - pos_; }
  uint8_t U8() { return empty() ? 0 : data_[pos_++]; }
  template <typename T>
  T Raw() {
    T v{};
    unsigned char buf[sizeof(T)] = {};
    size_t n = remaining() < sizeof(T) ? remaining() : sizeof(T);
    if (n > 0) std::memcpy(buf, data_ + pos_, n);
    pos_ += n;
    std::memcpy(&v, buf, sizeof(T));
    return v;
  }
  std::string Bytes(size_t n) {
    if (n > remaining()) n = remaining();
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace streamstats::fuzz

#endif  // STREAMSTATS_TESTS_FUZZ_FUZZ_UTIL_H_
