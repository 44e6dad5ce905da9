// Copyright 2026 The Ember Authors.
//
// The CUDA model::DenseTower: the CPU tower's computation (dense_tower.cc) on one GPU.
// Products through cuBLAS (cublasGemmEx: fp32, tf32 or bf16 operands, fp32
// accumulate); bias+activation, ReLU backward, bias gradients, the interactions and the
// loss through kernels.cu. Inputs travel host -> pinned buffer -> device on a copy
// stream; compute runs on one compute stream that waits on the copy's event. Every
// transfer and memset is on one of these two streams (never the legacy default stream,
// which the non-blocking streams do not wait for), and every entry point first selects
// the tower's device on the calling thread (cudaSetDevice is per thread: the trainer,
// its evaluation and the tests may call from other threads than the one that made it).
//
// Row-major matrices through column-major cuBLAS: a row-major [r x c] matrix is a
// column-major [c x r] one, so y = x W^T is, column-major, y' = W'^T x', and so on.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/model/layers.h"
#include "common/status_macros.h"
#include "worker/cuda/cuda_libraries.h"
#include "worker/cuda/cuda_status.h"
#include "worker/dense/cuda/cuda_backend.h"
#include "worker/dense/cuda/device_buffer.h"
#include "worker/dense/cuda/kernels.h"

namespace ember::worker::cuda_internal {
namespace {

using model::dense_internal::Layer;
using model::dense_internal::TowerLayout;

class CudaDenseTower final : public model::DenseTower {
 public:
  CudaDenseTower(TowerLayout layout, const DenseTowerOptions& options)
      : layout_(std::move(layout)), options_(options) {}

  ~CudaDenseTower() override {
    cudaSetDevice(options_.cuda_device);  // errors: the calls below fail alike, harmlessly
    if (compute_ != nullptr) cudaStreamSynchronize(compute_);
    if (copy_ != nullptr) cudaStreamSynchronize(copy_);
    if (cublas_ != nullptr) blas_->destroy(cublas_);
    if (copied_ != nullptr) cudaEventDestroy(copied_);
    if (compute_ != nullptr) cudaStreamDestroy(compute_);
    if (copy_ != nullptr) cudaStreamDestroy(copy_);
  }

  absl::Status Init(const std::vector<float>& parameters) {
    EMBER_RETURN_IF_ERROR(OnDevice());
    EMBER_RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking),
                                     "creating the compute stream"));
    EMBER_RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking),
                                     "creating the copy stream"));
    EMBER_RETURN_IF_ERROR(CudaStatus(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming),
                                     "creating the copy event"));
    EMBER_ASSIGN_OR_RETURN(blas_, LoadCublas());
    EMBER_RETURN_IF_ERROR(CublasStatus(blas_->create(&cublas_), "creating the cuBLAS handle"));
    EMBER_RETURN_IF_ERROR(CublasStatus(blas_->set_stream(cublas_, compute_), "binding cuBLAS"));
    EMBER_RETURN_IF_ERROR(
        CublasStatus(blas_->set_math_mode(cublas_, CUBLAS_DEFAULT_MATH), "setting the math mode"));
    const size_t n = layout_.num_parameters;
    EMBER_RETURN_IF_ERROR(params_.Reserve(n, "parameters"));
    EMBER_RETURN_IF_ERROR(grads_.Reserve(n, "gradients"));
    if (options_.precision == DensePrecision::kBf16) {
      EMBER_RETURN_IF_ERROR(params_bf16_.Reserve(n, "bf16 parameters"));
    }
    host_params_ = parameters;
    host_grads_.assign(n, 0.0f);
    bottom_out_.resize(layout_.bottom.size());
    top_out_.resize(layout_.top.size());
    layer_in_bf16_.resize(layout_.bottom.size() + layout_.top.size());
    // On the compute stream, then waited for: every later step is ordered after them.
    EMBER_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(params_.data(), host_params_.data(), n * sizeof(float),
                                   cudaMemcpyHostToDevice, compute_),
                   "uploading the parameters"));
    return ZeroGradients();
  }

  model::DenseDevice device() const override { return model::DenseDevice::kCuda; }
  absl::Status status() const override { return status_; }
  int pooled_width() const override { return layout_.pooled_width; }
  void* cuda_stream() const override { return compute_; }

  absl::Span<float> step_parameters() override {
    return absl::MakeSpan(params_.data(), layout_.num_parameters);
  }
  absl::Span<float> step_gradients() override {
    return absl::MakeSpan(grads_.data(), layout_.num_parameters);
  }

  absl::Span<float> parameters() override {
    Download(params_.data(), &host_params_, "downloading the parameters");
    return absl::MakeSpan(host_params_);
  }
  absl::Span<float> gradients() override {
    Download(grads_.data(), &host_grads_, "downloading the gradients");
    return absl::MakeSpan(host_grads_);
  }

  absl::Status SyncParametersToDevice() override {
    Record([&]() -> absl::Status {
      EMBER_RETURN_IF_ERROR(CudaStatus(
          cudaMemcpyAsync(params_.data(), host_params_.data(), host_params_.size() * sizeof(float),
                          cudaMemcpyHostToDevice, compute_),
          "uploading the parameters"));
      return CudaStatus(cudaStreamSynchronize(compute_), "uploading the parameters");
    });
    return status_;
  }

  void Forward(int batch, absl::Span<const float> dense, absl::Span<const float> pooled,
               absl::Span<float> logits) override {
    batch_ = batch;
    Record([&]() -> absl::Status {
      if (batch == 0) return absl::OkStatus();
      EMBER_RETURN_IF_ERROR(Reserve(batch));
      EMBER_RETURN_IF_ERROR(Upload(dense, pooled));
      EMBER_RETURN_IF_ERROR(ForwardOnDevice(batch));
      EMBER_RETURN_IF_ERROR(
          CudaStatus(cudaMemcpyAsync(logits.data(), logits_.data(), batch * sizeof(float),
                                     cudaMemcpyDeviceToHost, compute_),
                     "downloading the logits"));
      return CudaStatus(cudaStreamSynchronize(compute_), "the forward pass");
    });
  }

  // Not batch-invariant: cuBLAS chooses kernels (and summation orders) by shape, so a
  // row's logit may differ in the last bits with the batch it is in. A CUDA worker's
  // evaluation scores therefore match serving's (CPU) Predict to float rounding only.
  void Score(int batch, absl::Span<const float> dense, absl::Span<const float> pooled,
             absl::Span<float> logits) override {
    Forward(batch, dense, pooled, logits);
  }

  void Backward(absl::Span<const float> dlogits, absl::Span<float> d_pooled) override {
    Record([&]() -> absl::Status {
      if (batch_ <= 0) return ZeroGradients();
      EMBER_RETURN_IF_ERROR(
          CudaStatus(cudaMemcpyAsync(dlogits_.data(), dlogits.data(), batch_ * sizeof(float),
                                     cudaMemcpyHostToDevice, compute_),
                     "uploading dlogits"));
      return BackwardAndDownload(d_pooled);
    });
  }

  float BackwardWithBce(absl::Span<const float>, absl::Span<const float> labels,
                        absl::Span<const float> weights, float scale,
                        absl::Span<float> d_pooled) override {
    double loss = 0.0;
    Record([&]() -> absl::Status {
      if (batch_ <= 0) return ZeroGradients();
      const size_t b = batch_;
      float* staged = staging_.data();  // free: the forward pass synchronized
      std::memcpy(staged, labels.data(), b * sizeof(float));
      if (!weights.empty()) std::memcpy(staged + b, weights.data(), b * sizeof(float));
      EMBER_RETURN_IF_ERROR(CudaStatus(
          cudaMemcpyAsync(labels_.data(), staged, (weights.empty() ? 1 : 2) * b * sizeof(float),
                          cudaMemcpyHostToDevice, compute_),
          "uploading labels"));
      EMBER_RETURN_IF_ERROR(
          CudaStatus(LaunchBce(compute_, batch_, logits_.data(), labels_.data(),
                               weights.empty() ? nullptr : labels_.data() + b, scale,
                               dlogits_.data(), bce_partials_.data(), loss_.data()),
                     "the BCE loss"));
      EMBER_RETURN_IF_ERROR(CudaStatus(
          cudaMemcpyAsync(&loss, loss_.data(), sizeof(double), cudaMemcpyDeviceToHost, compute_),
          "downloading the loss"));
      return BackwardAndDownload(d_pooled);
    });
    return static_cast<float>(loss);
  }

 private:
  // Runs `step` unless the tower is already broken; keeps its first error.
  template <typename F>
  void Record(F&& step) {
    if (!status_.ok()) return;
    status_ = OnDevice();
    if (status_.ok()) status_ = step();
  }

  // Selects the tower's device on the calling thread (cudaSetDevice is per thread).
  absl::Status OnDevice() const {
    return CudaStatus(cudaSetDevice(options_.cuda_device),
                      absl::StrCat("selecting CUDA device ", options_.cuda_device));
  }

  void Download(const float* device, std::vector<float>* host, const char* what) {
    Record([&]() -> absl::Status {
      EMBER_RETURN_IF_ERROR(
          CudaStatus(cudaMemcpyAsync(host->data(), device, host->size() * sizeof(float),
                                     cudaMemcpyDeviceToHost, compute_),
                     what));
      return CudaStatus(cudaStreamSynchronize(compute_), what);
    });
  }

  absl::Status ZeroGradients() {
    EMBER_RETURN_IF_ERROR(CudaStatus(
        cudaMemsetAsync(grads_.data(), 0, layout_.num_parameters * sizeof(float), compute_),
        "zeroing the gradients"));
    return CudaStatus(cudaStreamSynchronize(compute_), "zeroing the gradients");
  }

  absl::Status Reserve(int batch) {
    const size_t b = batch;
    const size_t max_width = layout_.MaxWidth();
    const size_t in_width = layout_.num_dense + layout_.pooled_width;
    EMBER_RETURN_IF_ERROR(staging_.Reserve(b * std::max<size_t>(in_width, 2), "input staging"));
    EMBER_RETURN_IF_ERROR(input_.Reserve(b * std::max(layout_.num_dense, 1), "dense input"));
    EMBER_RETURN_IF_ERROR(pooled_.Reserve(b * std::max(layout_.pooled_width, 1), "pooled input"));
    EMBER_RETURN_IF_ERROR(d_pooled_.Reserve(b * std::max(layout_.pooled_width, 1), "d_pooled"));
    for (size_t l = 0; l < layout_.bottom.size(); ++l) {
      EMBER_RETURN_IF_ERROR(bottom_out_[l].Reserve(b * layout_.bottom[l].out, "activations"));
    }
    for (size_t l = 0; l + 1 < layout_.top.size(); ++l) {
      EMBER_RETURN_IF_ERROR(top_out_[l].Reserve(b * layout_.top[l].out, "activations"));
    }
    EMBER_RETURN_IF_ERROR(interaction_out_.Reserve(b * layout_.interaction_width, "interaction"));
    EMBER_RETURN_IF_ERROR(logits_.Reserve(b, "logits"));
    EMBER_RETURN_IF_ERROR(dlogits_.Reserve(b, "dlogits"));
    EMBER_RETURN_IF_ERROR(labels_.Reserve(2 * b, "labels"));
    EMBER_RETURN_IF_ERROR(grad_a_.Reserve(b * max_width, "gradient scratch"));
    EMBER_RETURN_IF_ERROR(grad_b_.Reserve(b * max_width, "gradient scratch"));
    EMBER_RETURN_IF_ERROR(grad_d_bottom_.Reserve(b * std::max(layout_.bottom_width, 1), "scratch"));
    EMBER_RETURN_IF_ERROR(
        column_partial_.Reserve(ColumnSumsPartialRows(batch) * max_width, "bias scratch"));
    EMBER_RETURN_IF_ERROR(bce_partials_.Reserve(BcePartialCount(batch), "loss scratch"));
    EMBER_RETURN_IF_ERROR(loss_.Reserve(1, "loss"));
    if (options_.precision == DensePrecision::kBf16) {
      size_t l = 0;
      for (const std::vector<Layer>* layers : {&layout_.bottom, &layout_.top}) {
        for (const Layer& layer : *layers) {
          EMBER_RETURN_IF_ERROR(layer_in_bf16_[l++].Reserve(b * layer.in, "bf16 activations"));
        }
      }
      EMBER_RETURN_IF_ERROR(dy_bf16_.Reserve(b * max_width, "bf16 gradient scratch"));
    }
    return absl::OkStatus();
  }

  // Host inputs -> pinned staging -> device, on the copy stream; compute waits for it.
  absl::Status Upload(absl::Span<const float> dense, absl::Span<const float> pooled) {
    EMBER_RETURN_IF_ERROR(CudaStatus(cudaEventSynchronize(copied_), "the previous input copy"));
    float* staged = staging_.data();
    std::memcpy(staged, dense.data(), dense.size() * sizeof(float));
    std::memcpy(staged + dense.size(), pooled.data(), pooled.size() * sizeof(float));
    if (!dense.empty()) {
      EMBER_RETURN_IF_ERROR(
          CudaStatus(cudaMemcpyAsync(input_.data(), staged, dense.size() * sizeof(float),
                                     cudaMemcpyHostToDevice, copy_),
                     "uploading dense features"));
    }
    if (!pooled.empty()) {
      EMBER_RETURN_IF_ERROR(
          CudaStatus(cudaMemcpyAsync(pooled_.data(), staged + dense.size(),
                                     pooled.size() * sizeof(float), cudaMemcpyHostToDevice, copy_),
                     "uploading pooled embeddings"));
    }
    EMBER_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(copied_, copy_), "recording the copy"));
    return CudaStatus(cudaStreamWaitEvent(compute_, copied_, 0), "ordering the copy");
  }

  // C (column-major m x n, ld ldc) = op(A) op(B), operands in the configured precision.
  // a16 / b16: the operands already in bf16 (kBf16 only).
  absl::Status Gemm(cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k,
                    const void* a, int lda, const void* b, int ldb, float* c, int ldc,
                    const char* what) {
    const float one = 1.0f, zero = 0.0f;
    cudaDataType_t type = CUDA_R_32F;
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    if (options_.precision == DensePrecision::kTf32) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
    if (options_.precision == DensePrecision::kBf16) type = CUDA_R_16BF;
    return CublasStatus(
        blas_->gemm_ex(cublas_, op_a, op_b, m, n, k, &one, a, type, lda, b, type, ldb, &zero, c,
                       CUDA_R_32F, ldc, compute, CUBLAS_GEMM_DEFAULT),
        what);
  }

  bool Bf16() const { return options_.precision == DensePrecision::kBf16; }
  const uint16_t* WeightsBf16(const Layer& layer) const { return params_bf16_.data() + layer.w; }

  // y [B x out] = act(x W^T + b). `index`: the layer's slot in layer_in_bf16_.
  absl::Status LinearForward(int batch, const Layer& layer, size_t index, const float* x,
                             float* y) {
    const void* xa = x;
    const void* wa = params_.data() + layer.w;
    if (Bf16()) {
      uint16_t* x16 = layer_in_bf16_[index].data();
      EMBER_RETURN_IF_ERROR(
          CudaStatus(LaunchToBf16(compute_, size_t{static_cast<size_t>(batch)} * layer.in, x, x16),
                     "rounding activations to bf16"));
      xa = x16;
      wa = WeightsBf16(layer);
    }
    EMBER_RETURN_IF_ERROR(Gemm(CUBLAS_OP_T, CUBLAS_OP_N, layer.out, batch, layer.in, wa, layer.in,
                               xa, layer.in, y, layer.out, "a linear layer's forward product"));
    return CudaStatus(
        LaunchBiasActivation(compute_, batch, layer.out, params_.data() + layer.b, layer.relu, y),
        "bias and activation");
  }

  // dW = dy^T x, db = column sums of dy, dx = dy W (unless dx is null).
  absl::Status LinearBackward(int batch, const Layer& layer, size_t index, const float* x,
                              const float* dy, float* dx) {
    const void* xa = x;
    const void* dya = dy;
    const void* wa = params_.data() + layer.w;
    if (Bf16()) {
      xa = layer_in_bf16_[index].data();
      EMBER_RETURN_IF_ERROR(
          CudaStatus(LaunchToBf16(compute_, size_t{static_cast<size_t>(batch)} * layer.out, dy,
                                  dy_bf16_.data()),
                     "rounding gradients to bf16"));
      dya = dy_bf16_.data();
      wa = WeightsBf16(layer);
    }
    EMBER_RETURN_IF_ERROR(Gemm(CUBLAS_OP_N, CUBLAS_OP_T, layer.in, layer.out, batch, xa, layer.in,
                               dya, layer.out, grads_.data() + layer.w, layer.in,
                               "a weight gradient product"));
    EMBER_RETURN_IF_ERROR(
        CudaStatus(LaunchColumnSums(compute_, batch, layer.out, dy, column_partial_.data(),
                                    grads_.data() + layer.b),
                   "a bias gradient"));
    if (dx == nullptr) return absl::OkStatus();
    return Gemm(CUBLAS_OP_N, CUBLAS_OP_N, layer.in, batch, layer.out, wa, layer.in, dya, layer.out,
                dx, layer.in, "an input gradient product");
  }

  absl::Status ForwardOnDevice(int batch) {
    if (Bf16()) {
      EMBER_RETURN_IF_ERROR(CudaStatus(
          LaunchToBf16(compute_, layout_.num_parameters, params_.data(), params_bf16_.data()),
          "rounding weights to bf16"));
    }
    const float* x = layout_.num_dense > 0 ? input_.data() : nullptr;
    size_t index = 0;
    for (size_t l = 0; l < layout_.bottom.size(); ++l, ++index) {
      EMBER_RETURN_IF_ERROR(
          LinearForward(batch, layout_.bottom[l], index, x, bottom_out_[l].data()));
      x = bottom_out_[l].data();
    }
    float* inter = interaction_out_.data();
    if (layout_.interaction == v1::DenseTowerConfig::DOT) {
      EMBER_RETURN_IF_ERROR(CudaStatus(
          LaunchDotForward(compute_, batch, static_cast<int>(layout_.feature_dims.size()),
                           layout_.DotDim(), x, pooled_.data(), inter),
          "the DOT interaction"));
    } else {
      // Forward only reads the parts.
      EMBER_RETURN_IF_ERROR(
          ConcatCopy(batch, const_cast<float*>(x), pooled_.data(), inter, /*forward=*/true));
    }
    x = inter;
    for (size_t l = 0; l < layout_.top.size(); ++l, ++index) {
      float* y = l + 1 == layout_.top.size() ? logits_.data() : top_out_[l].data();
      EMBER_RETURN_IF_ERROR(LinearForward(batch, layout_.top[l], index, x, y));
      x = y;
    }
    return absl::OkStatus();
  }

  // CONCAT: each row of the [batch x interaction_width] matrix `wide` is [bottom |
  // pooled]. Forward copies the parts in; backward (the gradient) copies them out. A
  // null bottom (no bottom vector, or its gradient unwanted) is skipped.
  absl::Status ConcatCopy(int batch, float* bottom, float* pooled, float* wide, bool forward) {
    const size_t row = layout_.interaction_width * sizeof(float);
    const size_t bw = layout_.bottom_width * sizeof(float);
    const size_t pw = layout_.pooled_width * sizeof(float);
    // One part: `width` bytes at byte `offset` of each wide row, `part` packed.
    auto copy = [&](float* part, size_t offset, size_t width) {
      char* slice = reinterpret_cast<char*>(wide) + offset;
      return CudaStatus(forward ? cudaMemcpy2DAsync(slice, row, part, width, width, batch,
                                                    cudaMemcpyDeviceToDevice, compute_)
                                : cudaMemcpy2DAsync(part, width, slice, row, width, batch,
                                                    cudaMemcpyDeviceToDevice, compute_),
                        "the CONCAT interaction");
    };
    if (bw > 0 && bottom != nullptr) EMBER_RETURN_IF_ERROR(copy(bottom, 0, bw));
    if (pw > 0) EMBER_RETURN_IF_ERROR(copy(pooled, bw, pw));
    return absl::OkStatus();
  }

  // The CPU tower's Backward (dense_tower.cc), step for step, from dlogits_ on the device.
  absl::Status BackwardOnDevice() {
    const int batch = batch_;
    const size_t b = batch;
    const size_t bottom_layers = layout_.bottom.size();
    const std::vector<Layer>& top = layout_.top;
    float* dy = grad_a_.data();
    float* next = grad_b_.data();
    const float* top_in0 = interaction_out_.data();
    EMBER_RETURN_IF_ERROR(LinearBackward(batch, top.back(), bottom_layers + top.size() - 1,
                                         top.size() > 1 ? top_out_[top.size() - 2].data() : top_in0,
                                         dlogits_.data(), dy));
    for (size_t l = top.size() - 1; l-- > 0;) {
      EMBER_RETURN_IF_ERROR(CudaStatus(
          LaunchReluBackward(compute_, b * top[l].out, top_out_[l].data(), dy), "ReLU backward"));
      const float* x = l > 0 ? top_out_[l - 1].data() : top_in0;
      EMBER_RETURN_IF_ERROR(LinearBackward(batch, top[l], bottom_layers + l, x, dy, next));
      std::swap(dy, next);
    }

    float* d_bottom = nullptr;
    if (bottom_layers > 0) {
      d_bottom = next;
      next = dy;
    }
    if (layout_.interaction == v1::DenseTowerConfig::DOT) {
      const float* bottom = nullptr;
      if (layout_.num_dense > 0) {
        bottom = bottom_layers == 0 ? input_.data() : bottom_out_.back().data();
        if (d_bottom == nullptr) d_bottom = grad_d_bottom_.data();
      }
      EMBER_RETURN_IF_ERROR(CudaStatus(
          LaunchDotBackward(compute_, batch, static_cast<int>(layout_.feature_dims.size()),
                            layout_.DotDim(), bottom, pooled_.data(), dy, d_bottom,
                            d_pooled_.data()),
          "the DOT interaction's backward"));
    } else {
      EMBER_RETURN_IF_ERROR(ConcatCopy(batch, d_bottom, d_pooled_.data(), dy, /*forward=*/false));
    }

    float* dyb = d_bottom;
    for (size_t l = bottom_layers; l-- > 0;) {
      const Layer& layer = layout_.bottom[l];
      EMBER_RETURN_IF_ERROR(
          CudaStatus(LaunchReluBackward(compute_, b * layer.out, bottom_out_[l].data(), dyb),
                     "ReLU backward"));
      const float* x = l > 0 ? bottom_out_[l - 1].data() : input_.data();
      float* dx = l > 0 ? next : nullptr;
      EMBER_RETURN_IF_ERROR(LinearBackward(batch, layer, l, x, dyb, dx));
      if (dx != nullptr) std::swap(dyb, next);
    }
    return absl::OkStatus();
  }

  absl::Status BackwardAndDownload(absl::Span<float> d_pooled) {
    EMBER_RETURN_IF_ERROR(BackwardOnDevice());
    if (!d_pooled.empty()) {
      EMBER_RETURN_IF_ERROR(CudaStatus(
          cudaMemcpyAsync(d_pooled.data(), d_pooled_.data(), d_pooled.size() * sizeof(float),
                          cudaMemcpyDeviceToHost, compute_),
          "downloading d_pooled"));
    }
    return CudaStatus(cudaStreamSynchronize(compute_), "the backward pass");
  }

  const TowerLayout layout_;
  const DenseTowerOptions options_;
  absl::Status status_;
  cudaStream_t compute_ = nullptr;
  cudaStream_t copy_ = nullptr;
  cudaEvent_t copied_ = nullptr;
  const CublasApi* blas_ = nullptr;  // loaded by Init
  cublasHandle_t cublas_ = nullptr;

  DeviceBuffer<float> params_, grads_;
  DeviceBuffer<uint16_t> params_bf16_;
  std::vector<float> host_params_, host_grads_;

  // State of the last Forward, sized for the largest batch seen.
  int batch_ = -1;
  PinnedBuffer<float> staging_;
  DeviceBuffer<float> input_, pooled_, interaction_out_, logits_;
  std::vector<DeviceBuffer<float>> bottom_out_, top_out_;
  std::vector<DeviceBuffer<uint16_t>> layer_in_bf16_;  // per layer (bottom, then top)
  // Backward scratch.
  DeviceBuffer<float> dlogits_, labels_, d_pooled_, grad_a_, grad_b_, grad_d_bottom_;
  DeviceBuffer<float> column_partial_;
  DeviceBuffer<uint16_t> dy_bf16_;
  DeviceBuffer<double> bce_partials_, loss_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<model::DenseTower>> CreateCudaDenseTower(
    TowerLayout layout, std::vector<float> parameters, const DenseTowerOptions& options) {
  // CreateDenseTower refuses it first (CheckDenseTowerOnDevice); without this the
  // kernels below would run CROSS as CONCAT.
  if (layout.interaction == v1::DenseTowerConfig::CROSS) {
    return absl::UnimplementedError("interaction CROSS is not on CUDA yet; use --device=cpu");
  }
  if (!layout.tasks.empty()) {  // likewise: the kernels would run task 0 alone
    return absl::UnimplementedError("multi-task heads are not on CUDA yet; use --device=cpu");
  }
  auto tower = std::make_unique<CudaDenseTower>(std::move(layout), options);
  EMBER_RETURN_IF_ERROR(tower->Init(parameters));
  return tower;
}

}  // namespace ember::worker::cuda_internal
