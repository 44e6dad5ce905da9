// Copyright 2026 The Ember Authors.
//
// FrequencyTracker (worker/skew/frequency_tracker.h): counting with saturation and a bound,
// cold judgement from the counts before each example, determinism, checkpoint state.

#include "worker/skew/frequency_tracker.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ember::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A batch of examples with one optional ID in each of two features (nullopt: missing).
model::ExampleBatch Batch(const std::vector<std::optional<uint64_t>>& users,
                          const std::vector<std::optional<uint64_t>>& items = {}) {
  model::ExampleBatch batch;
  batch.Reset(0, 2, 0);
  for (size_t i = 0; i < users.size(); ++i) {
    auto add = [&](int f, std::optional<uint64_t> id) {
      if (id.has_value()) batch.sparse[f].ids.push_back(*id);
      batch.sparse[f].offsets.push_back(static_cast<uint32_t>(batch.sparse[f].ids.size()));
    };
    add(0, users[i]);
    add(1, i < items.size() ? items[i] : std::nullopt);
    batch.labels.push_back(0);
    batch.weights.push_back(1);
    ++batch.size;
  }
  return batch;
}

TEST(FrequencyTrackerTest, CountsSaturateAtTheThreshold) {
  FrequencyTracker tracker({{0, 3}}, 100);
  EXPECT_EQ(tracker.CountOf(0, 7), 0u);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(tracker.Add(0, 7));
  EXPECT_EQ(tracker.CountOf(0, 7), 3u);  // saturated: only "below 3" matters
  EXPECT_TRUE(tracker.Add(0, 8));
  EXPECT_EQ(tracker.CountOf(0, 8), 1u);
  EXPECT_EQ(tracker.tracked_ids(), 2u);
  EXPECT_EQ(tracker.untracked(), 0u);
}

TEST(FrequencyTrackerTest, AnExampleIsJudgedBeforeItIsCounted) {
  FrequencyTracker tracker({{0, 2}}, 100);
  const model::ExampleBatch batch = Batch({5, 5, 5, 6});
  std::vector<uint8_t> cold;
  tracker.Classify(batch, &cold);
  // ID 5 seen 0, 1, 2 times before its three examples: cold, cold, warm.
  EXPECT_THAT(cold, ElementsAre(1, 1, 0, 1));
  // Classify changes no count; Count adds the batch.
  EXPECT_EQ(tracker.CountOf(0, 5), 0u);
  tracker.Classify(batch, &cold);
  EXPECT_THAT(cold, ElementsAre(1, 1, 0, 1));  // judged twice, judged the same
  tracker.Count(batch, batch.size);
  EXPECT_EQ(tracker.CountOf(0, 5), 2u);
  EXPECT_EQ(tracker.CountOf(0, 6), 1u);
  tracker.Classify(Batch({5, 6, 6}), &cold);
  EXPECT_THAT(cold, ElementsAre(0, 1, 0));
}

TEST(FrequencyTrackerTest, AnyColdFeatureMakesTheExampleColdAndMissingIdsDoNot) {
  FrequencyTracker tracker({{0, 1}, {1, 1}}, 100);
  tracker.Add(0, 1);
  tracker.Add(1, 10);
  std::vector<uint8_t> cold;
  tracker.Classify(Batch({1, 1, 2, std::nullopt, std::nullopt}, {10, 11, 10, 10, std::nullopt}),
                   &cold);
  EXPECT_THAT(cold, ElementsAre(0, 1, 1, 0, 0));
  // The same ID in two features is counted per feature.
  EXPECT_EQ(tracker.CountOf(1, 1), 0u);
}

TEST(FrequencyTrackerTest, CountsOnlyTheReadExamples) {
  FrequencyTracker tracker({{0, 5}}, 100);
  tracker.Count(Batch({1, 1, 2}), /*examples=*/2);
  EXPECT_EQ(tracker.CountOf(0, 1), 2u);
  EXPECT_EQ(tracker.CountOf(0, 2), 0u);
}

TEST(FrequencyTrackerTest, AFullTrackerLeavesNewIdsColdAndCountsThem) {
  FrequencyTracker tracker({{0, 1}}, 2);
  tracker.Count(Batch({1, 2, 3, 3, 1}), 5);
  EXPECT_EQ(tracker.tracked_ids(), 2u);
  EXPECT_EQ(tracker.untracked(), 2u);
  EXPECT_EQ(tracker.CountOf(0, 3), 0u);
  std::vector<uint8_t> cold;
  tracker.Classify(Batch({1, 3}), &cold);
  EXPECT_THAT(cold, ElementsAre(0, 1));
}

TEST(FrequencyTrackerTest, SameDataSameJudgementsAndTheSameState) {
  // Two trackers over the same batches; one of them also saved and restored halfway.
  std::vector<model::ExampleBatch> batches;
  uint64_t x = 12345;
  for (int b = 0; b < 20; ++b) {
    std::vector<std::optional<uint64_t>> users, items;
    for (int i = 0; i < 50; ++i) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      users.push_back((x >> 33) % 97);
      items.push_back((x >> 20) % 13 == 0 ? std::nullopt : std::optional<uint64_t>((x >> 40) % 31));
    }
    batches.push_back(Batch(users, items));
  }
  FrequencyTracker a({{0, 4}, {1, 6}}, 1000);
  FrequencyTracker b({{0, 4}, {1, 6}}, 1000);
  std::vector<uint8_t> cold_a, cold_b;
  int cold = 0;
  for (size_t i = 0; i < batches.size(); ++i) {
    if (i == 10) {
      v1::FrequencyTrackerState state;
      b.Save(&state);
      FrequencyTracker restored({{0, 4}, {1, 6}}, 1000);
      ASSERT_TRUE(restored.Load(state).ok());
      v1::FrequencyTrackerState again;
      restored.Save(&again);
      EXPECT_EQ(again.SerializeAsString(), state.SerializeAsString());
      ASSERT_TRUE(b.Load(state).ok());
    }
    a.Classify(batches[i], &cold_a);
    b.Classify(batches[i], &cold_b);
    EXPECT_EQ(cold_a, cold_b) << "batch " << i;
    for (uint8_t c : cold_a) cold += c;
    a.Count(batches[i], batches[i].size);
    b.Count(batches[i], batches[i].size);
  }
  EXPECT_GT(cold, 0);
  EXPECT_LT(cold, 1000);
  v1::FrequencyTrackerState sa, sb;
  a.Save(&sa);
  b.Save(&sb);
  EXPECT_EQ(sa.SerializeAsString(), sb.SerializeAsString());
  // Saved IDs ascend (deltas), with their counts.
  EXPECT_EQ(sa.features_size(), 2);
  EXPECT_EQ(sa.features(0).id_deltas_size(), sa.features(0).counts_size());
}

TEST(FrequencyTrackerTest, LoadRefusesStatesThatDoNotFitAndKeepsItsCounts) {
  FrequencyTracker tracker({{0, 3}}, 3);
  tracker.Add(0, 42);
  auto state = [](std::vector<uint64_t> deltas, std::vector<uint32_t> counts, int features = 1) {
    v1::FrequencyTrackerState s;
    for (int f = 0; f < features; ++f) {
      auto* out = s.add_features();
      for (uint64_t d : deltas) out->add_id_deltas(d);
      for (uint32_t c : counts) out->add_counts(c);
    }
    return s;
  };
  const std::vector<std::pair<v1::FrequencyTrackerState, const char*>> bad = {
      {state({1}, {1}, 2), "2 features, the job 1"},
      {state({1, 2}, {1}), "2 IDs but 1 counts"},
      {state({1, 0}, {1, 1}), "not strictly ascending"},
      {state({~uint64_t{0}, 5}, {1, 1}), "not strictly ascending"},
      {state({1}, {4}), "count 4 of ID 1 is outside 1..3"},
      {state({1}, {0}), "count 0 of ID 1"},
      {state({1, 1, 1, 1}, {1, 1, 1, 1}), "more than cold_max_tracked_ids = 3"},
  };
  for (const auto& [s, message] : bad) {
    const absl::Status status = tracker.Load(s);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(status.message(), HasSubstr(message));
    EXPECT_EQ(tracker.CountOf(0, 42), 1u);
    EXPECT_EQ(tracker.tracked_ids(), 1u);
  }
}

}  // namespace
}  // namespace ember::worker
