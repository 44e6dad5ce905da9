// Copyright 2026 The Ember Authors.
//
// The kernels declared in kernels.h. Element-wise kernels use grid-stride loops over
// a grid capped at kMaxBlocks; reductions use fixed grids and fixed tree orders.

#include <cuda_bf16.h>

#include "worker/dense/cuda/kernels.h"

namespace ember::worker::cuda_internal {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 4096;
constexpr int kWarp = 32;

int BlocksFor(size_t n) {
  const size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

__global__ void BiasActivationKernel(size_t n, int out, const float* __restrict__ bias, bool relu,
                                     float* __restrict__ y) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    float v = __fadd_rn(y[i], bias[i % out]);
    if (relu && !(v > 0.0f)) v = 0.0f;
    y[i] = v;
  }
}

__global__ void ReluBackwardKernel(size_t n, const float* __restrict__ y, float* __restrict__ dy) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    if (y[i] <= 0.0f) dy[i] = 0.0f;
  }
}

// Column sums, stage 1: block (32 x 8) covers 32 columns of one row chunk; each thread
// sums rows ty, ty + 8, ... of its chunk, then the 8 partial sums fold in a fixed order.
constexpr int kColumnChunkRows = 512;
__global__ void ColumnPartialKernel(int batch, int cols, const float* __restrict__ x,
                                    float* __restrict__ partial) {
  __shared__ float acc[8][kWarp + 1];
  const int c = blockIdx.x * kWarp + threadIdx.x;
  const int row0 = blockIdx.y * kColumnChunkRows;
  const int row1 = min(batch, row0 + kColumnChunkRows);
  float s = 0.0f;
  if (c < cols) {
    for (int r = row0 + threadIdx.y; r < row1; r += 8) s = __fadd_rn(s, x[size_t{r} * cols + c]);
  }
  acc[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float t = acc[0][threadIdx.x];
    for (int k = 1; k < 8; ++k) t = __fadd_rn(t, acc[k][threadIdx.x]);
    partial[size_t{blockIdx.y} * cols + c] = t;
  }
}

__global__ void ColumnFinalKernel(int chunks, int cols, const float* __restrict__ partial,
                                  float* __restrict__ sums) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float s = 0.0f;
  for (int k = 0; k < chunks; ++k) s = __fadd_rn(s, partial[size_t{k} * cols + c]);
  sums[c] = s;
}

// Row r of example b's DOT matrix Z.
__device__ __forceinline__ const float* ZRow(int b, int r, int num_features, int dim,
                                             const float* bottom, const float* pooled) {
  if (bottom != nullptr) {
    if (r == 0) return bottom + size_t{b} * dim;
    --r;
  }
  return pooled + (size_t{b} * num_features + r) * dim;
}

// Pair p of the lower triangle in row-major order: (1,0), (2,0), (2,1), (3,0), ...
__device__ __forceinline__ void PairOf(int p, int* i, int* j) {
  int row = static_cast<int>((1.0f + sqrtf(1.0f + 8.0f * p)) * 0.5f);
  while (row * (row - 1) / 2 > p) --row;
  while ((row + 1) * row / 2 <= p) ++row;
  *i = row;
  *j = p - row * (row - 1) / 2;
}

// One warp per example; lanes stride over the output row.
__global__ void DotForwardKernel(int batch, int num_features, int dim,
                                 const float* __restrict__ bottom, const float* __restrict__ pooled,
                                 float* __restrict__ out) {
  const int warps = blockDim.x / kWarp;
  const int b = blockIdx.x * warps + threadIdx.x / kWarp;
  if (b >= batch) return;
  const int lane = threadIdx.x % kWarp;
  const int n = num_features + (bottom != nullptr ? 1 : 0);
  const int pairs = n * (n - 1) / 2;
  const int head = bottom != nullptr ? dim : 0;
  float* row_out = out + size_t{b} * (head + pairs);
  for (int k = lane; k < head; k += kWarp) row_out[k] = bottom[size_t{b} * dim + k];
  for (int p = lane; p < pairs; p += kWarp) {
    int i, j;
    PairOf(p, &i, &j);
    const float* zi = ZRow(b, i, num_features, dim, bottom, pooled);
    const float* zj = ZRow(b, j, num_features, dim, bottom, pooled);
    float s = 0.0f;
    for (int k = 0; k < dim; ++k) s = __fadd_rn(s, __fmul_rn(zi[k], zj[k]));
    row_out[head + p] = s;
  }
}

// dZ[i][k] = sum_{j != i} dout(i, j) Z[j][k] (+ the bottom passthrough for row 0).
__global__ void DotBackwardKernel(int batch, int num_features, int dim,
                                  const float* __restrict__ bottom,
                                  const float* __restrict__ pooled, const float* __restrict__ dout,
                                  float* __restrict__ d_bottom, float* __restrict__ d_pooled) {
  const int warps = blockDim.x / kWarp;
  const int b = blockIdx.x * warps + threadIdx.x / kWarp;
  if (b >= batch) return;
  const int lane = threadIdx.x % kWarp;
  const bool has_bottom = bottom != nullptr;
  const int n = num_features + (has_bottom ? 1 : 0);
  const int head = has_bottom ? dim : 0;
  const float* drow = dout + size_t{b} * (head + n * (n - 1) / 2);
  for (int e = lane; e < n * dim; e += kWarp) {
    const int i = e / dim;
    const int k = e % dim;
    float s = (has_bottom && i == 0) ? drow[k] : 0.0f;
    for (int j = 0; j < n; ++j) {
      if (j == i) continue;
      const int hi = i > j ? i : j;
      const int lo = i > j ? j : i;
      const float g = drow[head + hi * (hi - 1) / 2 + lo];
      s = __fadd_rn(s, __fmul_rn(g, ZRow(b, j, num_features, dim, bottom, pooled)[k]));
    }
    if (has_bottom) {
      if (i == 0) {
        d_bottom[size_t{b} * dim + k] = s;
      } else {
        d_pooled[(size_t{b} * num_features + i - 1) * dim + k] = s;
      }
    } else {
      d_pooled[(size_t{b} * num_features + i) * dim + k] = s;
    }
  }
}

__global__ void ToBf16Kernel(size_t n, const float* __restrict__ x, __nv_bfloat16* __restrict__ y) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    y[i] = __float2bfloat16_rn(x[i]);
  }
}

// BCE: each block folds its grid-stride share in a fixed tree; a second one-block
// launch folds the block sums.
constexpr int kBceBlocks = 128;
__global__ void BceKernel(int batch, const float* __restrict__ logits,
                          const float* __restrict__ labels, const float* __restrict__ weights,
                          float scale, float* __restrict__ dlogits, double* __restrict__ partials) {
  __shared__ double acc[kThreads];
  double sum = 0.0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < batch; i += gridDim.x * blockDim.x) {
    const double x = logits[i];
    const double y = labels[i];
    const double w = weights == nullptr ? 1.0 : static_cast<double>(weights[i]);
    const double e = exp(-fabs(x));
    const double sigmoid = x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
    sum += w * (fmax(x, 0.0) - x * y + log1p(e));
    dlogits[i] = static_cast<float>(w * (sigmoid - y) * scale);
  }
  acc[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) acc[threadIdx.x] += acc[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = acc[0];
}

// One thread: kBceBlocks sums in order.
__global__ void BceFinalKernel(int count, const double* __restrict__ partials, float scale,
                               double* __restrict__ loss) {
  double s = 0.0;
  for (int i = 0; i < count; ++i) s += partials[i];
  *loss = s * scale;
}

__global__ void SgdKernel(size_t n, float lr, float* __restrict__ p, const float* __restrict__ g) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    p[i] = __fsub_rn(p[i], __fmul_rn(lr, g[i]));
  }
}

__global__ void AdagradKernel(size_t n, float lr, float eps, float* __restrict__ p,
                              const float* __restrict__ g, float* __restrict__ a) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const float gi = g[i];
    const float ai = __fadd_rn(a[i], __fmul_rn(gi, gi));
    a[i] = ai;
    p[i] = __fsub_rn(p[i], __fmul_rn(lr, __fdiv_rn(gi, __fadd_rn(__fsqrt_rn(ai), eps))));
  }
}

__global__ void AdamKernel(size_t n, float step_size, float bc2_sqrt, float b1, float b2, float c1,
                           float c2, float eps, float* __restrict__ p, const float* __restrict__ g,
                           float* __restrict__ m, float* __restrict__ v) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const float gi = g[i];
    const float mi = __fadd_rn(__fmul_rn(b1, m[i]), __fmul_rn(c1, gi));
    const float vi = __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(c2, __fmul_rn(gi, gi)));
    m[i] = mi;
    v[i] = vi;
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2_sqrt), eps);
    p[i] = __fsub_rn(p[i], __fmul_rn(step_size, __fdiv_rn(mi, denom)));
  }
}

// One warp per bag (feature f, example b); lanes over the dim.
__global__ void PoolForwardKernel(DevicePoolingPlan plan, const float* __restrict__ rows,
                                  float* __restrict__ pooled) {
  const int warps = blockDim.x / kWarp;
  const int bag = blockIdx.x * warps + threadIdx.x / kWarp;
  if (bag >= plan.num_features * plan.batch) return;
  const int lane = threadIdx.x % kWarp;
  const int f = bag / plan.batch;
  const int b = bag % plan.batch;
  const int dim = plan.feature_dim[f];
  const uint32_t begin = plan.bag_begin[bag], end = plan.bag_begin[bag + 1];
  const float* table = rows + plan.feature_rows_offset[f];
  float* out = pooled + size_t{b} * plan.pooled_width + plan.feature_pooled_offset[f];
  const bool mean = plan.feature_mean[f] != 0 && end - begin > 1;
  const float scale = mean ? __fdiv_rn(1.0f, static_cast<float>(end - begin)) : 1.0f;
  for (int j = lane; j < dim; j += kWarp) {
    float s = 0.0f;
    for (uint32_t k = begin; k < end; ++k) s = __fadd_rn(s, table[size_t{plan.ids[k]} * dim + j]);
    out[j] = mean ? __fmul_rn(s, scale) : s;
  }
}

__global__ void PoolBackwardKernel(DevicePoolingPlan plan, int num_rows, int dim,
                                   const uint32_t* __restrict__ row_begin,
                                   const uint32_t* __restrict__ row_bags,
                                   const float* __restrict__ d_pooled, float* __restrict__ d_rows) {
  const size_t n = size_t{num_rows} * dim;
  for (size_t e = blockIdx.x * size_t{blockDim.x} + threadIdx.x; e < n;
       e += size_t{gridDim.x} * blockDim.x) {
    const size_t r = e / dim;
    const int j = static_cast<int>(e % dim);
    float s = 0.0f;
    for (uint32_t c = row_begin[r]; c < row_begin[r + 1]; ++c) {
      const uint32_t bag = row_bags[c];
      const int f = bag / plan.batch;
      const int b = bag % plan.batch;
      const uint32_t count = plan.bag_begin[bag + 1] - plan.bag_begin[bag];
      const float scale = plan.feature_mean[f] != 0 && count > 1
                              ? __fdiv_rn(1.0f, static_cast<float>(count))
                              : 1.0f;
      const float in = d_pooled[size_t{b} * plan.pooled_width + plan.feature_pooled_offset[f] + j];
      s = __fadd_rn(s, __fmul_rn(in, scale));
    }
    d_rows[e] = s;
  }
}

constexpr int kWarpsPerBlock = kThreads / kWarp;

}  // namespace

cudaError_t LaunchBiasActivation(cudaStream_t stream, int batch, int out, const float* bias,
                                 bool relu, float* y) {
  const size_t n = size_t{static_cast<size_t>(batch)} * out;
  if (n == 0) return cudaSuccess;
  BiasActivationKernel<<<BlocksFor(n), kThreads, 0, stream>>>(n, out, bias, relu, y);
  return cudaGetLastError();
}

cudaError_t LaunchReluBackward(cudaStream_t stream, size_t n, const float* y, float* dy) {
  if (n == 0) return cudaSuccess;
  ReluBackwardKernel<<<BlocksFor(n), kThreads, 0, stream>>>(n, y, dy);
  return cudaGetLastError();
}

int ColumnSumsPartialRows(int batch) { return (batch + kColumnChunkRows - 1) / kColumnChunkRows; }

cudaError_t LaunchColumnSums(cudaStream_t stream, int batch, int cols, const float* x,
                             float* partial, float* sums) {
  if (batch <= 0 || cols <= 0) return cudaSuccess;
  const int chunks = ColumnSumsPartialRows(batch);
  const dim3 grid((cols + kWarp - 1) / kWarp, chunks);
  ColumnPartialKernel<<<grid, dim3(kWarp, 8), 0, stream>>>(batch, cols, x, partial);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  ColumnFinalKernel<<<(cols + kThreads - 1) / kThreads, kThreads, 0, stream>>>(chunks, cols,
                                                                               partial, sums);
  return cudaGetLastError();
}

cudaError_t LaunchDotForward(cudaStream_t stream, int batch, int num_features, int dim,
                             const float* bottom, const float* pooled, float* out) {
  if (batch <= 0) return cudaSuccess;
  const int blocks = (batch + kWarpsPerBlock - 1) / kWarpsPerBlock;
  DotForwardKernel<<<blocks, kThreads, 0, stream>>>(batch, num_features, dim, bottom, pooled, out);
  return cudaGetLastError();
}

cudaError_t LaunchDotBackward(cudaStream_t stream, int batch, int num_features, int dim,
                              const float* bottom, const float* pooled, const float* dout,
                              float* d_bottom, float* d_pooled) {
  if (batch <= 0) return cudaSuccess;
  const int blocks = (batch + kWarpsPerBlock - 1) / kWarpsPerBlock;
  DotBackwardKernel<<<blocks, kThreads, 0, stream>>>(batch, num_features, dim, bottom, pooled, dout,
                                                     d_bottom, d_pooled);
  return cudaGetLastError();
}

cudaError_t LaunchToBf16(cudaStream_t stream, size_t n, const float* x, uint16_t* y) {
  if (n == 0) return cudaSuccess;
  ToBf16Kernel<<<BlocksFor(n), kThreads, 0, stream>>>(n, x, reinterpret_cast<__nv_bfloat16*>(y));
  return cudaGetLastError();
}

int BcePartialCount(int) { return kBceBlocks; }

cudaError_t LaunchBce(cudaStream_t stream, int batch, const float* logits, const float* labels,
                      const float* weights, float scale, float* dlogits, double* partials,
                      double* loss) {
  BceKernel<<<kBceBlocks, kThreads, 0, stream>>>(batch, logits, labels, weights, scale, dlogits,
                                                 partials);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  BceFinalKernel<<<1, 1, 0, stream>>>(kBceBlocks, partials, scale, loss);
  return cudaGetLastError();
}

cudaError_t LaunchSgd(cudaStream_t stream, size_t n, float lr, float* p, const float* g) {
  if (n == 0) return cudaSuccess;
  SgdKernel<<<BlocksFor(n), kThreads, 0, stream>>>(n, lr, p, g);
  return cudaGetLastError();
}

cudaError_t LaunchAdagrad(cudaStream_t stream, size_t n, float lr, float eps, float* p,
                          const float* g, float* accumulator) {
  if (n == 0) return cudaSuccess;
  AdagradKernel<<<BlocksFor(n), kThreads, 0, stream>>>(n, lr, eps, p, g, accumulator);
  return cudaGetLastError();
}

cudaError_t LaunchAdam(cudaStream_t stream, size_t n, float step_size, float bc2_sqrt, float beta1,
                       float beta2, float eps, float* p, const float* g, float* m, float* v) {
  if (n == 0) return cudaSuccess;
  AdamKernel<<<BlocksFor(n), kThreads, 0, stream>>>(n, step_size, bc2_sqrt, beta1, beta2,
                                                    1.0f - beta1, 1.0f - beta2, eps, p, g, m, v);
  return cudaGetLastError();
}

cudaError_t LaunchPoolForward(cudaStream_t stream, const DevicePoolingPlan& plan, const float* rows,
                              float* pooled) {
  const int bags = plan.num_features * plan.batch;
  if (bags == 0) return cudaSuccess;
  PoolForwardKernel<<<(bags + kWarpsPerBlock - 1) / kWarpsPerBlock, kThreads, 0, stream>>>(
      plan, rows, pooled);
  return cudaGetLastError();
}

cudaError_t LaunchPoolBackward(cudaStream_t stream, const DevicePoolingPlan& plan, int num_rows,
                               int dim, const uint32_t* row_begin, const uint32_t* row_bags,
                               const float* d_pooled, float* d_rows) {
  const size_t n = size_t{static_cast<size_t>(num_rows)} * dim;
  if (n == 0) return cudaSuccess;
  PoolBackwardKernel<<<BlocksFor(n), kThreads, 0, stream>>>(plan, num_rows, dim, row_begin,
                                                            row_bags, d_pooled, d_rows);
  return cudaGetLastError();
}

}  // namespace ember::worker::cuda_internal
