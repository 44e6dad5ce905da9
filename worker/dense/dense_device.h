// Copyright 2026 The Ember Authors.
//
// Where a dense tower runs: the CPU (OpenBLAS) or a CUDA GPU (cuBLAS and Ember's
// kernels), and in which matrix precision. Chosen once per worker (`--device`,
// `--dense_precision`) and passed to CreateDenseTower.
//
//   DenseTowerOptions options;
//   EMBER_ASSIGN_OR_RETURN(options.device, ParseDenseDevice("cuda"));
//   EMBER_RETURN_IF_ERROR(CheckDenseDevice(options));   // UNAVAILABLE: no GPU visible
//
// The CUDA backend is compiled whenever nvcc is found at build time (CMake); a build
// without it answers UNIMPLEMENTED for kCuda. Built with it, a machine with no GPU (or
// no driver) answers UNAVAILABLE with the CUDA runtime's reason.

#ifndef EMBER_WORKER_DENSE_DENSE_DEVICE_H_
#define EMBER_WORKER_DENSE_DENSE_DEVICE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/model/dense_tower.h"
#include "ember/v1/model.pb.h"

namespace ember::worker {

using ::ember::model::DenseDevice;  // kCpu, kCuda: the tower's (common/model/dense_tower.h)

// The precision of the tower's matrix products. Everything else (bias, activations,
// interaction, loss, optimizer, master weights) is float32 in every mode.
enum class DensePrecision {
  kFp32,  // float32 products (CUDA: cuBLAS default math, no tensor cores)
  kTf32,  // CUDA: float32 in, tensor cores with 10-bit mantissas, float32 accumulate
  kBf16,  // CUDA: operands rounded to bfloat16, float32 accumulate; master weights float32
};

struct DenseTowerOptions {
  // Default: kCpu.
  DenseDevice device = DenseDevice::kCpu;
  // Default: kFp32. The CPU backend computes in fp32 only: CheckDenseDevice refuses
  // another precision for it (INVALID_ARGUMENT), so a run never claims one it does not use.
  DensePrecision precision = DensePrecision::kFp32;
  // The CUDA device ordinal (kCuda only). Default: 0.
  int cuda_device = 0;
};

// "cpu" | "cuda" (INVALID_ARGUMENT otherwise, naming the choices).
absl::StatusOr<DenseDevice> ParseDenseDevice(absl::string_view text);
// "fp32" | "tf32" | "bf16".
absl::StatusOr<DensePrecision> ParseDensePrecision(absl::string_view text);
const char* DenseDeviceName(DenseDevice device);
const char* DensePrecisionName(DensePrecision precision);

// OK when a tower with these options can be made here: for kCuda, the build has the
// CUDA backend (else UNIMPLEMENTED) and `cuda_device` is a visible device (else
// UNAVAILABLE, with the runtime's reason: no driver, no device, ordinal out of range).
// INVALID_ARGUMENT for a non-fp32 precision on the CPU or a negative ordinal.
absl::Status CheckDenseDevice(const DenseTowerOptions& options);

// OK when `config`'s tower runs on `options.device`: UNIMPLEMENTED ("interaction CROSS
// is not on CUDA yet; use --device=cpu") for a CROSS tower on kCuda, and ("multi-task
// heads are not on CUDA yet; use --device=cpu") for a tower with dense.tasks, which the
// CUDA backend does not have. Needs no device (so it answers the same on any machine); the
// worker calls it before any rendezvous, CreateDenseTower before anything else.
absl::Status CheckDenseTowerOnDevice(const v1::DenseTowerConfig& config,
                                     const DenseTowerOptions& options);

// A tower on the device of `options`: model::DenseTower::Create's tower on the CPU, the
// CUDA backend's (dense/cuda/) on a GPU, from the same layout and initial weights. The
// errors of CheckDenseTowerOnDevice, of BuildTowerLayout (INVALID_ARGUMENT: see
// model::DenseTower::Create), those of CheckDenseDevice(options), and for CUDA RESOURCE_EXHAUSTED
// or INTERNAL when the device cannot hold the parameters or start cuBLAS.
absl::StatusOr<std::unique_ptr<model::DenseTower>> CreateDenseTower(
    const v1::DenseTowerConfig& config, int num_dense, std::vector<int> feature_dims,
    const DenseTowerOptions& options = DenseTowerOptions());

// One line about the CUDA device `ordinal` ("NVIDIA H200, compute 9.0, 132 SMs, 140 GiB"),
// or the reason there is none (the status of CheckDenseDevice).
absl::StatusOr<std::string> DescribeCudaDevice(int ordinal);

}  // namespace ember::worker

#endif  // EMBER_WORKER_DENSE_DENSE_DEVICE_H_
