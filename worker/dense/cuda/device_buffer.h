// Copyright 2026 The Ember Authors.
//
// Owning buffers of device memory and of pinned (page-locked) host memory that grow on
// demand and never shrink: a tower sizes them for the largest batch it has seen.
//
//   DeviceBuffer<float> logits;
//   EMBER_RETURN_IF_ERROR(logits.Reserve(batch, "logits"));   // RESOURCE_EXHAUSTED when full
//   kernel<<<..., stream>>>(logits.data(), ...);
//
// Reserve keeps the contents only when it does not reallocate (callers treat a grown
// buffer as uninitialized). Not thread-safe. Internal to worker/dense/cuda/ and the
// NCCL collective.

#ifndef EMBER_WORKER_DENSE_CUDA_DEVICE_BUFFER_H_
#define EMBER_WORKER_DENSE_CUDA_DEVICE_BUFFER_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/cuda/cuda_status.h"

namespace ember::worker::cuda_internal {

enum class Memory { kDevice, kPinnedHost };

template <typename T, Memory kMemory>
class CudaBuffer {
 public:
  CudaBuffer() = default;
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;
  CudaBuffer(CudaBuffer&& other) noexcept : data_(other.data_), capacity_(other.capacity_) {
    other.data_ = nullptr;
    other.capacity_ = 0;
  }
  ~CudaBuffer() { Free(); }

  // Makes room for at least `n` elements. RESOURCE_EXHAUSTED (naming `what`) when the
  // memory is not there; the old buffer is gone then too.
  absl::Status Reserve(size_t n, const char* what) {
    if (n <= capacity_) return absl::OkStatus();
    Free();
    void* p = nullptr;
    const cudaError_t e = kMemory == Memory::kDevice ? cudaMalloc(&p, n * sizeof(T))
                                                     : cudaMallocHost(&p, n * sizeof(T));
    if (e != cudaSuccess) {
      return CudaStatus(e, absl::StrCat("allocating ", n * sizeof(T), " bytes for ", what));
    }
    data_ = static_cast<T*>(p);
    capacity_ = n;
    return absl::OkStatus();
  }

  T* data() const { return data_; }
  size_t capacity() const { return capacity_; }

 private:
  void Free() {
    if (data_ == nullptr) return;
    // Errors here (a device already lost) have no one to go to; the memory is gone.
    if (kMemory == Memory::kDevice) {
      cudaFree(data_);
    } else {
      cudaFreeHost(data_);
    }
    data_ = nullptr;
    capacity_ = 0;
  }

  T* data_ = nullptr;
  size_t capacity_ = 0;
};

template <typename T>
using DeviceBuffer = CudaBuffer<T, Memory::kDevice>;
template <typename T>
using PinnedBuffer = CudaBuffer<T, Memory::kPinnedHost>;

}  // namespace ember::worker::cuda_internal

#endif  // EMBER_WORKER_DENSE_CUDA_DEVICE_BUFFER_H_
