// Copyright 2026 The Ember Authors.
//
// Test helpers of the dense tower tests (tests/common/model/): random inputs, a
// finite-difference gradient checker and a whole-tower gradient check.

#ifndef EMBER_TESTS_COMMON_MODEL_GRADIENT_CHECK_H_
#define EMBER_TESTS_COMMON_MODEL_GRADIENT_CHECK_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "common/model/dense_tower.h"
#include "gtest/gtest.h"

namespace ember::model::test {

// n floats uniform in [-scale, scale], the same for the same seed.
inline std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

inline double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double{a[i]} * b[i];
  return s;
}

// Checks `analytic` against central differences of `f` in each coordinate of `x`. `f` is
// piecewise smooth: ReLU networks are piecewise linear, DOT pairs bilinear in distinct
// rows, and a cross network a polynomial (x0 enters every layer), so differences are
// exact only to O(h) (one-sided) and O(h^2) (central), and a ReLU kink may lie within
// a step.
// With steps h and h / 2, smoothness predicts central(h) ~ central(h / 2) and
// (forward(h) - backward(h)) ~ 2 (forward(h / 2) - backward(h / 2)); a kink within
// [x - h, x + h] breaks one of the two unless its slope change is tiny. Such a coordinate
// is retried with smaller steps, then skipped. Returns the number skipped.
inline int CheckGradient(const std::function<double()>& f, float* x, size_t n,
                         const float* analytic) {
  struct Differences {
    double forward, backward, central;
  };
  auto differences = [&](size_t i, float h, double f0) {
    const float saved = x[i];
    x[i] = saved + h;
    const double plus = f();
    x[i] = saved - h;
    const double minus = f();
    x[i] = saved;
    // The steps actually taken, after rounding.
    const double up = double{saved + h} - saved, down = saved - double{saved - h};
    return Differences{(plus - f0) / up, (f0 - minus) / down, (plus - minus) / (up + down)};
  };
  int skipped = 0;
  const double f0 = f();
  for (size_t i = 0; i < n; ++i) {
    bool checked = false;
    for (float h = 1e-2f; h > 1e-4f && !checked; h /= 8) {
      const Differences wide = differences(i, h, f0), narrow = differences(i, h / 2, f0);
      const double scale = std::max({1.0, std::fabs(wide.central), std::fabs(narrow.central)});
      const double curvature =
          (wide.forward - wide.backward) - 2 * (narrow.forward - narrow.backward);
      if (std::fabs(wide.central - narrow.central) > 2e-3 * scale ||
          std::fabs(curvature) > 2e-3 * scale) {
        continue;  // a kink in the step
      }
      checked = true;
      EXPECT_NEAR(analytic[i], narrow.central, 3e-3 * std::max(1.0, std::fabs(narrow.central)))
          << "coordinate " << i << " of " << n << ", step " << h;
    }
    skipped += !checked;
  }
  return skipped;
}

// DenseTower::Create, expecting success (null and a test failure otherwise).
inline std::unique_ptr<DenseTower> MustCreate(const v1::DenseTowerConfig& config, int num_dense,
                                              std::vector<int> dims) {
  absl::StatusOr<std::unique_ptr<DenseTower>> tower =
      DenseTower::Create(config, num_dense, std::move(dims));
  EXPECT_TRUE(tower.ok()) << tower.status();
  return tower.ok() ? std::move(*tower) : nullptr;
}

// Gradient check of a whole tower with L = sum_b c_b logit_b (so dlogits = c), for
// every parameter and every pooled input.
inline void CheckTowerGradient(const v1::DenseTowerConfig& config, int num_dense,
                               std::vector<int> dims) {
  std::unique_ptr<DenseTower> tower = MustCreate(config, num_dense, dims);
  ASSERT_NE(tower, nullptr);
  const int batch = 5;
  std::vector<float> dense = Random(batch * num_dense, 51, 2.0f);
  std::vector<float> pooled = Random(batch * tower->pooled_width(), 52);
  std::vector<float> c = Random(batch, 53);
  std::vector<float> logits(batch);
  // Non-zero biases, so that the bias gradients are checked at a generic point.
  absl::Span<float> params = tower->parameters();
  std::vector<float> noise = Random(params.size(), 54, 0.05f);
  for (size_t i = 0; i < params.size(); ++i) params[i] += noise[i];

  auto loss = [&] {
    tower->Forward(batch, dense, pooled, absl::MakeSpan(logits));
    return Dot(c, logits);
  };
  loss();
  std::fill(tower->gradients().begin(), tower->gradients().end(), 123.0f);  // overwritten
  std::vector<float> d_pooled(pooled.size(), 123.0f);
  tower->Backward(c, absl::MakeSpan(d_pooled));
  std::vector<float> gradients(tower->gradients().begin(), tower->gradients().end());

  int skipped = CheckGradient(loss, params.data(), params.size(), gradients.data());
  skipped += CheckGradient(loss, pooled.data(), pooled.size(), d_pooled.data());
  const size_t total = params.size() + pooled.size();
  EXPECT_LE(skipped, static_cast<int>(total / 20)) << "of " << total;

  // Backward again: the same gradients (overwritten, not accumulated).
  loss();
  std::vector<float> d_pooled2(pooled.size());
  tower->Backward(c, absl::MakeSpan(d_pooled2));
  EXPECT_EQ(std::vector<float>(tower->gradients().begin(), tower->gradients().end()), gradients);
  EXPECT_EQ(d_pooled2, d_pooled);
}

}  // namespace ember::model::test

#endif  // EMBER_TESTS_COMMON_MODEL_GRADIENT_CHECK_H_
