// Copyright 2026 The Ember Authors.
//
// The checkpoint layout of a dense optimizer's state, shared by the CPU optimizers
// (dense_optimizer.cc) and the CUDA ones (cuda/cuda_dense_optimizer.cc) so a checkpoint
// written on one backend restores on the other. All floats:
//   [0] kind (1 SGD, 2 Adagrad, 3 Adam)
//   [1] step count mod 2^24, [2] step count / 2^24 (each exact in a float)
//   then the moments: Adagrad accumulator[n]; Adam m[n], v[n].
// Internal to worker/dense/.

#ifndef EMBER_WORKER_DENSE_OPTIMIZER_STATE_H_
#define EMBER_WORKER_DENSE_OPTIMIZER_STATE_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "ember/v1/model.pb.h"

namespace ember::model::dense_internal {

constexpr size_t kOptimizerStateHeader = 3;

// The header floats, followed by room for `moment_floats` floats (zero).
inline std::vector<float> OptimizerStateHeader(v1::DenseOptimizerConfig::Kind kind, uint64_t step,
                                               size_t moment_floats) {
  std::vector<float> out(kOptimizerStateHeader + moment_floats, 0.0f);
  out[0] = static_cast<float>(kind);
  out[1] = static_cast<float>(step & 0xffffff);
  out[2] = static_cast<float>(step >> 24);
  return out;
}

// The step count of `state` if it is an optimizer of `kind` with `moment_floats` floats
// of moments; INVALID_ARGUMENT (saying what does not fit) otherwise.
inline absl::StatusOr<uint64_t> CheckOptimizerState(absl::Span<const float> state,
                                                    v1::DenseOptimizerConfig::Kind kind,
                                                    size_t moment_floats) {
  const size_t want = kOptimizerStateHeader + moment_floats;
  if (state.size() != want) {
    return absl::InvalidArgumentError(
        absl::StrCat("dense optimizer state has ", state.size(), " floats; want ", want));
  }
  if (state[0] != static_cast<float>(kind)) {
    return absl::InvalidArgumentError(absl::StrCat("dense optimizer state is of kind ", state[0],
                                                   "; want ", static_cast<int>(kind)));
  }
  auto is_count = [](float f) { return f >= 0 && f < 16777216.0f && f == std::floor(f); };
  if (!is_count(state[1]) || !is_count(state[2])) {
    return absl::InvalidArgumentError("dense optimizer state: bad step count");
  }
  return static_cast<uint64_t>(state[1]) | (static_cast<uint64_t>(state[2]) << 24);
}

}  // namespace ember::model::dense_internal

#endif  // EMBER_WORKER_DENSE_OPTIMIZER_STATE_H_
