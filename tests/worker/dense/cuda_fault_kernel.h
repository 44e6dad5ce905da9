// Copyright 2026 The Ember Authors.
//
// A kernel that fails on purpose (cuda_fault_kernel.cu), for the tests of sticky errors.

#ifndef EMBER_TESTS_WORKER_DENSE_CUDA_FAULT_KERNEL_H_
#define EMBER_TESTS_WORKER_DENSE_CUDA_FAULT_KERNEL_H_

#include <cuda_runtime_api.h>

namespace ember::worker::testing {

// Enqueues a kernel that writes through an unmapped device address on `stream`; the
// launch itself succeeds, and the stream's next synchronization reports
// cudaErrorIllegalAddress, which loses the process's CUDA context.
cudaError_t LaunchIllegalAddressWrite(cudaStream_t stream);

}  // namespace ember::worker::testing

#endif  // EMBER_TESTS_WORKER_DENSE_CUDA_FAULT_KERNEL_H_
