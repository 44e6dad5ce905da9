// Copyright 2026 The Ember Authors.
//
// Helpers of the CUDA dense tests: skipping without a GPU, random inputs, relative
// errors, and device buffers filled from / read into host vectors.

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

// A device copy of a host vector; Read() copies back. Aborts the test on CUDA errors.
template <typename T>
class DeviceVector {
 public:
  explicit DeviceVector(const std::vector<T>& host) : n_(host.size()) {
    EXPECT_EQ(cudaMalloc(&data_, std::max<size_t>(n_, 1) * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(data_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  explicit DeviceVector(size_t n, T poison) : DeviceVector(std::vector<T>(n, poison)) {}
  ~DeviceVector() { cudaFree(data_); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;

  T* get() const { return static_cast<T*>(data_); }
  std::vector<T> Read() const {
    std::vector<T> host(n_);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(host.data(), data_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

 private:
  void* data_ = nullptr;
  size_t n_;
};

}  // namespace ember::worker::testing

#endif  // EMBER_TESTS_WORKER_DENSE_CUDA_TEST_UTIL_H_
