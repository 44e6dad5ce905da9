// Copyright 2026 The Ember Authors.

#include "worker/cuda/cuda_status.h"

#include <nccl.h>

#include "worker/cuda/context_lost.h"
#include "worker/cuda/cuda_libraries.h"

#include "absl/strings/str_cat.h"

namespace ember::worker::cuda_internal {

bool IsStickyCudaError(cudaError_t error) {
  switch (static_cast<int>(error)) {
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    // By number: these names are newer than the CUDA 12.x of the worker image.
    case 226:  // cudaErrorContained
    case 721:  // cudaErrorTensorMemoryLeak
    case 810:  // cudaErrorMpsClientTerminated
    case 911:  // cudaErrorExternalDevice
      return true;
    default:
      return false;
  }
}

absl::Status CudaStatus(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  std::string message = absl::StrCat("CUDA error while ", what, ": ", cudaGetErrorName(error), " (",
                                     cudaGetErrorString(error), ")");
  if (IsStickyCudaError(error)) {
    // The process cannot use CUDA again; retries in it fail the same way.
    absl::StrAppend(&message, "; the CUDA context is lost: the process must restart");
    MarkCudaContextLost(message);
    return absl::UnavailableError(message);
  }
  switch (error) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorSystemNotReady:
    case cudaErrorStubLibrary:
    case cudaErrorDeviceUninitialized:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorNoKernelImageForDevice:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

namespace {

const char* CublasName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
    default:
      return "CUBLAS_STATUS_UNKNOWN";
  }
}

}  // namespace

absl::Status CublasStatus(cublasStatus_t status, absl::string_view what) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string message = absl::StrCat("cuBLAS error while ", what, ": ", CublasName(status));
  switch (status) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::ResourceExhaustedError(message);
    case CUBLAS_STATUS_NOT_INITIALIZED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status NcclStatus(int result, absl::string_view what) {
  const ncclResult_t r = static_cast<ncclResult_t>(result);
  if (r == ncclSuccess || r == ncclInProgress) return absl::OkStatus();
  const NcclApi* nccl = LoadedNccl();
  const std::string message = absl::StrCat(
      "NCCL error while ", what, ": ",
      nccl != nullptr ? nccl->get_error_string(r) : "(NCCL not loaded)", " (", result, ")");
  switch (r) {
    case ncclSystemError:
    case ncclRemoteError:
      return absl::UnavailableError(message);
    case ncclUnhandledCudaError: {
      // A CUDA error inside NCCL: a sticky one is still there to peek at.
      const cudaError_t cuda = cudaPeekAtLastError();
      if (IsStickyCudaError(cuda)) return CudaStatus(cuda, what);
      return absl::UnavailableError(message);
    }
    default:
      return absl::InternalError(message);
  }
}

}  // namespace ember::worker::cuda_internal
