// Copyright 2026 The Ember Authors.
//
// A kernel that fails on purpose, for the tests of what a sticky CUDA error does.

#include "tests/worker/dense/cuda_fault_kernel.h"

namespace ember::worker::testing {
namespace {

__global__ void WriteThroughABadPointer(float* p) { p[threadIdx.x] = 1.0f; }

}  // namespace

cudaError_t LaunchIllegalAddressWrite(cudaStream_t stream) {
  // Address 0x100 is never mapped: the write ends the kernel with cudaErrorIllegalAddress.
  WriteThroughABadPointer<<<1, 32, 0, stream>>>(reinterpret_cast<float*>(0x100));
  return cudaGetLastError();
}

}  // namespace ember::worker::testing
