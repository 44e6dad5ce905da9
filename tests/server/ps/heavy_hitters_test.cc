// Copyright 2026 The Ember Authors.
//
// HeavyHitters (server/ps/heavy_hitters.h): the top keys of skewed streams with known
// frequencies, the Space-Saving error bounds, decay by the half-life (explicit times,
// no sleeping), unbiased sampling and edge cases.

#include "server/ps/heavy_hitters.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace ember {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1'000'000);
constexpr double kLn2 = 0.69314718055994530942;

// A shuffled stream where key k (1-based) occurs counts[k - 1] times.
std::vector<uint64_t> Stream(const std::vector<int>& counts, uint32_t seed) {
  std::vector<uint64_t> ids;
  for (size_t k = 0; k < counts.size(); ++k) ids.insert(ids.end(), counts[k], k + 1);
  std::mt19937_64 rng(seed);
  std::shuffle(ids.begin(), ids.end(), rng);
  return ids;
}

// Zipf-like counts: key k occurs floor(scale / k^s) times (at least once).
std::vector<int> ZipfCounts(int keys, double s, double scale) {
  std::vector<int> counts(keys);
  for (int k = 1; k <= keys; ++k) {
    counts[k - 1] = std::max(1, static_cast<int>(scale / std::pow(k, s)));
  }
  return counts;
}

TEST(HeavyHittersTest, FindsTheTopKeysOfAZipfStreamWithinTheErrorBounds) {
  const std::vector<int> counts = ZipfCounts(/*keys=*/5000, /*s=*/1.1, /*scale=*/20000);
  HeavyHitters hh({.capacity = 256, .half_life = absl::Seconds(10), .sample_every = 1});
  const std::vector<uint64_t> stream = Stream(counts, 7);
  // All at one instant: the decayed counts are the plain counts.
  for (size_t i = 0; i < stream.size(); i += 1000) {
    hh.Record(absl::MakeConstSpan(stream).subspan(i, 1000), kStart);
  }
  const double lambda = kLn2 / 10.0;
  const std::vector<v1::HotKey> top = hh.Top(20, kStart);
  ASSERT_EQ(top.size(), 20u);
  for (size_t i = 0; i < top.size(); ++i) {
    // The true top 20 in order: their gaps are far above the error bound here.
    EXPECT_EQ(top[i].id(), i + 1) << "rank " << i;
    const double truth = counts[top[i].id() - 1] * lambda;
    EXPECT_LE(truth, top[i].rate() * (1 + 1e-9)) << "never underestimates";
    EXPECT_GE(truth, (top[i].rate() - top[i].error()) * (1 - 1e-9)) << "error bound";
    if (i > 0) {
      EXPECT_GE(top[i - 1].rate(), top[i].rate());
    }
  }
  // Every key's overestimate is at most total / capacity.
  const double total = static_cast<double>(stream.size());
  for (const v1::HotKey& key : hh.Top(256, kStart)) {
    EXPECT_LE(key.error(), total / 256 * lambda * (1 + 1e-9));
  }
  EXPECT_NEAR(hh.TotalRate(kStart), total * lambda, total * lambda * 1e-9);
  EXPECT_EQ(hh.size(), 256u);
}

TEST(HeavyHittersTest, EveryKeyAboveTheMinimumIsTracked) {
  // 8 heavy keys among 10k singletons with capacity 16: the heavy ones survive.
  std::vector<uint64_t> stream;
  for (uint64_t k = 1; k <= 8; ++k) stream.insert(stream.end(), 2000, k);
  for (uint64_t k = 100; k < 10100; ++k) stream.push_back(k);
  std::mt19937_64 rng(3);
  std::shuffle(stream.begin(), stream.end(), rng);
  HeavyHitters hh({.capacity = 16, .half_life = absl::Seconds(5), .sample_every = 1});
  hh.Record(stream, kStart);
  std::vector<v1::HotKey> top = hh.Top(8, kStart);
  std::vector<uint64_t> ids;
  for (const v1::HotKey& key : top) ids.push_back(key.id());
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(HeavyHittersTest, RatesHalveWithEachHalfLife) {
  HeavyHitters hh({.capacity = 8, .half_life = absl::Seconds(10), .sample_every = 1});
  std::vector<uint64_t> burst(1024, 42);
  hh.Record(burst, kStart);
  const double r0 = hh.Top(1, kStart)[0].rate();
  EXPECT_NEAR(r0, 1024 * kLn2 / 10.0, 1e-9);
  EXPECT_NEAR(hh.Top(1, kStart + absl::Seconds(10))[0].rate(), r0 / 2, r0 * 1e-9);
  EXPECT_NEAR(hh.Top(1, kStart + absl::Seconds(30))[0].rate(), r0 / 8, r0 * 1e-9);
  EXPECT_NEAR(hh.TotalRate(kStart + absl::Seconds(20)), r0 / 4, r0 * 1e-9);

  // A key that is newer but served less at its time overtakes the old one once the
  // old one has decayed enough: 1024 at t=0 vs 300 at t=20 s (1024 / 4 = 256 < 300).
  std::vector<uint64_t> later(300, 7);
  hh.Record(later, kStart + absl::Seconds(20));
  const std::vector<v1::HotKey> top = hh.Top(2, kStart + absl::Seconds(20));
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].id(), 7u);
  EXPECT_EQ(top[1].id(), 42u);
}

TEST(HeavyHittersTest, SteadyRateIsMeasuredInKeysPerSecond) {
  // Key 1 at 200/s and key 2 at 50/s for 20 half-lives (1 s), in 10 ms ticks.
  HeavyHitters hh({.capacity = 4, .half_life = absl::Seconds(1), .sample_every = 1});
  absl::Time t = kStart;
  for (int tick = 0; tick < 2000; ++tick) {
    std::vector<uint64_t> ids(2, 1);
    if (tick % 2 == 0) ids.push_back(2);
    hh.Record(ids, t);
    t += absl::Milliseconds(10);
  }
  const std::vector<v1::HotKey> top = hh.Top(2, t);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].id(), 1u);
  EXPECT_NEAR(top[0].rate(), 200, 200 * 0.02);
  EXPECT_NEAR(top[1].rate(), 50, 50 * 0.02);
  EXPECT_NEAR(hh.TotalRate(t), 250, 250 * 0.02);
}

TEST(HeavyHittersTest, RenormalisationKeepsLongRunsFinite) {
  // 10,000 half-lives: the forward-decay weights are rescaled many times.
  HeavyHitters hh({.capacity = 4, .half_life = absl::Milliseconds(10), .sample_every = 1});
  absl::Time t = kStart;
  for (int tick = 0; tick < 100000; ++tick) {
    const uint64_t ids[] = {5, 5, 6};
    hh.Record(ids, t);
    t += absl::Milliseconds(1);
  }
  const std::vector<v1::HotKey> top = hh.Top(2, t);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].id(), 5u);
  EXPECT_TRUE(std::isfinite(top[0].rate()));
  EXPECT_NEAR(top[0].rate(), 2000, 2000 * 0.05);  // 2 per ms
  EXPECT_NEAR(top[1].rate(), 1000, 1000 * 0.05);
  // Reading far in the future or the past stays finite.
  EXPECT_TRUE(std::isfinite(hh.Top(1, t + absl::Hours(1000))[0].rate()));
  EXPECT_TRUE(std::isfinite(hh.TotalRate(kStart - absl::Hours(1000))));
}

TEST(HeavyHittersTest, SamplingIsUnbiased) {
  const std::vector<int> counts = ZipfCounts(/*keys=*/2000, /*s=*/1.2, /*scale=*/40000);
  const std::vector<uint64_t> stream = Stream(counts, 11);
  HeavyHitters hh({.capacity = 128, .half_life = absl::Seconds(10), .sample_every = 8});
  for (size_t i = 0; i < stream.size(); i += 512) {
    hh.Record(absl::MakeConstSpan(stream).subspan(i, std::min<size_t>(512, stream.size() - i)),
              kStart);
  }
  const double lambda = kLn2 / 10.0;
  const std::vector<v1::HotKey> top = hh.Top(5, kStart);
  ASSERT_EQ(top.size(), 5u);
  for (size_t i = 0; i < top.size(); ++i) {
    EXPECT_EQ(top[i].id(), i + 1);
    // Standard deviation ~ sqrt(7 * count) (<= 3.5% here): within 15%.
    const double truth = counts[i] * lambda;
    EXPECT_NEAR(top[i].rate(), truth, truth * 0.15) << "key " << i + 1;
  }
  // The total counts every key, sampled or not.
  EXPECT_NEAR(hh.TotalRate(kStart), stream.size() * lambda, stream.size() * lambda * 1e-9);
}

TEST(HeavyHittersTest, EmptyAndTinySummaries) {
  HeavyHitters empty({.capacity = 4, .sample_every = 1});
  EXPECT_TRUE(empty.Top(10, kStart).empty());
  EXPECT_EQ(empty.TotalRate(kStart), 0);
  empty.Record({}, kStart);
  EXPECT_EQ(empty.size(), 0u);

  HeavyHitters none({.capacity = 0, .sample_every = 1});
  const uint64_t ids[] = {1, 2, 3};
  none.Record(ids, kStart);
  EXPECT_TRUE(none.Top(10, kStart).empty());
  EXPECT_GT(none.TotalRate(kStart), 0);

  // Capacity 1: the one counter always holds the last new key with the error bound.
  HeavyHitters one({.capacity = 1, .half_life = absl::Seconds(1), .sample_every = 1});
  const uint64_t seq[] = {1, 1, 1, 2};
  one.Record(seq, kStart);
  std::vector<v1::HotKey> top = one.Top(5, kStart);
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].id(), 2u);
  EXPECT_NEAR(top[0].rate(), 4 * kLn2, 1e-9);   // 3 (inherited) + 1
  EXPECT_NEAR(top[0].error(), 3 * kLn2, 1e-9);  // true count 1 = 4 - 3
  EXPECT_TRUE(one.Top(0, kStart).empty());
}

}  // namespace
}  // namespace ember
