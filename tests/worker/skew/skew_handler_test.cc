// Copyright 2026 The Ember Authors.
//
// SkewHandler (worker/skew/skew_handler.h) without a cluster: cold examples' loss weights,
// replays (planned size, each replayed once, in order), no state left by a dropped
// batch, and a handler restored from a saved state continuing bit for bit like one
// that never stopped (what a checkpoint needs).

#include "worker/skew/skew_handler.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/model/model_config.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace ember::worker {
namespace {

using ::testing::ElementsAre;

constexpr int kBatch = 8;

// Features user (0), item (1) and tags (2, MULTI_HOT) on one table; one dense column.
v1::ModelConfig Config(const std::string& skew) {
  const std::string text = R"pb(
    data {
      columns { name: "label" kind: LABEL }
      columns { name: "x" kind: DENSE }
      columns { name: "user" kind: CATEGORICAL id_encoding: DECIMAL }
      columns { name: "item" kind: CATEGORICAL id_encoding: DECIMAL }
      columns { name: "tags" kind: MULTI_HOT id_encoding: DECIMAL }
    }
    tables { name: "t" dim: 4 }
    features { column: "user" table: "t" }
    features { column: "item" table: "t" }
    features { column: "tags" table: "t" }
    dense { bottom_mlp: [ 4 ] }
    training { batch_size: 8 consistency: SSP }
  )pb";
  v1::ModelConfig config;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text + skew, &config));
  absl::StatusOr<v1::ModelConfig> normalized = model::NormalizeModelConfig(config, "test");
  EXPECT_TRUE(normalized.ok()) << normalized.status();
  return *normalized;
}

// Batch `b` of a deterministic stream: users repeat across batches (some become warm),
// items are mostly new; example k of batch b has label (b * 100 + k) % 2 and dense
// value b * 100 + k, so every example is recognizable.
std::unique_ptr<PreparedBatch> MakeBatch(const SparseLayout& layout, int b) {
  auto batch = std::make_unique<PreparedBatch>(layout);
  model::ExampleBatch& ex = batch->examples;
  ex.Reset(1, 3, 0);
  for (int k = 0; k < kBatch; ++k) {
    const int n = b * 100 + k;
    ex.labels.push_back(static_cast<float>(n % 2));
    ex.weights.push_back(1.0f);
    ex.dense.push_back(static_cast<float>(n));
    const uint64_t ids[3] = {static_cast<uint64_t>(k % 3), static_cast<uint64_t>(1000 + n % 37),
                             static_cast<uint64_t>(5000 + k)};
    for (int f = 0; f < 3; ++f) {
      if (f < 2 || k % 2 == 0) ex.sparse[f].ids.push_back(ids[f]);
      ex.sparse[f].offsets.push_back(static_cast<uint32_t>(ex.sparse[f].ids.size()));
    }
    ++ex.size;
  }
  batch->sparse.Build(ex);
  batch->read_size = ex.size;
  return batch;
}

// Prepares and commits batch `b`, as the trainer does.
std::unique_ptr<PreparedBatch> Train(SkewHandler& skew, const SparseLayout& layout, int b) {
  std::unique_ptr<PreparedBatch> batch = MakeBatch(layout, b);
  const int planned = skew.PlannedSize(*batch);
  skew.Prepare(batch.get());
  EXPECT_EQ(batch->examples.size, planned) << "batch " << b;
  EXPECT_EQ(skew.PlannedSize(*batch), planned);
  skew.Commit(*batch);
  return batch;
}

TEST(SkewHandlerTest, OffLeavesEveryBatchAsItIs) {
  const v1::ModelConfig config = Config(R"pb(skew { cold_features: "user" })pb");
  const SparseLayout layout = SparseLayout::FromConfig(config);
  SkewHandler skew(config, layout, 2);
  EXPECT_FALSE(skew.active());
  std::unique_ptr<PreparedBatch> batch = Train(skew, layout, 0);
  const std::unique_ptr<PreparedBatch> plain = MakeBatch(layout, 0);
  EXPECT_EQ(batch->examples.weights, plain->examples.weights);
  EXPECT_EQ(batch->examples.size, kBatch);
  EXPECT_EQ(batch->sparse.table(0).ids, plain->sparse.table(0).ids);
  EXPECT_EQ(skew.TakeStepCounts(), (SkewHandler::StepCounts{0, 0, 0, 0}));
}

TEST(SkewHandlerTest, WeightsColdExamplesOnly) {
  // Threshold: cold_max_count 4 over 2 workers = a local count below 2.
  const v1::ModelConfig config =
      Config(R"pb(skew { cold_features: "user" cold_max_count: 4 cold_loss_weight: 2.5 })pb");
  const SparseLayout layout = SparseLayout::FromConfig(config);
  SkewHandler skew(config, layout, 2);
  EXPECT_TRUE(skew.cold_active());
  EXPECT_FALSE(skew.cache_active());
  // Users k % 3 = 0,1,2,0,1,2,0,1: each user's first two examples are cold.
  std::unique_ptr<PreparedBatch> batch = Train(skew, layout, 0);
  EXPECT_THAT(batch->cold, ElementsAre(1, 1, 1, 1, 1, 1, 0, 0));
  EXPECT_THAT(batch->examples.weights, ElementsAre(2.5, 2.5, 2.5, 2.5, 2.5, 2.5, 1, 1));
  EXPECT_EQ(batch->cold_count, 6);
  batch = Train(skew, layout, 1);  // every user is warm now
  EXPECT_THAT(batch->examples.weights, ElementsAre(1, 1, 1, 1, 1, 1, 1, 1));
  EXPECT_EQ(skew.TakeStepCounts(), (SkewHandler::StepCounts{6, 0, 0, 0}));
}

TEST(SkewHandlerTest, ReplaysEachColdExampleOnceInOrder) {
  // Items are cold (1000 + n % 37 repeats every 37 examples; threshold 2 locally).
  const v1::ModelConfig config = Config(
      R"pb(skew {
             cold_features: "item"
             cold_max_count: 2
             cold_resample_fraction: 0.5
             cold_replay_capacity: 100
           })pb");
  const SparseLayout layout = SparseLayout::FromConfig(config);
  SkewHandler skew(config, layout, 1);
  std::vector<float> cold_seen, replayed;
  for (int b = 0; b < 12; ++b) {
    std::unique_ptr<PreparedBatch> batch = Train(skew, layout, b);
    const model::ExampleBatch& ex = batch->examples;
    ASSERT_LE(ex.size - batch->read_size, kBatch / 2);  // floor(0.5 x 8)
    for (int i = 0; i < batch->read_size; ++i) {
      if (batch->cold[i]) cold_seen.push_back(ex.dense[i]);
    }
    for (int i = batch->read_size; i < ex.size; ++i) {
      replayed.push_back(ex.dense[i]);
      // The replay's IDs joined the batch's unique IDs.
      const auto& ids = batch->sparse.table(0).ids;
      EXPECT_NE(std::find(ids.begin(), ids.end(), ex.sparse[1].ids[i]), ids.end());
    }
    EXPECT_EQ(batch->sparse.batch_size(), ex.size);
  }
  ASSERT_GT(replayed.size(), 10u);
  // The replays are the cold examples, oldest first, each once (nothing was dropped).
  ASSERT_LE(replayed.size(), cold_seen.size());
  EXPECT_EQ(replayed, std::vector<float>(cold_seen.begin(), cold_seen.begin() + replayed.size()));
  EXPECT_EQ(skew.buffered(), cold_seen.size() - replayed.size());
  const SkewHandler::StepCounts counts = skew.TakeStepCounts();
  EXPECT_EQ(counts[0], static_cast<float>(cold_seen.size()));
  EXPECT_EQ(counts[1], static_cast<float>(replayed.size()));
}

TEST(SkewHandlerTest, ADroppedBatchLeavesNoState) {
  const v1::ModelConfig config = Config(
      R"pb(skew { cold_features: "item" cold_resample_fraction: 0.25 cold_loss_weight: 2 })pb");
  const SparseLayout layout = SparseLayout::FromConfig(config);
  SkewHandler a(config, layout, 2), b(config, layout, 2);
  for (int i = 0; i < 3; ++i) {
    Train(a, layout, i);
    Train(b, layout, i);
  }
  // b prepares a batch (a prefetch) that is then dropped, and a later one again.
  std::unique_ptr<PreparedBatch> dropped = MakeBatch(layout, 3);
  b.Prepare(dropped.get());
  EXPECT_GT(dropped->examples.size, dropped->read_size);
  const std::unique_ptr<PreparedBatch> x = Train(a, layout, 4);
  const std::unique_ptr<PreparedBatch> y = Train(b, layout, 4);
  EXPECT_EQ(x->examples.dense, y->examples.dense);
  EXPECT_EQ(x->examples.weights, y->examples.weights);
}

TEST(SkewHandlerTest, ARestoredHandlerContinuesBitForBit) {
  const v1::ModelConfig config = Config(R"pb(skew {
                                               cold_features: [ "user", "item" ]
                                               cold_max_count: 6
                                               cold_loss_weight: 3
                                               cold_resample_fraction: 0.375
                                               cold_replay_capacity: 5
                                             })pb");
  const SparseLayout layout = SparseLayout::FromConfig(config);
  SkewHandler original(config, layout, 2);
  std::unique_ptr<SkewHandler> restored;
  for (int b = 0; b < 16; ++b) {
    if (b == 7) {
      v1::WorkerSkewState state;
      original.Save(&state);
      // Through the wire format, as a checkpoint stores it.
      v1::WorkerSkewState parsed;
      ASSERT_TRUE(parsed.ParseFromString(state.SerializeAsString()));
      restored = std::make_unique<SkewHandler>(config, layout, 2);
      ASSERT_TRUE(restored->Load(parsed).ok());
      EXPECT_EQ(restored->buffered(), original.buffered());
    }
    const std::unique_ptr<PreparedBatch> x = Train(original, layout, b);
    if (restored == nullptr) continue;
    const std::unique_ptr<PreparedBatch> y = Train(*restored, layout, b);
    ASSERT_EQ(x->examples.size, y->examples.size) << b;
    EXPECT_EQ(x->cold, y->cold) << b;
    EXPECT_EQ(x->examples.labels, y->examples.labels) << b;
    EXPECT_EQ(x->examples.weights, y->examples.weights) << b;
    EXPECT_EQ(x->examples.dense, y->examples.dense) << b;
    for (int f = 0; f < 3; ++f) EXPECT_EQ(x->examples.sparse[f].ids, y->examples.sparse[f].ids);
    EXPECT_EQ(x->sparse.table(0).ids, y->sparse.table(0).ids) << b;
  }
  v1::WorkerSkewState a, b;
  original.Save(&a);
  restored->Save(&b);
  EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
  EXPECT_GT(a.replay().dropped(), 0u);  // the small buffer overflowed
}

TEST(SkewHandlerTest, LoadRefusesAStateOfAnotherShape) {
  const v1::ModelConfig config = Config(R"pb(skew {
                                               cold_features: [ "user", "item" ]
                                               cold_resample_fraction: 0.5
                                             })pb");
  const SparseLayout layout = SparseLayout::FromConfig(config);
  SkewHandler skew(config, layout, 1);
  v1::WorkerSkewState empty;
  EXPECT_EQ(skew.Load(empty).code(), absl::StatusCode::kInvalidArgument);  // 0 features
  // With cold handling off any state is ignored (old checkpoints load).
  const v1::ModelConfig off = Config("");
  SkewHandler none(off, SparseLayout::FromConfig(off), 1);
  EXPECT_TRUE(none.Load(empty).ok());
}

TEST(SkewHandlerTest, PartitioningByTheColumnCountsLocally) {
  // cold_max_count 4: with 4 workers the local threshold is 1, unless the data is
  // partitioned by the feature's column (then the local count is the global one).
  for (const bool by_user : {false, true}) {
    v1::ModelConfig config =
        Config(R"pb(skew { cold_features: "user" cold_max_count: 4 cold_loss_weight: 2 })pb");
    if (by_user) config.mutable_data()->set_partition_by("user");
    const SparseLayout layout = SparseLayout::FromConfig(config);
    SkewHandler skew(config, layout, 4);
    const std::unique_ptr<PreparedBatch> batch = Train(skew, layout, 0);
    EXPECT_EQ(batch->cold_count, by_user ? kBatch : 3) << by_user;
  }
}

}  // namespace
}  // namespace ember::worker
