// Copyright 2026 The Ember Authors.
//
// The one place where CUDA runtime, cuBLAS and NCCL results become absl::Status.
//
//   EMBER_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(...), "copying the logits"));
//
// Codes: out of device memory -> RESOURCE_EXHAUSTED; no device, no or too old a driver,
// a device that is busy, lost or in an unusable state -> UNAVAILABLE; a bad argument to
// a library call (an Ember bug) -> INTERNAL; NCCL remote and system errors (a peer died,
// a socket closed) -> UNAVAILABLE; NCCL's invalid usage -> INTERNAL. Messages name the
// operation and the library's own error name and text.

#ifndef EMBER_WORKER_CUDA_CUDA_STATUS_H_
#define EMBER_WORKER_CUDA_CUDA_STATUS_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ember::worker::cuda_internal {

absl::Status CudaStatus(cudaError_t error, absl::string_view what);
absl::Status CublasStatus(cublasStatus_t status, absl::string_view what);
// `result` is an ncclResult_t (an int, so this header needs no nccl.h).
absl::Status NcclStatus(int result, absl::string_view what);

}  // namespace ember::worker::cuda_internal

#endif  // EMBER_WORKER_CUDA_CUDA_STATUS_H_
