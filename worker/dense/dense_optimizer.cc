// Copyright 2026 The Ember Authors.
//
// The dense optimizers (declared in dense_optimizer.h): SGD, Adagrad, Adam over one flat
// float array. Element updates run in float, in PyTorch's operation order; the step
// scalars (bias corrections) are computed in double and rounded once.
//
// State layout (SaveState / LoadState): optimizer_state.h.

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/model/dense_tower.h"
#include "worker/dense/cuda/cuda_backend.h"
#include "worker/dense/dense_optimizer.h"
#include "worker/dense/optimizer_state.h"

namespace ember::worker {
namespace {

float OrDefault(float value, float default_value) { return value == 0.0f ? default_value : value; }

class FlatOptimizer : public DenseOptimizer {
 public:
  FlatOptimizer(v1::DenseOptimizerConfig::Kind kind, size_t num_parameters, int num_moments)
      : kind_(kind), n_(num_parameters), state_(num_parameters * num_moments, 0.0f) {}

  std::vector<float> SaveState() const final {
    std::vector<float> out =
        model::dense_internal::OptimizerStateHeader(kind_, step_, state_.size());
    std::copy(state_.begin(), state_.end(),
              out.begin() + model::dense_internal::kOptimizerStateHeader);
    return out;
  }

  absl::Status LoadState(absl::Span<const float> state) final {
    absl::StatusOr<uint64_t> step =
        model::dense_internal::CheckOptimizerState(state, kind_, state_.size());
    if (!step.ok()) return step.status();
    step_ = *step;
    state_.assign(state.begin() + model::dense_internal::kOptimizerStateHeader, state.end());
    return absl::OkStatus();
  }

 protected:
  const v1::DenseOptimizerConfig::Kind kind_;
  const size_t n_;
  uint64_t step_ = 0;         // steps taken
  std::vector<float> state_;  // the moments, one n_-block each
};

// p -= lr g.
class Sgd final : public FlatOptimizer {
 public:
  Sgd(size_t n, float lr) : FlatOptimizer(v1::DenseOptimizerConfig::SGD, n, 0), lr_(lr) {}
  void Step(absl::Span<float> p, absl::Span<const float> g) override {
    assert(p.size() == n_ && g.size() == n_);
    const float lr = lr_;
    for (size_t i = 0; i < n_; ++i) p[i] -= lr * g[i];
    ++step_;
  }

 private:
  const float lr_;
};

// a += g^2; p -= lr g / (sqrt(a) + eps).
class Adagrad final : public FlatOptimizer {
 public:
  Adagrad(size_t n, float lr, float eps, float initial_accumulator)
      : FlatOptimizer(v1::DenseOptimizerConfig::ADAGRAD, n, 1), lr_(lr), eps_(eps) {
    state_.assign(n, initial_accumulator);
  }
  void Step(absl::Span<float> p, absl::Span<const float> g) override {
    assert(p.size() == n_ && g.size() == n_);
    const float lr = lr_, eps = eps_;
    float* a = state_.data();
    for (size_t i = 0; i < n_; ++i) {
      a[i] += g[i] * g[i];
      p[i] -= lr * (g[i] / (std::sqrt(a[i]) + eps));
    }
    ++step_;
  }

 private:
  const float lr_, eps_;
};

// PyTorch's Adam (torch.optim.Adam, amsgrad off, no weight decay), step t from 1:
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
class Adam final : public FlatOptimizer {
 public:
  Adam(size_t n, float lr, float beta1, float beta2, float eps)
      : FlatOptimizer(v1::DenseOptimizerConfig::ADAM, n, 2),
        lr_(lr),
        beta1_(beta1),
        beta2_(beta2),
        eps_(eps) {}
  void Step(absl::Span<float> p, absl::Span<const float> g) override {
    assert(p.size() == n_ && g.size() == n_);
    ++step_;
    const double t = static_cast<double>(step_);
    const float step_size = static_cast<float>(lr_ / (1.0 - std::pow(double{beta1_}, t)));
    const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(double{beta2_}, t)));
    const float b1 = beta1_, b2 = beta2_, c1 = 1.0f - beta1_, c2 = 1.0f - beta2_, eps = eps_;
    float* m = state_.data();
    float* v = state_.data() + n_;
    for (size_t i = 0; i < n_; ++i) {
      m[i] = b1 * m[i] + c1 * g[i];
      v[i] = b2 * v[i] + c2 * (g[i] * g[i]);
      const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
      p[i] -= step_size * (m[i] / denom);
    }
  }

 private:
  const float lr_, beta1_, beta2_, eps_;
};

}  // namespace

// Zero fields take their documented defaults (see model.proto); an unknown kind gives
// nullptr.
std::unique_ptr<DenseOptimizer> DenseOptimizer::Create(const v1::DenseOptimizerConfig& config,
                                                       size_t num_parameters) {
  const float lr = OrDefault(config.learning_rate(), 0.001f);
  const float eps = OrDefault(config.epsilon(), 1e-8f);
  switch (config.kind()) {
    case v1::DenseOptimizerConfig::SGD:
      return std::make_unique<Sgd>(num_parameters, lr);
    case v1::DenseOptimizerConfig::ADAGRAD:
      return std::make_unique<Adagrad>(
          num_parameters, lr, eps,
          config.has_initial_accumulator() ? config.initial_accumulator() : 0.1f);
    case v1::DenseOptimizerConfig::KIND_UNSPECIFIED:
    case v1::DenseOptimizerConfig::ADAM:
      return std::make_unique<Adam>(num_parameters, lr, OrDefault(config.beta1(), 0.9f),
                                    OrDefault(config.beta2(), 0.999f), eps);
    default:
      return nullptr;
  }
}

std::unique_ptr<DenseOptimizer> CreateDenseOptimizer(const v1::DenseOptimizerConfig& config,
                                                     model::DenseTower& tower) {
  const size_t n = tower.step_parameters().size();
  if (tower.device() == model::DenseDevice::kCuda) {
    const int device = cuda_internal::DeviceOfPointer(tower.step_parameters().data());
    return cuda_internal::CreateCudaDenseOptimizer(config, n, tower.cuda_stream(), device);
  }
  return DenseOptimizer::Create(config, n);
}

}  // namespace ember::worker
