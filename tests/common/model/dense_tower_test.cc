// Copyright 2026 The Ember Authors.
//
// Tests of the CPU dense tower (common/model/dense_tower.cc, layers.cc, loss.cc):
// gradient checks of every layer kind and of whole towers, determinism, shape errors,
// the parameter layout, the BCE loss, and a tiny training run.

#include "common/model/dense_tower.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "common/model/layers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/model/gradient_check.h"

namespace ember::model {
namespace {

using dense_internal::ConcatInteractionBackward;
using dense_internal::ConcatInteractionForward;
using dense_internal::DotInteractionBackward;
using dense_internal::DotInteractionForward;
using dense_internal::DotOutputWidth;
using dense_internal::LinearBackward;
using dense_internal::LinearForward;
using dense_internal::ReluBackward;
using test::CheckGradient;
using test::CheckTowerGradient;
using test::Dot;
using test::MustCreate;
using test::Random;
using ::testing::HasSubstr;

// ---- Layer kernels.

TEST(LinearTest, ForwardMatchesNaive) {
  for (int out : {1, 5}) {
    const int batch = 3, in = 4;
    std::vector<float> x = Random(batch * in, 1), w = Random(out * in, 2), b = Random(out, 3);
    std::vector<float> y(batch * out), y_relu(batch * out);
    LinearForward(batch, in, out, x.data(), w.data(), b.data(), false, y.data());
    LinearForward(batch, in, out, x.data(), w.data(), b.data(), true, y_relu.data());
    for (int r = 0; r < batch; ++r) {
      for (int o = 0; o < out; ++o) {
        double s = b[o];
        for (int k = 0; k < in; ++k) s += double{x[r * in + k]} * w[o * in + k];
        EXPECT_NEAR(y[r * out + o], s, 1e-5);
        EXPECT_NEAR(y_relu[r * out + o], std::max(s, 0.0), 1e-5);
      }
    }
  }
}

// L = sum(R .* layer(x)) for a Linear layer with or without ReLU.
void CheckLinearGradient(int batch, int in, int out, bool relu) {
  SCOPED_TRACE(testing::Message() << "in " << in << " out " << out << " relu " << relu);
  std::vector<float> x = Random(batch * in, 11), w = Random(out * in, 12),
                     b = Random(out, 13, 0.5f), r = Random(batch * out, 14);
  std::vector<float> y(batch * out);
  auto loss = [&] {
    LinearForward(batch, in, out, x.data(), w.data(), b.data(), relu, y.data());
    return Dot(r, y);
  };
  loss();
  std::vector<float> dy = r;
  if (relu) ReluBackward(dy.size(), y.data(), dy.data());
  std::vector<float> dw(out * in, 99.0f), db(out, 99.0f), dx(batch * in, 99.0f);
  LinearBackward(batch, in, out, x.data(), w.data(), dy.data(), dw.data(), db.data(), dx.data());
  int skipped = CheckGradient(loss, w.data(), w.size(), dw.data());
  skipped += CheckGradient(loss, b.data(), b.size(), db.data());
  skipped += CheckGradient(loss, x.data(), x.size(), dx.data());
  EXPECT_LE(skipped, static_cast<int>((w.size() + b.size() + x.size()) / 20));
  // No dx wanted: the parameter gradients are the same.
  std::vector<float> dw2(out * in), db2(out);
  LinearBackward(batch, in, out, x.data(), w.data(), dy.data(), dw2.data(), db2.data(), nullptr);
  EXPECT_EQ(dw, dw2);
  EXPECT_EQ(db, db2);
}

TEST(LinearTest, GradientCheck) {
  CheckLinearGradient(6, 5, 7, false);
  CheckLinearGradient(6, 5, 7, true);
  CheckLinearGradient(6, 9, 1, false);
  CheckLinearGradient(1, 3, 2, true);
}

TEST(ReluTest, BackwardMasksNonPositiveOutputs) {
  std::vector<float> y = {0.0f, 1.0f, 0.0f, 2.5f};
  std::vector<float> dy = {1.0f, 2.0f, -3.0f, 4.0f};
  ReluBackward(y.size(), y.data(), dy.data());
  EXPECT_EQ(dy, (std::vector<float>{0.0f, 2.0f, 0.0f, 4.0f}));
}

// Every kernel variant: dims 8, 16, 32 are specialized; 4 and 12 (8 + a tail) are not.
class DotInteractionTest : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(Dims, DotInteractionTest, ::testing::Values(4, 8, 12, 16, 32));

TEST_P(DotInteractionTest, ForwardMatchesNaive) {
  const int batch = 2, features = 3, dim = GetParam();
  std::vector<float> bottom = Random(batch * dim, 21), pooled = Random(batch * features * dim, 22);
  for (bool has_bottom : {true, false}) {
    const int n = features + has_bottom;
    const int width = DotOutputWidth(has_bottom, features, dim);
    EXPECT_EQ(width, (has_bottom ? dim : 0) + n * (n - 1) / 2);
    std::vector<float> out(batch * width);
    DotInteractionForward(batch, features, dim, has_bottom ? bottom.data() : nullptr, pooled.data(),
                          out.data());
    for (int r = 0; r < batch; ++r) {
      // Rows of Z for example r.
      auto row = [&](int i) -> const float* {
        if (has_bottom && i == 0) return &bottom[r * dim];
        return &pooled[(r * features + i - has_bottom) * dim];
      };
      int p = 0;
      if (has_bottom) {
        for (int k = 0; k < dim; ++k) EXPECT_EQ(out[r * width + p++], bottom[r * dim + k]);
      }
      for (int i = 1; i < n; ++i) {
        for (int j = 0; j < i; ++j) {
          double s = 0;
          for (int k = 0; k < dim; ++k) s += double{row(i)[k]} * row(j)[k];
          EXPECT_NEAR(out[r * width + p++], s, 1e-5) << "pair " << i << "," << j;
        }
      }
      EXPECT_EQ(p, width);
    }
  }
}

TEST_P(DotInteractionTest, GradientCheck) {
  const int batch = 3, dim = GetParam();
  for (int features : {1, 2, 5}) {
    for (bool has_bottom : {true, false}) {
      if (features + has_bottom < 2) continue;
      SCOPED_TRACE(testing::Message() << features << " features, bottom " << has_bottom);
      const int width = DotOutputWidth(has_bottom, features, dim);
      std::vector<float> bottom = Random(batch * dim, 31),
                         pooled = Random(batch * features * dim, 32), r = Random(batch * width, 33);
      std::vector<float> out(batch * width);
      const float* b = has_bottom ? bottom.data() : nullptr;
      auto loss = [&] {
        DotInteractionForward(batch, features, dim, b, pooled.data(), out.data());
        return Dot(r, out);
      };
      loss();
      std::vector<float> d_bottom(batch * dim, 99.0f), d_pooled(pooled.size(), 99.0f);
      DotInteractionBackward(batch, features, dim, b, pooled.data(), r.data(),
                             has_bottom ? d_bottom.data() : nullptr, d_pooled.data());
      EXPECT_EQ(CheckGradient(loss, pooled.data(), pooled.size(), d_pooled.data()), 0);
      if (has_bottom) {
        EXPECT_EQ(CheckGradient(loss, bottom.data(), bottom.size(), d_bottom.data()), 0);
      }
    }
  }
}

TEST(ConcatInteractionTest, ForwardAndBackwardAreSlices) {
  const int batch = 2, bw = 3, pw = 4;
  std::vector<float> bottom = Random(batch * bw, 41), pooled = Random(batch * pw, 42);
  std::vector<float> out(batch * (bw + pw));
  ConcatInteractionForward(batch, bw, pw, bottom.data(), pooled.data(), out.data());
  for (int r = 0; r < batch; ++r) {
    for (int k = 0; k < bw; ++k) EXPECT_EQ(out[r * 7 + k], bottom[r * bw + k]);
    for (int k = 0; k < pw; ++k) EXPECT_EQ(out[r * 7 + bw + k], pooled[r * pw + k]);
  }
  std::vector<float> d_bottom(batch * bw), d_pooled(batch * pw);
  ConcatInteractionBackward(batch, bw, pw, out.data(), d_bottom.data(), d_pooled.data());
  EXPECT_EQ(d_bottom, bottom);
  EXPECT_EQ(d_pooled, pooled);
}

// ---- The tower.

v1::DenseTowerConfig Config(std::vector<uint32_t> bottom, v1::DenseTowerConfig::Interaction kind,
                            std::vector<uint32_t> top, uint64_t seed = 1) {
  v1::DenseTowerConfig config;
  for (uint32_t s : bottom) config.add_bottom_mlp(s);
  for (uint32_t s : top) config.add_top_mlp(s);
  config.set_interaction(kind);
  config.set_init_seed(seed);
  return config;
}

size_t ExpectedParameters(int in, const std::vector<uint32_t>& sizes) {
  size_t n = 0;
  for (uint32_t s : sizes) {
    n += static_cast<size_t>(in) * s + s;
    in = static_cast<int>(s);
  }
  return n;
}

TEST(DenseTowerTest, GradientCheckDot) {
  CheckTowerGradient(Config({8, 4}, v1::DenseTowerConfig::DOT, {8, 6}), 3, {4, 4, 4, 4});
}

TEST(DenseTowerTest, GradientCheckDotSingleFeatureNoTopMlp) {
  CheckTowerGradient(Config({6, 3}, v1::DenseTowerConfig::DOT, {}), 2, {3});
}

TEST(DenseTowerTest, GradientCheckDotRawDenseAsBottom) {
  // No bottom MLP: the 4 dense features are the bottom vector.
  CheckTowerGradient(Config({}, v1::DenseTowerConfig::DOT, {5}), 4, {4, 4, 4});
}

TEST(DenseTowerTest, GradientCheckDotWithoutDense) {
  CheckTowerGradient(Config({8, 4}, v1::DenseTowerConfig::DOT, {6}), 0, {4, 4, 4});
}

TEST(DenseTowerTest, GradientCheckConcat) {
  CheckTowerGradient(Config({8, 4}, v1::DenseTowerConfig::CONCAT, {7, 5}), 3, {3, 5, 2});
}

TEST(DenseTowerTest, GradientCheckConcatWithoutDense) {
  CheckTowerGradient(Config({8, 4}, v1::DenseTowerConfig::CONCAT, {7}), 0, {3, 5});
}

TEST(DenseTowerTest, GradientCheckConcatDenseOnly) {
  CheckTowerGradient(Config({6}, v1::DenseTowerConfig::CONCAT, {5}), 3, {});
}

TEST(DenseTowerTest, ParameterCountAndLayout) {
  // The benchmark model: 3 dense, bottom [64, 16], 8 features of dim 16, top [64, 32].
  std::unique_ptr<DenseTower> tower =
      MustCreate(Config({64, 16}, v1::DenseTowerConfig::DOT, {64, 32}), 3, std::vector<int>(8, 16));
  ASSERT_NE(tower, nullptr);
  EXPECT_EQ(tower->pooled_width(), 128);
  const int interaction = 16 + 9 * 8 / 2;
  const size_t expected =
      ExpectedParameters(3, {64, 16}) + ExpectedParameters(interaction, {64, 32, 1});
  EXPECT_EQ(expected, 6801u);
  EXPECT_EQ(tower->parameters().size(), expected);
  EXPECT_EQ(tower->gradients().size(), expected);

  // Layout: W (out x in) then b (out) per layer; weights Xavier-uniform, biases 0.
  struct Shape {
    int in, out;
  };
  const Shape layers[] = {{3, 64}, {64, 16}, {interaction, 64}, {64, 32}, {32, 1}};
  absl::Span<const float> p = tower->parameters();
  size_t offset = 0;
  for (const Shape& layer : layers) {
    const float limit = std::sqrt(6.0f / (layer.in + layer.out));
    float max_abs = 0;
    for (int i = 0; i < layer.in * layer.out; ++i) {
      max_abs = std::max(max_abs, std::fabs(p[offset + i]));
    }
    EXPECT_LE(max_abs, limit);
    if (layer.in * layer.out >= 64) {
      EXPECT_GT(max_abs, 0.8f * limit);  // spans the range
    }
    offset += layer.in * layer.out;
    for (int i = 0; i < layer.out; ++i) EXPECT_EQ(p[offset + i], 0.0f);
    offset += layer.out;
  }
  EXPECT_EQ(offset, expected);
}

TEST(DenseTowerTest, NoDenseConcatSkipsBottomMlp) {
  std::unique_ptr<DenseTower> tower =
      MustCreate(Config({64, 16}, v1::DenseTowerConfig::CONCAT, {8}), 0, {4, 6});
  ASSERT_NE(tower, nullptr);
  EXPECT_EQ(tower->parameters().size(), ExpectedParameters(10, {8, 1}));
}

TEST(DenseTowerTest, ShapeErrors) {
  using v1::DenseTowerConfig;
  auto error = [](const DenseTowerConfig& config, int num_dense, std::vector<int> dims) {
    absl::StatusOr<std::unique_ptr<DenseTower>> tower =
        DenseTower::Create(config, num_dense, std::move(dims));
    EXPECT_FALSE(tower.ok());
    return tower.ok() ? absl::OkStatus() : tower.status();
  };
  const DenseTowerConfig dot = Config({8, 4}, DenseTowerConfig::DOT, {8});
  const DenseTowerConfig concat = Config({8, 4}, DenseTowerConfig::CONCAT, {8});

  absl::Status s = error(dot, 3, {4, 5});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("feature 1 has dim 5"));
  EXPECT_THAT(error(concat, 0, {}).message(), HasSubstr("no inputs"));
  EXPECT_THAT(error(Config({8, 0}, DenseTowerConfig::DOT, {8}), 3, {4}).message(),
              HasSubstr("bottom_mlp[1] is 0"));
  EXPECT_THAT(error(Config({8, 4}, DenseTowerConfig::CONCAT, {0}), 3, {4}).message(),
              HasSubstr("top_mlp[0] is 0"));
  EXPECT_THAT(error(dot, -1, {4}).message(), HasSubstr("num_dense"));
  EXPECT_THAT(error(concat, 3, {4, 0}).message(), HasSubstr("feature_dims[1]"));
  // DOT without dense features: the features alone, so at least two of one dim.
  EXPECT_THAT(error(dot, 0, {4}).message(), HasSubstr("at least two"));
  EXPECT_THAT(error(dot, 0, {4, 3}).message(), HasSubstr("feature 1 has dim 3"));
  EXPECT_THAT(error(dot, 3, {}).message(), HasSubstr("at least two"));
  DenseTowerConfig bad = dot;
  bad.set_interaction(static_cast<DenseTowerConfig::Interaction>(7));
  EXPECT_THAT(error(bad, 3, {4}).message(), HasSubstr("unknown interaction"));
}

TEST(DenseTowerTest, ZeroFieldsTakeDefaults) {
  // interaction 0 = DOT, init_seed 0 = 1.
  std::unique_ptr<DenseTower> a =
      MustCreate(Config({8, 4}, v1::DenseTowerConfig::INTERACTION_UNSPECIFIED, {8}, 0), 3, {4, 4});
  std::unique_ptr<DenseTower> b =
      MustCreate(Config({8, 4}, v1::DenseTowerConfig::DOT, {8}, 1), 3, {4, 4});
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(a->parameters().size(), b->parameters().size());
  EXPECT_TRUE(std::equal(a->parameters().begin(), a->parameters().end(), b->parameters().begin()));
}

TEST(DenseTowerTest, Deterministic) {
  const v1::DenseTowerConfig config = Config({16, 8}, v1::DenseTowerConfig::DOT, {16, 8}, 7);
  const std::vector<int> dims(4, 8);
  std::unique_ptr<DenseTower> a = MustCreate(config, 3, dims);
  std::unique_ptr<DenseTower> b = MustCreate(config, 3, dims);
  std::unique_ptr<DenseTower> other =
      MustCreate(Config({16, 8}, v1::DenseTowerConfig::DOT, {16, 8}, 8), 3, dims);
  ASSERT_TRUE(a && b && other);
  auto params = [](DenseTower& t) {
    return std::vector<float>(t.parameters().begin(), t.parameters().end());
  };
  EXPECT_EQ(params(*a), params(*b));
  EXPECT_NE(params(*a), params(*other));

  const int batch = 37;
  std::vector<float> dense = Random(batch * 3, 61), pooled = Random(batch * 32, 62),
                     dlogits = Random(batch, 63);
  auto run = [&](DenseTower& t, std::vector<float>& logits, std::vector<float>& grads,
                 std::vector<float>& d_pooled) {
    logits.assign(batch, 0);
    d_pooled.assign(pooled.size(), 0);
    t.Forward(batch, dense, pooled, absl::MakeSpan(logits));
    t.Backward(dlogits, absl::MakeSpan(d_pooled));
    grads.assign(t.gradients().begin(), t.gradients().end());
  };
  std::vector<float> l1, g1, p1, l2, g2, p2, l3, g3, p3;
  run(*a, l1, g1, p1);
  run(*a, l2, g2, p2);
  run(*b, l3, g3, p3);
  auto same_bits = [](const std::vector<float>& x, const std::vector<float>& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), 4 * x.size()) == 0;
  };
  EXPECT_TRUE(same_bits(l1, l2));
  EXPECT_TRUE(same_bits(g1, g2));
  EXPECT_TRUE(same_bits(p1, p2));
  EXPECT_TRUE(same_bits(l1, l3));
  EXPECT_TRUE(same_bits(g1, g3));
  EXPECT_TRUE(same_bits(p1, p3));
}

TEST(DenseTowerTest, BatchSizeMayChange) {
  // A smaller batch after a larger one reuses the buffers; each example's logit does not
  // depend on the rest of its batch.
  std::unique_ptr<DenseTower> tower =
      MustCreate(Config({16, 8}, v1::DenseTowerConfig::DOT, {16}), 3, {8, 8});
  ASSERT_NE(tower, nullptr);
  const int big = 64, small = 5;
  std::vector<float> dense = Random(big * 3, 71), pooled = Random(big * 16, 72);
  std::vector<float> logits_big(big), logits_small(small);
  tower->Forward(big, dense, pooled, absl::MakeSpan(logits_big));
  tower->Forward(small, absl::MakeSpan(dense).subspan(0, small * 3),
                 absl::MakeSpan(pooled).subspan(0, small * 16), absl::MakeSpan(logits_small));
  for (int i = 0; i < small; ++i) EXPECT_NEAR(logits_small[i], logits_big[i], 1e-5);
  std::vector<float> d_pooled(small * 16);
  std::vector<float> ones(small, 1.0f);
  tower->Backward(ones, absl::MakeSpan(d_pooled));
  // An empty batch: no logits, zero gradients.
  tower->Forward(0, {}, {}, {});
  tower->Backward({}, {});
  for (float g : tower->gradients()) ASSERT_EQ(g, 0.0f);
}

// Score: a row's logit is the same bits whichever batch it is scored in (what makes
// serving's Predict equal evaluation). The models are wide enough (>= 16) for Forward's
// sgemm to block rows by batch size.
TEST(DenseTowerTest, ScoreIsBatchInvariant) {
  for (const auto interaction : {v1::DenseTowerConfig::DOT, v1::DenseTowerConfig::CONCAT}) {
    SCOPED_TRACE(interaction == v1::DenseTowerConfig::DOT ? "DOT" : "CONCAT");
    std::unique_ptr<DenseTower> tower =
        MustCreate(Config({64, 16}, interaction, {64, 32}, 3), 3, std::vector<int>(8, 16));
    ASSERT_NE(tower, nullptr);
    const int rows = 1024, width = tower->pooled_width();
    const std::vector<float> dense = Random(rows * 3, 81), pooled = Random(rows * width, 82);
    std::vector<float> all(rows);
    tower->Score(rows, dense, pooled, absl::MakeSpan(all));
    for (const int size : {1, 7, 100}) {
      for (const int first : {0, 13, rows - size}) {
        SCOPED_TRACE(testing::Message() << size << " rows from " << first);
        std::vector<float> part(size);
        tower->Score(size, absl::MakeConstSpan(dense).subspan(first * 3, size * 3),
                     absl::MakeConstSpan(pooled).subspan(static_cast<size_t>(first) * width,
                                                         static_cast<size_t>(size) * width),
                     absl::MakeSpan(part));
        EXPECT_EQ(std::memcmp(part.data(), all.data() + first, sizeof(float) * size), 0);
      }
    }
    // Scores are logits of the same model: Forward agrees to float rounding.
    std::vector<float> forward(rows);
    tower->Forward(rows, dense, pooled, absl::MakeSpan(forward));
    for (int i = 0; i < rows; i += 97) EXPECT_NEAR(forward[i], all[i], 1e-4) << i;
    // Score clobbered nothing Forward + Backward need when Forward runs again.
    std::vector<float> d_pooled(static_cast<size_t>(rows) * width);
    tower->Backward(std::vector<float>(rows, 1.0f), absl::MakeSpan(d_pooled));
  }
}

TEST(DenseTowerTest, ClickProbabilityIsTheSigmoid) {
  EXPECT_EQ(ClickProbability(0.0f), 0.5f);
  EXPECT_NEAR(ClickProbability(2.0f), 1.0 / (1.0 + std::exp(-2.0)), 1e-7);
  EXPECT_EQ(ClickProbability(-200.0f), 0.0f);
  EXPECT_EQ(ClickProbability(200.0f), 1.0f);
}

// ---- Loss.

TEST(BceWithLogitsTest, HandComputedValues) {
  const std::vector<float> logits = {0.0f, 2.0f, -3.0f, 100.0f, -100.0f};
  const std::vector<float> labels = {1.0f, 0.0f, 1.0f, 0.0f, 1.0f};
  const double expected[] = {std::log(2.0), 2.0 + std::log1p(std::exp(-2.0)),
                             3.0 + std::log1p(std::exp(-3.0)), 100.0, 100.0};
  const double sigmoid[] = {0.5, 1 / (1 + std::exp(-2.0)), 1 / (1 + std::exp(3.0)), 1.0, 0.0};
  std::vector<float> d(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    const float loss = BceWithLogits(absl::MakeSpan(&logits[i], 1), absl::MakeSpan(&labels[i], 1),
                                     {}, 1.0f, absl::MakeSpan(&d[i], 1));
    EXPECT_NEAR(loss, expected[i], 1e-5 * expected[i]) << i;
    EXPECT_NEAR(d[i], sigmoid[i] - labels[i], 1e-7) << i;
  }
  EXPECT_NEAR(expected[0], 0.693147, 1e-6);
  EXPECT_NEAR(expected[1], 2.126928, 1e-6);

  // Weighted, scaled: sum_i w_i bce_i * scale, dlogits w_i (sigmoid - y) scale.
  const std::vector<float> weights = {1.0f, 2.0f, 0.0f, 0.5f, 1.0f};
  const float scale = 0.25f;
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) sum += weights[i] * expected[i];
  std::vector<float> dw(logits.size());
  const float loss = BceWithLogits(logits, labels, weights, scale, absl::MakeSpan(dw));
  EXPECT_NEAR(loss, sum * scale, 1e-5);
  for (size_t i = 0; i < logits.size(); ++i) {
    EXPECT_NEAR(dw[i], weights[i] * (sigmoid[i] - labels[i]) * scale, 1e-7) << i;
  }
}

TEST(BceWithLogitsTest, GradientMatchesDerivative) {
  for (float x : {-5.0f, -0.3f, 0.0f, 0.7f, 4.0f}) {
    for (float y : {0.0f, 1.0f, 0.3f}) {
      float d, unused;
      const float h = 1e-2f;
      const float xs[] = {x + h, x - h};
      BceWithLogits(absl::MakeSpan(&x, 1), absl::MakeSpan(&y, 1), {}, 1.0f, absl::MakeSpan(&d, 1));
      const double plus = BceWithLogits(absl::MakeSpan(&xs[0], 1), absl::MakeSpan(&y, 1), {}, 1.0f,
                                        absl::MakeSpan(&unused, 1));
      const double minus = BceWithLogits(absl::MakeSpan(&xs[1], 1), absl::MakeSpan(&y, 1), {}, 1.0f,
                                         absl::MakeSpan(&unused, 1));
      EXPECT_NEAR(d, (plus - minus) / (2 * h), 1e-4) << x << " " << y;
    }
  }
}

// ---- Speed (printed, not asserted): the benchmark model at batch 1024.

TEST(DenseTowerTest, ForwardBackwardSpeed) {
  for (auto kind :
       {v1::DenseTowerConfig::DOT, v1::DenseTowerConfig::CONCAT, v1::DenseTowerConfig::CROSS}) {
    std::unique_ptr<DenseTower> tower =
        MustCreate(Config({64, 16}, kind, {64, 32}), 3, std::vector<int>(8, 16));
    ASSERT_NE(tower, nullptr);
    const int batch = 1024;
    std::vector<float> dense = Random(batch * 3, 81), pooled = Random(batch * 128, 82),
                       dlogits = Random(batch, 83), logits(batch), d_pooled(batch * 128);
    auto step = [&] {
      tower->Forward(batch, dense, pooled, absl::MakeSpan(logits));
      tower->Backward(dlogits, absl::MakeSpan(d_pooled));
    };
    for (int i = 0; i < 5; ++i) step();
    // Wall time and this thread's CPU time (the better figure on a loaded machine); the
    // best of several rounds.
    auto cpu_us = [] {
      timespec ts;
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
      return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
    };
    double best_wall = 1e30, best_cpu = 1e30;
    for (int round = 0; round < 5; ++round) {
      const int iters = 20;
      const auto start = std::chrono::steady_clock::now();
      const double cpu_start = cpu_us();
      for (int i = 0; i < iters; ++i) step();
      const double cpu = cpu_us() - cpu_start;
      const std::chrono::duration<double, std::micro> wall =
          std::chrono::steady_clock::now() - start;
      best_wall = std::min(best_wall, wall.count() / iters);
      best_cpu = std::min(best_cpu, cpu / iters);
    }
    std::printf("%s forward+backward, batch 1024: %.0f us wall, %.0f us CPU\n",
                v1::DenseTowerConfig::Interaction_Name(kind).c_str(), best_wall, best_cpu);
  }
}

}  // namespace
}  // namespace ember::model
