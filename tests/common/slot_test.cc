// Copyright 2026 The Ember Authors.

#include "common/slot.h"

#include <algorithm>
#include <random>
#include <vector>

#include "common/slot_map.h"
#include "gtest/gtest.h"

namespace ember {
namespace {

// max/mean slot load over `n` IDs produced by `next`.
template <typename Next>
double MaxOverMean(uint64_t seed, size_t n, Next next) {
  std::vector<uint32_t> load(kNumSlots, 0);
  for (size_t i = 0; i < n; ++i) ++load[SlotOf(seed, next(i))];
  const double mean = static_cast<double>(n) / kNumSlots;
  return *std::max_element(load.begin(), load.end()) / mean;
}

// With 20000 IDs per slot on average, a uniform hash's fullest slot lies about 4.2
// standard deviations (sqrt(20000) = 141, i.e. 3%) above the mean by chance alone.
constexpr size_t kIdsPerSlot = 20000;

TEST(SlotTest, SequentialIdsSpreadEvenly) {
  const double ratio = MaxOverMean(42, kNumSlots * kIdsPerSlot, [](size_t i) { return i; });
  EXPECT_LT(ratio, 1.05);
}

TEST(SlotTest, RandomIdsSpreadEvenly) {
  std::mt19937_64 rng(7);
  const double ratio = MaxOverMean(99, kNumSlots * kIdsPerSlot, [&](size_t) { return rng(); });
  EXPECT_LT(ratio, 1.05);
}

TEST(SlotTest, StridedIdsSpreadEvenly) {
  // IDs that share low bits (e.g. hashes truncated to a multiple of 1024).
  const double ratio =
      MaxOverMean(5, kNumSlots * kIdsPerSlot, [](size_t i) { return uint64_t{i} << 10; });
  EXPECT_LT(ratio, 1.05);
}

TEST(SlotTest, DeterministicAndSeedDependent) {
  EXPECT_EQ(SlotOf(1, 12345), SlotOf(1, 12345));
  int differ = 0;
  for (uint64_t id = 0; id < 1000; ++id) differ += SlotOf(1, id) != SlotOf(2, id);
  EXPECT_GT(differ, 990);  // another table's seed places IDs independently
  // Pinned values: the slot function is part of the on-disk format.
  EXPECT_EQ(SlotOf(0, 0), 0u);
  EXPECT_EQ(SlotOf(0, 1), static_cast<uint32_t>(Mix64(1) & (kNumSlots - 1)));
}

TEST(SlotMapTest, EvenAssignmentCoversEverySlot) {
  SlotMap map = SlotMap::Even({3, 7, 9}, 5);
  EXPECT_EQ(map.epoch(), 5u);
  size_t total = 0;
  for (uint32_t shard : {3u, 7u, 9u}) {
    const size_t n = map.SlotsOf(shard).size();
    EXPECT_GE(n, kNumSlots / 3);
    EXPECT_LE(n, kNumSlots / 3 + 1);
    total += n;
  }
  EXPECT_EQ(total, kNumSlots);
  EXPECT_EQ(map.Shards(), (std::vector<uint32_t>{3, 7, 9}));
}

TEST(SlotMapTest, FromOwnersRejectsWrongSize) {
  EXPECT_FALSE(SlotMap::FromOwners(std::vector<uint32_t>(10, 0), 1).ok());
  auto map = SlotMap::FromOwners(std::vector<uint32_t>(kNumSlots, 4), 2);
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map->OwnerOf(123), 4u);
}

}  // namespace
}  // namespace ember
