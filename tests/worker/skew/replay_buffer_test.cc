// Copyright 2026 The Ember Authors.
//
// ReplayBuffer (worker/skew/replay_buffer.h): bounded FIFO, each example replayed once,
// examples kept bit for bit, checkpoint state.

#include "worker/skew/replay_buffer.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ember::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Example i: label i, weight i + 0.5, dense {i, -i}, feature 0 one ID 100 + i,
// feature 1 i % 3 IDs (1000 + i, ...).
model::ExampleBatch Batch(int first, int n) {
  model::ExampleBatch batch;
  batch.Reset(2, 2, 0);
  for (int i = first; i < first + n; ++i) {
    batch.labels.push_back(static_cast<float>(i));
    batch.weights.push_back(static_cast<float>(i) + 0.5f);
    batch.dense.push_back(static_cast<float>(i));
    batch.dense.push_back(-static_cast<float>(i));
    batch.sparse[0].ids.push_back(100 + i);
    batch.sparse[0].offsets.push_back(static_cast<uint32_t>(batch.sparse[0].ids.size()));
    for (int k = 0; k < i % 3; ++k) batch.sparse[1].ids.push_back(1000 + i * 10 + k);
    batch.sparse[1].offsets.push_back(static_cast<uint32_t>(batch.sparse[1].ids.size()));
    ++batch.size;
  }
  return batch;
}

std::vector<float> Labels(const ReplayBuffer& buffer) {
  model::ExampleBatch out;
  out.Reset(2, 2, 0);
  buffer.AppendTo(buffer.size(), &out);
  return out.labels;
}

TEST(ReplayBufferTest, IsBoundedAndDropsTheOldest) {
  ReplayBuffer buffer(3);
  const model::ExampleBatch batch = Batch(0, 5);
  for (int i = 0; i < 5; ++i) buffer.Push(batch, i);
  EXPECT_EQ(buffer.size(), 3u);
  EXPECT_EQ(buffer.capacity(), 3u);
  EXPECT_EQ(buffer.dropped(), 2u);
  EXPECT_THAT(Labels(buffer), ElementsAre(2, 3, 4));
}

TEST(ReplayBufferTest, EachExampleIsReplayedOnce) {
  ReplayBuffer buffer(100);
  const model::ExampleBatch batch = Batch(0, 10);
  for (int i = 0; i < 10; ++i) buffer.Push(batch, i);
  std::vector<float> replayed;
  while (buffer.size() > 0) {
    model::ExampleBatch next = Batch(50, 2);  // two read examples, then up to 3 replays
    const size_t n = std::min<size_t>(buffer.size(), 3);
    buffer.AppendTo(n, &next);
    buffer.AppendTo(n, &next);  // appending does not consume: the same ones again
    ASSERT_EQ(next.size, static_cast<int>(2 + 2 * n));
    for (size_t k = 0; k < n; ++k) EXPECT_EQ(next.labels[2 + k], next.labels[2 + n + k]);
    replayed.insert(replayed.end(), next.labels.begin() + 2, next.labels.begin() + 2 + n);
    buffer.PopFront(n);  // trained: gone
  }
  EXPECT_THAT(replayed, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
}

TEST(ReplayBufferTest, KeepsExamplesBitForBit) {
  ReplayBuffer buffer(10);
  const model::ExampleBatch source = Batch(0, 6);
  for (int i : {1, 2, 5}) buffer.Push(source, i);
  model::ExampleBatch out = Batch(40, 1);
  buffer.AppendTo(3, &out);
  ASSERT_EQ(out.size, 4);
  EXPECT_THAT(out.labels, ElementsAre(40, 1, 2, 5));
  EXPECT_THAT(out.weights, ElementsAre(40.5f, 1.5f, 2.5f, 5.5f));
  EXPECT_THAT(out.dense, ElementsAre(40, -40, 1, -1, 2, -2, 5, -5));
  EXPECT_THAT(out.sparse[0].ids, ElementsAre(140, 101, 102, 105));
  EXPECT_THAT(out.sparse[0].offsets, ElementsAre(0, 1, 2, 3, 4));
  EXPECT_THAT(out.sparse[1].ids, ElementsAre(1400, 1010, 1020, 1021, 1050, 1051));
  EXPECT_THAT(out.sparse[1].offsets, ElementsAre(0, 1, 2, 4, 6));
}

TEST(ReplayBufferTest, EvalColumnsOfTheTargetGetNaN) {
  ReplayBuffer buffer(2);
  buffer.Push(Batch(0, 1), 0);
  model::ExampleBatch out;
  out.Reset(2, 2, 1);
  buffer.AppendTo(1, &out);
  ASSERT_EQ(out.eval[0].size(), 1u);
  EXPECT_TRUE(std::isnan(out.eval[0][0]));
}

TEST(ReplayBufferTest, SaveAndLoadRoundTrip) {
  ReplayBuffer buffer(4);
  const model::ExampleBatch batch = Batch(0, 6);
  for (int i = 0; i < 6; ++i) buffer.Push(batch, i);
  v1::ReplayBufferState state;
  buffer.Save(&state);
  EXPECT_EQ(state.size(), 4u);
  EXPECT_EQ(state.dropped(), 2u);

  ReplayBuffer restored(4);
  ASSERT_TRUE(restored.Load(state, 2, 2).ok());
  EXPECT_EQ(restored.size(), 4u);
  EXPECT_EQ(restored.dropped(), 2u);
  model::ExampleBatch a, b;
  a.Reset(2, 2, 0);
  b.Reset(2, 2, 0);
  buffer.AppendTo(4, &a);
  restored.AppendTo(4, &b);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.weights, b.weights);
  EXPECT_EQ(a.dense, b.dense);
  for (int f = 0; f < 2; ++f) {
    EXPECT_EQ(a.sparse[f].ids, b.sparse[f].ids);
    EXPECT_EQ(a.sparse[f].offsets, b.sparse[f].offsets);
  }
  v1::ReplayBufferState again;
  restored.Save(&again);
  EXPECT_EQ(again.SerializeAsString(), state.SerializeAsString());

  // An empty buffer saves and loads too.
  ReplayBuffer empty(4);
  v1::ReplayBufferState nothing;
  empty.Save(&nothing);
  ASSERT_TRUE(restored.Load(nothing, 2, 2).ok());
  EXPECT_EQ(restored.size(), 0u);
}

TEST(ReplayBufferTest, LoadRefusesStatesThatDoNotFitAndKeepsItsExamples) {
  ReplayBuffer buffer(3);
  const model::ExampleBatch batch = Batch(0, 3);
  for (int i = 0; i < 3; ++i) buffer.Push(batch, i);
  v1::ReplayBufferState good;
  buffer.Save(&good);
  ReplayBuffer small(2);
  EXPECT_THAT(small.Load(good, 2, 2).message(), HasSubstr("3 examples, the capacity is 2"));

  ReplayBuffer target(3);
  target.Push(batch, 0);
  struct Case {
    std::function<void(v1::ReplayBufferState*)> mutate;
    int num_dense, num_features;
    const char* message;
  };
  const std::vector<Case> cases = {
      {[](v1::ReplayBufferState*) {}, 3, 2, "2 dense values and 2 features per example"},
      {[](v1::ReplayBufferState*) {}, 2, 1, "the job has 2 and 1"},
      {[](v1::ReplayBufferState* s) { s->mutable_labels()->RemoveLast(); }, 2, 2,
       "do not match 3 examples"},
      {[](v1::ReplayBufferState* s) { s->mutable_dense()->Add(1); }, 2, 2,
       "do not match 3 examples"},
      {[](v1::ReplayBufferState* s) { s->mutable_features(1)->mutable_lengths()->RemoveLast(); }, 2,
       2, "feature 1 has 2 lengths for 3 examples"},
      {[](v1::ReplayBufferState* s) { s->mutable_features(0)->add_ids(7); }, 2, 2,
       "feature 0 lengths add up to 3 IDs, it has 4"},
  };
  for (const Case& c : cases) {
    v1::ReplayBufferState s = good;
    c.mutate(&s);
    const absl::Status status = target.Load(s, c.num_dense, c.num_features);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(status.message(), HasSubstr(c.message));
    EXPECT_THAT(Labels(target), ElementsAre(0));
  }
}

}  // namespace
}  // namespace ember::worker
