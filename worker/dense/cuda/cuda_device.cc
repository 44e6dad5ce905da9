// Copyright 2026 The Ember Authors.
//
// Device probing for CheckDenseDevice, and whether this build has CUDA at all.

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "worker/cuda/cuda_status.h"
#include "worker/dense/cuda/cuda_backend.h"

namespace ember::worker::cuda_internal {

bool BuiltWithCuda() { return true; }

absl::Status ProbeDevice(int ordinal) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // not sticky; clear it
    return absl::UnavailableError(absl::StrCat("no CUDA device visible (", cudaGetErrorName(e),
                                               ": ", cudaGetErrorString(e), ")"));
  }
  if (ordinal >= count) {
    return absl::UnavailableError(
        absl::StrCat("CUDA device ", ordinal, " is not visible; ", count, " device(s) are"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> DescribeDevice(int ordinal) {
  EMBER_RETURN_IF_ERROR(ProbeDevice(ordinal));
  cudaDeviceProp prop;
  EMBER_RETURN_IF_ERROR(
      CudaStatus(cudaGetDeviceProperties(&prop, ordinal), "reading the device's properties"));
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  return absl::StrFormat("%s, compute %d.%d, %d SMs, %.1f GiB, driver %d, runtime %d", prop.name,
                         prop.major, prop.minor, prop.multiProcessorCount,
                         static_cast<double>(prop.totalGlobalMem) / (1 << 30), driver, runtime);
}

int DeviceOfPointer(const void* device_pointer) {
  cudaPointerAttributes attributes;
  if (cudaPointerGetAttributes(&attributes, device_pointer) != cudaSuccess) {
    cudaGetLastError();  // not sticky (a sticky one shows again at the next call)
    return 0;
  }
  return attributes.device;
}

}  // namespace ember::worker::cuda_internal
