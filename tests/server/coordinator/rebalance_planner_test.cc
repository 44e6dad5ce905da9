// Copyright 2026 The Ember Authors.

#include "server/coordinator/rebalance_planner.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ember {
namespace {

using ::testing::HasSubstr;

RebalanceInput BySlots(SlotMap map, std::vector<uint32_t> shards) {
  RebalanceInput in;
  in.map = std::move(map);
  in.shards = std::move(shards);
  in.slot_weight.assign(kNumSlots, 1);
  return in;
}

// Per-shard slots and weight of `owners`, for every shard in `ids`, ascending.
std::map<uint32_t, std::pair<uint32_t, uint64_t>> Tally(const std::vector<uint32_t>& owners,
                                                        const std::vector<uint64_t>& weight,
                                                        const std::set<uint32_t>& ids) {
  std::map<uint32_t, std::pair<uint32_t, uint64_t>> t;
  for (uint32_t id : ids) t[id] = {0, 0};
  for (uint32_t s = 0; s < kNumSlots; ++s) {
    t[owners[s]].first += 1;
    t[owners[s]].second += weight[s];
  }
  return t;
}

std::map<uint32_t, std::pair<uint32_t, uint64_t>> FromWeights(
    const google::protobuf::RepeatedPtrField<v1::ShardWeight>& ws) {
  std::map<uint32_t, std::pair<uint32_t, uint64_t>> t;
  uint32_t prev = 0;
  bool first = true;
  for (const v1::ShardWeight& w : ws) {
    EXPECT_TRUE(first || w.shard_id() > prev) << "not ascending at shard " << w.shard_id();
    first = false;
    prev = w.shard_id();
    t[w.shard_id()] = {w.slots(), w.weight()};
  }
  return t;
}

// Checks the plan's invariants against `in` and returns the owners after the moves.
std::vector<uint32_t> CheckAndApply(const RebalanceInput& in,
                                    const v1::PlanRebalanceResponse& plan) {
  EXPECT_EQ(plan.epoch(), in.map.epoch());
  std::set<uint32_t> ids(in.shards.begin(), in.shards.end());
  ids.insert(in.drain.begin(), in.drain.end());
  for (uint32_t o : in.map.Shards()) ids.insert(o);

  std::vector<uint32_t> owners = in.map.owners();
  std::vector<bool> seen(kNumSlots, false);
  for (const v1::SlotMove& move : plan.spec().moves()) {
    EXPECT_NE(move.source(), move.target());
    EXPECT_GT(move.ranges_size(), 0);
    absl::StatusOr<std::vector<uint32_t>> slots = FromRanges(move.ranges());
    EXPECT_TRUE(slots.ok()) << slots.status();
    if (!slots.ok()) continue;
    EXPECT_LE(slots->size(), in.max_slots_per_move);
    uint64_t weight = 0;
    for (uint32_t s : *slots) {
      EXPECT_FALSE(seen[s]) << "slot " << s << " is in two moves";
      seen[s] = true;
      EXPECT_EQ(in.map.OwnerOf(s), move.source()) << "slot " << s;
      owners[s] = move.target();
      weight += in.slot_weight[s];
    }
    EXPECT_EQ(move.weight(), weight);
  }
  EXPECT_EQ(FromWeights(plan.before()), Tally(in.map.owners(), in.slot_weight, ids));
  EXPECT_EQ(FromWeights(plan.after()), Tally(owners, in.slot_weight, ids));
  for (uint32_t d : in.drain) {
    for (uint32_t s = 0; s < kNumSlots; ++s) EXPECT_NE(owners[s], d) << "slot " << s;
  }
  return owners;
}

// Slots moved from each source to `target`.
std::map<uint32_t, uint32_t> MovedTo(const v1::PlanRebalanceResponse& plan, uint32_t target) {
  std::map<uint32_t, uint32_t> from;
  for (const v1::SlotMove& move : plan.spec().moves()) {
    if (move.target() != target) continue;
    for (const v1::SlotRange& r : move.ranges()) from[move.source()] += r.last() - r.first() + 1;
  }
  return from;
}

int TotalRanges(const v1::PlanRebalanceResponse& plan) {
  int n = 0;
  for (const v1::SlotMove& move : plan.spec().moves()) n += move.ranges_size();
  return n;
}

void ExpectWithinTolerance(const v1::PlanRebalanceResponse& plan, const std::set<uint32_t>& targets,
                           double tolerance, bool by_slots) {
  double total = 0;
  for (const v1::ShardWeight& w : plan.after()) {
    total += by_slots ? w.slots() : static_cast<double>(w.weight());
  }
  const double mean = total / static_cast<double>(targets.size());
  for (const v1::ShardWeight& w : plan.after()) {
    if (!targets.count(w.shard_id())) continue;
    const double v = by_slots ? w.slots() : static_cast<double>(w.weight());
    EXPECT_LE(std::fabs(v - mean), tolerance * mean) << "shard " << w.shard_id();
  }
}

TEST(RebalancePlannerTest, GrowTwoToThreeBySlots) {
  RebalanceInput in = BySlots(SlotMap::Even({0, 1}, 7), {0, 1, 2});
  absl::StatusOr<v1::PlanRebalanceResponse> plan = PlanRebalance(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  CheckAndApply(in, *plan);
  for (const v1::ShardWeight& w : plan->after()) {
    EXPECT_TRUE(w.slots() == 5461 || w.slots() == 5462) << w.ShortDebugString();
  }
  std::map<uint32_t, uint32_t> from = MovedTo(*plan, 2);
  EXPECT_EQ(from.size(), 2u);
  EXPECT_NEAR(from[0], from[1], 2);
  for (const v1::SlotMove& move : plan->spec().moves()) EXPECT_EQ(move.target(), 2u);
  // Contiguous runs from the end of each donor's range: one range per split move.
  EXPECT_EQ(TotalRanges(*plan), plan->spec().moves_size());
  EXPECT_LE(plan->spec().moves_size(), 6);
}

TEST(RebalancePlannerTest, AllZeroWeightsBalanceSlotCounts) {
  RebalanceInput in = BySlots(SlotMap::Even({0, 1}, 7), {0, 1, 2});
  in.slot_weight.assign(kNumSlots, 0);  // a fresh cluster, by rows
  absl::StatusOr<v1::PlanRebalanceResponse> plan = PlanRebalance(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  CheckAndApply(in, *plan);
  ASSERT_GT(plan->spec().moves_size(), 0);
  for (const v1::ShardWeight& w : plan->after()) {
    EXPECT_TRUE(w.slots() == 5461 || w.slots() == 5462) << w.ShortDebugString();
    EXPECT_EQ(w.weight(), 0u);
  }
}

TEST(RebalancePlannerTest, ZeroToleranceEvensSlotCountsExactly) {
  RebalanceInput in = BySlots(SlotMap::Even({0, 1, 2}, 3), {0, 1, 2, 3, 4});
  in.tolerance = 0;
  absl::StatusOr<v1::PlanRebalanceResponse> plan = PlanRebalance(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  CheckAndApply(in, *plan);
  for (const v1::ShardWeight& w : plan->after()) {
    EXPECT_TRUE(w.slots() == 3276 || w.slots() == 3277) << w.ShortDebugString();
  }
}

// Shard 0 holds three times the rows of the others, with a few hot slots.
std::vector<uint64_t> SkewedWeights(const SlotMap& map, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> w(kNumSlots);
  for (uint32_t s = 0; s < kNumSlots; ++s) {
    w[s] = rng() % 1000;
    if (map.OwnerOf(s) == 0) w[s] *= 3;
    if (rng() % 500 == 0) w[s] += 20000;
    if (rng() % 50 == 0) w[s] = 0;
  }
  return w;
}

TEST(RebalancePlannerTest, GrowThreeToFourByRowsWithSkewedWeights) {
  RebalanceInput in;
  in.map = SlotMap::Even({0, 1, 2}, 11);
  in.shards = {0, 1, 2, 3};
  in.slot_weight = SkewedWeights(in.map, 1);
  absl::StatusOr<v1::PlanRebalanceResponse> plan = PlanRebalance(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  CheckAndApply(in, *plan);
  ExpectWithinTolerance(*plan, {0, 1, 2, 3}, in.tolerance, /*by_slots=*/false);
  // Shard 0 was the heaviest: it gives the most.
  std::map<uint32_t, uint32_t> to3 = MovedTo(*plan, 3);
  EXPECT_GT(to3[0], 0u);
}

TEST(RebalancePlannerTest, DrainOneOfThreeSplitsItsSlotsEvenly) {
  for (bool listed_in_shards : {false, true}) {
    SCOPED_TRACE(listed_in_shards);
    RebalanceInput in =
        BySlots(SlotMap::Even({0, 1, 2}, 5),
                listed_in_shards ? std::vector<uint32_t>{0, 1, 2} : std::vector<uint32_t>{0, 1});
    in.drain = {2};
    absl::StatusOr<v1::PlanRebalanceResponse> plan = PlanRebalance(in);
    ASSERT_TRUE(plan.ok()) << plan.status();
    CheckAndApply(in, *plan);
    std::map<uint32_t, std::pair<uint32_t, uint64_t>> after = FromWeights(plan->after());
    EXPECT_EQ(after[2].first, 0u);
    EXPECT_NEAR(after[0].first, 8192, 1);
    EXPECT_NEAR(after[1].first, 8192, 1);
    std::map<uint32_t, uint32_t> from2;
    for (const v1::SlotMove& move : plan->spec().moves()) {
      EXPECT_EQ(move.source(), 2u);
      for (const v1::SlotRange& r : move.ranges()) from2[move.target()] += r.last() - r.first() + 1;
    }
    EXPECT_NEAR(from2[0], from2[1], 2);
  }
}

TEST(RebalancePlannerTest, DrainByRowsThenEvens) {
  RebalanceInput in;
  in.map = SlotMap::Even({0, 1, 2, 3}, 2);
  in.shards = {0, 1, 2, 3, 4};
  in.drain = {1, 3, 9};  // 9 owns nothing
  in.slot_weight = SkewedWeights(in.map, 2);
  absl::StatusOr<v1::PlanRebalanceResponse> plan = PlanRebalance(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  CheckAndApply(in, *plan);
  ExpectWithinTolerance(*plan, {0, 2, 4}, in.tolerance, /*by_slots=*/false);
  std::map<uint32_t, std::pair<uint32_t, uint64_t>> after = FromWeights(plan->after());
  EXPECT_EQ(after.count(9), 1u);
  EXPECT_EQ(after[9].first, 0u);
}

TEST(RebalancePlannerTest, AlreadyBalancedPlansNoMoves) {
  RebalanceInput in = BySlots(SlotMap::Even({0, 1, 2}, 4), {0, 1, 2});
  absl::StatusOr<v1::PlanRebalanceResponse> plan = PlanRebalance(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->spec().moves_size(), 0);
  EXPECT_EQ(plan->epoch(), 4u);
  ASSERT_EQ(plan->before_size(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(plan->before(i).ShortDebugString(), plan->after(i).ShortDebugString());
  }
}

TEST(RebalancePlannerTest, SplitsLargeMoves) {
  RebalanceInput in = BySlots(SlotMap::Even({0, 1}, 7), {0, 1, 2});
  in.max_slots_per_move = 100;
  absl::StatusOr<v1::PlanRebalanceResponse> plan = PlanRebalance(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  CheckAndApply(in, *plan);  // every move <= 100 slots
  EXPECT_GE(plan->spec().moves_size(), 5462 / 100);
}

TEST(RebalancePlannerTest, InterleavedOwnersStayConsistent) {
  std::vector<uint32_t> owners(kNumSlots);
  for (uint32_t s = 0; s < kNumSlots; ++s) owners[s] = (s / 7 + s % 3) % 5;
  absl::StatusOr<SlotMap> map = SlotMap::FromOwners(owners, 9);
  ASSERT_TRUE(map.ok());
  RebalanceInput in;
  in.map = *map;
  in.shards = {0, 1, 2, 3, 5, 6};
  in.drain = {4};
  in.slot_weight = SkewedWeights(in.map, 3);
  absl::StatusOr<v1::PlanRebalanceResponse> plan = PlanRebalance(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  CheckAndApply(in, *plan);
  ExpectWithinTolerance(*plan, {0, 1, 2, 3, 5, 6}, in.tolerance, /*by_slots=*/false);
}

TEST(RebalancePlannerTest, Deterministic) {
  RebalanceInput in;
  in.map = SlotMap::Even({0, 1, 2}, 11);
  in.shards = {0, 1, 2, 3};
  in.drain = {1};
  in.slot_weight = SkewedWeights(in.map, 4);
  absl::StatusOr<v1::PlanRebalanceResponse> a = PlanRebalance(in);
  absl::StatusOr<v1::PlanRebalanceResponse> b = PlanRebalance(in);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GT(a->spec().moves_size(), 0);
  EXPECT_EQ(a->SerializeAsString(), b->SerializeAsString());
}

TEST(RebalancePlannerTest, SixtyFourShardsAreFast) {
  std::vector<uint32_t> old_shards, shards;
  for (uint32_t i = 0; i < 64; ++i) {
    if (i < 56) old_shards.push_back(i);
    shards.push_back(i);
  }
  RebalanceInput in;
  in.map = SlotMap::Even(old_shards, 1);
  in.shards = shards;
  in.drain = {3};
  in.slot_weight = SkewedWeights(in.map, 5);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<v1::PlanRebalanceResponse> plan = PlanRebalance(in);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(plan.ok()) << plan.status();
  CheckAndApply(in, *plan);
  std::set<uint32_t> targets(shards.begin(), shards.end());
  targets.erase(3);
  // Each target holds ~256 slots: a few hot slots (20000) limit how even it can get.
  ExpectWithinTolerance(*plan, targets, 0.10, /*by_slots=*/false);
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count(), 100);
}

TEST(RebalancePlannerTest, InvalidArguments) {
  const RebalanceInput good = BySlots(SlotMap::Even({0, 1}, 1), {0, 1});
  ASSERT_TRUE(PlanRebalance(good).ok());
  auto expect_invalid = [](const RebalanceInput& in, const std::string& text) {
    absl::StatusOr<v1::PlanRebalanceResponse> plan = PlanRebalance(in);
    ASSERT_FALSE(plan.ok()) << text;
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << plan.status();
    EXPECT_THAT(plan.status().message(), HasSubstr(text));
  };
  RebalanceInput in = good;
  in.map.set_epoch(0);
  expect_invalid(in, "epoch");

  in = good;
  in.shards = {};
  in.drain = {0, 1};
  expect_invalid(in, "no shard to receive");
  in.shards = {0, 1};  // every alive shard is drained
  expect_invalid(in, "no shard to receive");

  in = good;
  in.slot_weight.resize(kNumSlots - 1);
  expect_invalid(in, "slot_weight has 16383");

  in = good;
  in.tolerance = -0.1;
  expect_invalid(in, "tolerance");
  in.tolerance = std::nan("");
  expect_invalid(in, "tolerance");

  in = good;
  in.max_slots_per_move = 0;
  expect_invalid(in, "max_slots_per_move");

  in = good;
  in.slot_weight[0] = std::numeric_limits<uint64_t>::max();
  expect_invalid(in, "overflows");

  // Shard 2 is dead: neither alive nor draining.
  in = BySlots(SlotMap::Even({0, 1, 2}, 1), {0, 1});
  expect_invalid(in, "slots 10922-16383 are owned by shard 2");
  in.drain = {2};
  EXPECT_TRUE(PlanRebalance(in).ok());

  in = good;
  in.map.SetOwner(100, kNoShard);
  expect_invalid(in, "slot 100 is without an owner");
}

TEST(RebalancePlannerTest, RangesRoundTrip) {
  std::vector<v1::SlotRange> ranges = ToRanges({1, 2, 3, 7, 9, 10, kNumSlots - 1});
  ASSERT_EQ(ranges.size(), 4u);
  EXPECT_EQ(ranges[0].ShortDebugString(), "first: 1 last: 3");
  EXPECT_EQ(ranges[1].ShortDebugString(), "first: 7 last: 7");
  EXPECT_EQ(ranges[2].ShortDebugString(), "first: 9 last: 10");
  EXPECT_EQ(ranges[3].first(), kNumSlots - 1);
  EXPECT_TRUE(ToRanges({}).empty());

  google::protobuf::RepeatedPtrField<v1::SlotRange> field(ranges.begin(), ranges.end());
  absl::StatusOr<std::vector<uint32_t>> slots = FromRanges(field);
  ASSERT_TRUE(slots.ok()) << slots.status();
  EXPECT_EQ(*slots, (std::vector<uint32_t>{1, 2, 3, 7, 9, 10, kNumSlots - 1}));

  auto bad = [](uint32_t first, uint32_t last) {
    google::protobuf::RepeatedPtrField<v1::SlotRange> f;
    f.Add()->set_first(first);
    f.Mutable(0)->set_last(last);
    return FromRanges(f).status();
  };
  EXPECT_EQ(bad(5, 4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad(0, kNumSlots).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(bad(0, kNumSlots - 1).ok());
  google::protobuf::RepeatedPtrField<v1::SlotRange> overlap(field);
  overlap.Add()->set_first(3);
  overlap.Mutable(overlap.size() - 1)->set_last(4);
  EXPECT_EQ(FromRanges(overlap).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ember
