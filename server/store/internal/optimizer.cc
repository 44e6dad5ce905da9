// Copyright 2026 The Ember Authors.

#include "server/store/internal/optimizer.h"

#include <algorithm>
#include <cmath>

namespace ember {
namespace {

class Sgd final : public Optimizer {
 public:
  using Optimizer::Optimizer;
  uint32_t state_floats() const override { return 0; }
  void InitState(float*) const override {}
  void Apply(float* w, float*, const float* g, float lr_scale) const override {
    const float lr = config_.learning_rate() * lr_scale;
    for (uint32_t i = 0; i < dim_; ++i) w[i] -= lr * g[i];
  }
};

class Adagrad final : public Optimizer {
 public:
  using Optimizer::Optimizer;
  uint32_t state_floats() const override { return dim_; }
  void InitState(float* state) const override {
    std::fill(state, state + dim_, config_.initial_accumulator());
  }
  void Apply(float* w, float* acc, const float* g, float lr_scale) const override {
    const float lr = config_.learning_rate() * lr_scale;
    const float eps = config_.epsilon();
    for (uint32_t i = 0; i < dim_; ++i) {
      acc[i] += g[i] * g[i];
      w[i] -= lr * g[i] / (std::sqrt(acc[i]) + eps);
    }
  }
};

class Adam final : public Optimizer {
 public:
  using Optimizer::Optimizer;
  uint32_t state_floats() const override { return 2 * dim_ + 2; }
  void InitState(float* state) const override {
    std::fill(state, state + 2 * dim_, 0.0f);
    state[2 * dim_] = 1.0f;      // beta1^t
    state[2 * dim_ + 1] = 1.0f;  // beta2^t
  }
  void Apply(float* w, float* state, const float* g, float lr_scale) const override {
    const float lr = config_.learning_rate() * lr_scale;
    const float b1 = config_.beta1(), b2 = config_.beta2(), eps = config_.epsilon();
    float* m = state;
    float* v = state + dim_;
    float& p1 = state[2 * dim_];
    float& p2 = state[2 * dim_ + 1];
    p1 *= b1;
    p2 *= b2;
    const float c1 = 1.0f / (1.0f - p1);
    const float c2 = 1.0f / (1.0f - p2);
    for (uint32_t i = 0; i < dim_; ++i) {
      m[i] = b1 * m[i] + (1.0f - b1) * g[i];
      v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
      w[i] -= lr * (m[i] * c1) / (std::sqrt(v[i] * c2) + eps);
    }
  }
};

class Ftrl final : public Optimizer {
 public:
  using Optimizer::Optimizer;
  uint32_t state_floats() const override { return 2 * dim_; }
  void InitState(float* state) const override { std::fill(state, state + 2 * dim_, 0.0f); }
  void Apply(float* w, float* state, const float* g, float lr_scale) const override {
    const float lr = config_.learning_rate() * lr_scale;
    const float l1 = config_.ftrl_l1(), l2 = config_.ftrl_l2(), beta = config_.ftrl_beta();
    float* z = state;
    float* n = state + dim_;
    for (uint32_t i = 0; i < dim_; ++i) {
      const float n_new = n[i] + g[i] * g[i];
      const float sigma = (std::sqrt(n_new) - std::sqrt(n[i])) / lr;
      z[i] += g[i] - sigma * w[i];
      n[i] = n_new;
      if (std::fabs(z[i]) <= l1) {
        w[i] = 0.0f;
      } else {
        const float sign = z[i] > 0 ? 1.0f : -1.0f;
        w[i] = -(z[i] - sign * l1) / ((beta + std::sqrt(n[i])) / lr + l2);
      }
    }
  }
};

}  // namespace

std::unique_ptr<Optimizer> Optimizer::Create(const v1::OptimizerConfig& config, uint32_t dim) {
  switch (config.kind()) {
    case v1::OptimizerConfig::ADAGRAD:
      return std::unique_ptr<Optimizer>(new Adagrad(config, dim));
    case v1::OptimizerConfig::ADAM:
      return std::unique_ptr<Optimizer>(new Adam(config, dim));
    case v1::OptimizerConfig::FTRL:
      return std::unique_ptr<Optimizer>(new Ftrl(config, dim));
    default:
      return std::unique_ptr<Optimizer>(new Sgd(config, dim));
  }
}

float Optimizer::LearningRateScale(float count) const {
  if (config_.freq_power() == 0) return 1.0f;
  const float ratio = config_.freq_reference_count() / std::max(count, 1.0f);
  return std::clamp(std::pow(ratio, config_.freq_power()), config_.freq_min_scale(),
                    config_.freq_max_scale());
}

}  // namespace ember
