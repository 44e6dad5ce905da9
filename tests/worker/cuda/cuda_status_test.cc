// Copyright 2026 The Ember Authors.
//
// worker/cuda/cuda_status.cc: the codes CUDA errors become, and which of them lose the
// process's CUDA context (context_lost.h). Host-side only: translating an error needs
// no GPU, so this runs on every machine with the CUDA toolkit.

#include "worker/cuda/cuda_status.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "worker/cuda/context_lost.h"

namespace ember::worker::cuda_internal {
namespace {

// One test, in this order: the flag is process-wide and never clears.
TEST(CudaStatusTest, StickyErrorsLoseTheContextAndOthersDoNot) {
  EXPECT_TRUE(CudaStatus(cudaSuccess, "nothing").ok());
  const absl::Status oom = CudaStatus(cudaErrorMemoryAllocation, "allocating");
  EXPECT_EQ(oom.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(oom.message(), "allocating")) << oom;
  EXPECT_EQ(CudaStatus(cudaErrorNoDevice, "probing").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(CudaStatus(cudaErrorInvalidValue, "a call").code(), absl::StatusCode::kInternal);
  EXPECT_FALSE(CudaContextLost());
  EXPECT_EQ(CudaContextLostReason(), "");

  for (cudaError_t e :
       {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorIllegalInstruction,
        cudaErrorECCUncorrectable, cudaErrorLaunchTimeout, cudaErrorAssert,
        cudaErrorHardwareStackError, cudaErrorMisalignedAddress, cudaErrorInvalidPc,
        cudaErrorNvlinkUncorrectable}) {
    EXPECT_TRUE(IsStickyCudaError(e)) << cudaGetErrorName(e);
  }
  for (cudaError_t e : {cudaSuccess, cudaErrorMemoryAllocation, cudaErrorNoDevice,
                        cudaErrorInvalidValue, cudaErrorNotReady, cudaErrorLaunchOutOfResources}) {
    EXPECT_FALSE(IsStickyCudaError(e)) << cudaGetErrorName(e);
  }

  const absl::Status lost = CudaStatus(cudaErrorIllegalAddress, "the forward pass");
  EXPECT_EQ(lost.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(lost.message(), "the CUDA context is lost")) << lost;
  EXPECT_TRUE(CudaContextLost());
  EXPECT_TRUE(absl::StrContains(CudaContextLostReason(), "the forward pass"));
  // The first reason stays.
  EXPECT_FALSE(CudaStatus(cudaErrorLaunchFailure, "later").ok());
  EXPECT_TRUE(absl::StrContains(CudaContextLostReason(), "the forward pass"));
  EXPECT_EQ(kExitCudaContextLost, 75);
}

}  // namespace
}  // namespace ember::worker::cuda_internal
