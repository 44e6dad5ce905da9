// Copyright 2026 The Ember Authors.
//
// The one place where CUDA runtime, cuBLAS and NCCL results become absl::Status.
//
//   EMBER_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(...), "copying the logits"));
//
// Codes: out of device memory -> RESOURCE_EXHAUSTED; no device, no or too old a driver,
// a device that is busy, lost or in an unusable state -> UNAVAILABLE; a sticky error
// (IsStickyCudaError: the context is lost for the rest of the process) -> UNAVAILABLE,
// its message ending "the CUDA context is lost: the process must restart", and
// CudaContextLost() (context_lost.h) turns true, so the worker exits 75 to be restarted
// instead of retrying in the same process; a bad argument to
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
// Whether `error` leaves the process's CUDA context unusable (the CUDA headers say "the
// process must be terminated and relaunched"): illegal address / instruction / PC /
// address space, misaligned address, launch failure, launch timeout, device-side
// assert, hardware stack error, uncorrectable ECC or NVLink error, contained error,
// tensor memory leak, MPS client terminated, external device error.
bool IsStickyCudaError(cudaError_t error);
absl::Status CublasStatus(cublasStatus_t status, absl::string_view what);
// `result` is an ncclResult_t (an int, so this header needs no nccl.h).
absl::Status NcclStatus(int result, absl::string_view what);

}  // namespace ember::worker::cuda_internal

#endif  // EMBER_WORKER_CUDA_CUDA_STATUS_H_
