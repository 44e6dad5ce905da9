// Copyright 2026 The Ember Authors.
//
// A CPU reference of the dense tower whose matrix products round their operands the
// way the CUDA tower's reduced precisions do (tf32: 10 mantissa bits; bf16: 7, round to
// nearest even), everything else in fp32 like the CPU tower (layers.h).
//
// Why: compared with the plain fp32 CPU tower, a reduced-precision GPU tower's
// pre-activations near zero flip ReLU masks, and each flip moves a whole dy * x term of
// a gradient, an error that does not shrink with the batch (a NumPy simulation of the
// quickstart tower at batch 1024: tf32 gradients 1.6-2.4e-2 off, bf16 d_pooled 4.9-6.9e-2).
// Against operands rounded the same way, the pre-activations agree to fp32 accumulation
// order, masks flip only for |pre-activation| ~ 1e-7, and gradients can be held to a
// tolerance that still catches a wrong transpose or a missed rounding.
//
// What it cannot know: how cuBLAS's tf32 kernels turn fp32 into tf32 (not documented:
// a conversion to nearest, or the tensor core reading the top 19 bits, i.e.
// truncation; for some shapes it may even pick a kernel without tensor cores). The
// reference takes the rounding as a parameter, and the test holds the GPU to the
// closest of the three, and names the error against each.

#ifndef EMBER_TESTS_WORKER_DENSE_ROUNDED_REFERENCE_H_
#define EMBER_TESTS_WORKER_DENSE_ROUNDED_REFERENCE_H_

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "common/model/layers.h"
#include "common/model/tower_layout.h"
#include "worker/dense/dense_device.h"

namespace ember::worker::testing {

// How tf32 operands are made: to nearest even, by truncation, or not at all (kFp32: a
// cuBLAS kernel without tensor cores, which FAST_TF32 allows for some shapes).
enum class Rounding { kNearestEven, kTruncate, kFp32 };

// x with its low `drop` mantissa bits rounded away.
inline float RoundMantissa(float x, int drop, Rounding rounding) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  if (rounding == Rounding::kNearestEven) {
    const uint32_t half = (1u << (drop - 1)) - 1;
    bits += half + ((bits >> drop) & 1u);
  }
  bits &= ~((1u << drop) - 1);
  std::memcpy(&x, &bits, sizeof(bits));
  return x;
}

// The operand rounding of `precision`'s products (fp32: none; bf16: always to nearest
// even, as LaunchToBf16 does).
inline std::vector<float> RoundOperands(DensePrecision precision, Rounding tf32_rounding,
                                        const float* x, size_t n) {
  std::vector<float> out(x, x + n);
  if (precision == DensePrecision::kTf32 && tf32_rounding != Rounding::kFp32) {
    for (float& v : out) v = RoundMantissa(v, 13, tf32_rounding);
  } else if (precision == DensePrecision::kBf16) {
    for (float& v : out) v = RoundMantissa(v, 16, Rounding::kNearestEven);
  }
  return out;
}

class RoundedReference {
 public:
  RoundedReference(model::dense_internal::TowerLayout layout, DensePrecision precision,
                   Rounding tf32_rounding = Rounding::kNearestEven)
      : layout_(std::move(layout)), precision_(precision), tf32_rounding_(tf32_rounding) {}

  // logits [batch] for `params` (the tower's flat layout); keeps what Backward needs.
  std::vector<float> Forward(int batch, const std::vector<float>& params,
                             const std::vector<float>& dense, const std::vector<float>& pooled) {
    using model::dense_internal::Layer;
    batch_ = batch;
    params_ = params;
    dense_ = dense;
    pooled_ = pooled;
    inputs_.clear();
    outputs_.clear();
    std::vector<float> x = dense_;
    for (const Layer& layer : layout_.bottom) x = Linear(layer, x);
    has_bottom_ = layout_.num_dense > 0;
    bottom_ = x;
    inter_.assign(size_t(batch) * layout_.interaction_width, 0.0f);
    const int features = static_cast<int>(layout_.feature_dims.size());
    if (layout_.interaction == v1::DenseTowerConfig::DOT) {
      model::dense_internal::DotInteractionForward(batch, features, layout_.DotDim(),
                                                   has_bottom_ ? bottom_.data() : nullptr,
                                                   pooled_.data(), inter_.data());
    } else {
      model::dense_internal::ConcatInteractionForward(batch, layout_.bottom_width,
                                                      layout_.pooled_width, bottom_.data(),
                                                      pooled_.data(), inter_.data());
    }
    x = inter_;
    for (const Layer& layer : layout_.top) x = Linear(layer, x);
    return x;
  }

  // Back-propagates dlogits [batch] through the last Forward: the parameter gradients
  // (flat layout) and d_pooled [batch x pooled_width].
  void Backward(const std::vector<float>& dlogits, std::vector<float>* grads,
                std::vector<float>* d_pooled) {
    using model::dense_internal::Layer;
    grads->assign(layout_.num_parameters, 0.0f);
    d_pooled->assign(size_t(batch_) * layout_.pooled_width, 0.0f);
    size_t index = layout_.bottom.size() + layout_.top.size();
    std::vector<float> dy = dlogits;
    for (size_t l = layout_.top.size(); l-- > 0;) {
      dy = LinearBackward(layout_.top[l], --index, dy, /*want_dx=*/true, grads);
    }
    const int features = static_cast<int>(layout_.feature_dims.size());
    std::vector<float> d_bottom(size_t(batch_) * std::max(layout_.bottom_width, 1), 0.0f);
    if (layout_.interaction == v1::DenseTowerConfig::DOT) {
      model::dense_internal::DotInteractionBackward(
          batch_, features, layout_.DotDim(), has_bottom_ ? bottom_.data() : nullptr,
          pooled_.data(), dy.data(), has_bottom_ ? d_bottom.data() : nullptr, d_pooled->data());
    } else {
      model::dense_internal::ConcatInteractionBackward(
          batch_, layout_.bottom_width, layout_.pooled_width, dy.data(),
          layout_.bottom_width > 0 ? d_bottom.data() : nullptr, d_pooled->data());
    }
    dy = d_bottom;
    for (size_t l = layout_.bottom.size(); l-- > 0;) {
      dy = LinearBackward(layout_.bottom[l], --index, dy, /*want_dx=*/l > 0, grads);
    }
  }

 private:
  std::vector<float> Linear(const model::dense_internal::Layer& layer,
                            const std::vector<float>& x) {
    const size_t b = batch_;
    std::vector<float> xr = RoundOperands(precision_, tf32_rounding_, x.data(), b * layer.in);
    const std::vector<float> wr = RoundOperands(
        precision_, tf32_rounding_, params_.data() + layer.w, size_t(layer.out) * layer.in);
    std::vector<float> y(b * layer.out);
    model::dense_internal::LinearForward(batch_, layer.in, layer.out, xr.data(), wr.data(),
                                         params_.data() + layer.b, layer.relu, y.data());
    inputs_.push_back(std::move(xr));
    outputs_.push_back(y);
    return y;
  }

  // dy: the gradient of the layer's output. Returns dx (empty unless want_dx).
  std::vector<float> LinearBackward(const model::dense_internal::Layer& layer, size_t index,
                                    std::vector<float> dy, bool want_dx,
                                    std::vector<float>* grads) {
    const size_t b = batch_;
    if (layer.relu)
      model::dense_internal::ReluBackward(b * layer.out, outputs_[index].data(), dy.data());
    // The bias gradient from the unrounded dy, as the GPU's column sums.
    for (int o = 0; o < layer.out; ++o) {
      double s = 0;
      for (size_t r = 0; r < b; ++r) s += dy[r * layer.out + o];
      (*grads)[layer.b + o] = static_cast<float>(s);
    }
    const std::vector<float> dyr = RoundOperands(precision_, tf32_rounding_, dy.data(), dy.size());
    const std::vector<float> wr = RoundOperands(
        precision_, tf32_rounding_, params_.data() + layer.w, size_t(layer.out) * layer.in);
    std::vector<float> db(layer.out), dx(want_dx ? b * layer.in : 0);
    model::dense_internal::LinearBackward(batch_, layer.in, layer.out, inputs_[index].data(),
                                          wr.data(), dyr.data(), grads->data() + layer.w, db.data(),
                                          want_dx ? dx.data() : nullptr);
    return dx;
  }

  const model::dense_internal::TowerLayout layout_;
  const DensePrecision precision_;
  const Rounding tf32_rounding_;
  int batch_ = 0;
  bool has_bottom_ = false;
  std::vector<float> params_, dense_, pooled_, bottom_, inter_;
  std::vector<std::vector<float>> inputs_, outputs_;  // per layer: rounded input, output
};

}  // namespace ember::worker::testing

#endif  // EMBER_TESTS_WORKER_DENSE_ROUNDED_REFERENCE_H_
