// Copyright 2026 The Ember Authors.
//
// The entry points of the CUDA dense backend, as plain C++ (no CUDA headers), so
// dense_tower.cc and dense_device.cc call them whether or not the build has CUDA.
// Built with nvcc present: cuda_device.cc, cuda_dense_tower.cc, cuda_dense_optimizer.cc
// and kernels.cu. Without: cuda_unavailable.cc, where each answers UNIMPLEMENTED
// ("built without CUDA"). Internal to worker/dense/.

#ifndef EMBER_WORKER_DENSE_CUDA_CUDA_BACKEND_H_
#define EMBER_WORKER_DENSE_CUDA_CUDA_BACKEND_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model/dense_tower.h"
#include "common/model/tower_layout.h"
#include "ember/v1/model.pb.h"
#include "worker/dense/dense_device.h"
#include "worker/dense/dense_optimizer.h"

namespace ember::worker::cuda_internal {

// Whether this build has the CUDA backend.
bool BuiltWithCuda();

// OK when device `ordinal` is visible and usable; UNAVAILABLE with the runtime's
// reason otherwise; UNIMPLEMENTED without the backend.
absl::Status ProbeDevice(int ordinal);
absl::StatusOr<std::string> DescribeDevice(int ordinal);

// A tower on options.cuda_device with these (validated) shapes and initial parameters.
// UNIMPLEMENTED for a CROSS layout (no cross kernels yet).
absl::StatusOr<std::unique_ptr<model::DenseTower>> CreateCudaDenseTower(
    model::dense_internal::TowerLayout layout, std::vector<float> parameters,
    const DenseTowerOptions& options);

// An optimizer over `num_parameters` floats of device memory on `cuda_device`, stepping
// on `stream` (a cudaStream_t). nullptr for an unknown kind.
std::unique_ptr<DenseOptimizer> CreateCudaDenseOptimizer(const v1::DenseOptimizerConfig& config,
                                                         size_t num_parameters, void* stream,
                                                         int cuda_device);

// The device that holds `device_pointer` (memory a CUDA tower allocated), for the
// optimizer that steps on it; 0 when it cannot be told (only with a lost CUDA context,
// where every later call fails anyway).
int DeviceOfPointer(const void* device_pointer);

}  // namespace ember::worker::cuda_internal

#endif  // EMBER_WORKER_DENSE_CUDA_CUDA_BACKEND_H_
