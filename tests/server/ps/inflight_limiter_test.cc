// Copyright 2026 The Ember Authors.
//
// InflightLimiter (server/ps/inflight_limiter.h), WatchSlots (server/ps/watch_slots.h)
// and the retry hint they attach (common/grpc_status.h). Part of ps_parts_test.

#include "server/ps/inflight_limiter.h"

#include <optional>
#include <utility>

#include "common/grpc_status.h"
#include "gtest/gtest.h"
#include "server/ps/watch_slots.h"

namespace ember {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(InflightLimiterTest, RefusesBeyondTheBytesWithARetryHint) {
  InflightLimiter limiter({.max_calls = 100,
                           .max_bytes = 10 * kMiB,
                           .retry_after = absl::Milliseconds(30),
                           .shard_id = 4});
  absl::StatusOr<InflightLimiter::Ticket> a = limiter.Admit(6 * kMiB);
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<InflightLimiter::Ticket> b = limiter.Admit(4 * kMiB);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(limiter.bytes_in_flight(), 10 * kMiB);
  absl::StatusOr<InflightLimiter::Ticket> c = limiter.Admit(1);
  ASSERT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(c.status().message().find("shard 4 is overloaded"), std::string::npos) << c.status();
  EXPECT_NE(c.status().message().find("--max_inflight_mb=10"), std::string::npos) << c.status();
  ASSERT_EQ(GetRetryAfter(c.status()), absl::Milliseconds(30));
  EXPECT_EQ(limiter.refused(), 1);
  *a = InflightLimiter::Ticket();  // released
  EXPECT_EQ(limiter.bytes_in_flight(), 4 * kMiB);
  EXPECT_TRUE(limiter.Admit(6 * kMiB).ok());
}

TEST(InflightLimiterTest, RefusesBeyondTheCalls) {
  InflightLimiter limiter({.max_calls = 2, .max_bytes = 100 * kMiB});
  absl::StatusOr<InflightLimiter::Ticket> a = limiter.Admit(0);
  absl::StatusOr<InflightLimiter::Ticket> b = limiter.Admit(0);
  ASSERT_TRUE(a.ok() && b.ok());
  const absl::Status c = limiter.Admit(0).status();
  EXPECT_EQ(c.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(c.message().find("--max_inflight_calls=2"), std::string::npos) << c;
  { InflightLimiter::Ticket moved = *std::move(b); }  // a moved ticket releases once
  EXPECT_EQ(limiter.calls_in_flight(), 1);
  EXPECT_TRUE(limiter.Admit(0).ok());
  EXPECT_EQ(limiter.calls_in_flight(), 1);
}

TEST(InflightLimiterTest, OneCallIsAdmittedWhenIdleHoweverLarge) {
  InflightLimiter limiter({.max_calls = 10, .max_bytes = kMiB});
  absl::StatusOr<InflightLimiter::Ticket> big = limiter.Admit(50 * kMiB);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(limiter.Admit(1).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(InflightLimiterTest, DefaultBytesFollowTheMemoryBudget) {
  EXPECT_EQ(InflightBytesFor(1024 * kMiB), 256 * kMiB);
  EXPECT_EQ(InflightBytesFor(64 * kMiB), 64 * kMiB);           // at least 64 MiB
  EXPECT_EQ(InflightBytesFor(64 * 1024 * kMiB), 1024 * kMiB);  // at most 1 GiB
  EXPECT_EQ(InflightBytesFor(0), 1024 * kMiB);                 // unlimited budget
}

TEST(RetryHintTest, SurvivesTheWireAsTrailingMetadata) {
  const absl::Status overloaded = OverloadedError("busy", absl::Milliseconds(75));
  EXPECT_EQ(overloaded.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(GetRetryAfter(overloaded), absl::Milliseconds(75));
  EXPECT_EQ(GetRetryAfter(absl::ResourceExhaustedError("too big")), std::nullopt);
  grpc::ServerContext server_context;
  const grpc::Status wire = ToGrpcStatus(overloaded, &server_context);
  EXPECT_EQ(wire.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(wire.error_message(), "busy");
}

TEST(WatchSlotsTest, OnePeerGetsItsShareAndOthersTheRest) {
  WatchSlots slots({.max_watches = 3, .max_per_peer = 2}, /*shard_id=*/1);
  absl::StatusOr<WatchSlots::Slot> a1 = slots.Take("10.0.0.1");
  absl::StatusOr<WatchSlots::Slot> a2 = slots.Take("10.0.0.1");
  ASSERT_TRUE(a1.ok() && a2.ok());
  const absl::Status a3 = slots.Take("10.0.0.1").status();
  EXPECT_EQ(a3.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(a3.message().find("--max_watches_per_peer=2"), std::string::npos) << a3;
  EXPECT_TRUE(GetRetryAfter(a3).has_value());
  absl::StatusOr<WatchSlots::Slot> b1 = slots.Take("10.0.0.2");
  ASSERT_TRUE(b1.ok()) << b1.status();
  const absl::Status c1 = slots.Take("10.0.0.3").status();
  EXPECT_NE(c1.message().find("--max_watches=3"), std::string::npos) << c1;
  *a1 = WatchSlots::Slot();
  EXPECT_EQ(slots.open(), 2);
  EXPECT_EQ(slots.open_for("10.0.0.1"), 1);
  EXPECT_TRUE(slots.Take("10.0.0.3").ok());
  EXPECT_EQ(slots.open(), 2);  // the temporary slot above was released
}

TEST(WatchSlotsTest, PeerAddressDropsThePort) {
  EXPECT_EQ(PeerAddress("ipv4:127.0.0.1:5000"), "127.0.0.1");
  EXPECT_EQ(PeerAddress("ipv6:[::1]:5000"), "[::1]");
  EXPECT_EQ(PeerAddress("ipv6:[::ffff:127.0.0.1]:41234"), "[::ffff:127.0.0.1]");
  EXPECT_EQ(PeerAddress("unix:/tmp/sock"), "unix:/tmp/sock");
}

}  // namespace
}  // namespace ember
