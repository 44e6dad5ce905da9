// Copyright 2026 The Ember Authors.
//
// Server-side sparse optimizers, applied by the PS to one row at a time on push.
// All are lazy: only rows present in a push change. Formulas (w: embedding, g:
// gradient, lr: learning_rate * frequency scale):
//
//   SGD      w -= lr * g
//   Adagrad  a += g^2;  w -= lr * g / (sqrt(a) + eps)            (a starts at initial_accumulator)
//   Adam     per-row t: p1 *= b1; p2 *= b2; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//            w -= lr * (m / (1 - p1)) / (sqrt(v / (1 - p2)) + eps)   (p1 = p2 = 1 initially)
//   FTRL     n' = n + g^2; sigma = (sqrt(n') - sqrt(n)) / lr; z += g - sigma * w; n = n';
//            w = |z| <= l1 ? 0 : -(z - sign(z) l1) / ((beta + sqrt(n)) / lr + l2)
//
// Frequency-aware learning rate: lr = learning_rate *
//   clamp((freq_reference_count / max(count, 1)) ^ freq_power, freq_min_scale, freq_max_scale)
// where count is the row's sighting count after this push. freq_power = 0 disables it.
//
// Finiteness: finite gradients can still overflow a row (SGD with a gradient of 3e38) or
// its state (g^2 in Adagrad's accumulator, Adam's v, FTRL's n). Apply computes into an
// output and reports whether every float of it is finite; the table writes the output
// only then (embedding_table.cc), so a stored row and its state are always finite.

#ifndef EMBER_SERVER_STORE_INTERNAL_OPTIMIZER_H_
#define EMBER_SERVER_STORE_INTERNAL_OPTIMIZER_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "ember/v1/table.pb.h"

namespace ember {

class Optimizer {
 public:
  // REQUIRES: `config` normalized (NormalizeTableConfig).
  static std::unique_ptr<Optimizer> Create(const v1::OptimizerConfig& config, uint32_t dim);

  virtual ~Optimizer() = default;

  uint32_t dim() const { return dim_; }
  // Floats of state stored after the embedding in every row.
  virtual uint32_t state_floats() const = 0;
  // Writes the state of a freshly created row.
  virtual void InitState(float* state) const = 0;
  // Computes the update of gradient g[0, dim) with learning-rate multiplier `lr_scale`
  // on `row` (dim embedding floats, then state_floats() floats of state) into `out`
  // (the same layout). Returns whether every float of `out` is finite; when not, `out`
  // must not be stored. REQUIRES: `out` overlaps neither `row` nor `g` (the loops are
  // vectorized on that promise).
  // Thread-compatible: callers serialize access to a row.
  bool Apply(const float* row, float* out, const float* g, float lr_scale) const {
    return Update(row, out, g, lr_scale);
  }

  // Whether x[0, n) holds no NaN and no infinity.
  static bool AllFinite(const float* x, size_t n);

  // The frequency-aware multiplier for a row seen `count` times.
  float LearningRateScale(float count) const;

 protected:
  Optimizer(const v1::OptimizerConfig& config, uint32_t dim) : config_(config), dim_(dim) {}
  // Apply itself, per optimizer (the finiteness check is part of each loop).
  virtual bool Update(const float* __restrict row, float* __restrict out, const float* __restrict g,
                      float lr_scale) const = 0;
  const v1::OptimizerConfig config_;
  const uint32_t dim_;
};

}  // namespace ember

#endif  // EMBER_SERVER_STORE_INTERNAL_OPTIMIZER_H_
