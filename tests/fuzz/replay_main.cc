// A libFuzzer-compatible driver for compilers without libFuzzer (the gcc CI build): runs a fuzz
// target over every file of the given corpus folders (or files), then over --iterations
// deterministic pseudo-random inputs: mutations of the corpus entries (bit flips, byte sets,
// truncations, insertions, splices) and plain random bytes. A crash or a failed FUZZ_CHECK
// aborts, which fails the ctest entry; the sanitizer builds turn memory errors into crashes too.
//
//   fuzz_<target>_replay [--iterations=N] [--seed=S] CORPUS_DIR_OR_FILE...
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

uint64_t SplitMix(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void RunOne(const std::string& input) {
  // A copy on the heap of exactly the input's size, so ASan sees reads past its end.
  std::vector<uint8_t> buf(input.begin(), input.end());
  LLVMFuzzerTestOneInput(buf.empty() ? nullptr : buf.data(), buf.size());
}

std::string Mutate(std::string s, const std::vector<std::string>& corpus, uint64_t& rng) {
  const int rounds = 1 + SplitMix(rng) % 4;
  for (int r = 0; r < rounds; ++r) {
    switch (SplitMix(rng) % 6) {
      case 0:  // flip a bit
        if (!s.empty()) s[SplitMix(rng) % s.size()] ^= static_cast<char>(1 << (SplitMix(rng) % 8));
        break;
      case 1: {  // set a byte to an interesting value
        static constexpr uint8_t kInteresting[] = {0, 1, 0x7f, 0x80, 0xff, 0xfe, 0x40, 0x10};
        if (!s.empty()) s[SplitMix(rng) % s.size()] = static_cast<char>(kInteresting[SplitMix(rng) % 8]);
        break;
      }
      case 2:  // truncate
        if (!s.empty()) s.resize(SplitMix(rng) % s.size());
        break;
      case 3: {  // insert random bytes
        const size_t at = s.empty() ? 0 : SplitMix(rng) % (s.size() + 1);
        std::string ins(1 + SplitMix(rng) % 16, '\0');
        for (char& c : ins) c = static_cast<char>(SplitMix(rng));
        s.insert(at, ins);
        break;
      }
      case 4: {  // overwrite 8 bytes with a random (often huge) integer
        if (s.size() >= 8) {
          const uint64_t v = SplitMix(rng) >> (SplitMix(rng) % 64);
          std::memcpy(&s[SplitMix(rng) % (s.size() - 7)], &v, 8);
        }
        break;
      }
      case 5: {  // splice with another corpus entry
        if (!corpus.empty()) {
          const std::string& o = corpus[SplitMix(rng) % corpus.size()];
          const size_t cut = s.empty() ? 0 : SplitMix(rng) % s.size();
          const size_t from = o.empty() ? 0 : SplitMix(rng) % o.size();
          s = s.substr(0, cut) + o.substr(from);
        }
        break;
      }
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  long iterations = 2000;
  uint64_t seed = 1;
  std::vector<std::string> corpus;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--iterations=", 0) == 0) {
      iterations = std::strtol(arg.c_str() + 13, nullptr, 10);
      continue;
    }
    if (arg.rfind("--seed=", 0) == 0) {
      seed = std::strtoull(arg.c_str() + 7, nullptr, 10);
      continue;
    }
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(arg)) {
      for (const auto& e : std::filesystem::directory_iterator(arg)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
      std::sort(files.begin(), files.end());
    } else if (std::filesystem::is_regular_file(arg)) {
      files.push_back(arg);
    } else {
      std::fprintf(stderr, "replay: %s is neither a file nor a folder\n", arg.c_str());
      return 2;
    }
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  }
  for (const std::string& input : corpus) RunOne(input);
  uint64_t rng = seed;
  for (long i = 0; i < iterations; ++i) {
    if (!corpus.empty() && SplitMix(rng) % 4 != 0) {
      RunOne(Mutate(corpus[SplitMix(rng) % corpus.size()], corpus, rng));
    } else {
      std::string s(SplitMix(rng) % 512, '\0');
      for (char& c : s) c = static_cast<char>(SplitMix(rng));
      RunOne(s);
    }
  }
  std::printf("replay: %zu corpus inputs and %ld generated inputs, no crash\n", corpus.size(),
              iterations);
  return 0;
}
