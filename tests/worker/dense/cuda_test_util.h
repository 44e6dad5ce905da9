// Copyright 2026 The Ember Authors.
//
// Helpers of the CUDA dense and NCCL tests: skipping without a GPU (or without enough
// of them), random inputs, relative errors, and device buffers filled from / read into
// host vectors.

#ifndef EMBER_TESTS_WORKER_DENSE_CUDA_TEST_UTIL_H_
#define EMBER_TESTS_WORKER_DENSE_CUDA_TEST_UTIL_H_

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/common/model/gradient_check.h"
#include "worker/dense/dense_device.h"

// Skips the test, naming the reason, when no CUDA device is visible.
#define EMBER_SKIP_WITHOUT_GPU()                                                     \
  do {                                                                               \
    ::ember::worker::DenseTowerOptions gpu_options_;                                 \
    gpu_options_.device = ::ember::model::DenseDevice::kCuda;                        \
    if (absl::Status s = ::ember::worker::CheckDenseDevice(gpu_options_); !s.ok()) { \
      GTEST_SKIP() << "needs a GPU: " << s.message();                                \
    }                                                                                \
  } while (0)

// Skips the test, naming the reason, with fewer than `n` visible CUDA devices.
#define EMBER_SKIP_WITH_FEWER_GPUS(n)                                                     \
  do {                                                                                    \
    int gpus_ = 0;                                                                        \
    if (cudaGetDeviceCount(&gpus_) != cudaSuccess) gpus_ = 0;                             \
    cudaGetLastError();                                                                   \
    if (gpus_ < (n)) GTEST_SKIP() << "needs " << (n) << " GPUs; " << gpus_ << " visible"; \
  } while (0)

namespace ember::worker::testing {

using ::ember::model::test::Random;

// ||got - want|| / ||want|| in double; 0 for two empty vectors; infinity on NaN.
inline double RelativeError(const float* got, const float* want, size_t n) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(got[i])) return INFINITY;
    const double d = static_cast<double>(got[i]) - want[i];
    diff += d * d;
    norm += static_cast<double>(want[i]) * want[i];
  }
  return norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

template <typename V>
double RelativeError(const V& got, const V& want) {
  EXPECT_EQ(got.size(), want.size());
  return RelativeError(got.data(), want.data(), std::min(got.size(), want.size()));
}

// A device copy of a host vector; Read() copies back. Fails the test on CUDA errors.
// Both copies run on `stream` (the stream the code under test uses: a tower's or
// optimizer's streams are non-blocking, so they do not wait for the legacy default
// stream that cudaMemcpy uses) and are waited for before returning.
template <typename T>
class DeviceVector {
 public:
  explicit DeviceVector(const std::vector<T>& host, cudaStream_t stream = nullptr)
      : n_(host.size()), stream_(stream) {
    EXPECT_EQ(cudaMalloc(&data_, std::max<size_t>(n_, 1) * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpyAsync(data_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice, stream_),
              cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  }
  DeviceVector(size_t n, T poison, cudaStream_t stream = nullptr)
      : DeviceVector(std::vector<T>(n, poison), stream) {}
  ~DeviceVector() { cudaFree(data_); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;

  T* get() const { return static_cast<T*>(data_); }
  // After every stream's work so far (cudaDeviceSynchronize), then on `stream`.
  std::vector<T> Read() const {
    std::vector<T> host(n_);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpyAsync(host.data(), data_, n_ * sizeof(T), cudaMemcpyDeviceToHost, stream_),
              cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    return host;
  }

 private:
  void* data_ = nullptr;
  size_t n_;
  cudaStream_t stream_;
};

}  // namespace ember::worker::testing

#endif  // EMBER_TESTS_WORKER_DENSE_CUDA_TEST_UTIL_H_
