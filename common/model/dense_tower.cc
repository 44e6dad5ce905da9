// Copyright 2026 The Ember Authors.
//
// The CPU DenseTower: a list of Linear layers over one flat parameter buffer, the
// activations of the last Forward kept for Backward. Kernels are in layers.cc; the
// shapes in tower_layout.cc. The CUDA tower is the worker's (worker/dense/cuda/).

#include "common/model/dense_tower.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/model/layers.h"
#include "common/model/tower_layout.h"
#include "common/status_macros.h"

namespace ember::model {
namespace {

using dense_internal::AddTo;
using dense_internal::ConcatInteractionBackward;
using dense_internal::ConcatInteractionForward;
using dense_internal::CrossBackward;
using dense_internal::CrossForward;
using dense_internal::DotInteractionBackward;
using dense_internal::DotInteractionForward;
using dense_internal::Layer;
using dense_internal::LinearBackward;
using dense_internal::LinearForward;
using dense_internal::ReluBackward;
using dense_internal::TowerLayout;

class CpuDenseTower final : public DenseTower {
 public:
  CpuDenseTower(TowerLayout layout, std::vector<float> parameters)
      : interaction_(layout.interaction),
        num_dense_(layout.num_dense),
        feature_dims_(layout.feature_dims),
        pooled_width_(layout.pooled_width),
        bottom_width_(layout.bottom_width),
        interaction_width_(layout.interaction_width),
        bottom_(layout.bottom),
        cross_(layout.cross),
        cross_layers_(layout.cross_layers),
        cross_rank_(layout.cross_rank),
        top_(layout.top),
        tasks_(layout.tasks),
        parameters_(std::move(parameters)),
        gradients_(parameters_.size(), 0.0f) {
    bottom_out_.resize(bottom_.size());
    cross_mid_.resize(cross_rank_ > 0 ? cross_layers_ : 0);
    cross_u_.resize(cross_layers_);
    cross_x_.resize(cross_layers_);
    top_out_.resize(top_.size());
    task_out_.resize(tasks_.size());
    for (size_t t = 0; t < tasks_.size(); ++t) {
      task_out_[t].resize(tasks_[t].top.size());
      heads_.push_back({tasks_[t].kind, tasks_[t].loss_weight});
    }
  }

  int pooled_width() const override { return pooled_width_; }
  absl::Span<float> parameters() override { return absl::MakeSpan(parameters_); }
  absl::Span<float> gradients() override { return absl::MakeSpan(gradients_); }
  int num_tasks() const override { return 1 + static_cast<int>(tasks_.size()); }

  void Forward(int batch, absl::Span<const float> dense, absl::Span<const float> pooled,
               absl::Span<float> logits) override {
    assert(batch >= 0);
    assert(dense.size() == static_cast<size_t>(batch) * num_dense_);
    assert(pooled.size() == static_cast<size_t>(batch) * pooled_width_);
    assert(logits.size() == static_cast<size_t>(batch));
    batch_ = batch;
    if (batch == 0) return;
    const size_t b = batch;
    auto fit = [b](std::vector<float>& v, size_t width) {
      if (v.size() < b * width) v.resize(b * width);
    };

    // Bottom MLP (no layers: the dense features themselves are the bottom output).
    const float* x = nullptr;
    if (num_dense_ > 0) {
      fit(input_, num_dense_);
      std::memcpy(input_.data(), dense.data(), sizeof(float) * b * num_dense_);
      x = input_.data();
    }
    for (size_t l = 0; l < bottom_.size(); ++l) {
      const Layer& layer = bottom_[l];
      fit(bottom_out_[l], layer.out);
      LinearForward(batch, layer.in, layer.out, x, &parameters_[layer.w], &parameters_[layer.b],
                    layer.relu, bottom_out_[l].data());
      x = bottom_out_[l].data();
    }

    // Interaction.
    fit(interaction_out_, interaction_width_);
    if (interaction_ == v1::DenseTowerConfig::DOT) {
      // Backward needs the features again; the caller's buffer may be gone by then.
      fit(pooled_, pooled_width_);
      std::memcpy(pooled_.data(), pooled.data(), sizeof(float) * pooled.size());
      DotInteractionForward(batch, static_cast<int>(feature_dims_.size()), DotDim(), x,
                            pooled_.data(), interaction_out_.data());
    } else {  // CONCAT, or CROSS's x0
      ConcatInteractionForward(batch, bottom_width_, pooled_width_, x, pooled.data(),
                               interaction_out_.data());
    }
    top_in_ = interaction_out_.data();
    if (interaction_ == v1::DenseTowerConfig::CROSS) top_in_ = CrossNetworkForward(batch);

    TopForward(batch, top_, &top_out_, logits.data());
  }

  void ForwardTasks(int batch, absl::Span<const float> dense, absl::Span<const float> pooled,
                    absl::Span<float> logits) override {
    assert(logits.size() == static_cast<size_t>(batch) * num_tasks());
    Forward(batch, dense, pooled, logits.subspan(0, batch));
    if (batch == 0) return;
    for (size_t t = 0; t < tasks_.size(); ++t) {
      TopForward(batch, tasks_[t].top, &task_out_[t], &logits[(t + 1) * batch]);
    }
  }

  // Every row as its own batch of one, every task.
  void ScoreTasks(int batch, absl::Span<const float> dense, absl::Span<const float> pooled,
                  absl::Span<float> logits) override {
    assert(logits.size() == static_cast<size_t>(batch) * num_tasks());
    const int tasks = num_tasks();
    std::vector<float> row(tasks);
    for (int r = 0; r < batch; ++r) {
      ForwardTasks(1, dense.subspan(static_cast<size_t>(r) * num_dense_, num_dense_),
                   pooled.subspan(static_cast<size_t>(r) * pooled_width_, pooled_width_),
                   absl::MakeSpan(row));
      for (int t = 0; t < tasks; ++t) logits[static_cast<size_t>(t) * batch + r] = row[t];
    }
  }

  // Every row as its own batch of one (see dense_tower.h).
  void Score(int batch, absl::Span<const float> dense, absl::Span<const float> pooled,
             absl::Span<float> logits) override {
    assert(batch >= 0);
    assert(dense.size() == static_cast<size_t>(batch) * num_dense_);
    assert(pooled.size() == static_cast<size_t>(batch) * pooled_width_);
    assert(logits.size() == static_cast<size_t>(batch));
    for (int r = 0; r < batch; ++r) {
      Forward(1, dense.subspan(static_cast<size_t>(r) * num_dense_, num_dense_),
              pooled.subspan(static_cast<size_t>(r) * pooled_width_, pooled_width_),
              logits.subspan(r, 1));
    }
  }

  void Backward(absl::Span<const float> dlogits, absl::Span<float> d_pooled) override {
    assert(dlogits.size() == static_cast<size_t>(batch_));
    BackwardAll(dlogits, /*with_tasks=*/false, d_pooled);
  }

  // BackwardWithBce of every task (MultiTaskLoss), through a scratch kept across steps.
  float BackwardWithTaskLoss(absl::Span<const float> logits, absl::Span<const float> labels,
                             absl::Span<const float> weights, float scale,
                             absl::Span<float> d_pooled) override {
    dlogits_.resize(logits.size());
    const float loss =
        MultiTaskLoss(heads_, logits, labels, weights, scale, absl::MakeSpan(dlogits_));
    assert(dlogits_.size() == static_cast<size_t>(batch_) * num_tasks());
    BackwardAll(dlogits_, /*with_tasks=*/true, d_pooled);
    return loss;
  }

 private:
  // Backward of task 0 (dlogits [B]) or of every task (dlogits [num_tasks x B]); without
  // tasks the extra heads' gradients are 0.
  void BackwardAll(absl::Span<const float> dlogits, bool with_tasks, absl::Span<float> d_pooled) {
    assert(batch_ >= 0);
    assert(d_pooled.size() == static_cast<size_t>(batch_) * pooled_width_);
    if (batch_ == 0 || (!tasks_.empty() && !with_tasks)) {
      std::fill(gradients_.begin(), gradients_.end(), 0.0f);
      if (batch_ == 0) return;
    }
    const int batch = batch_;
    const size_t b = batch;
    size_t max_width = interaction_width_;
    for (const Layer& layer : top_) max_width = std::max<size_t>(max_width, layer.out);
    for (const dense_internal::TowerLayout::TaskHead& task : tasks_) {
      for (const Layer& layer : task.top) max_width = std::max<size_t>(max_width, layer.out);
    }
    for (const Layer& layer : bottom_) max_width = std::max<size_t>(max_width, layer.out);
    if (grad_a_.size() < b * max_width) grad_a_.resize(b * max_width);
    if (grad_b_.size() < b * max_width) grad_b_.resize(b * max_width);

    // Top MLP, last layer first: the logit layer, then each hidden layer, whose output
    // gradient `dy` (the dx of the layer above) is first masked by its ReLU.
    float* dy = grad_a_.data();
    float* next = grad_b_.data();
    TopBackward(batch, top_, top_out_, dlogits.data(), &dy, &next);
    if (with_tasks) {
      // Every head reads the same input: their input gradients add up (task order).
      if (grad_task_a_.size() < b * max_width) grad_task_a_.resize(b * max_width);
      if (grad_task_b_.size() < b * max_width) grad_task_b_.resize(b * max_width);
      for (size_t t = 0; t < tasks_.size(); ++t) {
        float* tdy = grad_task_a_.data();
        float* tnext = grad_task_b_.data();
        TopBackward(batch, tasks_[t].top, task_out_[t], &dlogits[(t + 1) * b], &tdy, &tnext);
        AddTo(b * interaction_width_, tdy, dy);
      }
    }

    // CROSS: dy is d(x_L) now; afterwards d(x0), the CONCAT row's gradient.
    if (interaction_ == v1::DenseTowerConfig::CROSS) CrossNetworkBackward(batch, &dy, &next);

    // Interaction: dy is d(interaction output) now.
    float* d_bottom = nullptr;
    if (!bottom_.empty()) {
      d_bottom = next;
      next = dy;  // free once the interaction is done
    }
    if (interaction_ == v1::DenseTowerConfig::DOT) {
      const float* bottom = nullptr;  // the forward's bottom vector
      if (num_dense_ > 0) {
        bottom = bottom_.empty() ? input_.data() : bottom_out_.back().data();
        // Without bottom layers the bottom vector is the raw input: its gradient is unused.
        if (d_bottom == nullptr) {
          if (grad_d_bottom_.size() < b * bottom_width_) grad_d_bottom_.resize(b * bottom_width_);
          d_bottom = grad_d_bottom_.data();
        }
      }
      DotInteractionBackward(batch, static_cast<int>(feature_dims_.size()), DotDim(), bottom,
                             pooled_.data(), dy, d_bottom, d_pooled.data());
    } else {
      ConcatInteractionBackward(batch, bottom_width_, pooled_width_, dy, d_bottom, d_pooled.data());
    }

    // Bottom MLP, last layer first; no dx for the first (the dense features).
    float* dyb = d_bottom;
    for (size_t l = bottom_.size(); l-- > 0;) {
      const Layer& layer = bottom_[l];
      ReluBackward(b * layer.out, bottom_out_[l].data(), dyb);
      const float* x = l > 0 ? bottom_out_[l - 1].data() : input_.data();
      float* dx = l > 0 ? next : nullptr;
      LinearBackward(batch, layer.in, layer.out, x, &parameters_[layer.w], dyb,
                     &gradients_[layer.w], &gradients_[layer.b], dx);
      if (dx != nullptr) std::swap(dyb, next);
    }
  }

  // Forward through a top MLP `layers` over top_in_ (the last layer the 1-unit logit
  // layer, written to `logits`), keeping the hidden outputs in *out.
  void TopForward(int batch, const std::vector<Layer>& layers, std::vector<std::vector<float>>* out,
                  float* logits) {
    const float* x = top_in_;
    for (size_t l = 0; l < layers.size(); ++l) {
      const Layer& layer = layers[l];
      float* y;
      if (l + 1 == layers.size()) {
        y = logits;
      } else {
        std::vector<float>& o = (*out)[l];
        if (o.size() < static_cast<size_t>(batch) * layer.out) o.resize(batch * layer.out);
        y = o.data();
      }
      LinearForward(batch, layer.in, layer.out, x, &parameters_[layer.w], &parameters_[layer.b],
                    layer.relu, y);
      x = y;
    }
  }

  // Backward through a top MLP, last layer first: the logit layer, then each hidden
  // layer, whose output gradient `dy` (the dx of the layer above) is first masked by its
  // ReLU. On return *dy holds d(top_in_); *dy and *next are free buffers on entry (they
  // may be swapped).
  void TopBackward(int batch, const std::vector<Layer>& layers,
                   const std::vector<std::vector<float>>& out, const float* dlogits, float** dy,
                   float** next) {
    const Layer& logit = layers.back();
    LinearBackward(batch, logit.in, logit.out,
                   layers.size() > 1 ? out[layers.size() - 2].data() : top_in_,
                   &parameters_[logit.w], dlogits, &gradients_[logit.w], &gradients_[logit.b], *dy);
    for (size_t l = layers.size() - 1; l-- > 0;) {
      const Layer& layer = layers[l];
      ReluBackward(static_cast<size_t>(batch) * layer.out, out[l].data(), *dy);
      const float* x = l > 0 ? out[l - 1].data() : top_in_;
      LinearBackward(batch, layer.in, layer.out, x, &parameters_[layer.w], *dy,
                     &gradients_[layer.w], &gradients_[layer.b], *next);
      std::swap(*dy, *next);
    }
  }

 public:
  // BceWithLogits, then Backward, through a scratch kept across steps.
  float BackwardWithBce(absl::Span<const float> logits, absl::Span<const float> labels,
                        absl::Span<const float> weights, float scale,
                        absl::Span<float> d_pooled) override {
    dlogits_.resize(logits.size());
    const float loss = BceWithLogits(logits, labels, weights, scale, absl::MakeSpan(dlogits_));
    Backward(dlogits_, d_pooled);
    return loss;
  }

 private:
  // The cross layers over x0 = interaction_out_ (the CONCAT row); returns x_L.
  const float* CrossNetworkForward(int batch) {
    const size_t n = static_cast<size_t>(batch) * interaction_width_;
    const float* x0 = interaction_out_.data();
    const float* x = x0;
    for (int l = 0; l < cross_layers_; ++l) {
      if (cross_u_[l].size() < n) cross_u_[l].resize(n);
      if (cross_x_[l].size() < n) cross_x_[l].resize(n);
      float* u = cross_u_[l].data();
      if (cross_rank_ == 0) {
        const Layer& w = cross_[l];
        LinearForward(batch, w.in, w.out, x, &parameters_[w.w], &parameters_[w.b], false, u);
      } else {
        const Layer& v = cross_[2 * l];
        const Layer& w = cross_[2 * l + 1];
        std::vector<float>& mid = cross_mid_[l];
        if (mid.size() < static_cast<size_t>(batch) * cross_rank_) mid.resize(batch * cross_rank_);
        LinearForward(batch, v.in, v.out, x, &parameters_[v.w], &parameters_[v.b], false,
                      mid.data());
        LinearForward(batch, w.in, w.out, mid.data(), &parameters_[w.w], &parameters_[w.b], false,
                      u);
      }
      CrossForward(n, x0, u, x, cross_x_[l].data());
      x = cross_x_[l].data();
    }
    return x;
  }

  // Back through the cross layers, last first: *dy holds d(x_L) on entry and d(x0) on
  // return; *next is a free buffer of the same size (both may be swapped).
  void CrossNetworkBackward(int batch, float** dy, float** next) {
    const size_t n = static_cast<size_t>(batch) * interaction_width_;
    const float* x0 = interaction_out_.data();
    if (cross_dx0_.size() < n) cross_dx0_.resize(n);
    if (cross_du_.size() < n) cross_du_.resize(n);
    std::fill(cross_dx0_.begin(), cross_dx0_.begin() + n, 0.0f);
    float* g = *dy;     // d(x_{l+1})
    float* dx = *next;  // -> d(x_l)
    for (int l = cross_layers_; l-- > 0;) {
      const float* x = l > 0 ? cross_x_[l - 1].data() : x0;
      CrossBackward(n, x0, cross_u_[l].data(), g, cross_du_.data(), cross_dx0_.data());
      if (cross_rank_ == 0) {
        const Layer& w = cross_[l];
        LinearBackward(batch, w.in, w.out, x, &parameters_[w.w], cross_du_.data(), &gradients_[w.w],
                       &gradients_[w.b], dx);
      } else {
        const Layer& v = cross_[2 * l];
        const Layer& w = cross_[2 * l + 1];
        const size_t mid = static_cast<size_t>(batch) * cross_rank_;
        if (cross_dmid_.size() < mid) cross_dmid_.resize(mid);
        LinearBackward(batch, w.in, w.out, cross_mid_[l].data(), &parameters_[w.w],
                       cross_du_.data(), &gradients_[w.w], &gradients_[w.b], cross_dmid_.data());
        LinearBackward(batch, v.in, v.out, x, &parameters_[v.w], cross_dmid_.data(),
                       &gradients_[v.w], &gradients_[v.b], dx);
      }
      AddTo(n, g, dx);  // the residual x_l
      std::swap(g, dx);
    }
    AddTo(n, cross_dx0_.data(), g);  // x_0 is x0: its gate terms join the chain's
    *dy = g;
    *next = dx;
  }

  // See TowerLayout::DotDim.
  int DotDim() const { return num_dense_ > 0 ? bottom_width_ : feature_dims_[0]; }

  const v1::DenseTowerConfig::Interaction interaction_;
  const int num_dense_;
  const std::vector<int> feature_dims_;
  const int pooled_width_;
  const int bottom_width_;  // 0 without dense features
  const int interaction_width_;
  const std::vector<Layer> bottom_;
  const std::vector<Layer> cross_;  // CROSS: see TowerLayout::cross
  const int cross_layers_;
  const int cross_rank_;
  const std::vector<Layer> top_;  // the last one is the logit layer
  const std::vector<dense_internal::TowerLayout::TaskHead> tasks_;  // the extra tasks' tops
  std::vector<TaskHeadKind> heads_;                                 // their loss kinds
  std::vector<float> parameters_;
  std::vector<float> gradients_;

  // State of the last Forward, sized for the largest batch seen.
  int batch_ = -1;
  std::vector<float> input_;                    // [B x num_dense]
  std::vector<std::vector<float>> bottom_out_;  // per bottom layer [B x out]
  std::vector<float> pooled_;                   // DOT: a copy of the pooled input
  std::vector<float> interaction_out_;          // [B x interaction_width] (CROSS: x0)
  std::vector<std::vector<float>> cross_mid_;   // CROSS low rank: per layer V x + c [B x r]
  std::vector<std::vector<float>> cross_u_;     // CROSS: per layer W x + b [B x D]
  std::vector<std::vector<float>> cross_x_;     // CROSS: per layer its output [B x D]
  const float* top_in_ = nullptr;               // the top MLP's input (interaction_out_ or x_L)
  std::vector<std::vector<float>> top_out_;     // per top layer but the last [B x out]
  std::vector<std::vector<std::vector<float>>> task_out_;  // the same per extra task
  // Backward scratch.
  std::vector<float> grad_a_, grad_b_, grad_d_bottom_, dlogits_;
  std::vector<float> grad_task_a_, grad_task_b_;          // the extra tasks' top MLPs
  std::vector<float> cross_dx0_, cross_du_, cross_dmid_;  // CROSS
};

}  // namespace

absl::StatusOr<std::unique_ptr<DenseTower>> DenseTower::Create(const v1::DenseTowerConfig& config,
                                                               int num_dense,
                                                               std::vector<int> feature_dims) {
  absl::StatusOr<TowerLayout> layout =
      dense_internal::BuildTowerLayout(config, num_dense, std::move(feature_dims));
  if (!layout.ok()) return layout.status();
  std::vector<float> parameters =
      dense_internal::InitialParameters(*layout, config.init_seed() == 0 ? 1 : config.init_seed());
  dense_internal::SetBlasSingleThreaded();
  return std::make_unique<CpuDenseTower>(std::move(*layout), std::move(parameters));
}

}  // namespace ember::model
