// Copyright 2026 The Ember Authors.
//
// The dense optimizers on the device: dense_optimizer.cc's SGD, Adagrad and Adam with
// their moments in device memory and the element updates in kernels.cu (bitwise the
// CPU's for the same inputs). The step scalars are computed on the host exactly as the
// CPU optimizer computes them. SaveState / LoadState use the CPU layout, so a
// checkpoint written on one backend restores on the other. Every entry point selects the
// optimizer's device on the calling thread first (cudaSetDevice is per thread), and every
// transfer runs on the optimizer's stream (the tower's compute stream), then is waited for.

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/cuda/cuda_status.h"
#include "worker/dense/cuda/cuda_backend.h"
#include "worker/dense/cuda/device_buffer.h"
#include "worker/dense/cuda/kernels.h"
#include "worker/dense/optimizer_state.h"

namespace ember::worker::cuda_internal {
namespace {

float OrDefault(float value, float default_value) { return value == 0.0f ? default_value : value; }

class CudaDenseOptimizer final : public DenseOptimizer {
 public:
  CudaDenseOptimizer(const v1::DenseOptimizerConfig& config, v1::DenseOptimizerConfig::Kind kind,
                     size_t n, cudaStream_t stream, int device)
      : kind_(kind),
        n_(n),
        moments_(kind == v1::DenseOptimizerConfig::SGD       ? 0
                 : kind == v1::DenseOptimizerConfig::ADAGRAD ? 1
                                                             : 2),
        stream_(stream),
        device_(device),
        lr_(OrDefault(config.learning_rate(), 0.001f)),
        eps_(OrDefault(config.epsilon(), 1e-8f)),
        beta1_(OrDefault(config.beta1(), 0.9f)),
        beta2_(OrDefault(config.beta2(), 0.999f)),
        initial_accumulator_(config.has_initial_accumulator() ? config.initial_accumulator()
                                                              : 0.1f) {}

  void Init() {
    if (moments_ == 0 || n_ == 0) return;
    status_ = OnDevice();
    if (status_.ok()) status_ = state_.Reserve(n_ * moments_, "optimizer state");
    if (!status_.ok()) return;
    std::vector<float> init(n_ * moments_,
                            kind_ == v1::DenseOptimizerConfig::ADAGRAD ? initial_accumulator_ : 0);
    status_ = Upload(init.data(), "initializing the optimizer state");
  }

  void Step(absl::Span<float> p, absl::Span<const float> g) override {
    if (!status_.ok()) return;
    status_ = OnDevice();
    if (!status_.ok()) return;
    switch (kind_) {
      case v1::DenseOptimizerConfig::SGD:
        status_ = CudaStatus(LaunchSgd(stream_, n_, lr_, p.data(), g.data()), "an SGD step");
        break;
      case v1::DenseOptimizerConfig::ADAGRAD:
        status_ =
            CudaStatus(LaunchAdagrad(stream_, n_, lr_, eps_, p.data(), g.data(), state_.data()),
                       "an Adagrad step");
        break;
      default: {
        const double t = static_cast<double>(step_ + 1);
        const float step_size = static_cast<float>(lr_ / (1.0 - std::pow(double{beta1_}, t)));
        const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(double{beta2_}, t)));
        status_ = CudaStatus(LaunchAdam(stream_, n_, step_size, bc2_sqrt, beta1_, beta2_, eps_,
                                        p.data(), g.data(), state_.data(), state_.data() + n_),
                             "an Adam step");
      }
    }
    ++step_;
  }

  std::vector<float> SaveState() const override {
    std::vector<float> out =
        model::dense_internal::OptimizerStateHeader(kind_, step_, n_ * moments_);
    if (moments_ > 0 && n_ > 0 && status_.ok()) {
      // A failure leaves the moments zero; status() reports it and the caller checks it.
      status_ = OnDevice();
      if (!status_.ok()) return out;
      const cudaError_t e =
          cudaMemcpyAsync(out.data() + model::dense_internal::kOptimizerStateHeader, state_.data(),
                          n_ * moments_ * sizeof(float), cudaMemcpyDeviceToHost, stream_);
      const cudaError_t s = e == cudaSuccess ? cudaStreamSynchronize(stream_) : e;
      if (s != cudaSuccess) status_ = CudaStatus(s, "downloading the optimizer state");
    }
    return out;
  }

  absl::Status LoadState(absl::Span<const float> state) override {
    EMBER_RETURN_IF_ERROR(status_);
    EMBER_ASSIGN_OR_RETURN(const uint64_t step,
                           model::dense_internal::CheckOptimizerState(state, kind_, n_ * moments_));
    if (moments_ > 0 && n_ > 0) {
      EMBER_RETURN_IF_ERROR(OnDevice());
      EMBER_RETURN_IF_ERROR(Upload(state.data() + model::dense_internal::kOptimizerStateHeader,
                                   "uploading the optimizer state"));
    }
    step_ = step;
    return absl::OkStatus();
  }

  absl::Status status() const override { return status_; }

 private:
  absl::Status OnDevice() const {
    return CudaStatus(cudaSetDevice(device_), absl::StrCat("selecting CUDA device ", device_));
  }

  // n_ * moments_ floats from the host into the state, on stream_, waited for.
  absl::Status Upload(const float* host, const char* what) {
    EMBER_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(state_.data(), host, n_ * moments_ * sizeof(float),
                                   cudaMemcpyHostToDevice, stream_),
                   what));
    return CudaStatus(cudaStreamSynchronize(stream_), what);
  }

  const v1::DenseOptimizerConfig::Kind kind_;
  const size_t n_;
  const int moments_;
  const cudaStream_t stream_;
  const int device_;
  const float lr_, eps_, beta1_, beta2_, initial_accumulator_;
  uint64_t step_ = 0;
  DeviceBuffer<float> state_;  // the moments, one n_-block each (Adam: m then v)
  mutable absl::Status status_;
};

}  // namespace

std::unique_ptr<DenseOptimizer> CreateCudaDenseOptimizer(const v1::DenseOptimizerConfig& config,
                                                         size_t num_parameters, void* stream,
                                                         int cuda_device) {
  v1::DenseOptimizerConfig::Kind kind = config.kind();
  switch (kind) {
    case v1::DenseOptimizerConfig::KIND_UNSPECIFIED:
      kind = v1::DenseOptimizerConfig::ADAM;
      break;
    case v1::DenseOptimizerConfig::SGD:
    case v1::DenseOptimizerConfig::ADAGRAD:
    case v1::DenseOptimizerConfig::ADAM:
      break;
    default:
      return nullptr;
  }
  auto optimizer = std::make_unique<CudaDenseOptimizer>(
      config, kind, num_parameters, static_cast<cudaStream_t>(stream), cuda_device);
  optimizer->Init();  // a failure shows in status(), which callers check after each step
  return optimizer;
}

}  // namespace ember::worker::cuda_internal
