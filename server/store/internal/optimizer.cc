// Copyright 2026 The Ember Authors.

#include "server/store/internal/optimizer.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ember {
namespace {

// 1 for NaN and +-Inf (NaN compares false), else 0: an integer or-reduction of it keeps
// the optimizer loops vectorized (no early exit).
inline int NotFinite(float x) { return !(std::fabs(x) <= std::numeric_limits<float>::max()); }

class Sgd final : public Optimizer {
 public:
  using Optimizer::Optimizer;
  uint32_t state_floats() const override { return 0; }
  void InitState(float*) const override {}

 protected:
  bool Update(const float* __restrict w, float* __restrict out, const float* __restrict g,
              float lr_scale) const override {
    const float lr = config_.learning_rate() * lr_scale;
    int bad = 0;
    for (uint32_t i = 0; i < dim_; ++i) {
      out[i] = w[i] - lr * g[i];
      bad |= NotFinite(out[i]);
    }
    return bad == 0;
  }
};

class Adagrad final : public Optimizer {
 public:
  using Optimizer::Optimizer;
  uint32_t state_floats() const override { return dim_; }
  void InitState(float* state) const override {
    std::fill(state, state + dim_, config_.initial_accumulator());
  }

 protected:
  bool Update(const float* __restrict w, float* __restrict out, const float* __restrict g,
              float lr_scale) const override {
    const float lr = config_.learning_rate() * lr_scale;
    const float eps = config_.epsilon();
    const float* acc = w + dim_;
    float* acc_out = out + dim_;
    int bad = 0;
    for (uint32_t i = 0; i < dim_; ++i) {
      const float a = acc[i] + g[i] * g[i];
      out[i] = w[i] - lr * g[i] / (std::sqrt(a) + eps);
      acc_out[i] = a;
      bad |= NotFinite(out[i]) | NotFinite(a);
    }
    return bad == 0;
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

 protected:
  bool Update(const float* __restrict w, float* __restrict out, const float* __restrict g,
              float lr_scale) const override {
    const float lr = config_.learning_rate() * lr_scale;
    const float b1 = config_.beta1(), b2 = config_.beta2(), eps = config_.epsilon();
    const float* m = w + dim_;
    const float* v = w + 2 * dim_;
    float* m_out = out + dim_;
    float* v_out = out + 2 * dim_;
    const float p1 = w[3 * dim_] * b1;
    const float p2 = w[3 * dim_ + 1] * b2;
    const float c1 = 1.0f / (1.0f - p1);
    const float c2 = 1.0f / (1.0f - p2);
    int bad = 0;
    for (uint32_t i = 0; i < dim_; ++i) {
      const float mi = b1 * m[i] + (1.0f - b1) * g[i];
      const float vi = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
      out[i] = w[i] - lr * (mi * c1) / (std::sqrt(vi * c2) + eps);
      m_out[i] = mi;
      v_out[i] = vi;
      bad |= NotFinite(out[i]) | NotFinite(mi) | NotFinite(vi);
    }
    out[3 * dim_] = p1;
    out[3 * dim_ + 1] = p2;
    return (bad | NotFinite(p1) | NotFinite(p2)) == 0;
  }
};

class Ftrl final : public Optimizer {
 public:
  using Optimizer::Optimizer;
  uint32_t state_floats() const override { return 2 * dim_; }
  void InitState(float* state) const override { std::fill(state, state + 2 * dim_, 0.0f); }

 protected:
  bool Update(const float* __restrict w, float* __restrict out, const float* __restrict g,
              float lr_scale) const override {
    const float lr = config_.learning_rate() * lr_scale;
    const float l1 = config_.ftrl_l1(), l2 = config_.ftrl_l2(), beta = config_.ftrl_beta();
    const float* z = w + dim_;
    const float* n = w + 2 * dim_;
    float* z_out = out + dim_;
    float* n_out = out + 2 * dim_;
    int bad = 0;
    for (uint32_t i = 0; i < dim_; ++i) {
      const float n_new = n[i] + g[i] * g[i];
      const float sigma = (std::sqrt(n_new) - std::sqrt(n[i])) / lr;
      const float z_new = z[i] + g[i] - sigma * w[i];
      float w_new = 0.0f;
      if (std::fabs(z_new) > l1) {
        const float sign = z_new > 0 ? 1.0f : -1.0f;
        w_new = -(z_new - sign * l1) / ((beta + std::sqrt(n_new)) / lr + l2);
      }
      out[i] = w_new;
      z_out[i] = z_new;
      n_out[i] = n_new;
      bad |= NotFinite(w_new) | NotFinite(z_new) | NotFinite(n_new);
    }
    return bad == 0;
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

bool Optimizer::AllFinite(const float* x, size_t n) {
  // An or-reduction over integers (no early exit) so the loop vectorizes: a float is
  // finite exactly when its magnitude is at most FLT_MAX (NaN compares false).
  int bad = 0;
  for (size_t i = 0; i < n; ++i) bad |= NotFinite(x[i]);
  return bad == 0;
}

float Optimizer::LearningRateScale(float count) const {
  if (config_.freq_power() == 0) return 1.0f;
  const float ratio = config_.freq_reference_count() / std::max(count, 1.0f);
  return std::clamp(std::pow(ratio, config_.freq_power()), config_.freq_min_scale(),
                    config_.freq_max_scale());
}

}  // namespace ember
