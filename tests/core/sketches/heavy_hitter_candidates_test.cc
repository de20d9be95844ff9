// HeavyHitterCandidates against a plain reference model of its rule (keep the C
// keys with the largest (estimate, id) offered, each at its latest estimate),
// for streams of nondecreasing estimates per key, as Count-Min and FCM offer
// them.
#include "core/sketches/heavy_hitter_candidates.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/hash.h"
#include "gtest/gtest.h"

namespace streamstats::core {
namespace {

// id -> (estimate, string)
using Contents = std::map<uint64_t, std::pair<uint64_t, std::string>>;

class Reference {
 public:
  explicit Reference(size_t capacity) : capacity_(capacity) {}
  void Offer(uint64_t id, uint64_t estimate, const std::string& str) {
    if (capacity_ == 0) return;
    auto it = set_.find(id);
    if (it != set_.end()) {
      it->second.first = estimate;
      return;
    }
    if (set_.size() < capacity_) {
      set_[id] = {estimate, str};
      return;
    }
    auto min = set_.begin();
    for (auto j = set_.begin(); j != set_.end(); ++j) {
      if (std::make_pair(j->second.first, j->first) <
          std::make_pair(min->second.first, min->first)) {
        min = j;
      }
    }
    if (std::make_pair(min->second.first, min->first) <
        std::make_pair(estimate, id)) {
      set_.erase(min);
      set_[id] = {estimate, str};
    }
  }
  const Contents& contents() const { return set_; }

 private:
  size_t capacity_;
  Contents set_;
};

Contents ContentsOf(const HeavyHitterCandidates& c) {
  Contents out;
  c.ForEach([&](uint64_t id, uint64_t estimate, absl::string_view str) {
    EXPECT_TRUE(
        out.emplace(id, std::make_pair(estimate, std::string(str))).second)
        << id;
  });
  return out;
}

// Offers a skewed stream: each key's estimate grows by its occurrences (plus
// noise that never decreases), as a sketch's estimates do.
TEST(HeavyHitterCandidates,
     KeepsExactlyTheReferenceSetForNondecreasingEstimates) {
  for (size_t capacity : {0, 1, 2, 7, 64}) {
    for (uint64_t seed : {1, 2, 3}) {
      HeavyHitterCandidates c(capacity);
      Reference ref(capacity);
      std::mt19937_64 rng(seed);
      std::map<uint64_t, uint64_t> estimate;
      for (int i = 0; i < 20000; ++i) {
        const uint64_t x = rng();
        const uint64_t id = x % 3 == 0 ? x % 10 : x % 3000;
        estimate[id] += 1 + (x >> 60) % 3;
        const std::string str = absl::StrCat("k", id);
        c.Offer(id, estimate[id], str);
        ref.Offer(id, estimate[id], str);
        if (i % 997 == 0) {
          ASSERT_EQ(ContentsOf(c), ref.contents()) << capacity << " " << i;
        }
      }
      EXPECT_EQ(ContentsOf(c), ref.contents()) << capacity;
      EXPECT_EQ(c.size(), ref.contents().size());
    }
  }
}

// OfferGrowing and OfferGrowingAll (Count-Min's paths: no read of a stored leaf's node, the
// chunk's pre-filter) must leave the very heap
// Offer leaves, node for node (the serialized bytes are heap order), on nondecreasing
// estimates: a few hot keys, a wide tail, ties, floors and every small capacity.
TEST(HeavyHitterCandidates, OfferGrowingLeavesTheSameHeapAsOffer) {
  for (size_t capacity : {0, 1, 2, 7, 64, 1000}) {
    for (uint64_t floor : {0, 5}) {
      for (uint64_t seed : {1, 2, 3, 4}) {
        HeavyHitterCandidates plain(capacity), growing(capacity), chunked(capacity);
        plain.set_floor(floor);
        growing.set_floor(floor);
        chunked.set_floor(floor);
        // OfferGrowingAll gets the same offers in chunks of 1 to 256.
        std::vector<uint64_t> chunk_ids, chunk_estimates;
        std::vector<std::string> chunk_strs;
        size_t chunk_len = 1;
        std::mt19937_64 chunk_rng(seed + 100);
        uint8_t scratch[256];
        auto flush = [&] {
          chunked.OfferGrowingAll(chunk_ids.data(), chunk_estimates.data(), chunk_ids.size(),
                                  scratch, [&](size_t j) { return absl::string_view(chunk_strs[j]); });
          chunk_ids.clear();
          chunk_estimates.clear();
          chunk_strs.clear();
          chunk_len = 1 + chunk_rng() % 256;
        };
        std::mt19937_64 rng(seed);
        std::map<uint64_t, uint64_t> estimate;
        const uint64_t universe = seed % 2 == 0 ? 5000 : 300;
        for (int i = 0; i < 30000; ++i) {
          const uint64_t x = rng();
          const uint64_t id = x % 4 == 0 ? x % 8 : (x >> 8) % universe;
          estimate[id] += (x >> 61) % 3;  // 0 included: an unchanged estimate offered again
          const std::string str = absl::StrCat("k", id);
          plain.Offer(id, estimate[id], str);
          growing.OfferGrowing(id, estimate[id], str);
          chunk_ids.push_back(id);
          chunk_estimates.push_back(estimate[id]);
          chunk_strs.push_back(str);
          if (chunk_ids.size() == chunk_len) flush();
          if (i % 1009 == 0) {
            flush();
            ByteWriter a, b, c;
            plain.Serialize(true, &a);
            growing.Serialize(true, &b);
            chunked.Serialize(true, &c);
            ASSERT_EQ(a.bytes(), b.bytes()) << capacity << " " << seed << " " << i;
            ASSERT_EQ(a.bytes(), c.bytes()) << capacity << " " << seed << " " << i;
          }
        }
        flush();
        ByteWriter a, b, c;
        plain.Serialize(true, &a);
        growing.Serialize(true, &b);
        chunked.Serialize(true, &c);
        EXPECT_EQ(a.bytes(), b.bytes()) << capacity << " " << seed;
        EXPECT_EQ(a.bytes(), c.bytes()) << capacity << " " << seed;
      }
    }
  }
}

// What a GPU returns of a Count-Min or FCM batch (DeviceSketch::AddSelected): the items at or
// above the level the set had at the batch's start, and of those only each key's last one.
// Offered through OfferGrowingSelected they must leave the very set and stored estimates (and
// strings) that offering every item does, on nondecreasing estimates with ties, collisions
// (estimates that jump between a key's items), floors, every small capacity and batches of 1 to
// 3000 items; only the heap's layout may differ.
TEST(HeavyHitterCandidates, OfferingEachKeysLastItemAtTheLevelKeepsTheSetAndEstimates) {
  for (size_t capacity : {0, 1, 2, 7, 64, 1000}) {
    for (uint64_t floor : {0, 5}) {
      for (uint64_t seed : {1, 2, 3, 4}) {
        SCOPED_TRACE(absl::StrCat("capacity ", capacity, " floor ", floor, " seed ", seed));
        HeavyHitterCandidates every(capacity), last(capacity);
        every.set_floor(floor);
        last.set_floor(floor);
        std::mt19937_64 rng(seed);
        std::map<uint64_t, uint64_t> estimate;
        const uint64_t universe = seed % 2 == 0 ? 5000 : 300;
        size_t offered = 0, kept = 0;
        for (int b = 0; b < 40; ++b) {
          const size_t n = 1 + rng() % (b % 4 == 0 ? 3000 : 400);
          std::vector<uint64_t> ids(n), ests(n);
          std::vector<std::string> strs(n);
          for (size_t i = 0; i < n; ++i) {
            const uint64_t x = rng();
            const uint64_t id = x % 4 == 0 ? x % 8 : (x >> 8) % universe;
            estimate[id] += (x >> 61) % 3;  // 0: an equal estimate again
            if ((x >> 20) % 16 == 0) estimate[(x >> 30) % universe] += 1;  // a collision
            ids[i] = id;
            ests[i] = estimate[id];
            strs[i] = absl::StrCat("k", id);
          }
          for (size_t i = 0; i < n; ++i) every.OfferGrowing(ids[i], ests[i], strs[i]);
          // The device's selection: at or above the level, and no later such item of the key.
          const uint64_t least = last.LeastAdmitted();
          std::vector<uint32_t> positions;
          std::vector<uint64_t> selected;
          std::map<uint64_t, size_t> last_at;
          for (size_t i = 0; i < n; ++i) {
            if (ests[i] >= least) last_at[ids[i]] = i;
          }
          for (size_t i = 0; i < n; ++i) {
            if (ests[i] >= least && last_at[ids[i]] == i) {
              positions.push_back(static_cast<uint32_t>(i));
              selected.push_back(ests[i]);
            }
          }
          offered += n;
          kept += positions.size();
          last.OfferGrowingSelected(ids.data(), positions.data(), selected.data(),
                                    positions.size(),
                                    [&](size_t i) { return absl::string_view(strs[i]); });
          ASSERT_EQ(ContentsOf(last), ContentsOf(every)) << "batch " << b;
          ASSERT_EQ(last.LeastAdmitted(), every.LeastAdmitted()) << "batch " << b;
        }
        if (capacity >= 7) {
          EXPECT_LT(kept, offered / 2);  // most items are left out
        }
      }
    }
  }
}

TEST(HeavyHitterCandidates, SerializeRoundTripKeepsTheSetAndTheBytes) {
  for (bool with_strings : {false, true}) {
    HeavyHitterCandidates c(50);
    std::mt19937_64 rng(5);
    std::map<uint64_t, uint64_t> estimate;
    for (int i = 0; i < 5000; ++i) {
      const uint64_t k = rng() % 400;
      // String sessions keep a string beside its id, which is the string's
      // hash.
      const std::string str = with_strings ? absl::StrCat("key-", k) : "";
      const uint64_t id = with_strings ? HashString(str.data(), str.size()) : k;
      c.Offer(id, ++estimate[id], str);
    }
    ByteWriter w;
    c.Serialize(with_strings, &w);
    HeavyHitterCandidates back(50);
    ByteReader r(w.bytes());
    ASSERT_TRUE(back.Deserialize(with_strings, &r)) << with_strings;
    EXPECT_EQ(ContentsOf(back), ContentsOf(c)) << with_strings;
    ByteWriter again;
    back.Serialize(with_strings, &again);
    EXPECT_EQ(again.bytes(), w.bytes()) << with_strings;
    // More entries than the capacity are refused.
    HeavyHitterCandidates small(10);
    ByteReader r2(w.bytes());
    EXPECT_FALSE(small.Deserialize(with_strings, &r2));
  }
}

TEST(HeavyHitterCandidates, MergeFromKeepsTheTopOfTheUnionReEstimated) {
  HeavyHitterCandidates a(5), b(5);
  for (uint64_t id = 0; id < 10; ++id) a.Offer(id, id + 1, "");
  for (uint64_t id = 20; id < 30; ++id) b.Offer(id, 1, "");
  // The merged sketch's estimates: keys 20.. are now the heaviest.
  a.MergeFrom(b, [](uint64_t id) { return id >= 20 ? 100 + id : id + 1; });
  Contents got = ContentsOf(a);
  Contents want;
  for (uint64_t id = 25; id < 30; ++id) want[id] = {100 + id, ""};
  EXPECT_EQ(got, want);
}

TEST(HeavyHitterCandidates, MergeFromEqualsOfferingTheUnionOnceInAnyOrder) {
  // The selection MergeFrom makes must be the set that offering every key of the union once,
  // with its merged estimate, leaves; estimates tie often (ties go by id), keys carry strings.
  std::mt19937_64 rng(123);
  for (int round = 0; round < 200; ++round) {
    const uint64_t capacity = 1 + rng() % 40;
    HeavyHitterCandidates a(capacity), b(capacity);
    for (int i = 0; i < 60; ++i) {
      const uint64_t id = rng() % 100;
      a.Offer(id, 1 + rng() % 8, absl::StrCat("k", id));
      const uint64_t other = 50 + rng() % 100;
      b.Offer(other, 1 + rng() % 8, absl::StrCat("k", other));
    }
    const auto estimate = [](uint64_t id) { return 1 + (id * 7919) % 13; };
    std::vector<uint64_t> ids;
    a.ForEach([&](uint64_t id, uint64_t, absl::string_view) { ids.push_back(id); });
    b.ForEach([&](uint64_t id, uint64_t, absl::string_view) {
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    });
    std::shuffle(ids.begin(), ids.end(), rng);
    HeavyHitterCandidates want(capacity);
    for (uint64_t id : ids) want.Offer(id, estimate(id), absl::StrCat("k", id));
    a.MergeFrom(b, estimate);
    ASSERT_EQ(ContentsOf(a), ContentsOf(want)) << "round " << round;
    // Still a working heap: offers after the merge behave as on the reference.
    for (int i = 0; i < 30; ++i) {
      const uint64_t id = rng() % 150;
      const uint64_t e = 20 + rng() % 5;
      a.Offer(id, e, absl::StrCat("k", id));
      want.Offer(id, e, absl::StrCat("k", id));
    }
    ASSERT_EQ(ContentsOf(a), ContentsOf(want)) << "round " << round << " after offers";
  }
}

// MergeFrom with itself (its strings viewed from its own slots while the set is rebuilt: long
// ones, on the heap, so a sanitizer sees a read after their release), through the batch form of
// the estimator, and into a set of capacity 0.
TEST(HeavyHitterCandidates, MergeFromItselfWithLongStringsAndABatchEstimator) {
  HeavyHitterCandidates a(8);
  for (uint64_t id = 0; id < 20; ++id) a.Offer(id, id + 1, std::string(40, 'a' + id % 26));
  const Contents before = ContentsOf(a);
  int calls = 0;
  a.MergeFrom(a, [&](absl::Span<const uint64_t> ids, absl::Span<uint64_t> out) {
    ++calls;
    for (size_t i = 0; i < ids.size(); ++i) out[i] = 1000 - ids[i];  // the lightest ids win now
  });
  EXPECT_EQ(calls, 1);
  Contents want;
  for (const auto& [id, entry] : before) want[id] = {1000 - id, entry.second};
  EXPECT_EQ(ContentsOf(a), want);
  a.Offer(99, 5000, std::string(40, 'z'));  // still a working heap
  EXPECT_EQ(ContentsOf(a).count(99), 1u);
  HeavyHitterCandidates none(0);
  none.MergeFrom(a, [](uint64_t id) { return id; });
  EXPECT_EQ(none.size(), 0u);
  none.Offer(1, 1, "");
  EXPECT_EQ(none.size(), 0u);
}

}  // namespace
}  // namespace streamstats::core
