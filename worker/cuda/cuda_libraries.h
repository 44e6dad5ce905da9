// Copyright 2026 The Ember Authors.
//
// cuBLAS and NCCL, loaded with dlopen on first use instead of linked.
//
// Why: linked, their static thread-local storage (about 120 KiB, most of it cuBLASLt's)
// joins every thread of the process, and a thread with a small stack can no longer
// start: civetweb (prometheus-cpp's HTTP server) makes 100 KiB-stack threads and failed
// with "null context when constructing CivetServer" in every ember-worker. Loaded with
// dlopen, a library's TLS is allocated per thread on demand. It also lets a CPU-only
// worker run where neither library is installed.
//
//   absl::StatusOr<const CublasApi*> cublas = LoadCublas();   // UNAVAILABLE if missing
//   (*cublas)->create(&handle);
//
// Loading happens once per process (thread-safe); the result, success or error, is
// kept. Internal to worker/dense/cuda/ and the NCCL collective.

#ifndef EMBER_WORKER_CUDA_CUDA_LIBRARIES_H_
#define EMBER_WORKER_CUDA_CUDA_LIBRARIES_H_

#include <cublas_v2.h>
#include <nccl.h>

#include "absl/status/statusor.h"

namespace ember::worker::cuda_internal {

struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  // cublasGemmEx (C++ overloads it, so spelled out).
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                            int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                            cublasGemmAlgo_t) = nullptr;
};

struct NcclApi {
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRankConfig) comm_init_rank_config = nullptr;
  decltype(&ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclGetErrorString) get_error_string = nullptr;
};

// libcublas.so.N, N the major version of the cuBLAS this build compiled against. UNAVAILABLE naming
// the library and dlerror() when it or a symbol is missing.
absl::StatusOr<const CublasApi*> LoadCublas();
// libnccl.so.2. UNAVAILABLE likewise.
absl::StatusOr<const NcclApi*> LoadNccl();
// The NCCL API if LoadNccl succeeded before, else null (for error messages).
const NcclApi* LoadedNccl();

}  // namespace ember::worker::cuda_internal

#endif  // EMBER_WORKER_CUDA_CUDA_LIBRARIES_H_
