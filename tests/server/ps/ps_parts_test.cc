// Copyright 2026 The Ember Authors.
//
// Unit tests of the pieces under server/ps/ that ps_server_test.cc only reaches
// through a process: float16 conversion, push dedup and status translation.

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "common/clock.h"
#include "common/float16.h"
#include "common/grpc_status.h"
#include "gtest/gtest.h"
#include "server/ps/push_dedup.h"

namespace ember {
namespace {

TEST(Float16Test, EveryHalfRoundTripsExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f)))) << h;
      continue;
    }
    EXPECT_EQ(FloatToHalf(f), h) << h;
  }
}

TEST(Float16Test, KnownValues) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // rounds up to +Inf
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -26)), 0x0000);  // below half of it
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
}

TEST(Float16Test, TiesRoundToEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to the even mantissa (1.0).
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Just above the tie rounds up.
  EXPECT_EQ(FloatToHalf(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3c01);
  // Subnormal tie: 1.5 * 2^-24 lies between 1 and 2 units: to even (2).
  EXPECT_EQ(FloatToHalf(1.5f * std::ldexp(1.0f, -24)), 0x0002);
  EXPECT_EQ(FloatToHalf(0.5f * std::ldexp(1.0f, -24)), 0x0000);
}

TEST(PushDedupTest, RetryReturnsFirstVersion) {
  PushDedup dedup(PushDedupOptions{.window = 4});
  absl::StatusOr<PushDedup::Ticket> t = dedup.Begin(1, 1, 0);
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->duplicate);
  dedup.Finish(1, 1, /*applied=*/true, /*version=*/10);
  t = dedup.Begin(1, 1, 0);
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->duplicate);
  EXPECT_EQ(t->version, 10u);
  // Another worker's sequence 1 is independent.
  t = dedup.Begin(2, 1, 0);
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->duplicate);
}

TEST(PushDedupTest, InFlightAndFailedPushes) {
  PushDedup dedup(PushDedupOptions{.window = 4});
  ASSERT_TRUE(dedup.Begin(1, 5, 0).ok());
  EXPECT_EQ(dedup.Begin(1, 5, 0).status().code(), absl::StatusCode::kUnavailable);
  dedup.Finish(1, 5, /*applied=*/false, 0);
  absl::StatusOr<PushDedup::Ticket> t = dedup.Begin(1, 5, 0);  // a failed push may be retried
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->duplicate);
  EXPECT_EQ(dedup.Begin(1, 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PushDedupTest, OutOfOrderWithinWindowAndTooOld) {
  PushDedup dedup(PushDedupOptions{.window = 4});
  for (uint64_t seq : {1, 2, 3, 4, 5, 6, 7, 8, 10}) {
    ASSERT_TRUE(dedup.Begin(1, seq, 0).ok()) << seq;
    dedup.Finish(1, seq, true, seq * 100);
  }
  // 9 arrives late but inside (10 - 4, 10]: applied once.
  absl::StatusOr<PushDedup::Ticket> t = dedup.Begin(1, 9, 0);
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->duplicate);
  dedup.Finish(1, 9, true, 1100);
  EXPECT_TRUE(dedup.Begin(1, 9, 0)->duplicate);
  EXPECT_TRUE(dedup.Begin(1, 7, 0)->duplicate);
  // 6 fell out of the window: unknown whether applied.
  EXPECT_EQ(dedup.Begin(1, 6, 0).status().code(), absl::StatusCode::kAborted);
}

// Issue 28 item 1.7: a (worker, sequence) reused for another payload is refused, not
// answered OK with the payload dropped; applied or in flight.
TEST(PushDedupTest, SameSequenceWithAnotherPayloadIsRefused) {
  PushDedup dedup(PushDedupOptions{.window = 4});
  ASSERT_TRUE(dedup.Begin(7, 3, /*digest=*/111).ok());
  absl::Status in_flight = dedup.Begin(7, 3, 222).status();
  EXPECT_EQ(in_flight.code(), absl::StatusCode::kFailedPrecondition) << in_flight;
  EXPECT_EQ(dedup.Begin(7, 3, 111).status().code(), absl::StatusCode::kUnavailable);
  dedup.Finish(7, 3, /*applied=*/true, /*version=*/40);
  absl::Status applied = dedup.Begin(7, 3, 222).status();
  EXPECT_EQ(applied.code(), absl::StatusCode::kFailedPrecondition) << applied;
  EXPECT_NE(applied.message().find("sequence 3 of worker 7"), absl::string_view::npos) << applied;
  absl::StatusOr<PushDedup::Ticket> retry = dedup.Begin(7, 3, 111);
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_TRUE(retry->duplicate);
  EXPECT_EQ(retry->version, 40u);
}

// A sequence at the top of the range would leave the worker no sequence above it.
TEST(PushDedupTest, SequencesFromTwoToTheSixtyThreeAreRefusedAndPoisonNothing) {
  PushDedup dedup(PushDedupOptions{.window = 4});
  for (uint64_t bad : {~uint64_t{0}, uint64_t{1} << 63}) {
    absl::Status s = dedup.Begin(7, bad, 0).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  }
  ASSERT_TRUE(dedup.Begin(7, PushDedup::kMaxSequence, 0).ok());
  dedup.Finish(7, PushDedup::kMaxSequence, /*applied=*/false, 0);
  // The refused and the failed ones left the worker's next pushes alone.
  absl::StatusOr<PushDedup::Ticket> next = dedup.Begin(7, 1, 0);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_FALSE(next->duplicate);
}

// Idle workers are forgotten after idle_ttl; active ones and ones with a push in flight
// are kept. With a fake clock: no sleeping.
TEST(PushDedupTest, IdleWorkersExpireAndActiveOnesStay) {
  FakeClock clock;
  PushDedup dedup(PushDedupOptions{.window = 4, .idle_ttl = absl::Minutes(60), .clock = &clock});
  for (uint64_t worker = 1; worker <= 100; ++worker) {
    ASSERT_TRUE(dedup.Begin(worker, 1, 0).ok());
    dedup.Finish(worker, 1, /*applied=*/true, worker);
  }
  ASSERT_TRUE(dedup.Begin(200, 1, 0).ok());  // stays in flight
  EXPECT_EQ(dedup.workers(), 101u);
  clock.Advance(absl::ToInt64Microseconds(absl::Minutes(40)));
  // Worker 1 is active: its retry is still a duplicate (and refreshes it).
  absl::StatusOr<PushDedup::Ticket> retry = dedup.Begin(1, 1, 0);
  ASSERT_TRUE(retry.ok());
  EXPECT_TRUE(retry->duplicate);
  EXPECT_EQ(dedup.workers(), 101u);
  clock.Advance(absl::ToInt64Microseconds(absl::Minutes(30)));  // 70 min: 2..100 idle 70 min
  ASSERT_TRUE(dedup.Begin(300, 1, 0).ok());                     // any Begin sweeps
  dedup.Finish(300, 1, true, 1);
  EXPECT_EQ(dedup.workers(), 3u);  // 1 (30 min idle), 200 (in flight), 300
  retry = dedup.Begin(1, 1, 0);
  ASSERT_TRUE(retry.ok());
  EXPECT_TRUE(retry->duplicate);
  // An expired worker starts over: its sequence 1 is new again (no retry can still
  // come after an hour; push_dedup.h "Expiry").
  absl::StatusOr<PushDedup::Ticket> fresh = dedup.Begin(2, 1, 0);
  ASSERT_TRUE(fresh.ok());
  EXPECT_FALSE(fresh->duplicate);
}

TEST(GrpcStatusTest, CodesAndWrongShardSurviveTranslation) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus(), nullptr).ok());
  const grpc::Status nf = ToGrpcStatus(absl::NotFoundError("table x"), nullptr);
  EXPECT_EQ(nf.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(nf.error_message(), "table x");
  EXPECT_EQ(FromGrpcStatus(nf, nullptr).code(), absl::StatusCode::kNotFound);

  const absl::Status wrong = WrongShardError(17, 3, 9, "test");
  EXPECT_EQ(wrong.code(), absl::StatusCode::kFailedPrecondition);
  std::optional<v1::WrongShard> detail = GetWrongShard(wrong);
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->slot(), 17u);
  EXPECT_EQ(detail->owner(), 3u);
  EXPECT_EQ(detail->epoch(), 9u);
  EXPECT_FALSE(GetWrongShard(absl::FailedPreconditionError("plain")).has_value());
}

}  // namespace
}  // namespace ember
