// Copyright 2026 The Ember Authors.
//
// Tests of the CROSS (DCN-v2) interaction of the CPU dense tower (common/model/
// layers.h CrossForward / CrossBackward / AddTo, tower_layout.cc, dense_tower.cc):
// gradient checks of one cross layer and of whole CROSS towers (full and low rank),
// determinism, the parameter layout and initial weights, zero cross weights reducing
// to CONCAT, and shape errors.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "common/model/dense_tower.h"
#include "common/model/layers.h"
#include "common/model/tower_layout.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/model/gradient_check.h"

namespace ember::model {
namespace {

using dense_internal::AddTo;
using dense_internal::CrossBackward;
using dense_internal::CrossForward;
using dense_internal::LinearBackward;
using dense_internal::LinearForward;
using test::CheckGradient;
using test::CheckTowerGradient;
using test::Dot;
using test::MustCreate;
using test::Random;
using ::testing::HasSubstr;
using v1::DenseTowerConfig;

// ---- The kernels.

TEST(CrossKernelTest, ForwardMatchesDefinition) {
  const size_t n = 37;  // not a multiple of any vector width
  std::vector<float> x0 = Random(n, 1), u = Random(n, 2), x = Random(n, 3), out(n);
  CrossForward(n, x0.data(), u.data(), x.data(), out.data());
  // Up to rounding: the kernel may fuse the multiply-add.
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(out[i], x0[i] * u[i] + x[i], 1e-6f) << i;
  // In place (x_next aliasing x).
  CrossForward(n, x0.data(), u.data(), x.data(), x.data());
  EXPECT_EQ(x, out);
  // CrossBackward accumulates into dx0; AddTo adds.
  std::vector<float> g = Random(n, 4), du(n, 99.0f), dx0(n, 1.0f), y(n, 2.0f);
  CrossBackward(n, x0.data(), u.data(), g.data(), du.data(), dx0.data());
  AddTo(n, g.data(), y.data());
  for (size_t i = 0; i < n; ++i) {
    EXPECT_FLOAT_EQ(du[i], g[i] * x0[i]);
    EXPECT_NEAR(dx0[i], 1.0f + g[i] * u[i], 1e-6f);
    EXPECT_FLOAT_EQ(y[i], 2.0f + g[i]);
  }
}

// One full-rank cross layer x_next = x0 * (W x + b) + x, with x0 and x independent
// inputs, composed of the kernels as the tower composes them; L = sum(R .* x_next).
TEST(CrossKernelTest, LayerGradientCheck) {
  for (int width : {1, 5, 16}) {
    SCOPED_TRACE(testing::Message() << "width " << width);
    const int batch = 4;
    const size_t n = static_cast<size_t>(batch) * width;
    std::vector<float> x0 = Random(n, 11), x = Random(n, 12), w = Random(width * width, 13),
                       b = Random(width, 14, 0.5f), r = Random(n, 15);
    std::vector<float> u(n), out(n);
    auto loss = [&] {
      LinearForward(batch, width, width, x.data(), w.data(), b.data(), false, u.data());
      CrossForward(n, x0.data(), u.data(), x.data(), out.data());
      return Dot(r, out);
    };
    loss();
    std::vector<float> du(n), dx0(n, 0.0f), dw(width * width), db(width), dx(n);
    CrossBackward(n, x0.data(), u.data(), r.data(), du.data(), dx0.data());
    LinearBackward(batch, width, width, x.data(), w.data(), du.data(), dw.data(), db.data(),
                   dx.data());
    AddTo(n, r.data(), dx.data());
    EXPECT_EQ(CheckGradient(loss, x0.data(), n, dx0.data()), 0);
    EXPECT_EQ(CheckGradient(loss, x.data(), n, dx.data()), 0);
    EXPECT_EQ(CheckGradient(loss, w.data(), w.size(), dw.data()), 0);
    EXPECT_EQ(CheckGradient(loss, b.data(), b.size(), db.data()), 0);
  }
}

// ---- The tower.

DenseTowerConfig CrossConfig(std::vector<uint32_t> bottom, std::vector<uint32_t> top,
                             uint32_t layers, uint32_t rank, uint64_t seed = 1) {
  DenseTowerConfig config;
  for (uint32_t s : bottom) config.add_bottom_mlp(s);
  for (uint32_t s : top) config.add_top_mlp(s);
  config.set_interaction(DenseTowerConfig::CROSS);
  config.set_cross_layers(layers);
  config.set_cross_rank(rank);
  config.set_init_seed(seed);
  return config;
}

TEST(CrossTowerTest, GradientCheckFullRank) {
  CheckTowerGradient(CrossConfig({8, 4}, {8, 6}, 2, 0), 3, {4, 3, 5});
}

TEST(CrossTowerTest, GradientCheckLowRank) {
  CheckTowerGradient(CrossConfig({8, 4}, {6}, 3, 3), 3, {4, 4});
}

TEST(CrossTowerTest, GradientCheckOneLayerNoTopMlp) {
  CheckTowerGradient(CrossConfig({6, 3}, {}, 1, 0), 2, {3});
}

TEST(CrossTowerTest, GradientCheckWithoutDense) {
  CheckTowerGradient(CrossConfig({8, 4}, {6}, 2, 0), 0, {4, 3});
}

TEST(CrossTowerTest, GradientCheckRawDenseAsBottom) {
  // No bottom MLP: the dense features themselves start x0 (their gradient is unused).
  CheckTowerGradient(CrossConfig({}, {5}, 2, 2), 4, {3, 3});
}

TEST(CrossTowerTest, GradientCheckDenseOnly) {
  CheckTowerGradient(CrossConfig({6}, {5}, 2, 0), 3, {});
}

size_t LinearParameters(int in, int out) { return static_cast<size_t>(in) * out + out; }

TEST(CrossTowerTest, ParameterLayoutAndInitialWeights) {
  // 3 dense, bottom [8, 4], features of dims 4, 3, 5: D = 4 + 12 = 16.
  const int d = 16;
  const size_t bottom = LinearParameters(3, 8) + LinearParameters(8, 4);
  const size_t top = LinearParameters(d, 8) + LinearParameters(8, 1);
  for (uint32_t rank : {0u, 3u}) {
    SCOPED_TRACE(testing::Message() << "rank " << rank);
    const DenseTowerConfig config = CrossConfig({8, 4}, {8}, 3, rank);
    absl::StatusOr<dense_internal::TowerLayout> layout =
        dense_internal::BuildTowerLayout(config, 3, {4, 3, 5});
    ASSERT_TRUE(layout.ok()) << layout.status();
    EXPECT_EQ(layout->interaction_width, d);
    EXPECT_EQ(layout->cross_layers, 3);
    EXPECT_EQ(layout->cross_rank, static_cast<int>(rank));
    const size_t weights_per_layer = rank == 0 ? d * d : 2 * d * rank;
    const size_t per_layer = weights_per_layer + (rank == 0 ? d : d + rank);
    EXPECT_EQ(layout->num_parameters, bottom + 3 * per_layer + top);
    ASSERT_EQ(layout->cross.size(), rank == 0 ? 3u : 6u);
    // Bottom, then the cross layers, then the top, each weights then bias.
    EXPECT_EQ(layout->cross.front().w, bottom);
    EXPECT_EQ(layout->top.front().w, bottom + 3 * per_layer);
    EXPECT_DOUBLE_EQ(layout->ForwardMacsPerExample(),
                     3 * 8 + 8 * 4 + 3.0 * weights_per_layer + d * 8 + 8);

    // Xavier-uniform cross weights, zero biases.
    std::unique_ptr<DenseTower> tower = MustCreate(config, 3, {4, 3, 5});
    ASSERT_NE(tower, nullptr);
    ASSERT_EQ(tower->parameters().size(), layout->num_parameters);
    absl::Span<const float> p = tower->parameters();
    for (const dense_internal::Layer& layer : layout->cross) {
      EXPECT_FALSE(layer.relu);
      const float limit = std::sqrt(6.0f / (layer.in + layer.out));
      float max_abs = 0;
      for (int i = 0; i < layer.in * layer.out; ++i)
        max_abs = std::max(max_abs, std::fabs(p[layer.w + i]));
      EXPECT_LE(max_abs, limit);
      EXPECT_GT(max_abs, 0.5f * limit);
      for (int i = 0; i < layer.out; ++i) EXPECT_EQ(p[layer.b + i], 0.0f);
    }
  }
  // cross_layers 0 means 2.
  absl::StatusOr<dense_internal::TowerLayout> layout =
      dense_internal::BuildTowerLayout(CrossConfig({8, 4}, {8}, 0, 0), 3, {4, 3, 5});
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->cross_layers, 2);
  EXPECT_EQ(layout->num_parameters, bottom + 2 * LinearParameters(d, d) + top);
}

// With every cross weight and bias 0, x_L = x0: the tower computes CONCAT's logits.
TEST(CrossTowerTest, ZeroCrossWeightsGiveConcat) {
  const std::vector<int> dims = {4, 3, 5};
  DenseTowerConfig concat = CrossConfig({8, 4}, {8}, 0, 0);
  concat.set_interaction(DenseTowerConfig::CONCAT);
  concat.clear_cross_layers();
  concat.clear_cross_rank();
  std::unique_ptr<DenseTower> plain = MustCreate(concat, 3, dims);
  std::unique_ptr<DenseTower> cross = MustCreate(CrossConfig({8, 4}, {8}, 2, 0), 3, dims);
  ASSERT_TRUE(plain && cross);
  absl::StatusOr<dense_internal::TowerLayout> layout =
      dense_internal::BuildTowerLayout(CrossConfig({8, 4}, {8}, 2, 0), 3, dims);
  ASSERT_TRUE(layout.ok());
  // The CONCAT tower's parameters are the CROSS tower's without the cross block.
  absl::Span<float> p = cross->parameters();
  absl::Span<const float> q = plain->parameters();
  const size_t cross_begin = layout->cross.front().w, cross_end = layout->top.front().w;
  ASSERT_EQ(q.size(), p.size() - (cross_end - cross_begin));
  std::fill(p.begin() + cross_begin, p.begin() + cross_end, 0.0f);
  std::copy(q.begin(), q.begin() + cross_begin, p.begin());
  std::copy(q.begin() + cross_begin, q.end(), p.begin() + cross_end);

  const int batch = 9;
  std::vector<float> dense = Random(batch * 3, 61), pooled = Random(batch * 12, 62);
  std::vector<float> a(batch), b(batch);
  plain->Forward(batch, dense, pooled, absl::MakeSpan(a));
  cross->Forward(batch, dense, pooled, absl::MakeSpan(b));
  EXPECT_EQ(a, b);
}

TEST(CrossTowerTest, Deterministic) {
  for (uint32_t rank : {0u, 4u}) {
    const DenseTowerConfig config = CrossConfig({16, 8}, {16, 8}, 3, rank, 7);
    const std::vector<int> dims(4, 8);
    std::unique_ptr<DenseTower> a = MustCreate(config, 3, dims);
    std::unique_ptr<DenseTower> b = MustCreate(config, 3, dims);
    ASSERT_TRUE(a && b);
    const int batch = 37;
    std::vector<float> dense = Random(batch * 3, 71), pooled = Random(batch * 32, 72),
                       dlogits = Random(batch, 73);
    struct Out {
      std::vector<float> logits, grads, d_pooled;
    };
    auto run = [&](DenseTower& t) {
      Out o{std::vector<float>(batch), {}, std::vector<float>(pooled.size())};
      t.Forward(batch, dense, pooled, absl::MakeSpan(o.logits));
      t.Backward(dlogits, absl::MakeSpan(o.d_pooled));
      o.grads.assign(t.gradients().begin(), t.gradients().end());
      return o;
    };
    auto same_bits = [](const std::vector<float>& x, const std::vector<float>& y) {
      return x.size() == y.size() && std::memcmp(x.data(), y.data(), 4 * x.size()) == 0;
    };
    const Out first = run(*a), again = run(*a), other = run(*b);
    for (const Out* o : {&again, &other}) {
      EXPECT_TRUE(same_bits(first.logits, o->logits));
      EXPECT_TRUE(same_bits(first.grads, o->grads));
      EXPECT_TRUE(same_bits(first.d_pooled, o->d_pooled));
    }
    // A smaller batch after a larger one reuses the buffers; an empty batch zeroes the
    // gradients.
    std::vector<float> small(5);
    a->Forward(5, absl::MakeSpan(dense).subspan(0, 15), absl::MakeSpan(pooled).subspan(0, 160),
               absl::MakeSpan(small));
    for (int i = 0; i < 5; ++i) EXPECT_NEAR(small[i], first.logits[i], 1e-5);
    a->Forward(0, {}, {}, {});
    a->Backward({}, {});
    for (float g : a->gradients()) ASSERT_EQ(g, 0.0f);
  }
}

TEST(CrossTowerTest, ShapeErrors) {
  auto error = [](const DenseTowerConfig& config, int num_dense, std::vector<int> dims) {
    absl::StatusOr<std::unique_ptr<DenseTower>> tower =
        DenseTower::Create(config, num_dense, std::move(dims));
    EXPECT_FALSE(tower.ok());
    return tower.ok() ? absl::OkStatus() : tower.status();
  };
  absl::Status s = error(CrossConfig({8, 4}, {8}, 9, 0), 3, {4});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("cross_layers is 9; want 1..8"));
  EXPECT_THAT(error(CrossConfig({8, 4}, {8}, 2, 8), 3, {4}).message(),
              HasSubstr("cross_rank 8 is not below the cross width 8"));
  EXPECT_THAT(error(CrossConfig({8, 4}, {8}, 2, 0), 0, {}).message(), HasSubstr("no inputs"));
  DenseTowerConfig dot = CrossConfig({8, 4}, {8}, 2, 0);
  dot.set_interaction(DenseTowerConfig::DOT);
  EXPECT_THAT(error(dot, 3, {4}).message(), HasSubstr("not CROSS"));
}

}  // namespace
}  // namespace ember::model
