// Copyright 2026 The Ember Authors.
//
// The CPU DenseTower: a list of Linear layers over one flat parameter buffer, the
// activations of the last Forward kept for Backward. Kernels are in layers.cc.

#include "worker/dense/dense_tower.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/dense/layers.h"

namespace ember::worker {
namespace {

using dense_internal::ConcatInteractionBackward;
using dense_internal::ConcatInteractionForward;
using dense_internal::DotInteractionBackward;
using dense_internal::DotInteractionForward;
using dense_internal::DotOutputWidth;
using dense_internal::LinearBackward;
using dense_internal::LinearForward;
using dense_internal::ReluBackward;

// Larger layers are surely a config mistake, and this keeps every size product in range.
constexpr uint32_t kMaxWidth = 1 << 16;

struct Layer {
  int in = 0;
  int out = 0;
  size_t w = 0;  // offset of W [out x in] in the flat buffers
  size_t b = 0;  // offset of b [out]
  bool relu = false;
};

// splitmix64 (Steele et al.): the init PRNG, the same stream on every platform.
uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class CpuDenseTower final : public DenseTower {
 public:
  CpuDenseTower(v1::DenseTowerConfig::Interaction interaction, int num_dense,
                std::vector<int> feature_dims, int bottom_width, int interaction_width,
                std::vector<Layer> bottom, std::vector<Layer> top, size_t num_parameters)
      : interaction_(interaction),
        num_dense_(num_dense),
        feature_dims_(std::move(feature_dims)),
        bottom_width_(bottom_width),
        interaction_width_(interaction_width),
        bottom_(std::move(bottom)),
        top_(std::move(top)),
        parameters_(num_parameters, 0.0f),
        gradients_(num_parameters, 0.0f) {
    for (int d : feature_dims_) pooled_width_ += d;
    bottom_out_.resize(bottom_.size());
    top_out_.resize(top_.size());
  }

  // Xavier-uniform weights from one splitmix64 stream over the flat buffer in order
  // (bias entries draw nothing), biases 0.
  void Init(uint64_t seed) {
    uint64_t state = seed;
    auto init = [&](const std::vector<Layer>& layers) {
      for (const Layer& layer : layers) {
        const double limit = std::sqrt(6.0 / (layer.in + layer.out));
        float* w = &parameters_[layer.w];
        for (size_t i = 0; i < static_cast<size_t>(layer.in) * layer.out; ++i) {
          const double u = static_cast<double>(SplitMix64(state) >> 11) * 0x1.0p-53;  // [0, 1)
          w[i] = static_cast<float>((2.0 * u - 1.0) * limit);
        }
      }
    };
    init(bottom_);
    init(top_);
  }

  int pooled_width() const override { return pooled_width_; }
  absl::Span<float> parameters() override { return absl::MakeSpan(parameters_); }
  absl::Span<float> gradients() override { return absl::MakeSpan(gradients_); }

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
    } else {
      ConcatInteractionForward(batch, bottom_width_, pooled_width_, x, pooled.data(),
                               interaction_out_.data());
    }

    // Top MLP; the last layer is the 1-unit logit layer.
    x = interaction_out_.data();
    for (size_t l = 0; l < top_.size(); ++l) {
      const Layer& layer = top_[l];
      float* y;
      if (l + 1 == top_.size()) {
        y = logits.data();
      } else {
        fit(top_out_[l], layer.out);
        y = top_out_[l].data();
      }
      LinearForward(batch, layer.in, layer.out, x, &parameters_[layer.w], &parameters_[layer.b],
                    layer.relu, y);
      x = y;
    }
  }

  void Backward(absl::Span<const float> dlogits, absl::Span<float> d_pooled) override {
    assert(batch_ >= 0);
    assert(dlogits.size() == static_cast<size_t>(batch_));
    assert(d_pooled.size() == static_cast<size_t>(batch_) * pooled_width_);
    if (batch_ == 0) {
      std::fill(gradients_.begin(), gradients_.end(), 0.0f);
      return;
    }
    const int batch = batch_;
    const size_t b = batch;
    size_t max_width = interaction_width_;
    for (const Layer& layer : top_) max_width = std::max<size_t>(max_width, layer.out);
    for (const Layer& layer : bottom_) max_width = std::max<size_t>(max_width, layer.out);
    if (grad_a_.size() < b * max_width) grad_a_.resize(b * max_width);
    if (grad_b_.size() < b * max_width) grad_b_.resize(b * max_width);

    // Top MLP, last layer first: the logit layer, then each hidden layer, whose output
    // gradient `dy` (the dx of the layer above) is first masked by its ReLU.
    float* dy = grad_a_.data();
    float* next = grad_b_.data();
    const Layer& logit = top_.back();
    LinearBackward(batch, logit.in, logit.out,
                   top_.size() > 1 ? top_out_[top_.size() - 2].data() : interaction_out_.data(),
                   &parameters_[logit.w], dlogits.data(), &gradients_[logit.w],
                   &gradients_[logit.b], dy);
    for (size_t l = top_.size() - 1; l-- > 0;) {
      const Layer& layer = top_[l];
      ReluBackward(b * layer.out, top_out_[l].data(), dy);
      const float* x = l > 0 ? top_out_[l - 1].data() : interaction_out_.data();
      LinearBackward(batch, layer.in, layer.out, x, &parameters_[layer.w], dy, &gradients_[layer.w],
                     &gradients_[layer.b], next);
      std::swap(dy, next);
    }

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

 private:
  // The row length of the DOT matrix Z: the bottom width, or with no bottom vector the
  // (common) feature dim.
  int DotDim() const { return num_dense_ > 0 ? bottom_width_ : feature_dims_[0]; }

  const v1::DenseTowerConfig::Interaction interaction_;
  const int num_dense_;
  const std::vector<int> feature_dims_;
  int pooled_width_ = 0;
  const int bottom_width_;  // 0 without dense features
  const int interaction_width_;
  const std::vector<Layer> bottom_;
  const std::vector<Layer> top_;  // the last one is the logit layer
  std::vector<float> parameters_;
  std::vector<float> gradients_;

  // State of the last Forward, sized for the largest batch seen.
  int batch_ = -1;
  std::vector<float> input_;                    // [B x num_dense]
  std::vector<std::vector<float>> bottom_out_;  // per bottom layer [B x out]
  std::vector<float> pooled_;                   // DOT: a copy of the pooled input
  std::vector<float> interaction_out_;          // [B x interaction_width]
  std::vector<std::vector<float>> top_out_;     // per top layer but the last [B x out]
  // Backward scratch.
  std::vector<float> grad_a_, grad_b_, grad_d_bottom_;
};

absl::Status CheckWidth(uint32_t width, const char* field, int index) {
  if (width == 0 || width > kMaxWidth) {
    return absl::InvalidArgumentError(
        absl::StrCat("dense tower: ", field, "[", index, "] is ", width, "; want 1..", kMaxWidth));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<DenseTower>> DenseTower::Create(const v1::DenseTowerConfig& config,
                                                               int num_dense,
                                                               std::vector<int> feature_dims) {
  dense_internal::SetBlasSingleThreaded();
  v1::DenseTowerConfig::Interaction interaction = config.interaction();
  if (interaction == v1::DenseTowerConfig::INTERACTION_UNSPECIFIED) {
    interaction = v1::DenseTowerConfig::DOT;
  }
  if (interaction != v1::DenseTowerConfig::DOT && interaction != v1::DenseTowerConfig::CONCAT) {
    return absl::InvalidArgumentError(
        absl::StrCat("dense tower: unknown interaction ", static_cast<int>(interaction)));
  }
  if (num_dense < 0 || num_dense > static_cast<int>(kMaxWidth)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dense tower: num_dense is ", num_dense, "; want 0..", kMaxWidth));
  }
  int pooled_width = 0;
  for (size_t i = 0; i < feature_dims.size(); ++i) {
    if (feature_dims[i] <= 0 || feature_dims[i] > static_cast<int>(kMaxWidth)) {
      return absl::InvalidArgumentError(absl::StrCat("dense tower: feature_dims[", i, "] is ",
                                                     feature_dims[i], "; want 1..", kMaxWidth));
    }
    pooled_width += feature_dims[i];
    if (pooled_width > static_cast<int>(kMaxWidth)) {
      return absl::InvalidArgumentError("dense tower: pooled features wider than 65536");
    }
  }
  for (int i = 0; i < config.bottom_mlp_size(); ++i) {
    if (absl::Status s = CheckWidth(config.bottom_mlp(i), "bottom_mlp", i); !s.ok()) return s;
  }
  for (int i = 0; i < config.top_mlp_size(); ++i) {
    if (absl::Status s = CheckWidth(config.top_mlp(i), "top_mlp", i); !s.ok()) return s;
  }

  size_t num_parameters = 0;
  auto add_layer = [&num_parameters](std::vector<Layer>& layers, int in, int out, bool relu) {
    Layer layer{in, out, num_parameters, num_parameters + static_cast<size_t>(in) * out, relu};
    num_parameters = layer.b + out;
    layers.push_back(layer);
  };

  // Bottom MLP: only with dense features (without them bottom_mlp is ignored).
  std::vector<Layer> bottom;
  int bottom_width = 0;
  if (num_dense > 0) {
    bottom_width = num_dense;
    for (uint32_t width : config.bottom_mlp()) {
      add_layer(bottom, bottom_width, static_cast<int>(width), /*relu=*/true);
      bottom_width = static_cast<int>(width);
    }
  }

  const int num_features = static_cast<int>(feature_dims.size());
  int interaction_width = 0;
  if (interaction == v1::DenseTowerConfig::DOT) {
    const bool has_bottom = num_dense > 0;
    const int dim = has_bottom ? bottom_width : (num_features > 0 ? feature_dims[0] : 0);
    for (int i = 0; i < num_features; ++i) {
      if (feature_dims[i] != dim) {
        return absl::InvalidArgumentError(
            absl::StrCat("dense tower: DOT interaction needs every feature dim equal to ",
                         has_bottom ? "the bottom output size " : "the first feature's dim ", dim,
                         "; feature ", i, " has dim ", feature_dims[i]));
      }
    }
    if (num_features + (has_bottom ? 1 : 0) < 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("dense tower: DOT interaction needs at least two vectors (bottom output and "
                       "features); have ",
                       num_features, " features and ", has_bottom ? "a" : "no", " bottom output"));
    }
    interaction_width = DotOutputWidth(has_bottom, num_features, dim);
  } else {
    interaction_width = bottom_width + pooled_width;
    if (interaction_width == 0) {
      return absl::InvalidArgumentError("dense tower: no inputs (no dense and no features)");
    }
  }

  std::vector<Layer> top;
  int width = interaction_width;
  for (uint32_t out : config.top_mlp()) {
    add_layer(top, width, static_cast<int>(out), /*relu=*/true);
    width = static_cast<int>(out);
  }
  add_layer(top, width, 1, /*relu=*/false);

  auto tower = std::make_unique<CpuDenseTower>(interaction, num_dense, std::move(feature_dims),
                                               bottom_width, interaction_width, std::move(bottom),
                                               std::move(top), num_parameters);
  tower->Init(config.init_seed() == 0 ? 1 : config.init_seed());
  return tower;
}

}  // namespace ember::worker
