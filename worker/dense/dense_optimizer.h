// Copyright 2026 The Ember Authors.
//
// DenseOptimizer: the dense optimizers of a training job (SGD, Adagrad, Adam) over one
// flat parameter array, the tower's (common/model/dense_tower.h), with the CPU
// implementation here and the CUDA one in cuda/. Training only: serving runs towers
// without optimizers.

#ifndef EMBER_WORKER_DENSE_DENSE_OPTIMIZER_H_
#define EMBER_WORKER_DENSE_DENSE_OPTIMIZER_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/model/dense_tower.h"
#include "ember/v1/model.pb.h"

namespace ember::worker {

using model::DenseTower;

// A dense optimizer over one flat parameter array (the tower's), state included.
class DenseOptimizer {
 public:
  // `config` normalized; `num_parameters` the buffer size. Zero fields still mean
  // their defaults (ADAM, lr 0.001, betas 0.9 / 0.999, epsilon 1e-8; Adagrad's
  // initial_accumulator 0.1 when unset). Returns nullptr for an unknown kind.
  static std::unique_ptr<DenseOptimizer> Create(const v1::DenseOptimizerConfig& config,
                                                size_t num_parameters);
  virtual ~DenseOptimizer() = default;
  // One step: parameters -= update(gradients). REQUIRES: sizes equal num_parameters.
  virtual void Step(absl::Span<float> parameters, absl::Span<const float> gradients) = 0;
  // Optimizer state (kind, step count, moments) as a flat float array, for checkpoints.
  virtual std::vector<float> SaveState() const = 0;
  // INVALID_ARGUMENT when `state` does not come from SaveState of an equal optimizer.
  virtual absl::Status LoadState(absl::Span<const float> state) = 0;
  // OK, or the first device error of a CUDA optimizer (the CPU one is always OK).
  virtual absl::Status status() const { return absl::OkStatus(); }
};

// The optimizer that steps `tower`'s step_parameters(): DenseOptimizer::Create for a CPU
// tower; for a CUDA tower one whose state lives on the device and whose steps run on
// the tower's stream (same formulas, same SaveState layout, so checkpoints move between
// backends). nullptr for an unknown kind.
std::unique_ptr<DenseOptimizer> CreateDenseOptimizer(const v1::DenseOptimizerConfig& config,
                                                     model::DenseTower& tower);

}  // namespace ember::worker

#endif  // EMBER_WORKER_DENSE_DENSE_OPTIMIZER_H_
