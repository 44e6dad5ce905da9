// Copyright 2026 The Ember Authors.
//
// Each optimizer against values computed by hand (shown in the comments) for a few
// steps on a 2-dim row.

#include "server/store/internal/optimizer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "server/store/table_config.h"

namespace ember {
namespace {

v1::OptimizerConfig Normalized(v1::OptimizerConfig opt) {
  v1::TableConfig t;
  t.set_name("t");
  t.set_dim(2);
  *t.mutable_optimizer() = opt;
  return NormalizeTableConfig(t).value().optimizer();
}

struct Row {
  std::vector<float> w;
  std::vector<float> state;
};

Row Step(const Optimizer& opt, Row row, std::vector<float> g, float scale = 1.0f) {
  std::vector<float> floats = row.w;
  floats.insert(floats.end(), row.state.begin(), row.state.end());
  std::vector<float> out(floats.size());
  EXPECT_TRUE(opt.Apply(floats.data(), out.data(), g.data(), scale));
  floats = out;
  std::copy(floats.begin(), floats.begin() + row.w.size(), row.w.begin());
  std::copy(floats.begin() + row.w.size(), floats.end(), row.state.begin());
  return row;
}

Row Fresh(const Optimizer& opt, std::vector<float> w) {
  Row r{std::move(w), std::vector<float>(opt.state_floats())};
  opt.InitState(r.state.data());
  return r;
}

TEST(OptimizerTest, Sgd) {
  v1::OptimizerConfig c;
  c.set_kind(v1::OptimizerConfig::SGD);
  c.set_learning_rate(0.5f);
  auto opt = Optimizer::Create(Normalized(c), 2);
  EXPECT_EQ(opt->state_floats(), 0u);
  Row r = Fresh(*opt, {1.0f, -1.0f});
  r = Step(*opt, r, {0.2f, -0.4f});  // 1 - 0.1 = 0.9; -1 + 0.2 = -0.8
  EXPECT_FLOAT_EQ(r.w[0], 0.9f);
  EXPECT_FLOAT_EQ(r.w[1], -0.8f);
  r = Step(*opt, r, {1.0f, 0.0f});  // 0.9 - 0.5 = 0.4
  EXPECT_FLOAT_EQ(r.w[0], 0.4f);
  EXPECT_FLOAT_EQ(r.w[1], -0.8f);
}

TEST(OptimizerTest, Adagrad) {
  v1::OptimizerConfig c;
  c.set_kind(v1::OptimizerConfig::ADAGRAD);
  c.set_learning_rate(0.1f);
  c.set_initial_accumulator(0.0f);  // explicit zero
  c.set_epsilon(1e-8f);
  auto opt = Optimizer::Create(Normalized(c), 2);
  EXPECT_EQ(opt->state_floats(), 2u);
  Row r = Fresh(*opt, {0.0f, 0.0f});
  EXPECT_EQ(r.state[0], 0.0f);
  // step 1: a = 9; w = -0.1 * 3 / 3 = -0.1.   a = 16; w = -0.1 * 4 / 4 = -0.1
  r = Step(*opt, r, {3.0f, 4.0f});
  EXPECT_NEAR(r.w[0], -0.1f, 1e-7);
  EXPECT_NEAR(r.w[1], -0.1f, 1e-7);
  EXPECT_FLOAT_EQ(r.state[0], 9.0f);
  // step 2: a = 9 + 16 = 25; w = -0.1 - 0.1 * 4 / 5 = -0.18
  r = Step(*opt, r, {4.0f, 0.0f});
  EXPECT_NEAR(r.w[0], -0.18f, 1e-6);
  EXPECT_NEAR(r.w[1], -0.1f, 1e-7);
  EXPECT_FLOAT_EQ(r.state[0], 25.0f);
}

// The accumulator a fresh row starts from is the default, 1e-6 (the defaults sweep's;
// it was TensorFlow's 0.1 before 2026-12-04).
TEST(OptimizerTest, AdagradDefaultAccumulatorIsNearZero) {
  v1::OptimizerConfig c;
  c.set_kind(v1::OptimizerConfig::ADAGRAD);
  auto opt = Optimizer::Create(Normalized(c), 2);
  Row r = Fresh(*opt, {0, 0});
  EXPECT_FLOAT_EQ(r.state[0], kDefaultInitialAccumulator);
  EXPECT_FLOAT_EQ(r.state[0], 1e-6f);
}

TEST(OptimizerTest, Adam) {
  v1::OptimizerConfig c;
  c.set_kind(v1::OptimizerConfig::ADAM);
  c.set_learning_rate(0.1f);
  c.set_beta1(0.5f);
  c.set_beta2(0.75f);
  c.set_epsilon(1e-8f);
  auto opt = Optimizer::Create(Normalized(c), 2);
  EXPECT_EQ(opt->state_floats(), 6u);
  Row r = Fresh(*opt, {1.0f, 1.0f});
  // step 1, g = 2: m = 1, v = 1; mhat = 1 / 0.5 = 2; vhat = 1 / 0.25 = 4;
  //   w = 1 - 0.1 * 2 / 2 = 0.9
  r = Step(*opt, r, {2.0f, 0.0f});
  EXPECT_NEAR(r.w[0], 0.9f, 1e-6);
  EXPECT_FLOAT_EQ(r.w[1], 1.0f);  // zero gradient: m = v = 0, no move
  // step 2, g = 4: m = 0.5 + 2 = 2.5; v = 0.75 + 4 = 4.75; p1 = 0.25, p2 = 0.5625
  //   mhat = 2.5 / 0.75 = 3.3333; vhat = 4.75 / 0.4375 = 10.857; sqrt = 3.29502
  //   w = 0.9 - 0.1 * 3.3333 / 3.29502 = 0.798837
  r = Step(*opt, r, {4.0f, 0.0f});
  EXPECT_NEAR(r.w[0], 0.798837f, 1e-5);
  EXPECT_FLOAT_EQ(r.state[4], 0.25f);
  EXPECT_FLOAT_EQ(r.state[5], 0.5625f);
}

TEST(OptimizerTest, FtrlWithL1AndL2) {
  v1::OptimizerConfig c;
  c.set_kind(v1::OptimizerConfig::FTRL);
  c.set_learning_rate(0.5f);  // alpha
  c.set_ftrl_l1(1.0f);
  c.set_ftrl_l2(2.0f);
  c.set_ftrl_beta(1.0f);
  auto opt = Optimizer::Create(Normalized(c), 2);
  EXPECT_EQ(opt->state_floats(), 4u);
  Row r = Fresh(*opt, {0.0f, 0.0f});
  // step 1, g = (3, 0.5), w = 0: n = 9, sigma = 3 / 0.5 = 6, z = 3 - 0 = 3;
  //   |z| > l1: w = -(3 - 1) / ((1 + 3) / 0.5 + 2) = -2 / 10 = -0.2
  //   dim 1: n = 0.25, z = 0.5 <= l1 -> w = 0
  r = Step(*opt, r, {3.0f, 0.5f});
  EXPECT_NEAR(r.w[0], -0.2f, 1e-6);
  EXPECT_EQ(r.w[1], 0.0f);
  EXPECT_FLOAT_EQ(r.state[0], 3.0f);  // z
  EXPECT_FLOAT_EQ(r.state[2], 9.0f);  // n
  // step 2, g = 4: n' = 25, sigma = (5 - 3) / 0.5 = 4, z = 3 + 4 - 4 * (-0.2) = 7.8
  //   w = -(7.8 - 1) / ((1 + 5) / 0.5 + 2) = -6.8 / 14 = -0.485714
  r = Step(*opt, r, {4.0f, 0.0f});
  EXPECT_NEAR(r.state[0], 7.8f, 1e-5);
  EXPECT_NEAR(r.w[0], -0.485714f, 1e-5);
}

TEST(OptimizerTest, FrequencyAwareScale) {
  v1::OptimizerConfig c;
  c.set_kind(v1::OptimizerConfig::SGD);
  c.set_learning_rate(1.0f);
  c.set_freq_power(0.5f);
  c.set_freq_reference_count(100.0f);
  c.set_freq_min_scale(0.5f);
  c.set_freq_max_scale(4.0f);
  auto opt = Optimizer::Create(Normalized(c), 2);
  EXPECT_FLOAT_EQ(opt->LearningRateScale(100), 1.0f);    // sqrt(100/100)
  EXPECT_FLOAT_EQ(opt->LearningRateScale(25), 2.0f);     // sqrt(100/25)
  EXPECT_FLOAT_EQ(opt->LearningRateScale(1), 4.0f);      // sqrt(100) = 10, clamped to 4
  EXPECT_FLOAT_EQ(opt->LearningRateScale(400), 0.5f);    // sqrt(1/4)
  EXPECT_FLOAT_EQ(opt->LearningRateScale(10000), 0.5f);  // 0.1 clamped to 0.5
  v1::OptimizerConfig off;
  auto plain = Optimizer::Create(Normalized(off), 2);
  EXPECT_FLOAT_EQ(plain->LearningRateScale(1), 1.0f);
}

// Finite gradients that overflow: Apply says so, and an update in place is what the
// table never stores (embedding_store_finite_test covers the push).
TEST(OptimizerTest, ApplyReportsAnUpdateThatIsNotFinite) {
  for (auto kind : {v1::OptimizerConfig::SGD, v1::OptimizerConfig::ADAGRAD,
                    v1::OptimizerConfig::ADAM, v1::OptimizerConfig::FTRL}) {
    SCOPED_TRACE(v1::OptimizerConfig::Kind_Name(kind));
    v1::OptimizerConfig c;
    c.set_kind(kind);
    c.set_learning_rate(1.0f);
    auto opt = Optimizer::Create(Normalized(c), 2);
    std::vector<float> row(2 + opt->state_floats());
    row[0] = -3e38f;
    opt->InitState(row.data() + 2);
    std::vector<float> out(row.size());
    const std::vector<float> small = {0.5f, -0.5f};
    EXPECT_TRUE(opt->Apply(row.data(), out.data(), small.data(), 1.0f));
    const std::vector<float> huge = {3e38f, 0.5f};
    EXPECT_FALSE(opt->Apply(row.data(), out.data(), huge.data(), 1.0f));
  }
  const float nan = std::nanf("");
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> values = {0.0f, 3e38f, -3e38f, nan, inf, -inf};
  EXPECT_TRUE(Optimizer::AllFinite(values.data(), 3));
  for (size_t i = 3; i < values.size(); ++i) EXPECT_FALSE(Optimizer::AllFinite(&values[i], 1));
}

TEST(TableConfigTest, RejectsBadConfigs) {
  v1::TableConfig t;
  t.set_name("ok_name");
  t.set_dim(8);
  EXPECT_TRUE(NormalizeTableConfig(t).ok());
  auto bad = [](auto mutate) {
    v1::TableConfig c;
    c.set_name("t");
    c.set_dim(8);
    mutate(c);
    return NormalizeTableConfig(c).status().code();
  };
  EXPECT_EQ(bad([](auto& c) { c.set_name(""); }), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](auto& c) { c.set_name("has space"); }), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](auto& c) { c.set_name("__reserved"); }), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](auto& c) { c.set_dim(0); }), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](auto& c) { c.set_dim(kMaxDim + 1); }), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](auto& c) { c.mutable_optimizer()->set_learning_rate(-1); }),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](auto& c) { c.mutable_optimizer()->set_learning_rate(NAN); }),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](auto& c) { c.mutable_optimizer()->set_beta1(1.0f); }),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](auto& c) { c.mutable_eviction()->set_count_decay(1.5f); }),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](auto& c) { c.mutable_admission()->set_sketch_width(1000); }),
            absl::StatusCode::kInvalidArgument);
}

TEST(TableConfigTest, FillsDefaults) {
  v1::TableConfig t;
  t.set_name("item");
  t.set_dim(16);
  auto n = NormalizeTableConfig(t).value();
  EXPECT_EQ(n.seed(), DefaultTableSeed("item"));
  EXPECT_NE(n.seed(), 0u);
  // The defaults sweep's choice (docs/PERFORMANCE.md "Defaults that learn").
  EXPECT_EQ(n.optimizer().kind(), v1::OptimizerConfig::ADAGRAD);
  EXPECT_FLOAT_EQ(n.optimizer().learning_rate(), 0.1f);
  EXPECT_TRUE(n.optimizer().has_initial_accumulator());
  EXPECT_FLOAT_EQ(n.optimizer().initial_accumulator(), 1e-6f);
  EXPECT_EQ(n.initializer().kind(), v1::InitializerConfig::UNIFORM);
  EXPECT_FLOAT_EQ(n.initializer().scale(), 0.05f);
  EXPECT_FLOAT_EQ(n.eviction().count_decay(), 1.0f);
}

// A kind without a learning rate gets that kind's default; an explicit accumulator of 0
// stays 0 (it is optional: set differs from unset).
TEST(TableConfigTest, LearningRateDefaultsByKindAndExplicitZeroAccumulatorStays) {
  for (auto [kind, lr] : {std::pair{v1::OptimizerConfig::ADAGRAD, 0.1f},
                          {v1::OptimizerConfig::ADAM, 0.01f},
                          {v1::OptimizerConfig::SGD, 3.0f},
                          {v1::OptimizerConfig::FTRL, 0.1f}}) {
    v1::TableConfig t;
    t.set_name("item");
    t.set_dim(8);
    t.mutable_optimizer()->set_kind(kind);
    EXPECT_FLOAT_EQ(NormalizeTableConfig(t).value().optimizer().learning_rate(), lr)
        << v1::OptimizerConfig::Kind_Name(kind);
  }
  v1::TableConfig t;
  t.set_name("item");
  t.set_dim(8);
  t.mutable_optimizer()->set_initial_accumulator(0.0f);
  auto n = NormalizeTableConfig(t).value();
  EXPECT_EQ(n.optimizer().kind(), v1::OptimizerConfig::ADAGRAD);
  EXPECT_EQ(n.optimizer().initial_accumulator(), 0.0f);
  // Normalizing is idempotent.
  auto again = NormalizeTableConfig(n).value();
  EXPECT_EQ(again.SerializeAsString(), n.SerializeAsString());
}

}  // namespace
}  // namespace ember
