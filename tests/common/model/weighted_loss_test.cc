// Copyright 2026 The Ember Authors.
//
// Per-example loss weights through the dense tower (the path ModelConfig.skew.
// cold_loss_weight uses): a weighted example's loss and gradients are its weight times
// the unweighted ones, and weights of 1 are bitwise the unweighted path.

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "common/model/dense_tower.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ember::model {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

std::unique_ptr<DenseTower> Tower() {
  v1::DenseTowerConfig config;
  config.add_bottom_mlp(8);
  config.add_bottom_mlp(4);
  config.set_interaction(v1::DenseTowerConfig::DOT);
  config.add_top_mlp(8);
  absl::StatusOr<std::unique_ptr<DenseTower>> tower = DenseTower::Create(config, 3, {4, 4, 4});
  EXPECT_TRUE(tower.ok()) << tower.status();
  return std::move(*tower);
}

struct Grads {
  float loss = 0;
  std::vector<float> dlogits, params, d_pooled;
};

// Loss and gradients of one forward/backward of `tower` on a fixed batch of `batch`
// examples with `weights` (empty: unweighted), normalized by `batch`.
Grads Step(DenseTower& tower, int batch, const std::vector<float>& weights) {
  const std::vector<float> dense = Random(batch * 3, 1), pooled = Random(batch * 12, 2);
  std::vector<float> labels(batch);
  for (int i = 0; i < batch; ++i) labels[i] = static_cast<float>(i % 2);
  std::vector<float> logits(batch);
  Grads g;
  g.dlogits.resize(batch);
  g.d_pooled.resize(batch * 12);
  tower.Forward(batch, dense, pooled, absl::MakeSpan(logits));
  g.loss = BceWithLogits(logits, labels, weights, 1.0f / batch, absl::MakeSpan(g.dlogits));
  tower.Backward(g.dlogits, absl::MakeSpan(g.d_pooled));
  const absl::Span<float> p = tower.gradients();
  g.params.assign(p.begin(), p.end());
  return g;
}

TEST(WeightedLossTest, WeightsOfOneAreBitwiseTheUnweightedPath) {
  std::unique_ptr<DenseTower> tower = Tower();
  const Grads plain = Step(*tower, 16, {});
  const Grads ones = Step(*tower, 16, std::vector<float>(16, 1.0f));
  EXPECT_EQ(plain.loss, ones.loss);
  EXPECT_EQ(plain.dlogits, ones.dlogits);
  EXPECT_EQ(plain.params, ones.params);
  EXPECT_EQ(plain.d_pooled, ones.d_pooled);
}

TEST(WeightedLossTest, AWeightedExamplesGradientIsWeightTimesUnweighted) {
  std::unique_ptr<DenseTower> tower = Tower();
  // One example: a weight of 2 (a power of two scales every float exactly) doubles
  // the loss and every gradient bit for bit; a weight of 3 triples them (rounding).
  const Grads one = Step(*tower, 1, {1.0f});
  const Grads two = Step(*tower, 1, {2.0f});
  EXPECT_EQ(two.loss, 2 * one.loss);
  for (size_t i = 0; i < one.params.size(); ++i) EXPECT_EQ(two.params[i], 2 * one.params[i]) << i;
  for (size_t i = 0; i < one.d_pooled.size(); ++i) EXPECT_EQ(two.d_pooled[i], 2 * one.d_pooled[i]);
  const Grads three = Step(*tower, 1, {3.0f});
  EXPECT_FLOAT_EQ(three.loss, 3 * one.loss);
  for (size_t i = 0; i < one.params.size(); ++i) {
    EXPECT_NEAR(three.params[i], 3 * one.params[i], 1e-6f + 1e-5f * std::fabs(one.params[i]));
  }
}

TEST(WeightedLossTest, InABatchOnlyTheWeightedExamplesGradientScales) {
  // Batch of 4 with weights {1, 2.5, 1, 1}: the batch gradient equals the unweighted
  // one plus 1.5 x example 1's own contribution (its weight's excess); the loss stays
  // normalized by the batch size, so the other examples' terms are unchanged.
  std::unique_ptr<DenseTower> tower = Tower();
  const Grads plain = Step(*tower, 4, {});
  const Grads weighted = Step(*tower, 4, {1.0f, 2.5f, 1.0f, 1.0f});
  const Grads only1 = Step(*tower, 4, {0.0f, 1.0f, 0.0f, 0.0f});
  EXPECT_EQ(weighted.dlogits[0], plain.dlogits[0]);
  EXPECT_EQ(weighted.dlogits[2], plain.dlogits[2]);
  EXPECT_EQ(weighted.dlogits[3], plain.dlogits[3]);
  EXPECT_FLOAT_EQ(weighted.dlogits[1], 2.5f * plain.dlogits[1]);
  for (size_t i = 0; i < plain.params.size(); ++i) {
    EXPECT_NEAR(weighted.params[i], plain.params[i] + 1.5f * only1.params[i], 1e-6f) << i;
  }
  EXPECT_NEAR(weighted.loss, plain.loss + 1.5f * only1.loss, 1e-6f);
}

}  // namespace
}  // namespace ember::model
