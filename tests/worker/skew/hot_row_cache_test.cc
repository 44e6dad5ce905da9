// Copyright 2026 The Ember Authors.
//
// HotRowCache (worker/skew/hot_row_cache.h): the staleness bound, which keys it serves,
// hit counting, the pull plan it leaves, and its row bound.

#include "worker/skew/hot_row_cache.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ember::worker {
namespace {

using ::testing::ElementsAre;

constexpr int kDim = 2;

// The PS in this test: the row of `id` at version `v` is {id, v}.
std::vector<float> Rows(const std::vector<uint64_t>& ids, float version) {
  std::vector<float> rows;
  for (uint64_t id : ids) {
    rows.push_back(static_cast<float>(id));
    rows.push_back(version);
  }
  return rows;
}

// One pull through the cache at `step` while the PS holds `version`: returns the rows
// the batch gets and fills *pulled with the IDs that went to the PS.
std::vector<float> Pull(HotRowCache& cache, uint64_t step, const std::vector<uint64_t>& ids,
                        const absl::flat_hash_set<uint64_t>* hot, float version,
                        std::vector<uint64_t>* pulled) {
  std::vector<float> rows(ids.size() * kDim, -1.0f);
  HotRowCache::TablePull pull;
  cache.Lookup(0, step, ids, absl::MakeSpan(rows), hot, &pull);
  if (pull.direct) {
    *pulled = ids;
    rows = Rows(ids, version);
  } else {
    *pulled = pull.ids;
    pull.rows = Rows(pull.ids, version);
  }
  cache.Complete(0, step, ids, absl::MakeSpan(rows), &pull);
  return rows;
}

TEST(HotRowCacheTest, ServesAHotRowForAtMostMaxAgeSteps) {
  HotRowCache cache({kDim}, /*max_age=*/2, /*max_rows=*/100);
  const absl::flat_hash_set<uint64_t> hot = {7};
  std::vector<uint64_t> pulled;
  // Step 10 pulls everything and caches 7 (version 10).
  EXPECT_THAT(Pull(cache, 10, {7, 8}, &hot, 10, &pulled), ElementsAre(7, 10, 8, 10));
  EXPECT_THAT(pulled, ElementsAre(7, 8));
  // Steps 11 and 12: 7 comes from the cache, still at version 10; 8 is pulled.
  EXPECT_THAT(Pull(cache, 11, {8, 7}, &hot, 11, &pulled), ElementsAre(8, 11, 7, 10));
  EXPECT_THAT(pulled, ElementsAre(8));
  EXPECT_THAT(Pull(cache, 12, {7}, &hot, 12, &pulled), ElementsAre(7, 10));
  EXPECT_TRUE(pulled.empty());
  // Step 13: the copy is 3 steps old: pulled again (and cached at 13).
  EXPECT_THAT(Pull(cache, 13, {7}, &hot, 13, &pulled), ElementsAre(7, 13));
  EXPECT_THAT(pulled, ElementsAre(7));
  EXPECT_THAT(Pull(cache, 15, {7}, &hot, 15, &pulled), ElementsAre(7, 13));
  EXPECT_EQ(cache.lookups(), 5u);
  EXPECT_EQ(cache.hits(), 3u);
}

TEST(HotRowCacheTest, KeysThatAreNotHotAreNeitherCachedNorCounted) {
  HotRowCache cache({kDim}, 5, 100);
  std::vector<uint64_t> pulled;
  Pull(cache, 1, {1, 2, 3}, nullptr, 1, &pulled);
  const absl::flat_hash_set<uint64_t> none;
  Pull(cache, 2, {1, 2, 3}, &none, 2, &pulled);
  EXPECT_THAT(pulled, ElementsAre(1, 2, 3));
  EXPECT_EQ(cache.lookups(), 0u);
  EXPECT_EQ(cache.rows(), 0u);
  // A key cached while hot is not served once it left the hot set.
  const absl::flat_hash_set<uint64_t> hot = {2};
  Pull(cache, 3, {1, 2, 3}, &hot, 3, &pulled);
  EXPECT_EQ(cache.rows(), 1u);
  EXPECT_EQ(Pull(cache, 4, {2}, &none, 4, &pulled), Rows({2}, 4));
  EXPECT_EQ(Pull(cache, 4, {2}, &hot, 4, &pulled), Rows({2}, 3));
  EXPECT_EQ(cache.lookups(), 2u);
  EXPECT_EQ(cache.hits(), 1u);
}

TEST(HotRowCacheTest, LeavesAPullPlanOfTheRestInOrder) {
  HotRowCache cache({kDim, 3}, 1, 100);
  const absl::flat_hash_set<uint64_t> hot = {2, 4};
  std::vector<uint64_t> pulled;
  Pull(cache, 5, {2, 4}, &hot, 5, &pulled);
  std::vector<uint64_t> ids = {1, 2, 3, 4, 5};
  std::vector<float> rows(ids.size() * kDim, 0);
  HotRowCache::TablePull pull;
  cache.Lookup(0, 6, ids, absl::MakeSpan(rows), &hot, &pull);
  EXPECT_FALSE(pull.direct);
  EXPECT_THAT(pull.ids, ElementsAre(1, 3, 5));
  EXPECT_THAT(pull.index, ElementsAre(0, 2, 4));
  EXPECT_EQ(pull.rows.size(), 3u * kDim);
  EXPECT_TRUE(pull.to_cache.empty());
  // Another table has its own rows.
  std::vector<float> other(3);
  HotRowCache::TablePull other_pull;
  cache.Lookup(1, 6, {2}, absl::MakeSpan(other), &hot, &other_pull);
  EXPECT_TRUE(other_pull.direct);
  EXPECT_THAT(other_pull.to_cache, ElementsAre(0));
}

TEST(HotRowCacheTest, ALatePullNeverReplacesANewerRow) {
  HotRowCache cache({kDim}, 3, 100);
  const absl::flat_hash_set<uint64_t> hot = {9};
  std::vector<uint64_t> pulled;
  Pull(cache, 8, {9}, &hot, 8, &pulled);
  // A pull for an earlier step (which missed: the cached copy is from its future).
  EXPECT_EQ(Pull(cache, 7, {9}, &hot, 7, &pulled), Rows({9}, 7));
  EXPECT_EQ(Pull(cache, 9, {9}, &hot, 9, &pulled), Rows({9}, 8));
}

TEST(HotRowCacheTest, HoldsAtMostMaxRowsAndReusesExpiredSlots) {
  HotRowCache cache({kDim}, /*max_age=*/1, /*max_rows=*/2);
  const absl::flat_hash_set<uint64_t> hot = {1, 2, 3};
  std::vector<uint64_t> pulled;
  Pull(cache, 1, {1, 2, 3}, &hot, 1, &pulled);
  EXPECT_EQ(cache.rows(), 2u);  // 3 found the cache full
  Pull(cache, 2, {1, 2, 3}, &hot, 2, &pulled);
  EXPECT_THAT(pulled, ElementsAre(3));
  // Step 5: 1 and 2 expired; the cache sweeps them to make room for 3.
  Pull(cache, 5, {3}, &hot, 5, &pulled);
  EXPECT_EQ(cache.rows(), 1u);
  EXPECT_EQ(Pull(cache, 6, {3, 1}, &hot, 6, &pulled), (std::vector<float>{3, 5, 1, 6}));
  EXPECT_THAT(pulled, ElementsAre(1));
  EXPECT_EQ(cache.rows(), 2u);
}

}  // namespace
}  // namespace ember::worker
