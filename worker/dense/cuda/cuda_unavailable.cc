// Copyright 2026 The Ember Authors.
//
// The CUDA backend's entry points in a build without nvcc: every one says so.

#include "worker/dense/cuda/cuda_backend.h"

namespace ember::worker::cuda_internal {
namespace {

absl::Status NotBuilt() {
  return absl::UnimplementedError(
      "this Ember was built without CUDA (no nvcc at configure time); rebuild on a machine "
      "with the CUDA toolkit for --device=cuda");
}

}  // namespace

bool BuiltWithCuda() { return false; }
absl::Status ProbeDevice(int) { return NotBuilt(); }
absl::StatusOr<std::string> DescribeDevice(int) { return NotBuilt(); }

absl::StatusOr<std::unique_ptr<model::DenseTower>> CreateCudaDenseTower(
    model::dense_internal::TowerLayout, std::vector<float>, const DenseTowerOptions&) {
  return NotBuilt();
}

std::unique_ptr<DenseOptimizer> CreateCudaDenseOptimizer(const v1::DenseOptimizerConfig&, size_t,
                                                         void*, int) {
  return nullptr;
}
int DeviceOfPointer(const void*) { return 0; }

}  // namespace ember::worker::cuda_internal
