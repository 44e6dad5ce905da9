// Copyright 2026 The Ember Authors.
//
// Ember's CUDA kernels for the dense tower, as plain launch functions (callable from
// C++ compiled by the host compiler). Every function enqueues on `stream`, returns the
// launch's cudaError_t (cudaSuccess when there is nothing to do) and never
// synchronizes. Matrices are row-major [rows x cols]. No kernel uses atomics, so each
// gives the same bits on every run for the same inputs and sizes.
//
// Where a kernel has a CPU twin (common/model/layers.h, loss.cc, dense_optimizer.cc)
// the comment says how close they are: "bitwise" (same operations in the same order,
// IEEE rounding, no FMA contraction) or "to float rounding" (another summation order).

#ifndef EMBER_WORKER_DENSE_CUDA_KERNELS_H_
#define EMBER_WORKER_DENSE_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace ember::worker::cuda_internal {

// y [batch x out] += bias (broadcast over rows), then ReLU when `relu`. The bias+activation
// epilogue of a Linear layer whose product cuBLAS wrote into y.
cudaError_t LaunchBiasActivation(cudaStream_t stream, int batch, int out, const float* bias,
                                 bool relu, float* y);

// dy[i] = 0 where y[i] <= 0, in place (bitwise ReluBackward).
cudaError_t LaunchReluBackward(cudaStream_t stream, size_t n, const float* y, float* dy);

// sums[c] = sum over rows of x [batch x cols], in a fixed tree order. `partial` holds
// ColumnSumsPartialRows(batch) x cols floats of scratch. (The bias gradient.)
int ColumnSumsPartialRows(int batch);
cudaError_t LaunchColumnSums(cudaStream_t stream, int batch, int cols, const float* x,
                             float* partial, float* sums);

// The DOT interaction (layers.h: DotInteractionForward / Backward; to float rounding).
// bottom null = no bottom vector. out [batch x DotOutputWidth]; d_bottom null iff
// bottom is null.
cudaError_t LaunchDotForward(cudaStream_t stream, int batch, int num_features, int dim,
                             const float* bottom, const float* pooled, float* out);
cudaError_t LaunchDotBackward(cudaStream_t stream, int batch, int num_features, int dim,
                              const float* bottom, const float* pooled, const float* dout,
                              float* d_bottom, float* d_pooled);

// y[i] = x[i] rounded to bfloat16 (round to nearest even), stored as raw bf16 bits.
cudaError_t LaunchToBf16(cudaStream_t stream, size_t n, const float* x, uint16_t* y);

// Weighted BCE on logits (loss.cc model::BceWithLogits: per example in double, as there;
// the sum in a fixed tree order instead of sequentially). weights null = all 1.
// Writes dlogits [batch] and *loss (device memory, one double) = sum * scale.
// `partials` holds BcePartialCount(batch) doubles of scratch.
int BcePartialCount(int batch);
cudaError_t LaunchBce(cudaStream_t stream, int batch, const float* logits, const float* labels,
                      const float* weights, float scale, float* dlogits, double* partials,
                      double* loss);

// The dense optimizers' element updates (dense_optimizer.cc; bitwise given the same
// step scalars, which the host computes as the CPU optimizer does).
cudaError_t LaunchSgd(cudaStream_t stream, size_t n, float lr, float* p, const float* g);
cudaError_t LaunchAdagrad(cudaStream_t stream, size_t n, float lr, float eps, float* p,
                          const float* g, float* accumulator);
cudaError_t LaunchAdam(cudaStream_t stream, size_t n, float step_size, float bc2_sqrt, float beta1,
                       float beta2, float eps, float* p, const float* g, float* m, float* v);

// Sum / mean pooling of multi-hot features (the CPU twin is PoolingPlan::Forward /
// Backward in worker/dense/pooling_plan.h; bitwise). The plan's arrays in device
// memory: see PoolingPlan for their meaning.
struct DevicePoolingPlan {
  int batch = 0;
  int pooled_width = 0;
  int num_features = 0;
  const int* feature_dim = nullptr;              // [F]
  const int* feature_pooled_offset = nullptr;    // [F]
  const int* feature_mean = nullptr;             // [F] 0/1
  const int64_t* feature_rows_offset = nullptr;  // [F] float offset of its table in `rows`
  const uint32_t* bag_begin = nullptr;           // [F*batch + 1]
  const uint32_t* ids = nullptr;                 // [bag_begin[F*batch]]
};
cudaError_t LaunchPoolForward(cudaStream_t stream, const DevicePoolingPlan& plan, const float* rows,
                              float* pooled);
// One table's row gradients: rows [num_rows x dim] of the table, each the sum of its
// contributions [row_begin[r], row_begin[r+1]) (bag ids, in the CPU's order).
cudaError_t LaunchPoolBackward(cudaStream_t stream, const DevicePoolingPlan& plan, int num_rows,
                               int dim, const uint32_t* row_begin, const uint32_t* row_bags,
                               const float* d_pooled, float* d_rows);

}  // namespace ember::worker::cuda_internal

#endif  // EMBER_WORKER_DENSE_CUDA_KERNELS_H_
