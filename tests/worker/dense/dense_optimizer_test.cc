// Copyright 2026 The Ember Authors.
//
// Tests of the dense optimizers (worker/dense/dense_optimizer.cc): steps against
// hand-computed values, config defaults, and the SaveState / LoadState round trip.

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/model/dense_tower.h"
#include "gtest/gtest.h"
#include "worker/dense/dense_optimizer.h"

namespace ember::worker {
namespace {

v1::DenseOptimizerConfig Config(v1::DenseOptimizerConfig::Kind kind, float lr) {
  v1::DenseOptimizerConfig config;
  config.set_kind(kind);
  config.set_learning_rate(lr);
  return config;
}

// Steps a one-parameter optimizer from p = 1 with gradients 0.5 then -0.2; returns p
// after each step.
std::vector<float> TwoSteps(const v1::DenseOptimizerConfig& config) {
  std::unique_ptr<DenseOptimizer> opt = DenseOptimizer::Create(config, 1);
  EXPECT_NE(opt, nullptr);
  std::vector<float> p = {1.0f}, out;
  for (float g : {0.5f, -0.2f}) {
    opt->Step(absl::MakeSpan(p), absl::MakeConstSpan(&g, 1));
    out.push_back(p[0]);
  }
  return out;
}

TEST(DenseOptimizerTest, SgdHandComputed) {
  const std::vector<float> p = TwoSteps(Config(v1::DenseOptimizerConfig::SGD, 0.1f));
  EXPECT_NEAR(p[0], 0.95, 1e-7);
  EXPECT_NEAR(p[1], 0.97, 1e-7);
}

TEST(DenseOptimizerTest, AdagradHandComputed) {
  // a = 0.1 + 0.25 = 0.35, p = 1 - 0.1 * 0.5 / sqrt(0.35); then a = 0.39, ...
  const std::vector<float> p = TwoSteps(Config(v1::DenseOptimizerConfig::ADAGRAD, 0.1f));
  EXPECT_NEAR(p[0], 0.9154845759557197, 1e-6);
  EXPECT_NEAR(p[1], 0.9475102062039167, 1e-6);
}

TEST(DenseOptimizerTest, AdagradExplicitZeroAccumulator) {
  v1::DenseOptimizerConfig config = Config(v1::DenseOptimizerConfig::ADAGRAD, 0.1f);
  config.set_initial_accumulator(0.0f);  // set, so not the default 0.1
  const std::vector<float> p = TwoSteps(config);
  EXPECT_NEAR(p[0], 1.0 - 0.1 * 0.5 / 0.5, 1e-6);
  EXPECT_NEAR(p[1], p[0] + 0.1 * 0.2 / std::sqrt(0.25 + 0.04), 1e-6);
}

TEST(DenseOptimizerTest, AdamHandComputedFirstTwoSteps) {
  // Step 1: m = 0.05, v = 0.00025; m^ = 0.5, v^ = 0.25: p = 1 - 0.1 * 0.5 / (0.5 + 1e-8).
  // Step 2: m = 0.025, v = 0.00028975; m^ = m / 0.19, v^ = v / 0.001999.
  const std::vector<float> p = TwoSteps(Config(v1::DenseOptimizerConfig::ADAM, 0.1f));
  EXPECT_NEAR(p[0], 0.900000002, 1e-6);
  EXPECT_NEAR(p[1], 0.8654394181165108, 1e-6);
}

TEST(DenseOptimizerTest, ZeroFieldsTakeDefaults) {
  // kind 0 = Adam, lr 0 = 0.001: Adam's first step moves by lr * sign(g).
  std::unique_ptr<DenseOptimizer> opt = DenseOptimizer::Create(v1::DenseOptimizerConfig(), 3);
  ASSERT_NE(opt, nullptr);
  std::vector<float> p = {1.0f, 1.0f, 1.0f};
  const std::vector<float> g = {2.0f, -0.01f, 0.0f};
  opt->Step(absl::MakeSpan(p), g);
  EXPECT_NEAR(p[0], 0.999, 1e-6);
  EXPECT_NEAR(p[1], 1.001, 1e-6);
  EXPECT_EQ(p[2], 1.0f);
  // The explicit defaults give the same bits.
  v1::DenseOptimizerConfig explicit_config = Config(v1::DenseOptimizerConfig::ADAM, 0.001f);
  explicit_config.set_beta1(0.9f);
  explicit_config.set_beta2(0.999f);
  explicit_config.set_epsilon(1e-8f);
  std::unique_ptr<DenseOptimizer> opt2 = DenseOptimizer::Create(explicit_config, 3);
  std::vector<float> p2 = {1.0f, 1.0f, 1.0f};
  opt2->Step(absl::MakeSpan(p2), g);
  EXPECT_EQ(p, p2);
  // Adagrad: initial accumulator unset = 0.1.
  const std::vector<float> a = TwoSteps(Config(v1::DenseOptimizerConfig::ADAGRAD, 0.1f));
  v1::DenseOptimizerConfig with_acc = Config(v1::DenseOptimizerConfig::ADAGRAD, 0.1f);
  with_acc.set_initial_accumulator(0.1f);
  EXPECT_EQ(a, TwoSteps(with_acc));
}

TEST(DenseOptimizerTest, UnknownKindIsNull) {
  EXPECT_EQ(DenseOptimizer::Create(Config(static_cast<v1::DenseOptimizerConfig::Kind>(9), 0.1f), 4),
            nullptr);
}

TEST(DenseOptimizerTest, SaveLoadRoundTrip) {
  for (auto kind : {v1::DenseOptimizerConfig::SGD, v1::DenseOptimizerConfig::ADAGRAD,
                    v1::DenseOptimizerConfig::ADAM}) {
    SCOPED_TRACE(kind);
    const size_t n = 5;
    const v1::DenseOptimizerConfig config = Config(kind, 0.05f);
    std::unique_ptr<DenseOptimizer> a = DenseOptimizer::Create(config, n);
    std::vector<float> pa = {0.1f, -0.2f, 0.3f, 0.4f, -0.5f};
    auto grad = [n](int step) {
      std::vector<float> g(n);
      for (size_t i = 0; i < n; ++i) g[i] = std::sin(1.0f + step * 7 + i);
      return g;
    };
    for (int s = 0; s < 3; ++s) a->Step(absl::MakeSpan(pa), grad(s));
    const std::vector<float> state = a->SaveState();

    std::unique_ptr<DenseOptimizer> b = DenseOptimizer::Create(config, n);
    ASSERT_TRUE(b->LoadState(state).ok());
    EXPECT_EQ(b->SaveState(), state);
    std::vector<float> pb = pa;
    for (int s = 3; s < 6; ++s) {
      a->Step(absl::MakeSpan(pa), grad(s));
      b->Step(absl::MakeSpan(pb), grad(s));
    }
    EXPECT_EQ(std::memcmp(pa.data(), pb.data(), sizeof(float) * n), 0);
    EXPECT_EQ(a->SaveState(), b->SaveState());
  }
}

TEST(DenseOptimizerTest, StepCountBeyondFloatPrecision) {
  // The step count is stored as two 24-bit halves, exact beyond 2^24.
  std::unique_ptr<DenseOptimizer> adam =
      DenseOptimizer::Create(Config(v1::DenseOptimizerConfig::ADAM, 0.1f), 1);
  std::vector<float> state = adam->SaveState();
  ASSERT_EQ(state.size(), 5u);
  state[1] = 16777215.0f;  // step = 2^24 - 1 + 3 * 2^24
  state[2] = 3.0f;
  ASSERT_TRUE(adam->LoadState(state).ok());
  std::vector<float> p = {0.0f};
  const float g = 1.0f;
  adam->Step(absl::MakeSpan(p), absl::MakeConstSpan(&g, 1));  // step 2^26
  const std::vector<float> after = adam->SaveState();
  EXPECT_EQ(after[1], 0.0f);
  EXPECT_EQ(after[2], 4.0f);
}

TEST(DenseOptimizerTest, LoadStateRejectsForeignState) {
  std::unique_ptr<DenseOptimizer> adagrad2 =
      DenseOptimizer::Create(Config(v1::DenseOptimizerConfig::ADAGRAD, 0.1f), 2);
  std::unique_ptr<DenseOptimizer> adam1 =
      DenseOptimizer::Create(Config(v1::DenseOptimizerConfig::ADAM, 0.1f), 1);
  std::unique_ptr<DenseOptimizer> adam2 =
      DenseOptimizer::Create(Config(v1::DenseOptimizerConfig::ADAM, 0.1f), 2);
  const std::vector<float> before = adam1->SaveState();
  // Same length (3 + 2 = 3 + 2 * 1), other kind.
  absl::Status s = adam1->LoadState(adagrad2->SaveState());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(adam1->SaveState(), before);  // unchanged
  EXPECT_EQ(adam1->LoadState(adam2->SaveState()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(adam1->LoadState({}).code(), absl::StatusCode::kInvalidArgument);
  std::vector<float> bad = before;
  bad[1] = 0.5f;  // not a count
  EXPECT_EQ(adam1->LoadState(bad).code(), absl::StatusCode::kInvalidArgument);
  bad[1] = -1.0f;
  EXPECT_EQ(adam1->LoadState(bad).code(), absl::StatusCode::kInvalidArgument);
}

// ---- Training a tower (common/model/dense_tower.h) with an optimizer.

TEST(DenseOptimizerTest, AdamTrainsATowerOnASeparableProblem) {
  // label = [dense_0 - dense_1 + t > 0], with t = <f_0, u> for CONCAT and the
  // interaction DOT computes, t = 2 <f_0, f_1>, for DOT.
  for (auto kind : {v1::DenseTowerConfig::DOT, v1::DenseTowerConfig::CONCAT}) {
    SCOPED_TRACE(kind);
    v1::DenseTowerConfig tower_config;
    tower_config.add_bottom_mlp(16);
    tower_config.add_bottom_mlp(4);
    tower_config.add_top_mlp(16);
    tower_config.set_interaction(kind);
    tower_config.set_init_seed(1);
    absl::StatusOr<std::unique_ptr<model::DenseTower>> made =
        model::DenseTower::Create(tower_config, 2, {4, 4});
    ASSERT_TRUE(made.ok()) << made.status();
    std::unique_ptr<model::DenseTower> tower = std::move(*made);
    v1::DenseOptimizerConfig opt_config;
    opt_config.set_kind(v1::DenseOptimizerConfig::ADAM);
    opt_config.set_learning_rate(0.01f);
    std::unique_ptr<DenseOptimizer> opt =
        DenseOptimizer::Create(opt_config, tower->parameters().size());
    const std::vector<float> u = {0.5f, -1.0f, 0.25f, 1.0f};
    std::mt19937 rng(5);
    std::normal_distribution<float> normal;
    const int batch = 128;
    std::vector<float> dense(batch * 2), pooled(batch * 8), labels(batch), logits(batch),
        dlogits(batch), d_pooled(batch * 8);
    float first = 0, last = 0;
    for (int step = 0; step < 400; ++step) {
      for (int b = 0; b < batch; ++b) {
        for (float& x : absl::MakeSpan(dense).subspan(b * 2, 2)) x = normal(rng);
        for (float& x : absl::MakeSpan(pooled).subspan(b * 8, 8)) x = normal(rng);
        float s = dense[b * 2] - dense[b * 2 + 1];
        for (int k = 0; k < 4; ++k) {
          s += kind == v1::DenseTowerConfig::DOT ? 2 * pooled[b * 8 + k] * pooled[b * 8 + 4 + k]
                                                 : pooled[b * 8 + k] * u[k];
        }
        labels[b] = s > 0 ? 1.0f : 0.0f;
      }
      tower->Forward(batch, dense, pooled, absl::MakeSpan(logits));
      const float loss =
          model::BceWithLogits(logits, labels, {}, 1.0f / batch, absl::MakeSpan(dlogits));
      tower->Backward(dlogits, absl::MakeSpan(d_pooled));
      opt->Step(tower->parameters(), tower->gradients());
      if (step < 10) first += loss / 10;
      if (step >= 390) last += loss / 10;
    }
    std::printf("%s: loss %.3f -> %.3f\n", kind == v1::DenseTowerConfig::DOT ? "DOT" : "CONCAT",
                first, last);
    EXPECT_GT(first, 0.4f);
    EXPECT_LT(last, 0.1f);
  }
}

}  // namespace
}  // namespace ember::worker
