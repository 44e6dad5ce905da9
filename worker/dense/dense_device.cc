// Copyright 2026 The Ember Authors.

#include "worker/dense/dense_device.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model/tower_layout.h"
#include "common/status_macros.h"
#include "worker/dense/cuda/cuda_backend.h"

namespace ember::worker {

absl::StatusOr<DenseDevice> ParseDenseDevice(absl::string_view text) {
  if (text == "cpu") return DenseDevice::kCpu;
  if (text == "cuda") return DenseDevice::kCuda;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dense device '", text, "'; want cpu or cuda"));
}

absl::StatusOr<DensePrecision> ParseDensePrecision(absl::string_view text) {
  if (text == "fp32") return DensePrecision::kFp32;
  if (text == "tf32") return DensePrecision::kTf32;
  if (text == "bf16") return DensePrecision::kBf16;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dense precision '", text, "'; want fp32, tf32 or bf16"));
}

const char* DenseDeviceName(DenseDevice device) {
  return device == DenseDevice::kCuda ? "cuda" : "cpu";
}

const char* DensePrecisionName(DensePrecision precision) {
  switch (precision) {
    case DensePrecision::kTf32:
      return "tf32";
    case DensePrecision::kBf16:
      return "bf16";
    case DensePrecision::kFp32:
      break;
  }
  return "fp32";
}

absl::Status CheckDenseDevice(const DenseTowerOptions& options) {
  if (options.device == DenseDevice::kCpu) {
    if (options.precision != DensePrecision::kFp32) {
      return absl::InvalidArgumentError(
          absl::StrCat("dense precision ", DensePrecisionName(options.precision),
                       " needs --device=cuda; the CPU backend computes in fp32"));
    }
    return absl::OkStatus();
  }
  if (options.cuda_device < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA device ordinal ", options.cuda_device, " is negative"));
  }
  return cuda_internal::ProbeDevice(options.cuda_device);
}

absl::StatusOr<std::string> DescribeCudaDevice(int ordinal) {
  return cuda_internal::DescribeDevice(ordinal);
}

absl::Status CheckDenseTowerOnDevice(const v1::DenseTowerConfig& config,
                                     const DenseTowerOptions& options) {
  if (options.device == DenseDevice::kCuda && config.interaction() == v1::DenseTowerConfig::CROSS) {
    return absl::UnimplementedError("interaction CROSS is not on CUDA yet; use --device=cpu");
  }
  if (options.device == DenseDevice::kCuda && !config.tasks().empty()) {
    return absl::UnimplementedError("multi-task heads are not on CUDA yet; use --device=cpu");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<model::DenseTower>> CreateDenseTower(
    const v1::DenseTowerConfig& config, int num_dense, std::vector<int> feature_dims,
    const DenseTowerOptions& options) {
  EMBER_RETURN_IF_ERROR(CheckDenseTowerOnDevice(config, options));
  EMBER_RETURN_IF_ERROR(CheckDenseDevice(options));
  if (options.device == DenseDevice::kCpu) {
    return model::DenseTower::Create(config, num_dense, std::move(feature_dims));
  }
  EMBER_ASSIGN_OR_RETURN(
      model::dense_internal::TowerLayout layout,
      model::dense_internal::BuildTowerLayout(config, num_dense, std::move(feature_dims)));
  std::vector<float> parameters = model::dense_internal::InitialParameters(
      layout, config.init_seed() == 0 ? 1 : config.init_seed());
  return cuda_internal::CreateCudaDenseTower(std::move(layout), std::move(parameters), options);
}

}  // namespace ember::worker
