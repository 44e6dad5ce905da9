// Copyright 2026 The Ember Authors.
//
// DivideMemoryLimit (server/ps/memory_limit.h): the shares of one memory cap, what an
// explicit part's flag does to them, and the caps refused. Part of ps_parts_test.

#include "server/ps/memory_limit.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace ember {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr double kHardLimitFactor = 1.1;

int64_t Sum(const MemoryShares& s) {
  return s.baseline + s.inflight + s.rocksdb + s.change_log + s.replicas + s.memory_tier;
}

TEST(MemoryLimitTest, SharesAddUpToTheCap) {
  for (int64_t cap_mb : {256, 512, 4096}) {
    absl::StatusOr<MemoryShares> s = DivideMemoryLimit(cap_mb, {}, kHardLimitFactor);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(Sum(*s), cap_mb * kMiB) << cap_mb;
    EXPECT_EQ(s->baseline, kMemoryBaselineBytes);
    EXPECT_EQ(s->inflight, cap_mb * kMiB / 8);
    EXPECT_EQ(s->rocksdb, cap_mb * kMiB / 4);
    EXPECT_EQ(s->block_cache_bytes, s->rocksdb);
    EXPECT_EQ(s->write_buffer_manager_bytes, s->rocksdb / 2);
    EXPECT_LE(s->write_buffer_bytes, s->write_buffer_manager_bytes);
    EXPECT_EQ(s->change_log, static_cast<int64_t>(s->change_log_entries) * 32);
    EXPECT_EQ(s->max_inflight_bytes, s->inflight / 2);
    // The tier's hard limit (budget x 1.1) stays within its share.
    EXPECT_LE(static_cast<int64_t>(s->memory_budget_bytes * kHardLimitFactor), s->memory_tier);
    EXPECT_GE(s->memory_tier, kMinMemoryTierBytes);
  }
}

TEST(MemoryLimitTest, AnExplicitPartReplacesItsShareAndTheTierTakesTheRest) {
  MemoryParts parts;
  parts.block_cache_mb = 32;
  parts.change_log_entries = 1000;
  parts.max_inflight_mb = 8;
  absl::StatusOr<MemoryShares> s = DivideMemoryLimit(512, parts, kHardLimitFactor);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->rocksdb, 32 * kMiB);
  EXPECT_EQ(s->change_log_entries, 1000u);
  EXPECT_EQ(s->max_inflight_bytes, 8 * kMiB);
  EXPECT_EQ(Sum(*s), 512 * kMiB);

  // An explicit tier leaves the rest unassigned.
  MemoryParts tier;
  tier.memory_budget_mb = 100;
  s = DivideMemoryLimit(512, tier, kHardLimitFactor);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->memory_budget_bytes, 100 * kMiB);
  EXPECT_LT(Sum(*s), 512 * kMiB);
}

TEST(MemoryLimitTest, RefusedCapsNameTheFlags) {
  struct Case {
    int64_t cap_mb;
    MemoryParts parts;
    std::string message;
  };
  MemoryParts big_tier, no_inflight, big_write_buffer, big_cache, unlimited_tier;
  big_tier.memory_budget_mb = 400;
  no_inflight.max_inflight_mb = 0;
  big_write_buffer.write_buffer_mb = 100;
  big_cache.block_cache_mb = 400;
  unlimited_tier.memory_budget_mb = 0;
  const Case cases[] = {
      {128, {}, "--memory_limit_mb=128 is too small"},
      {512, big_tier, "--memory_limit_mb=512 is less than its shares"},
      {512, no_inflight, "conflicts with --max_inflight_mb=0"},
      {512, big_write_buffer, "--write_buffer_mb=100 exceeds"},
      {512, big_cache, "--memory_limit_mb=512 is too small"},
      {512, unlimited_tier, "conflicts with --memory_budget_mb=0"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<MemoryShares> s = DivideMemoryLimit(c.cap_mb, c.parts, kHardLimitFactor);
    ASSERT_FALSE(s.ok()) << c.message;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(s.status().message(), c.message)) << s.status();
  }
  // The smallest cap that works: the tier gets at least its minimum.
  EXPECT_TRUE(DivideMemoryLimit(192, {}, kHardLimitFactor).ok());
}

}  // namespace
}  // namespace ember
