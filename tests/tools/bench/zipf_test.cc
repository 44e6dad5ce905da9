// Copyright 2026 The Ember Authors.

#include "tools/bench/zipf.h"

#include <cmath>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "gtest/gtest.h"

namespace ember::bench {
namespace {

// Frequencies of `draws` samples match the exact mass 1/(r+1)^s / H(n, s) to within
// 5 standard errors, for every rank.
void ExpectMatchesPmf(uint64_t n, double s, int draws) {
  auto zipf = ZipfSampler::Create(n, s, /*seed=*/7);
  ASSERT_TRUE(zipf.ok()) << zipf.status();
  std::vector<int> counts(n);
  for (int i = 0; i < draws; ++i) {
    const uint64_t r = zipf->Next();
    ASSERT_LT(r, n);
    ++counts[r];
  }
  double norm = 0;
  for (uint64_t r = 0; r < n; ++r) norm += std::pow(r + 1.0, -s);
  for (uint64_t r = 0; r < n; ++r) {
    const double p = std::pow(r + 1.0, -s) / norm;
    const double sd = std::sqrt(draws * p * (1 - p));
    EXPECT_NEAR(counts[r], draws * p, 5 * sd + 1) << "rank " << r << " s " << s;
  }
}

TEST(ZipfSamplerTest, MatchesExactMassFunction) {
  ExpectMatchesPmf(10, 1.1, 1'000'000);
  ExpectMatchesPmf(50, 0.8, 1'000'000);
  ExpectMatchesPmf(20, 1.0, 1'000'000);  // the s = 1 limit of the integrals
  ExpectMatchesPmf(5, 3.0, 1'000'000);
}

TEST(ZipfSamplerTest, HottestRankShareAtTenMillion) {
  // P(rank 0) = 1 / H(1e7, 1.1); H from the Euler-Maclaurin tail.
  const double s = 1.1, n = 1e7;
  double h = 0;
  for (int k = 1; k <= 1000; ++k) h += std::pow(k, -s);
  h += (std::pow(n, 1 - s) - std::pow(1000.0, 1 - s)) / (1 - s) +
       0.5 * (std::pow(n, -s) - std::pow(1000.0, -s));
  auto zipf = ZipfSampler::Create(10'000'000, s, /*seed=*/3);
  ASSERT_TRUE(zipf.ok());
  const int draws = 2'000'000;
  int zeros = 0;
  for (int i = 0; i < draws; ++i) zeros += zipf->Next() == 0;
  EXPECT_NEAR(zeros / static_cast<double>(draws), 1 / h, 0.003);
}

TEST(ZipfSamplerTest, SingleElementAndDeterminism) {
  auto one = ZipfSampler::Create(1, 1.1, 1);
  ASSERT_TRUE(one.ok());
  for (int i = 0; i < 100; ++i) EXPECT_EQ(one->Next(), 0u);

  auto a = ZipfSampler::Create(1000, 1.1, 42);
  auto b = ZipfSampler::Create(1000, 1.1, 42);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(a->Next(), b->Next());
}

TEST(ZipfSamplerTest, RejectsBadArguments) {
  EXPECT_FALSE(ZipfSampler::Create(0, 1.1, 1).ok());
  EXPECT_FALSE(ZipfSampler::Create(10, 0, 1).ok());
  EXPECT_FALSE(ZipfSampler::Create(10, -1, 1).ok());
  EXPECT_FALSE(ZipfSampler::Create(10, NAN, 1).ok());
}

TEST(IdOfRankTest, ScattersRanksWithoutCollisions) {
  absl::flat_hash_set<uint64_t> ids;
  for (uint64_t r = 0; r < 100'000; ++r) ids.insert(IdOfRank(r));
  EXPECT_EQ(ids.size(), 100'000u);
  EXPECT_GT(IdOfRank(1) - IdOfRank(0), 1u << 20);  // neighbors are not adjacent
}

}  // namespace
}  // namespace ember::bench
